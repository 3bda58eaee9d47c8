"""Correctly rounded exp, log, tanh and sigmoid of binary floats: the reference that library
implementations are measured against.

mpmath's low-level functions (``mpmath.libmp``) take their precision as an argument, so no mpmath
context is read or changed. A value computed at p bits is within a few of its own ULPs of the true
value; when the interval of 8 such ULPs either side of it rounds to one value of the target format,
that value is the correctly rounded result (Ziv's strategy). Otherwise the precision doubles: results
very close to a half-way point between two values of the format need more bits to decide.
"""

from __future__ import annotations

import math
from fractions import Fraction

from mpmath.libmp import fone, from_float, mpf_add, mpf_div, mpf_exp, mpf_log, mpf_neg, mpf_tanh

from core.arith.formats import Exact, FloatFormat, round_to_format

FUNCTIONS: tuple[str, ...] = ("exp", "log", "tanh", "sigmoid")
START_BITS = 96
MAX_BITS = 8192
_GUARD = 24  # extra bits for sigmoid's intermediate 1 + exp(-x)


def _value(name: str, x, prec: int):
    """f(x) to ``prec`` bits (nearest), as an mpf tuple."""
    if name == "exp":
        return mpf_exp(x, prec, "n")
    if name == "log":
        return mpf_log(x, prec, "n")
    if name == "tanh":
        return mpf_tanh(x, prec, "n")
    if name == "sigmoid":
        wide = prec + _GUARD
        return mpf_div(fone, mpf_add(fone, mpf_exp(mpf_neg(x), wide, "n"), wide, "n"), prec, "n")
    raise ValueError(f"no reference for {name!r}: choose one of {', '.join(FUNCTIONS)}")


def _round(sign: int, man: int, exp: int, fmt: FloatFormat) -> tuple[int, int, int] | None:
    """(-1)^sign·man·2^exp rounded to ``fmt`` (nearest, ties to even) as (sign, m, q) meaning
    (-1)^sign·m·2^q, in integers only (the inner loop of ``reference``); None where it overflows.
    ``round_to_format`` is the same rounding in Fractions."""
    if man == 0:
        return (0, 0, 0)
    q = max(exp + man.bit_length() - 1, fmt.emin) - fmt.precision + 1
    if exp >= q:
        m = man << (exp - q)
    else:
        shift = q - exp
        m, rem = man >> shift, man & ((1 << shift) - 1)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and m & 1):
            m += 1
    if m.bit_length() + q > fmt.emax + 1:  # at or beyond 2^(emax+1): beyond the largest finite value
        return None
    while m and not m & 1:  # one form per value, so that two roundings compare equal
        m, q = m >> 1, q + 1
    return (sign, m, q)


def _exact(r: tuple[int, int, int] | None, sign: int) -> Exact:
    if r is None:
        return -math.inf if sign else math.inf
    s, m, q = r
    v = Fraction(m << q) if q >= 0 else Fraction(m, 1 << -q)
    return -v if s else v


def _special(name: str, x: float) -> Exact | None:
    """The result where it is not a finite real computed from a finite positive argument."""
    if math.isnan(x):
        return math.nan
    if name == "log":
        if x < 0:
            return math.nan
        if x == 0:
            return -math.inf
        if math.isinf(x):
            return math.inf
    if math.isinf(x):
        return {"exp": (Fraction(0), math.inf), "tanh": (Fraction(-1), Fraction(1)),
                "sigmoid": (Fraction(0), Fraction(1))}[name][x > 0]
    if x == 0 and name in ("tanh", "exp", "sigmoid"):
        return {"tanh": Fraction(0), "exp": Fraction(1), "sigmoid": Fraction(1, 2)}[name]
    return None


def reference(name: str, x: float, fmt: FloatFormat) -> Exact:
    """f(x) correctly rounded to ``fmt`` (a Fraction; ±inf where the rounding overflows, nan where f is
    undefined) for a float ``x``. ValueError if 8,192 bits cannot decide (no float32 or float64 argument
    comes near that)."""
    special = _special(name, x)
    if special is not None:
        return special if isinstance(special, float) else round_to_format(special, fmt)
    arg = from_float(float(x))
    prec = START_BITS
    while prec <= MAX_BITS:
        sign, man, exp, bc = _value(name, arg, prec)
        if man == 0:  # log(1): the one exact zero
            return Fraction(0)
        man, exp = man << (prec - bc), exp - (prec - bc)  # prec bits exactly: the margin is 8 of its ULPs
        low, high = _round(sign, man - 8, exp, fmt), _round(sign, man + 8, exp, fmt)
        if low == high:
            return _exact(low, sign)
        prec *= 2
    raise ValueError(f"{name}({x!r}) is too close to a rounding boundary of {fmt.name} to decide in {MAX_BITS} bits")
