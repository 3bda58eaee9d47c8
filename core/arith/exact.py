"""Exact values and their faithful presentation.

Sums of binary floating-point numbers are dyadic rationals (an integer times a power of
two), so they have finite binary and decimal expansions.  This module turns such values
into ``mpmath.mpf`` without rounding and into exact decimal strings, using only integer
arithmetic.  No mpmath context precision is read or changed.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import torch
from mpmath.libmp import from_man_exp

from core.arith import buckets
from core.arith.formats import (
    FORMATS,
    Exact,
    FloatFormat,
    bit_view,
    format_of,
    round_to_format,
    to_numpy,
    value_of_bits,
)


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

    def shortest_of(digits: int) -> str | None:
        scale = Fraction(10) ** (e10 - digits + 1)
        lo = mag // scale  # the two digit strings of this length that bracket |x|
        for m in sorted((lo, lo + 1), key=lambda m: (abs(m * scale - mag), m % 2)):
            if m and round_to_format(sign * m * scale, fmt) == x:
                return _format_sig(sign * m * scale, digits + 1)
        return None

    # The lengths that round back form an upward-closed set (a d-digit string that does is also a (d+1)-digit
    # one), so the search may start at a hint: when one digit fewer fails, nothing shorter succeeds either.
    # The hint only saves the exact checks of the lengths below it; what is returned is the same.
    start = _digits_hint(x, fmt)
    if start > 1 and shortest_of(start - 1) is not None:
        start = 1  # the hint was long: search from the start
    for digits in range(start, 40):
        found = shortest_of(digits)
        if found is not None:
            return found
    return exact_decimal(x)  # unreachable for the supported formats


def _digits_hint(x: Fraction, fmt: FloatFormat) -> int:
    """The significant digits of NumPy's shortest unique repr of ``x`` in ``fmt`` (1 where NumPy has no type for
    the format, or ``x`` is not one of its values)."""
    if not fmt.native_numpy:
        return 1
    value = fmt.numpy_dtype.type(float(x))
    if not np.isfinite(value) or Fraction(float(value)) != x:
        return 1
    mantissa = np.format_float_scientific(value, unique=True).split("e")[0]
    return max(1, len(mantissa.replace("-", "").replace(".", "").rstrip("0")))


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
# From this many values the compiled passes (core.arith.buckets) take over: below it NumPy is as fast
# and a small sum never waits for numba's import and compilation.
_COMPILED_MIN = 1 << 16
_COMPILED_CHUNK = 1 << 20  # values per compiled call (a piece of a narrower format is widened first)
# The dtypes the exact sums and dot products take: every stored format. All but float64 widen to float32
# exactly (their precision and exponent range lie within float32's), which the bucket passes rely on.
_TAKEN = {f.numpy_dtype: f for f in FORMATS.values()}
assert all(f.precision <= 24 and f.emax <= 127 and f.emin - f.precision >= -150 for f in _TAKEN.values()
           if f.width < 64), "a narrow format must widen to float32 exactly"


def _check_taken(a: np.ndarray, what: str) -> None:
    if a.dtype not in _TAKEN:
        raise TypeError(f"{what} takes {', '.join(FORMATS)} values, not {a.dtype}")


def as_numpy(x) -> np.ndarray:
    """A 1-D numpy view of a numpy array or torch tensor (bfloat16 via ml_dtypes)."""
    if isinstance(x, torch.Tensor):
        return to_numpy(x.detach().reshape(-1))
    a = np.asarray(x).reshape(-1)
    _check_taken(a, "exact_sum")
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
    compiled = a.size >= _COMPILED_MIN and buckets.available()
    step = (a.size if a.dtype == np.float32 else _COMPILED_CHUNK) if compiled else _CHUNK
    for s in range(0, a.size, step):
        part = a[s : s + step]
        if part.dtype != np.float32:
            part = part.astype(np.float32)  # narrower formats widen exactly
        if compiled:
            acc += buckets.sum_buckets32(part)
        else:
            acc += np.bincount(bit_view(part) >> 23, weights=part.astype(np.float64), minlength=512)
    return acc


def _buckets_float64(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per (sign, exponent) sums of the high and low 26-bit halves of float64 mantissas,
    as integers held exactly in float64 (each half < 2^27, fewer than 2^26 values)."""
    hi_acc, lo_acc = np.zeros(4096), np.zeros(4096)
    low_mask = np.uint64((1 << 26) - 1)
    for s in range(0, a.size, _CHUNK):
        u = bit_view(a[s : s + _CHUNK])
        idx = u >> np.uint64(52)
        frac = u & np.uint64((1 << 52) - 1)
        implicit = ((idx & np.uint64(0x7FF)) != 0).astype(np.uint64) << np.uint64(52)
        m = frac | implicit
        hi_acc += np.bincount(idx, weights=(m >> np.uint64(26)).astype(np.float64), minlength=4096)
        lo_acc += np.bincount(idx, weights=(m & low_mask).astype(np.float64), minlength=4096)
    return hi_acc, lo_acc


