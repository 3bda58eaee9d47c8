"""Quantized models. Dynamically quantized (torch.ao.quantization.quantize_dynamic, int8 weights): an MLP
(``kind=mlp``: three linear layers, quantized::linear_dynamic) and an LSTM with a linear head (``kind=lstm``:
aten.quantized_lstm over packed cells, then quantized::linear_dynamic). Their weights are packed objects
(torch.ScriptObject), not tensors, and each layer quantizes its input on a grid taken from that input's whole
range, a batch's rows included. And quantization-aware (``kind=fake``): two float linear layers with the
activations between them fake-quantized on a fixed grid (torch.fake_quantize_per_tensor_affine, step 2^-6,
levels 0 to 255), as a quantization-aware model trains and evaluates.

``engine``: the quantized engine (x86, fbgemm, qnnpack, onednn) that packs the weights and runs the model; it is
set while the model is built and while it runs, and restored after (process-wide state).

``near_tie=1`` (the MLP, on engines that keep ``reduce_range``: x86, fbgemm, onednn; and ``kind=fake``) puts one
input of the second layer one ULP below the midpoint between two of its quantization levels, exactly: the second
layer's input is the first layer's relu output plus a shift (zero but for that element, where the sum's exact
result is the chosen float). The MLP also appends an anchor of 127/64, the input's maximum, so its grid has step
127/64 / 127 = 2^-6, the fake quantizer's: a power of two, by which dividing is exact. A rounding-sized change of
the first layer's output (``--perturb-size 2^-22`` at op 1) moves that element two ULPs or more, past the
midpoint: its level flips.
"""

import contextlib
import warnings

import torch
from torch import nn

from tests.corpus.common import seeded

ANCHOR = 127 / 64  # the second layer's largest input: with reduce_range (levels 0 to 127), a step of 2^-6
STEP = 2.0 ** -6


@contextlib.contextmanager
def quantized_engine(name: str):
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = before


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(17, 16)
        self.fc3 = nn.Linear(16, 4)
        self.register_buffer("shift", torch.zeros(16))
        self.register_buffer("anchor", torch.tensor([ANCHOR]))

    def forward(self, x):
        h = torch.relu(self.fc1(x)) + self.shift
        h = torch.cat([h, self.anchor.expand(h.shape[0], 1)], dim=1)
        return self.fc3(torch.relu(self.fc2(h)))


class LSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(input_size=8, hidden_size=16, num_layers=1, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out)


class Fake(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
        self.register_buffer("shift", torch.zeros(16))

    def forward(self, x):
        h = torch.relu(self.fc1(x)) + self.shift
        return self.fc2(torch.fake_quantize_per_tensor_affine(h, STEP, 0, 0, 255))


class Engine(nn.Module):
    """The quantized model, run with its engine set (and the previous one restored)."""

    def __init__(self, model: nn.Module, engine: str):
        super().__init__()
        self.model, self.engine = model, engine

    def forward(self, x):
        with quantized_engine(self.engine):
            return self.model(x)


def rows(kind: str, batch: int) -> torch.Tensor:
    shape = (6, 8) if kind == "lstm" else (8,)
    return torch.stack([torch.randn(*shape, generator=torch.Generator().manual_seed(700 + r)) for r in range(batch)])


def make(batch: str = "1", kind: str = "mlp", engine: str = "x86", near_tie: str = ""):
    if kind == "fake":
        model = seeded(Fake)
        if near_tie:
            _near_tie(model, rows(kind, 1))
        return model, (rows(kind, int(batch)),)
    with quantized_engine(engine), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization's deprecation notices
        model = seeded(MLP if kind == "mlp" else LSTM)
        if kind == "mlp":
            with torch.no_grad():  # small activations: the anchor stays the largest input of fc2
                model.fc1.weight.mul_(0.25)
        quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear, nn.LSTM}, dtype=torch.qint8)
        if near_tie:
            _near_tie(quantized, rows(kind, 1))
    return Engine(quantized, engine).eval(), (rows(kind, int(batch)),)


def _near_tie(model: nn.Module, row: torch.Tensor) -> None:
    with torch.no_grad():
        r = torch.relu(model.fc1(row))[0]
    j = int(torch.argmax(r))
    step = STEP
    level = torch.floor(r[j] / step)  # the midpoint above r_j's level, one ULP below it: in r_j's binade
    midpoint = ((level + 0.5) * step).float()
    below = torch.nextafter(midpoint, torch.tensor(0.0))
    assert torch.floor(torch.log2(below)) == torch.floor(torch.log2(r[j])), "the midpoint left r_j's binade"
    model.shift[j] = below - r[j]  # exact (Sterbenz: the two are within a factor 2), and r_j + shift is below
