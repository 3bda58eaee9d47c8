"""A spectral layer (a Fourier neural operator's): the real FFT of each channel's signal (``torch.fft.rfft``), the
lowest ``modes`` frequencies mixed across channels by complex weights (``einsum``: a complex batched product),
the inverse FFT back to the signal (``irfft``), plus a pointwise linear path, then a GELU; two such layers
between a lifting and a projection. Its complex tensors are recorded as their parts and judged by them.

``spectral`` is the format the transforms run in: ``float32`` (the default) casts the layer's input up and its
output back, as spectral layers do under mixed precision (the CPU's FFT has no bfloat16 kernel); ``input``
runs the FFT on its input as it comes, which in bfloat16 fails (the trace says so in one line).
"""

import torch
from torch import nn

from tests.corpus.common import seeded


class Spectral(nn.Module):
    def __init__(self, channels: int, modes: int, spectral: str):
        super().__init__()
        self.modes, self.spectral = modes, spectral
        scale = 1 / channels
        self.weight = nn.Parameter(scale * torch.randn(channels, channels, modes, dtype=torch.cfloat))
        self.pointwise = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        z = x.float() if self.spectral == "float32" else x
        spectrum = torch.fft.rfft(z, dim=-1, norm="ortho")
        mixed = torch.einsum("bix,iox->box", spectrum[..., :self.modes], self.weight.to(spectrum.dtype))
        full = torch.zeros(*spectrum.shape[:-1], spectrum.shape[-1], dtype=spectrum.dtype)
        full[..., :self.modes] = mixed
        y = torch.fft.irfft(full, n=z.shape[-1], dim=-1, norm="ortho").to(x.dtype)
        return nn.functional.gelu(y + self.pointwise(x))


class Operator(nn.Module):
    def __init__(self, spectral: str):
        super().__init__()
        self.lift = nn.Conv1d(2, 8, 1)
        self.layers = nn.Sequential(Spectral(8, 5, spectral), Spectral(8, 5, spectral))
        self.project = nn.Conv1d(8, 1, 1)

    def forward(self, x):
        return self.project(self.layers(self.lift(x)))


def make(batch: str = "1", points: str = "32", spectral: str = "float32"):
    n = int(points)
    grid = torch.linspace(0, 1, n)
    rows = [torch.stack([torch.randn(n, generator=torch.Generator().manual_seed(800 + r)), grid])
            for r in range(int(batch))]
    return seeded(lambda: Operator(spectral)), (torch.stack(rows),)
