"""A choice at a hair's breadth: a linear layer's three scores plus an offset, then their argmax (torch.nn).
The scores come out exactly 1, 0.25 and 1 + 2^-23 (exact sums of exact terms; class 2's is all offset), so
class 2 wins by one ULP. A planted rounding-sized change of the product (``--perturb-size 2^-22`` at op 1,
2 ULPs) makes class 0 win."""

import torch
from torch import nn


class Chooser(nn.Module):
    def __init__(self):
        super().__init__()
        self.scores = nn.Linear(8, 3, bias=False)
        self.offset = nn.Parameter(torch.tensor([0.0, 0.0, 1.0 + 2.0 ** -23]))
        terms = torch.tensor([4.0, -4.0, 2.0, -2.0, 1.0, -1.0, 0.5, 0.5])  # sum 1, sum |t| 15
        with torch.no_grad():
            self.scores.weight.copy_(torch.stack([terms, terms / 4, 0 * terms]))

    def forward(self, x):
        return (self.scores(x) + self.offset).argmax(dim=-1)


def make(batch: str = "1"):
    return Chooser().eval(), (torch.ones(int(batch), 8),)
