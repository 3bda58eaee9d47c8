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


def significant_digits(decimal: str) -> int:
    """Number of significant digits in an exact decimal string (0 for zero)."""
    digits = decimal.lstrip("-").replace(".", "").lstrip("0")
    return len(digits)


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
