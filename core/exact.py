"""Exact values and their faithful presentation.

Sums of binary floating-point numbers are dyadic rationals (an integer times a power of
two), so they have finite binary and decimal expansions.  This module turns such values
into ``mpmath.mpf`` without rounding and into exact decimal strings, using only integer
arithmetic.  No mpmath context precision is read or changed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import torch
from mpmath.libmp import from_man_exp

from core.formats import Exact, FloatFormat, round_to_format


def is_dyadic(x: Fraction) -> bool:
    d = x.denominator
    return d & (d - 1) == 0


def to_mpf(x: Exact) -> mpmath.mpf:
    """An mpf equal to the dyadic rational x, carrying as many bits as it needs.

    ``from_man_exp`` with precision 0 normalizes without rounding, so the result does
    not depend on ``mpmath.mp.prec``.
    """
    if isinstance(x, float):
        return mpmath.mpf(x)  # inf, -inf, nan (and exact for finite floats)
    if not is_dyadic(x):
        raise ValueError(f"{x} is not a dyadic rational; it has no exact binary value")
    k = x.denominator.bit_length() - 1
    return mpmath.mp.make_mpf(from_man_exp(x.numerator, -k))


def mpf_to_fraction(x: mpmath.mpf) -> Fraction:
    """Exact Fraction of a finite mpf (used by tests to check round trips)."""
    sign, man, exp, _bc = x._mpf_
    if not man and exp:  # special values have man == 0 and exp != 0
        raise ValueError("not finite")
    v = Fraction(int(man)) * Fraction(2) ** exp
    return -v if sign else v


def exact_decimal(x: Exact) -> str:
    """The complete decimal expansion of a dyadic rational: no digit is rounded.

    m / 2^k = m * 5^k / 10^k, so k fractional decimal digits suffice.
    """
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        return "inf" if x > 0 else "-inf"
    if not is_dyadic(x):
        raise ValueError(f"{x} has no finite decimal expansion")
    sign = "-" if x < 0 else ""
    n = abs(x.numerator)
    k = x.denominator.bit_length() - 1
    scaled = n * 5**k  # value = scaled / 10^k
    int_part, frac_part = divmod(scaled, 10**k)
    if k == 0 or frac_part == 0:
        return f"{sign}{int_part}"
    frac = str(frac_part).rjust(k, "0").rstrip("0")
    return f"{sign}{int_part}.{frac}"




def distinguishing_reprs(values: list[Exact]) -> list[str]:
    """Every value with the fewest significant digits, the same count for all, that tell apart the
    values that differ (equal values print equally). Each string is the value correctly rounded to
    that many digits (every value of the four formats is a Python float exactly)."""
    floats = [float(v) for v in values]
    distinct = {(f, math.copysign(1.0, f)) for f in floats if not math.isnan(f)}  # -0 and +0 are other bits
    for digits in range(1, 18):
        out = [f"{f:.{digits}g}" for f in floats]
        finite = {o for o, f in zip(out, floats, strict=True) if not math.isnan(f)}
        if len(finite) == len(distinct):
            return out
    return [repr(f) for f in floats]  # 17 digits always tell float64 values apart


def shortest_repr(x: Exact, fmt: FloatFormat) -> str:
    """The shortest decimal string that rounds back to x in ``fmt``.

    Found by trying 1, 2, ... significant digits; each candidate is checked with exact
    rational rounding (so this is right for float16 and bfloat16 too).
    """
    if isinstance(x, float) and not math.isfinite(x):
        return exact_decimal(x)
    if x == 0:
        return "0"
    x = Fraction(x)
    sign = -1 if x < 0 else 1
    mag = abs(x)
    e10 = _floor_log10(mag)
    for digits in range(1, 40):
        scale = Fraction(10) ** (e10 - digits + 1)
        lo = mag // scale  # the two digit strings of this length that bracket |x|
        for m in sorted((lo, lo + 1), key=lambda m: (abs(m * scale - mag), m % 2)):
            if m and round_to_format(sign * m * scale, fmt) == x:
                return _format_sig(sign * m * scale, digits + 1)
    return exact_decimal(x)  # unreachable for the supported formats


def _floor_log10(mag: Fraction) -> int:
    e = len(str(mag.numerator)) - len(str(mag.denominator))
    while Fraction(10) ** e > mag:
        e -= 1
    while Fraction(10) ** (e + 1) <= mag:
        e += 1
    return e


def _format_sig(x: Fraction, digits: int) -> str:
    """Format a value with at most ``digits`` significant digits, plainly or in e-notation."""
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mag = abs(x)
    e10 = _floor_log10(mag)
    mantissa = round(mag / Fraction(10) ** (e10 - digits + 1))
    if mantissa >= 10**digits:  # rounding carried into a new digit
        mantissa //= 10
        e10 += 1
    s = str(mantissa).rstrip("0") or "0"
    if -5 <= e10 < 16:
        if e10 >= 0:
            if len(s) <= e10 + 1:
                return sign + s + "0" * (e10 + 1 - len(s))
            return sign + s[: e10 + 1] + "." + s[e10 + 1 :]
        return sign + "0." + "0" * (-e10 - 1) + s
    body = s[0] + ("." + s[1:] if len(s) > 1 else "")
    return f"{sign}{body}e{e10:+03d}"


def abbreviate(decimal: str, keep: int = 60) -> str:
    """Shorten a long exact decimal for display, saying how many digits were elided."""
    if len(decimal) <= keep:
        return decimal
    head, tail = decimal[: keep - 12], decimal[-8:]
    return f"{head}…({len(decimal) - len(head) - len(tail)} more digits)…{tail}"


# --------------------------------------------------------------------------- exact sums

_CHUNK = 1 << 14  # elements per pass: the temporaries stay in cache
_MAX_ELEMENTS = 1 << 26  # per-bucket float64 totals stay exact up to this many values


def as_numpy(x) -> np.ndarray:
    """A 1-D numpy view of a numpy array or torch tensor (bfloat16 via ml_dtypes)."""
    if isinstance(x, torch.Tensor):
        t = x.detach().reshape(-1).cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return t.numpy()
    a = np.asarray(x).reshape(-1)
    if a.dtype not in (np.float16, np.float32, np.float64, ml_dtypes.bfloat16):
        raise TypeError(f"exact_sum takes float16, bfloat16, float32 or float64 values, not {a.dtype}")
    return a


def _special_sum(a: np.ndarray) -> float:
    """IEEE result when non-finite values are present: nan, +inf or -inf."""
    bad = a[~np.isfinite(a)].astype(np.float64)
    if np.isnan(bad).any() or ((bad > 0).any() and (bad < 0).any()):
        return math.nan
    return float(bad[0])


def _buckets_float32(a: np.ndarray) -> np.ndarray:
    """Per (sign, exponent) sums of float32 values, each exact in float64.

    The bucket index is the top 9 bits (sign and exponent). All values in one bucket are
    multiples of one power of two and have at most 24 significant bits, so any float64
    sum of fewer than 2^29 of them is exact, whatever the order.
    """
    acc = np.zeros(512)
    for s in range(0, a.size, _CHUNK):
        part = a[s : s + _CHUNK]
        if part.dtype != np.float32:
            part = part.astype(np.float32)  # float16 and bfloat16 widen exactly
        acc += np.bincount(part.view(np.uint32) >> 23, weights=part.astype(np.float64), minlength=512)
    return acc


def _buckets_float64(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (sign, exponent) sums of the high and low 26-bit halves of float64 mantissas,
    as integers held exactly in float64 (each half < 2^27, fewer than 2^26 values)."""
    hi_acc, lo_acc = np.zeros(4096), np.zeros(4096)
    low_mask = np.uint64((1 << 26) - 1)
    for s in range(0, a.size, _CHUNK):
        u = a[s : s + _CHUNK].view(np.uint64)
        idx = u >> np.uint64(52)
        frac = u & np.uint64((1 << 52) - 1)
        implicit = ((idx & np.uint64(0x7FF)) != 0).astype(np.uint64) << np.uint64(52)
        m = frac | implicit
        hi_acc += np.bincount(idx, weights=(m >> np.uint64(26)).astype(np.float64), minlength=4096)
        lo_acc += np.bincount(idx, weights=(m & low_mask).astype(np.float64), minlength=4096)
    return hi_acc, lo_acc


