"""Recurrent nets (torch.nn): a 2-layer LSTM or GRU (``kind``), batch first, over 10 steps of 8 features,
then a linear head on every step. With autograd on, oneDNN's LSTM kernel (aten.mkldnn_rnn_layer) also
returns a workspace for the backward pass: scratch bytes, not a result."""

import torch
from torch import nn

from tests.corpus.common import seeded


class Recurrent(nn.Module):
    def __init__(self, kind: str):
        super().__init__()
        cell = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn = cell(input_size=8, hidden_size=16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out)


def make(batch: str = "1", steps: str = "10", kind: str = "lstm"):
    x = torch.stack([torch.randn(int(steps), 8, generator=torch.Generator().manual_seed(400 + r))
                     for r in range(int(batch))])
    return seeded(lambda: Recurrent(kind)), (x,)
