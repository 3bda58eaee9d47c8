"""Formats for the mismatch diagnosis: the reduced formats one side may have rounded its inputs to
(rounded with core.arith.formats.round_precision), the format each accumulates in, and the conversion
of NumPy arrays and torch tensors to float64. ULPs and gamma_K are core.arith's (formats, metrics).

F is the format a computation ran in (its result format); A the format it accumulated in
(``accumulation_format``): float32 for float16, bfloat16 and float32 (what torch's CPU and CUDA kernels
do), float64 for float64. u = 2^-p is the unit roundoff of a format with p significant bits
(float32: 2^-24), and gamma_K = K u / (1 - K u) (Higham, *Accuracy and Stability of Numerical
Algorithms*, 3.1).

The reduced formats (``REDUCED_FORMATS``): TF32 keeps 10 explicit mantissa bits (p = 11, float32's
exponent range); float16 p = 11 with a 5-bit exponent; bfloat16 p = 8 with float32's exponent range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.arith.formats import FORMATS, round_precision

_TORCH_NAMES = {f.torch_dtype: name for name, f in FORMATS.items()}
_NUMPY_NAMES = {f.numpy_dtype: name for name, f in FORMATS.items()}


# ---------------------------------------------------------------------------- formats


@dataclass(frozen=True, kw_only=True)
class InputFormat:
    """A format one side may have rounded its inputs to (reduced precision)."""

    key: str
    name: str
    precision: int  # p, with the implicit bit
    emin: int
    max_finite: float
    rounds_output: bool  # autocast returns results in this format
    what: str
    may_truncate: bool = False  # some hardware converts by truncation: twice the error, biased toward zero

    @property
    def u(self) -> float:
        return 2.0**-self.precision

    @property
    def half_min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.precision)


REDUCED_FORMATS: dict[str, InputFormat] = {
    "float32": InputFormat(
        key="float32",
        name="float32",
        precision=24,
        emin=-126,
        max_finite=float(FORMATS["float32"].max_finite),
        rounds_output=False,
        what="one side ran in float32 (inputs rounded to float32, float32 accumulation)",
    ),
    "tf32": InputFormat(
        key="tf32",
        name="TF32",
        precision=11,
        emin=-126,
        max_finite=float((2 - 2.0**-10) * 2.0**127),
        rounds_output=False,
        what="TF32 tensor cores: float32 inputs rounded to 10 explicit mantissa bits, "
        "float32 accumulation, float32 result",
        may_truncate=True,
    ),
    "float16": InputFormat(
        key="float16",
        name="float16",
        precision=11,
        emin=-14,
        max_finite=65504.0,
        rounds_output=True,
        what="float16 autocast: inputs rounded to float16, float32 accumulation, float16 result",
    ),
    "bfloat16": InputFormat(
        key="bfloat16",
        name="bfloat16",
        precision=8,
        emin=-126,
        max_finite=float(FORMATS["bfloat16"].max_finite),
        rounds_output=True,
        what="bfloat16 autocast: inputs rounded to bfloat16, float32 accumulation, bfloat16 result",
    ),
}


def accumulation_format(fmt: str) -> str:
    """The format torch accumulates reductions of ``fmt`` in (float32 below float64)."""
    return "float64" if fmt == "float64" else "float32"


def reduced_candidates(fmt: str) -> tuple[str, ...]:
    """Reduced-precision explanations worth testing for a result in ``fmt``, finest first."""
    return {"float64": ("float32", "tf32", "float16", "bfloat16"), "float32": ("tf32", "float16", "bfloat16"),
            "float16": ("float16", "bfloat16"), "bfloat16": ("bfloat16",)}[fmt]


def round_to(x, key: str) -> np.ndarray:
    """Round float64 values to a named format (float16, bfloat16, float32, float64, tf32)."""
    if key == "float64":
        return np.asarray(x, dtype=np.float64)
    f = REDUCED_FORMATS[key]
    return round_precision(x, f.precision, f.emin, f.max_finite)


# ----------------------------------------------------------------------------- arrays


def as_float_array(x, what: str = "array") -> tuple[np.ndarray, str]:
    """(float64 values, the format's name) of a tensor or array; every conversion is exact."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        name = _TORCH_NAMES.get(t.dtype)
        if name is None:
            raise TypeError(f"{what} has dtype {t.dtype}; diagnose needs float16, bfloat16, float32 or float64")
        return t.to("cpu").to(torch.float64).numpy().copy(), name
    arr = np.asarray(x)
    name = _NUMPY_NAMES.get(arr.dtype)
    if name is None:
        raise TypeError(f"{what} has dtype {arr.dtype}; diagnose needs float16, bfloat16, float32 or float64")
    return arr.astype(np.float64), name


def narrower(f1: str, f2: str) -> str:
    """The format of fewer significant bits of two (the first when they tie)."""
    return f1 if FORMATS[f1].precision <= FORMATS[f2].precision else f2
