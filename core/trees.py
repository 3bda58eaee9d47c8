"""The reduction tree of a small sum: every partial sum, exact and rounded.

For n <= MAX_TREE_N, an order is written out as a binary tree. Each internal node adds
its two children's *rounded* values; the node records that exact sum, the value it
rounds to in the working format, and the rounding error introduced right there.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.formats import Exact, FloatFormat, error_in_ulps, round_to_format
from core.metrics import exact_value
from core.vectors import NUMPY_DTYPES

MAX_TREE_N = 32
TREE_ORDERS = {
    "sequential": "Sequential, left to right",
    "reverse": "Sequential, right to left",
    "sorted_abs": "Sorted by increasing |x|",
    "pairwise": "Pairwise tree",
    "numpy": "NumPy's pairwise scheme (n < 8: sequential; else 8 accumulators + tail)",
    "cuda": "GPU: torch 2.13's CUDA block reduction (model): threads, then warp shuffles",
}


@dataclass(frozen=True)
class Node:
    id: int
    left: int | None  # child node ids (None for a leaf)
    right: int | None
    leaf_index: int | None  # position in the vector, for leaves
    exact: Exact  # exact sum of the children's rounded values (the leaf's own value for leaves)
    rounded: Exact  # value after rounding to the working format
    depth: int  # distance from the leaves (0 for leaves)

    @property
    def error(self) -> Exact:
        if isinstance(self.rounded, float) or isinstance(self.exact, float):
            return 0 if self.rounded == self.exact else float("inf")
        return self.rounded - self.exact

    def error_ulps(self, fmt: FloatFormat) -> float:
        return 0.0 if self.leaf_index is not None else error_in_ulps(self.rounded, self.exact, fmt)


@dataclass(frozen=True)
class Tree:
    order: str
    fmt: FloatFormat
    nodes: tuple[Node, ...]
    root: int

    @property
    def result(self) -> Exact:
        return self.nodes[self.root].rounded

    def internal(self) -> list[Node]:
        return [n for n in self.nodes if n.leaf_index is None]


class _Builder:
    def __init__(self, fmt: FloatFormat) -> None:
        self.fmt = fmt
        self.nodes: list[Node] = []

    def leaf(self, i: int, v: Exact) -> int:
        self.nodes.append(Node(len(self.nodes), None, None, i, v, v, 0))
        return len(self.nodes) - 1

    def add(self, a: int, b: int) -> int:
        x, y = self.nodes[a].rounded, self.nodes[b].rounded
        exact = float(x) + float(y) if isinstance(x, float) or isinstance(y, float) else x + y
        rounded = round_to_format(exact, self.fmt)
        depth = 1 + max(self.nodes[a].depth, self.nodes[b].depth)
        self.nodes.append(Node(len(self.nodes), a, b, None, exact, rounded, depth))
        return len(self.nodes) - 1

    def chain(self, ids: list[int]) -> int:
        acc = ids[0]
        for i in ids[1:]:
            acc = self.add(acc, i)
        return acc

    def balanced(self, ids: list[int]) -> int:
        level = ids
        while len(level) > 1:
            nxt = [self.add(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                nxt.append(level[-1])  # carried up unchanged (equivalent to adding +0)
            level = nxt
        return level[0]


def build_tree(values: np.ndarray, working: str, order: str) -> Tree:
    """Write the chosen order out as a tree over the values cast to the working dtype."""
    if order not in TREE_ORDERS:
        raise ValueError(f"no tree for order {order!r}")
    n = values.size
    if not 1 <= n <= MAX_TREE_N:
        raise ValueError(f"reduction trees are drawn for 1 to {MAX_TREE_N} values, not {n}")
    from core.formats import FORMATS

    fmt = FORMATS[working]
    x = values.astype(NUMPY_DTYPES[working])
    b = _Builder(fmt)
    exact_vals = [exact_value(v, fmt) for v in x]
    if order == "reverse":
        leaf_order = list(range(n))[::-1]
    elif order == "sorted_abs":
        leaf_order = list(np.argsort(np.abs(x.astype(np.float64)), kind="stable"))
    else:
        leaf_order = list(range(n))
    leaves = {i: b.leaf(int(i), exact_vals[int(i)]) for i in leaf_order}
    ids = [leaves[i] for i in leaf_order]
    if order in ("sequential", "reverse", "sorted_abs"):
        root = b.chain(ids)
    elif order == "pairwise":
        root = b.balanced(ids)
    elif order == "cuda":
        root = _cuda_block(b, ids)
    else:  # numpy's pairwise scheme for n <= 128
        if n < 8:
            root = b.chain(ids)
        else:
            r = [b.chain(ids[j : n - n % 8 : 8]) for j in range(8)]
            root = b.add(b.add(b.add(r[0], r[1]), b.add(r[2], r[3])), b.add(b.add(r[4], r[5]), b.add(r[6], r[7])))
            for i in ids[n - n % 8 :]:
                root = b.add(root, i)
    return Tree(order, fmt, tuple(b.nodes), root)


def _cuda_block(b: _Builder, ids: list[int]) -> int:
    """core.cuda_model's reduction for a small vector, addition by addition.

    For n <= MAX_TREE_N the kernel (``cuda_launch``, torch 2.13) runs one block of
    ``last_pow2(n)`` threads without vector loads: thread t's accumulators hold elements t,
    t + T, ... (combined left to right; their +0 padding adds nothing), then the block's lanes
    combine by warp shuffles with decreasing offsets T/2, ..., 1: lane t adds lane t + offset.
    """
    from core.cuda_model import cuda_launch

    n = len(ids)
    launch = cuda_launch(n)
    if launch.vectorized or launch.blocks != 1 or launch.threads_per_block > 32:
        raise ValueError(f"the CUDA tree is drawn for one warp-sized block, not for n = {n}")
    width = launch.threads_per_block
    lanes = [b.chain([ids[t + m * width] for m in range(launch.accumulators) if t + m * width < n])
             for t in range(width)]
    while len(lanes) > 1:  # shfl_down, offset = width/2, ..., 1
        half = len(lanes) // 2
        lanes = [b.add(lanes[t], lanes[t + half]) for t in range(half)]
    return lanes[0]


def exact_total(tree: Tree) -> Fraction:
    return sum((n.exact for n in tree.nodes if n.leaf_index is not None), Fraction(0))