def _pattern_count_sum(a: np.ndarray) -> Exact:
    """The exact sum of values of an eight-bit format, from how often each bit pattern occurs."""
    fmt = format_of(a.dtype)
    counts = np.bincount(bit_view(a), minlength=256)
    present = [(value_of_bits(b, fmt), int(counts[b])) for b in np.flatnonzero(counts).tolist()]
    specials = {v for v, _ in present if isinstance(v, float)}
    if specials:
        return math.nan if any(map(math.isnan, specials)) or len(specials) > 1 else specials.pop()
    return sum((v * c for v, c in present), Fraction(0))


def exact_sum_fraction(x) -> Exact:
    """The exact sum of the values as a Fraction (or nan / +-inf following IEEE).

    Values are grouped by sign and exponent with one vectorized bincount per cache-sized
    chunk; within a group every partial sum is exact in float64 (float32 and narrower
    inputs), or the mantissas are summed as integers in two 26-bit halves (float64
    inputs). The few hundred group totals are then combined exactly as Fractions. An eight-bit
    format has 256 patterns: each is counted, and the counts times the values added exactly.
    """
    a = as_numpy(x)
    if a.itemsize == 1:
        return _pattern_count_sum(a)
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


# --------------------------------------------------------------------------- exact dot products

_DOT_LIMIT = 1 << 24  # elements per bucket pass: per-bucket float64 totals stay exact (see below)
_DOT_CHUNK = 1 << 16
_HI_MASK = np.uint64(~((1 << 29) - 1) & ((1 << 64) - 1))  # sign, exponent and the top 23 stored bits
_LOW27 = np.uint64((1 << 27) - 1)
_E_OFFSET = 2148  # float64 products are integers times 2^E with E >= -2148


def _dot_operands(x, y) -> tuple[np.ndarray, np.ndarray]:
    a, b = as_numpy(x), as_numpy(y)
    for v in (a, b):
        _check_taken(v, "exact_dot")
    if a.size != b.size:
        raise ValueError(f"exact_dot needs two vectors of one length, not {a.size:,} and {b.size:,}")
    return a, b


def _special_dot(a: np.ndarray, b: np.ndarray) -> float | None:
    """IEEE result when an input is inf or nan (inf * 0 is nan, +inf + -inf is nan), else None.

    Products of finite values never matter then: exactly, they are finite."""
    bad = ~(np.isfinite(a) & np.isfinite(b))
    if not bad.any():
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        prods = a[bad].astype(np.float64) * b[bad].astype(np.float64)  # inf*0 -> nan, inf*tiny -> inf
    return _special_sum(prods)


def _compiled_dot(a: np.ndarray, b: np.ndarray) -> bool:
    return a.size >= _COMPILED_MIN and np.float64 not in (a.dtype, b.dtype) and buckets.available()


def _dot_narrow(a: np.ndarray, b: np.ndarray) -> Fraction | None:
    """Exact dot product of float16/bfloat16/float32 values (finite; the compiled pass also finds
    non-finite ones itself, and returns None for them).

    The compiled pass (core.arith.buckets.dot_buckets32) adds the products' integer significands
    per exponent in int64. Without it, NumPy: each product is exact in float64 (at most 24 x 24 =
    48 significant bits, magnitude in [2^-298, 2^256], normal). Split by bits: hi keeps the top 24
    significant bits, lo = p - hi (exact) the rest, at most 24 bits. Grouped by the product's sign
    and exponent e, every hi is a multiple of 2^(e-23) below 2^(e+1) and every lo a multiple of
    2^(e-47) below 2^(e-23): fewer than 2^29 of either sum exactly in float64, in any order.
    """
    if _compiled_dot(a, b):
        hi, lo = np.zeros(512, dtype=np.int64), np.zeros(512, dtype=np.int64)
        step = a.size if a.dtype == b.dtype == np.float32 else _COMPILED_CHUNK
        for s in range(0, a.size, step):  # float16 and bfloat16 widen to float32 exactly, a piece at a time
            h, low, special = buckets.dot_buckets32(a[s : s + step].astype(np.float32, copy=False),
                                                    b[s : s + step].astype(np.float32, copy=False))
            if special:
                return None  # an inf or nan input
            hi += h
            lo += low
        total = 0
        for j in np.flatnonzero((hi != 0) | (lo != 0)).tolist():  # bucket j: (hi * 2^31 + lo) * 2^(j - 300)
            total += ((int(hi[j]) << 31) + int(lo[j])) << (j - 2)
        return Fraction(total, 1 << 298)
    hi_acc, lo_acc = np.zeros(4096), np.zeros(4096)
    size = min(_DOT_CHUNK, a.size)
    p, hi, bucket = np.empty(size), np.empty(size), np.empty(size, dtype=np.int64)  # bincount takes int64
    p_bits, hi_bits = bit_view(p), bit_view(hi)
    direct = format_of(a.dtype).native_numpy and format_of(b.dtype).native_numpy  # numpy casts these itself
    for s in range(0, a.size, _DOT_CHUNK):
        m = min(_DOT_CHUNK, a.size - s)
        pm, hm = p[:m], hi[:m]
        if direct:
            np.multiply(a[s : s + m], b[s : s + m], out=pm, dtype=np.float64)
        else:
            np.multiply(a[s : s + m].astype(np.float64), b[s : s + m].astype(np.float64), out=pm)
        np.bitwise_and(p_bits[:m], _HI_MASK, out=hi_bits[:m])
        np.right_shift(p_bits[:m], np.uint64(52), out=bucket[:m])  # sign and exponent field: below 4096
        hi_acc += np.bincount(bucket[:m], weights=hm, minlength=4096)
        np.subtract(pm, hm, out=pm)  # lo = p - hi, exact
        lo_acc += np.bincount(bucket[:m], weights=pm, minlength=4096)
    return _dot_total(hi_acc, lo_acc)