def exact_sum_fraction(x) -> Exact:
    """The exact sum of the values as a Fraction (or nan / +-inf following IEEE).

    Values are grouped by sign and exponent with one vectorized bincount per cache-sized
    chunk; within a group every partial sum is exact in float64 (float32 and narrower
    inputs), or the mantissas are summed as integers in two 26-bit halves (float64
    inputs). The few hundred group totals are then combined exactly as Fractions.
    """
    a = as_numpy(x)
    if a.size > _MAX_ELEMENTS:
        parts = [exact_sum_fraction(a[s : s + _MAX_ELEMENTS]) for s in range(0, a.size, _MAX_ELEMENTS)]
        specials = [p for p in parts if isinstance(p, float)]
        return sum(specials, 0.0) if specials else sum(parts, Fraction(0))
    if a.dtype == np.float64:
        hi, lo = _buckets_float64(a)
        if hi[0x7FF] or lo[0x7FF] or hi[0xFFF] or lo[0xFFF] or np.isnan(hi).any():
            return _special_sum(a)
        total = Fraction(0)
        for idx in np.flatnonzero((hi != 0) | (lo != 0)):
            exp = max(int(idx) & 0x7FF, 1) - 1075
            m = (int(hi[idx]) << 26) + int(lo[idx])
            total += Fraction(-m if idx >> 11 else m) * Fraction(2) ** exp
        return total
    acc = _buckets_float32(a)
    if not np.isfinite(acc).all() or acc[255] or acc[511]:
        return _special_sum(a)
    return sum((Fraction(float(v)) for v in acc[acc != 0]), Fraction(0))


def exact_sum(x) -> mpmath.mpf:
    """The exact, unrounded sum as an mpmath.mpf carrying every bit it needs."""
    return to_mpf(exact_sum_fraction(x))


def correctly_rounded_sum(x, fmt: FloatFormat) -> Exact:
    """The exact sum rounded once to ``fmt`` (nearest, ties to even)."""
    return round_to_format(exact_sum_fraction(x), fmt)
