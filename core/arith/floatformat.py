"""The number formats the app knows, each one entry: its layout and the rules that differ between formats.

A format is one ``FloatFormat`` in ``REGISTRY``. Everything else reads its fields: the bit layout (sign,
``exponent_bits``, ``precision`` counting the implicit bit, ``bias``), whether the all-ones exponent
holds infinities, which patterns are NaN, what a cast does with a value too large for the format, whether
torch computes in it on a CPU or only stores it, and the torch and NumPy (ml_dtypes) types that store it.
core.arith.formats decodes, rounds and measures in ULPs from these fields alone, so adding a format is
one entry here plus its tests.

The eight-bit formats follow torch's dtypes (``float8_e4m3fn``, ``float8_e5m2``) and the OCP 8-bit
floating point specification (https://www.opencompute.org/documents/ocp-8-bit-floating-point-specification-ofp8-revision-1-0-2023-12-01-pdf-1):
e5m2 is IEEE-like, with infinities and several NaNs; e4m3fn ("finite, NaN") has no infinity, keeps the
all-ones exponent for finite values and gives NaN a single pattern per sign (S.1111.111), so its
largest value is 448, not 480. A cast of a value beyond that range is where libraries part: torch
2.12 and later saturate float8_e4m3fn to +-448, infinities included
(https://github.com/pytorch/pytorch/pull/178817), while ml_dtypes gives NaN
(https://github.com/jax-ml/ml_dtypes/issues/400). Both rules are fields (``overflow``,
``numpy_overflow``), and tests/core/arith/test_fp8.py checks them against both libraries on every
bit pattern.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Literal

import ml_dtypes
import numpy as np
import torch

Overflow = Literal["inf", "saturate", "nan"]  # what a cast gives for a value past the largest finite one
# ieee: all-ones exponent, nonzero fraction; all_ones: S.1111.111 only; negative_zero: the pattern of -0 is the one NaN
# (the "fnuz" formats: finite, no negative zero)
NanEncoding = Literal["ieee", "all_ones", "negative_zero"]


@dataclass(frozen=True, kw_only=True)
class FloatFormat:
    """One binary floating-point format. Its derived dtypes and width are computed once
    (``cached_property``): a trace asks for them for every op it records. A format without storage of
    its own (TF32) names the dtypes that hold its values (float32's); ``width`` is its own bits."""

    name: str
    precision: int  # p, including the implicit bit
    exponent_bits: int
    bias: int  # stored exponent minus the exponent it stands for
    torch_dtype: torch.dtype
    int_dtype: torch.dtype  # same-width signed integer dtype, for reading bit patterns
    numpy_dtype: np.dtype  # the NumPy dtype that stores it (ml_dtypes' for bfloat16 and the eight-bit formats)
    infinities: bool = True  # the all-ones exponent with a zero fraction is +-inf
    nan_encoding: NanEncoding = "ieee"
    overflow: Overflow = "inf"  # torch's cast, and this app's rounding
    numpy_overflow: Overflow = "inf"  # NumPy's or ml_dtypes' cast
    arithmetic: bool = True  # torch adds and multiplies in it on a CPU (the eight-bit formats are storage only)
    accumulates_in: str = "float32"  # the format torch's reductions of this dtype, and FP8 matrix products, add in

    def __post_init__(self):
        if not self.infinities and "inf" in (self.overflow, self.numpy_overflow):
            raise ValueError(f"{self.name} has no infinities to overflow to")
        if self.infinities and self.nan_encoding != "ieee":
            raise ValueError(f"{self.name}: a format with infinities keeps IEEE's NaNs")
        if not self.arithmetic and self.emax - self.emin + self.precision > 53:
            raise ValueError(f"{self.name}: a storage-only format's sums must be exact in float64")

    @cached_property
    def uint_dtype(self) -> np.dtype:
        """The unsigned NumPy integer dtype of the stored width: the bit view of a value."""
        return np.dtype(f"u{self.numpy_dtype.itemsize}")

    @property
    def emax(self) -> int:
        """The largest exponent of a finite value: the all-ones exponent is finite where it holds no infinity."""
        return (1 << self.exponent_bits) - (2 if self.infinities else 1) - self.bias

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def mantissa_bits(self) -> int:
        """Stored fraction bits (the implicit bit is not stored)."""
        return self.precision - 1

    @cached_property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def unit_roundoff(self) -> Fraction:
        """u = 2^-p: the largest relative error of one rounding to nearest."""
        return Fraction(1, 2**self.precision)

    @cached_property
    def max_finite(self) -> Fraction:
        """The largest finite value: all fraction bits set in the top binade, less one step where that
        pattern is the NaN (``nan_encoding`` all_ones)."""
        steps = (1 << self.mantissa_bits) - (2 if self.nan_encoding == "all_ones" else 1)
        return (1 + Fraction(steps, 1 << self.mantissa_bits)) * Fraction(2) ** self.emax

    @property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.emin

    @property
    def min_subnormal(self) -> Fraction:
        return Fraction(2) ** (self.emin - self.precision + 1)

    @property
    def decimal_digits(self) -> int:
        """Significant decimal digits that always identify a value (round trip)."""
        return math.ceil(self.precision * math.log10(2)) + 1

    @property
    def native_numpy(self) -> bool:
        """Whether NumPy stores it itself (float16, float32, float64), so its casts and arithmetic are NumPy's
        own, correctly rounded, rather than ml_dtypes'."""
        return self.numpy_dtype in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))

    def overflowed(self, negative: bool, policy: Overflow | None = None) -> float | Fraction:
        """What a cast gives for a value past the largest finite one (or an infinity), by ``policy``
        (default: torch's, ``overflow``)."""
        policy = policy or self.overflow
        if policy == "nan":
            return math.nan
        if policy == "saturate":
            return -self.max_finite if negative else self.max_finite
        return -math.inf if negative else math.inf


