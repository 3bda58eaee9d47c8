"""A graph neural network in plain torch, on a batch of graphs: ``graphs`` ring graphs of ``nodes`` nodes each
(with chords), stored as one graph whose node list is the graphs' nodes one after the other, ``x`` of shape
[graphs x nodes, 8], and an edge list [2, graphs x edges] whose values point into it. Two message-passing
layers gather their neighbours' messages (``index_select``, indexing) and add them up at each node
(``index_add_``, ``scatter_add_``, with degrees counted from ``torch.ones`` over the edges, as graph libraries do);
a readout takes each graph's maximum (``scatter_reduce``, amax) and mean (``scatter_reduce``, mean) and a head
gives two class scores and their ``argmax``.

The batch is the number of graphs, not ``x``'s leading dimension: trace it with ``--batch-arg graphs``.
Graph 0 is the same whatever the batch, so a batch of 4 following row 0 compares with graph 0 alone.

``near_tie=1`` sets the head so that graph 0's two scores are one ULP apart, exactly: score 0 is one pooled
feature plus a bias that cancels it but for that ULP (a sum whose exact result is a float, so no rounding),
score 1 is zero. A rounding-sized change of the readout (``--perturb-size 2^-22`` at the mean's
``scatter_reduce``) moves that feature by two ULPs or more, and the argmax flips from class 1 to class 0.
"""

import torch
from torch import nn

from tests.corpus.common import seeded

FEATURES = 8


class MessagePassing(nn.Module):
    def __init__(self, d: int, scatter: str):
        super().__init__()
        self.message = nn.Linear(d, d)
        self.update = nn.Linear(2 * d, d)
        self.scatter = scatter

    def forward(self, h, src, dst):
        if self.scatter == "index_add":
            m = self.message(h).index_select(0, src)
            total = torch.zeros_like(h).index_add_(0, dst, m)
            degree = torch.zeros(h.shape[0], 1, dtype=h.dtype).index_add_(0, dst, torch.ones(dst.shape[0], 1,
                                                                                              dtype=h.dtype))
        else:
            m = self.message(h)[src]
            total = torch.zeros_like(h).scatter_add_(0, dst[:, None].expand(-1, h.shape[1]), m)
            degree = torch.zeros(h.shape[0], 1, dtype=h.dtype).scatter_add_(0, dst[:, None],
                                                                             torch.ones(dst.shape[0], 1, dtype=h.dtype))
        return torch.relu(self.update(torch.cat([h, total / degree.clamp(min=1)], dim=1)))


class GraphNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = MessagePassing(FEATURES, "index_add")
        self.layer2 = MessagePassing(FEATURES, "scatter_add")
        self.head = nn.Linear(2 * FEATURES, 2)

    def readout(self, h, graph, graphs: int):
        where = graph[:, None].expand(-1, h.shape[1])
        top = torch.zeros(graphs, h.shape[1], dtype=h.dtype).scatter_reduce(0, where, h, "amax", include_self=False)
        mean = torch.zeros(graphs, h.shape[1], dtype=h.dtype).scatter_reduce(0, where, h, "mean", include_self=False)
        return torch.cat([top, mean], dim=1)

    def forward(self, x, edges, graph, sizes):
        src, dst = edges[0], edges[1]
        h = self.layer2(self.layer1(x, src, dst), src, dst)
        scores = self.head(self.readout(h, graph, sizes.shape[0]))
        return scores, scores.argmax(dim=1)


def graph_batch(graphs: int, nodes: int):
    """(x, edges, graph, sizes) of ``graphs`` rings; graph r's features are drawn from its own seed."""
    xs, edges, owner = [], [], []
    for r in range(graphs):
        xs.append(torch.randn(nodes, FEATURES, generator=torch.Generator().manual_seed(600 + r)))
        ring = [(i, (i + 1) % nodes) for i in range(nodes)] + [(i, (i + 3) % nodes) for i in range(0, nodes, 2)]
        both = ring + [(j, i) for i, j in ring]
        edges.append(torch.tensor(both).T + r * nodes)
        owner.append(torch.full((nodes,), r))
    return torch.cat(xs), torch.cat(edges, dim=1), torch.cat(owner), torch.full((graphs,), nodes)


def make(graphs: str = "1", nodes: str = "6", near_tie: str = ""):
    model = seeded(GraphNet)
    inputs = graph_batch(int(graphs), int(nodes))
    if near_tie:
        _near_tie(model, graph_batch(1, int(nodes)))
    return model, inputs


def _near_tie(model: GraphNet, alone) -> None:
    seen = {}
    hook = model.head.register_forward_hook(lambda m, i, o: seen.__setitem__("pooled", i[0][0].detach().clone()))
    try:
        with torch.no_grad():
            model(*alone)
    finally:
        hook.remove()
    pooled = seen["pooled"]
    j = FEATURES + int(torch.argmax(pooled[FEATURES:]))  # the largest mean feature (positive: after a relu)
    p = pooled[j]
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.weight[0, j] = 1.0
        # score 0 = p + bias = -ulp(p) exactly (the bias's value, -p - ulp(p), is a float: p's neighbour, negated)
        model.head.bias.copy_(torch.stack([-torch.nextafter(p, torch.tensor(float("inf"))), torch.tensor(0.0)]))
