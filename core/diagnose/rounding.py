"""Formats for the mismatch diagnosis: the reduced formats one side may have rounded its inputs to
(rounded with core.arith.formats.round_precision), the format each accumulates in, and the conversion
of NumPy arrays and torch tensors to float64. ULPs and gamma_K are core.arith's (formats, metrics).

F is the format a computation ran in (its result format); A the format it accumulated in
(``accumulation_format``): float32 for float16, bfloat16 and float32 (what torch's CPU and CUDA kernels
do), float64 for float64. u = 2^-p is the unit roundoff of a format with p significant bits
(float32: 2^-24), and gamma_K = K u / (1 - K u) (Higham, *Accuracy and Stability of Numerical
Algorithms*, 3.1).

The reduced formats (``REDUCED_FORMATS``) are a lookup of (a core.arith.formats.FloatFormat, whether the
result is rounded to it too, what it models): TF32 keeps 10 explicit mantissa bits (p = 11, float32's
exponent range); float16 p = 11 with a 5-bit exponent; bfloat16 p = 8 with float32's exponent range. Each
format's precision, range and unit roundoff are its FloatFormat's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.arith.formats import BFLOAT16, FLOAT16, FLOAT32, FORMATS, TF32, FloatFormat, format_of, round_precision

# ---------------------------------------------------------------------------- formats


@dataclass(frozen=True, kw_only=True)
class ReducedPrecision:
    """An explanation of a difference: one side rounded its inputs to ``fmt`` (reduced precision)."""

    key: str
    fmt: FloatFormat
    rounds_output: bool  # autocast returns results in this format
    what: str
    may_truncate: bool = False  # some hardware converts by truncation: twice the error, biased toward zero


REDUCED_FORMATS: dict[str, ReducedPrecision] = {
    p.key: p
    for p in (
        ReducedPrecision(
            key="float32", fmt=FLOAT32, rounds_output=False,
            what="one side ran in float32 (inputs rounded to float32, float32 accumulation)",
        ),
        ReducedPrecision(
            key="tf32", fmt=TF32, rounds_output=False,
            what="TF32 tensor cores: float32 inputs rounded to 10 explicit mantissa bits, "
            "float32 accumulation, float32 result",
            may_truncate=True,
        ),
        ReducedPrecision(
            key="float16", fmt=FLOAT16, rounds_output=True,
            what="float16 autocast: inputs rounded to float16, float32 accumulation, float16 result",
        ),
        ReducedPrecision(
            key="bfloat16", fmt=BFLOAT16, rounds_output=True,
            what="bfloat16 autocast: inputs rounded to bfloat16, float32 accumulation, bfloat16 result",
        ),
    )
}


def accumulation_format(fmt: str) -> str:
    """The format torch accumulates reductions of ``fmt`` in (float32 below float64; TF32 is read as float32)."""
    return FORMATS[fmt].accumulates_in if fmt in FORMATS else "float32"


def reduced_candidates(fmt: str) -> tuple[str, ...]:
    """Reduced-precision explanations worth testing for a result in ``fmt``, finest first."""
    return {"float64": ("float32", "tf32", "float16", "bfloat16"), "float32": ("tf32", "float16", "bfloat16"),
            "float16": ("float16", "bfloat16"), "bfloat16": ("bfloat16",)}[fmt]


def round_to(x, key: str) -> np.ndarray:
    """Round float64 values to a named format (float16, bfloat16, float32, float64, tf32)."""
    if key == "float64":
        return np.asarray(x, dtype=np.float64)
    f = REDUCED_FORMATS[key].fmt
    return round_precision(x, f.precision, f.emin, float(f.max_finite))


# ----------------------------------------------------------------------------- arrays


def as_float_array(x, what: str = "array") -> tuple[np.ndarray, str]:
    """(float64 values, the format's name) of a tensor or array; every conversion is exact."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        name = _format_name(t.dtype, what)
        return t.to("cpu").to(torch.float64).numpy().copy(), name
    arr = np.asarray(x)
    name = _format_name(arr.dtype, what)
    return arr.astype(np.float64), name


def _format_name(dtype, what: str) -> str:
    try:
        return format_of(dtype).name
    except ValueError:
        raise TypeError(f"{what} has dtype {dtype}; diagnose needs float16, bfloat16, float32 or float64") from None


def narrower(f1: str, f2: str) -> str:
    """The format of fewer significant bits of two (the first when they tie)."""
    return f1 if FORMATS[f1].precision <= FORMATS[f2].precision else f2