FLOAT16 = FloatFormat(name="float16", precision=11, exponent_bits=5, bias=15, torch_dtype=torch.float16,
                      int_dtype=torch.int16, numpy_dtype=np.dtype(np.float16))
BFLOAT16 = FloatFormat(name="bfloat16", precision=8, exponent_bits=8, bias=127, torch_dtype=torch.bfloat16,
                       int_dtype=torch.int16, numpy_dtype=np.dtype(ml_dtypes.bfloat16))
FLOAT32 = FloatFormat(name="float32", precision=24, exponent_bits=8, bias=127, torch_dtype=torch.float32,
                      int_dtype=torch.int32, numpy_dtype=np.dtype(np.float32))
FLOAT64 = FloatFormat(name="float64", precision=53, exponent_bits=11, bias=1023, torch_dtype=torch.float64,
                      int_dtype=torch.int64, numpy_dtype=np.dtype(np.float64), accumulates_in="float64")
FLOAT8_E4M3FN = FloatFormat(name="float8_e4m3fn", precision=4, exponent_bits=4, bias=7,
                            torch_dtype=torch.float8_e4m3fn, int_dtype=torch.int8,
                            numpy_dtype=np.dtype(ml_dtypes.float8_e4m3fn), infinities=False,
                            nan_encoding="all_ones", overflow="saturate", numpy_overflow="nan", arithmetic=False)
FLOAT8_E5M2 = FloatFormat(name="float8_e5m2", precision=3, exponent_bits=5, bias=15, torch_dtype=torch.float8_e5m2,
                          int_dtype=torch.int8, numpy_dtype=np.dtype(ml_dtypes.float8_e5m2), arithmetic=False)

# TF32 ("TensorFloat-32") is float32's sign and 8-bit exponent with 10 explicit mantissa bits: precision 11,
# the range of float32. It is no storage format: tensor cores read float32 registers and use their top 19
# bits, so its values are float32 values with the low 13 bits 0, and it is not in FORMATS (the formats a
# dtype stores; ``format_of(torch.float32)`` is FLOAT32).
TF32 = FloatFormat(name="TF32", precision=11, exponent_bits=8, bias=127, torch_dtype=torch.float32,
                   int_dtype=torch.int32, numpy_dtype=np.dtype(np.float32))

# Every format a dtype stores, narrowest first within each kind: the ones torch computes in, then the
# eight-bit storage formats. Pages list them in this order.
REGISTRY: tuple[FloatFormat, ...] = (FLOAT16, BFLOAT16, FLOAT32, FLOAT64, FLOAT8_E4M3FN, FLOAT8_E5M2)
