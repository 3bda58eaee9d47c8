"""A custom autograd.Function with outputs of three kinds: the input gated by its sign (float), the positions of
each row's largest value (int64, ``argmax``) and the sign mask itself (bool), marked non-differentiable; its
backward passes the gradient through the mask. Around it, two linear layers: the first's output goes in, the
gated values and the positions' embedding come out into the second.

``near_tie=1`` shifts one of row 0's inputs to the Function (a buffer added after the first layer) so that it is
one ULP below zero, exactly (the sum's exact result is a float): its mask is False by a hair. A
rounding-sized change of the first layer's output (``--perturb-size 2^-22`` at op 1) moves it past zero, and
the mask flips.
"""

import torch
from torch import nn

from tests.corpus.common import seeded


class Gate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        mask = x > 0
        where = x.argmax(dim=-1)
        ctx.save_for_backward(mask)
        ctx.mark_non_differentiable(where, mask)
        return x * mask, where, mask

    @staticmethod
    def backward(ctx, grad, _where, _mask):
        (mask,) = ctx.saved_tensors
        return grad * mask


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 16)
        self.register_buffer("shift", torch.zeros(16))
        self.positions = nn.Embedding(16, 4)
        self.second = nn.Linear(16 + 4, 4)

    def forward(self, x):
        gated, where, mask = Gate.apply(self.first(x) + self.shift)
        out = self.second(torch.cat([gated, self.positions(where)], dim=-1))
        return out, where, mask


def rows(batch: int) -> torch.Tensor:
    return torch.stack([torch.randn(8, generator=torch.Generator().manual_seed(900 + r)) for r in range(batch)])


def make(batch: str = "1", near_tie: str = ""):
    model = seeded(Gated)
    if near_tie:
        with torch.no_grad():
            y = model.first(rows(1))[0]
        j = int(torch.argmax(y))  # a positive output: the plant moves it up
        assert y[j] > 0, "no positive output to put at a hair below zero"
        # y_j + shift_j = -ulp(y_j) exactly: shift_j = -(y_j + ulp(y_j)), y_j's neighbour negated
        model.shift[j] = -torch.nextafter(y[j], torch.tensor(float("inf")))
    return model, (rows(int(batch)),)