def _dot_total(hi_acc: np.ndarray, lo_acc: np.ndarray) -> Fraction:
    """The exact sum of the bucket totals of ``_dot_narrow``."""
    total = 0
    shift = 1100  # every bucket total is an integer multiple of 2^-1100 (products are >= 2^-298)
    for v in np.concatenate([hi_acc[hi_acc != 0], lo_acc[lo_acc != 0]]).tolist():
        m, e = math.frexp(v)
        total += int(m * (1 << 53)) << (e - 53 + shift)
    return Fraction(total, 1 << shift)


def _dot_float64(a: np.ndarray, b: np.ndarray) -> Fraction:
    """Exact dot product when either operand is float64 (finite values).

    Each value is m * 2^e with an integer m < 2^53, so a product is M * 2^E with M < 2^106,
    E >= -2148. With m = m1 * 2^27 + m0, M = hi * 2^54 + mid * 2^27 + lo where hi, mid, lo
    < 2^54 are exact in uint64; regrouped into four digits of at most 28 bits at 2^0, 2^27,
    2^54, 2^81, each digit is summed per (sign, E) in float64, exactly while fewer than 2^25
    values are summed (28 + 25 = 53 bits).
    """
    def parts(v: np.ndarray):
        u = bit_view(v.astype(np.float64))
        field = (u >> np.uint64(52)) & np.uint64(0x7FF)
        m = (u & np.uint64((1 << 52) - 1)) | ((field != 0).astype(np.uint64) << np.uint64(52))
        e = np.maximum(field.astype(np.int64), 1) - 1075
        return u >> np.uint64(63), m >> np.uint64(27), m & _LOW27, e

    accs = [np.zeros(8192) for _ in range(4)]
    for s in range(0, a.size, _DOT_CHUNK):
        sa, a1, a0, ea = parts(a[s : s + _DOT_CHUNK])
        sb, b1, b0, eb = parts(b[s : s + _DOT_CHUNK])
        lo, mid, hi = a0 * b0, a1 * b0 + a0 * b1, a1 * b1
        idx = ((sa ^ sb).astype(np.int64) << 12) + (ea + eb + _E_OFFSET)
        digits = (lo & _LOW27, (lo >> np.uint64(27)) + (mid & _LOW27),
                  (mid >> np.uint64(27)) + (hi & _LOW27), hi >> np.uint64(27))
        for acc, d in zip(accs, digits, strict=True):
            acc += np.bincount(idx, weights=d.astype(np.float64), minlength=8192)
    total = 0
    nonzero = np.flatnonzero((accs[0] != 0) | (accs[1] != 0) | (accs[2] != 0) | (accs[3] != 0))
    for idx in nonzero.tolist():
        m = sum(int(acc[idx]) << (27 * k) for k, acc in enumerate(accs))
        total += (-m if idx >> 12 else m) << (idx & 0xFFF)
    return Fraction(total, 1 << _E_OFFSET)


def exact_dot_fraction(x, y) -> Exact:
    """The exact dot product sum(x_i * y_i) as a Fraction (or nan / +-inf following IEEE).

    Any of float16, bfloat16, float32 and float64 (numpy arrays or torch tensors, the two may
    differ). No product or sum is rounded: a product of finite values never overflows or
    underflows here, whatever its size. Non-finite inputs give IEEE's answer: nan for a nan,
    for inf * 0 or for +inf and -inf products together, else the infinity. An exact zero has no
    sign (the rounded results of the arithmetic models carry it).
    """
    a, b = _dot_operands(x, y)
    # the compiled pass sees an inf or nan in its buckets, so it reads the values only once
    special = None if _compiled_dot(a, b) else _special_dot(a, b)
    if special is not None:
        return special
    wide = np.float64 in (a.dtype, b.dtype)
    total = Fraction(0)
    for s in range(0, a.size, _DOT_LIMIT):
        part_a, part_b = a[s : s + _DOT_LIMIT], b[s : s + _DOT_LIMIT]
        part = _dot_float64(part_a, part_b) if wide else _dot_narrow(part_a, part_b)
        if part is None:
            return _special_dot(a, b)
        total += part
    return total


def exact_dot(x, y) -> mpmath.mpf:
    """The exact, unrounded dot product as an mpmath.mpf carrying every bit it needs."""
    return to_mpf(exact_dot_fraction(x, y))
