"""Errors and distances in ULPs: one convention for the whole project (the comment below), exact for
single values (Fractions) and element by element for arrays.

What may import it: every layer; it builds on core.arith.formats (the formats, their bit patterns).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from core.arith.formats import Exact, FloatFormat, bit_view, floor_log2, format_of, quantum_exponent

# ULPs, one convention for the whole project. ulp(x) is the spacing of the format's numbers in the
# binade of |x|: 2^(e-p+1) for 2^e <= |x| < 2^(e+1), so ulp(2^k) = 2^(k-p+1) (the spacing above a
# power of two, as np.spacing gives it), the smallest subnormal in the subnormal range and at 0.
# ``ulp`` is exact (Fractions), ``ulp_array`` the same per element in float64. An error in ULPs is
# measured in ULPs of the *reference* (``error_in_ulps``: of the exact value; ``in_ulps``, the same for
# arrays of absolute differences against any reference); a distance between two results counts the
# representable values between them (``ulp_distance``, ``ulp_distance_array``), which needs no reference.
# Where no exact value exists the caller names its reference: the mismatch diagnosis measures against
# the user's expected array, a trace's judge against the larger of the two runs' values, and the serving
# fork a logit gap against the larger logit.


def ulp(x: Exact, fmt: FloatFormat) -> Fraction:
    """The unit in the last place of the binade of |x| in ``fmt`` (the convention above); ulp(0) is the
    smallest subnormal. Infinite or NaN x has no ULP: ValueError."""
    if isinstance(x, float):
        if not math.isfinite(x):
            raise ValueError("ulp of a non-finite value")
        x = Fraction(x)
    if x == 0:
        return fmt.min_subnormal
    e = max(floor_log2(abs(x)), fmt.emin)
    return Fraction(2) ** (e - fmt.precision + 1)


def ulp_array(x, fmt: FloatFormat) -> np.ndarray:
    """``ulp`` of each |x| in ``fmt`` (TF32 included), as float64 (exact: every ULP of these formats is a
    power of two within float64's range); nan where x is not finite."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    out = np.ldexp(1.0, quantum_exponent(x, fmt.precision, fmt.emin))
    out = np.where(x == 0, 2.0 ** (fmt.emin - fmt.precision + 1), out)
    return np.where(np.isfinite(x), out, np.nan)


def in_ulps(d, reference, fmt: FloatFormat) -> np.ndarray:
    """Absolute differences ``d`` in ULPs of ``fmt`` at the magnitude of ``reference`` (element by element,
    float64; 0 where d is 0, nan where the reference is not finite)."""
    d = np.asarray(d, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(d == 0, 0.0, d / ulp_array(reference, fmt))


def error_in_ulps(computed: Exact, exact: Exact, fmt: FloatFormat) -> float:
    """(computed - exact) / ulp(exact), as a float (signed).

    inf when the computed value overflowed while the exact one is finite; nan when the
    exact value is not finite.
    """
    if isinstance(exact, float) and not math.isfinite(exact):
        return math.nan
    if isinstance(computed, float):
        if math.isnan(computed):
            return math.nan
        if math.isinf(computed):
            return computed
    ratio = (Fraction(computed) - Fraction(exact)) / ulp(exact, fmt)
    try:
        return float(ratio)
    except OverflowError:  # e.g. a nonzero result when the exact sum is 0: ulp(0) is the smallest subnormal
        return math.inf if ratio > 0 else -math.inf


def ordinal(bits: int, fmt: FloatFormat) -> int:
    """Map bit patterns to integers that count representable values in order.

    Consecutive finite values differ by one; +0 and -0 both map to 0.
    """
    sign_bit = 1 << (fmt.width - 1)
    if bits & sign_bit:
        return -(bits & (sign_bit - 1))
    return bits


def ulp_distance(bits_a: int, bits_b: int, fmt: FloatFormat) -> int:
    """How many representable values lie between two finite values (0 if equal)."""
    return abs(ordinal(bits_a, fmt) - ordinal(bits_b, fmt))


def ulp_distance_array(a, b) -> np.ndarray:
    """``ulp_distance`` element by element, for two arrays of one format in FORMATS: int64, or Python
    integers in an object array for float64 (whose distances reach 2^64)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        raise ValueError(f"ULP distance between {a.dtype} and {b.dtype}: give one format")
    fmt = format_of(a.dtype)
    if fmt.width == 64:
        return np.array([ulp_distance(int(p), int(q), fmt) for p, q in zip(bit_view(a).ravel(), bit_view(b).ravel(),
                                                                             strict=True)],
                        dtype=object).reshape(a.shape)

    def ordinals(v):
        bits = bit_view(v).astype(np.int64)
        sign = 1 << (fmt.width - 1)
        return np.where(bits & sign, -(bits & (sign - 1)), bits)

    return np.abs(ordinals(a) - ordinals(b))
