"""The exact engine of the dot-product models (core.kernels.dot): products of two inputs exactly, as integers
in units of 2^-scale, and every rounding decided on those integers.

Every value is an integer times 2^-scale (a Python int), with the scale chosen so that every product of
two inputs is an integer (then so is every sum, and every rounded value, which lies on a coarser grid).
Products are exact, sums are exact, and each rounding is done on the integer (nearest, ties to even,
gradual underflow, overflow to +-inf), so no floating-point operation of this machine decides a
rounding. Non-finite values follow IEEE (inf * 0 = nan, +inf + -inf = nan); zero signs follow IEEE
round-to-nearest (an exact zero sum is -0 only when every addend is -0; a nonzero result that
underflows keeps its sign). Every accumulator starts at +0, as ``acc = 0`` does in a kernel. The
structures a model accumulates in (a chain, tiles, split-K slices) are built from ``_add`` and
``_add_block`` here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import Exact, FloatFormat, bits_of_value


def _lowest_exponent(fmt: FloatFormat) -> int:
    """log2 of the smallest subnormal: every value of fmt is an integer times 2^this."""
    return fmt.emin - fmt.precision + 1


def _lowest_bits(mantissas: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """For m * 2^e (m an integer < 2^53 in int64, 0 allowed): the exponent of m's lowest set bit,
    plus e (a large number for m = 0)."""
    low = mantissas & -mantissas  # the lowest set bit, a power of two
    tz = np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(mantissas != 0, tz + exponents, 1 << 20)


def exact_products(a: np.ndarray, b: np.ndarray) -> tuple[list, list[bool], int]:
    """Each product a_i * b_i exactly, as an int in units of 2^-scale, and the scale: the smallest
    that makes every product an integer (nan or ±inf, as a float, where an input is not finite:
    inf * 0 = nan), with the sign bit of each product (which a zero product keeps).

    Sums of these integers are exact, and every rounded value is a coarser multiple of the same
    unit, so the whole computation stays in integers.
    """
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    negative = (np.signbit(a64) ^ np.signbit(b64)).tolist()
    finite = np.isfinite(a64) & np.isfinite(b64)
    fa, fb = np.where(finite, a64, 0.0), np.where(finite, b64, 0.0)
    if a.dtype != np.float64 and b.dtype != np.float64:
        # a product of two narrow values is exact in float64 (at most 48 bits, within [2^-298, 2^256]);
        # times 2^scale (scale <= 298) it is an integer below 2^554, still exact: int() loses nothing
        p = fa * fb
        m, e = np.frexp(p)
        low = _lowest_bits(np.ldexp(m, 53).astype(np.int64), e.astype(np.int64) - 53)
        scale = max(0, -int(low.min())) if p.size else 0
        out = [int(v) for v in np.ldexp(p, scale).tolist()]
    else:
        ma, ea = np.frexp(fa)
        mb, eb = np.frexp(fb)
        ia, ib = np.ldexp(ma, 53).astype(np.int64), np.ldexp(mb, 53).astype(np.int64)
        ea, eb = ea.astype(np.int64) - 53, eb.astype(np.int64) - 53
        low = _lowest_bits(ia, ea) + _lowest_bits(ib, eb)  # the product of the lowest bits is the lowest bit
        scale = max(0, -int(low.min())) if low.size else 0
        shifts = (ea + eb + scale).tolist()
        # a negative shift only drops zero bits: the product is a multiple of 2^-scale
        out = [(i * j << s) if s >= 0 else (i * j >> -s) for i, j, s in zip(ia.tolist(), ib.tolist(), shifts,
                                                                             strict=True)]
    if not finite.all():
        with np.errstate(invalid="ignore", over="ignore"):
            for i in np.flatnonzero(~finite).tolist():
                out[i] = float(a64[i] * b64[i])
    return out, negative, scale


def make_rounder(fmt: FloatFormat, scale: int):
    """round(n): the integer n (units of 2^-scale) rounded to fmt, nearest with ties to even, with
    gradual underflow, and ±inf (a float) past the overflow threshold. Non-finite floats pass.

    The spacing of fmt at |v| in [2^E, 2^(E+1)) is 2^(max(E, emin) - p + 1): in units, 2^sh with
    sh = max(bit_length(|n|) - p, emin - p + 1 + scale). sh <= 0 means n is a value of fmt."""
    p = fmt.precision
    qmin = _lowest_exponent(fmt) + scale
    max_units = math.floor(fmt.max_finite * Fraction(2) ** scale)
    inf = math.inf

    def rnd(n):
        if n.__class__ is float:
            return n
        a = n if n > 0 else -n
        sh = a.bit_length() - p
        if sh < qmin:
            sh = qmin
        if sh <= 0:
            return n
        q = a >> sh
        r = a - (q << sh)
        half = 1 << (sh - 1)
        if r > half or (r == half and q & 1):
            q += 1
        a = q << sh
        if a > max_units:
            return inf if n > 0 else -inf
        return a if n > 0 else -a

    return rnd


def _special_sum(*terms) -> float:
    """IEEE sum when a term is not finite (finite terms cannot change it)."""
    total = 0.0
    for t in terms:
        if t.__class__ is float:
            total += t
    return total


def _add(state: tuple, term, term_negative: bool, rnd) -> tuple:
    """round(s + term), with IEEE zero signs: an exact zero is -0 only if both addends are -0."""
    s, s_negative = state
    if s.__class__ is int and term.__class__ is int:
        t = s + term
        if t:
            return rnd(t), t < 0  # the sign matters only if t underflows to zero
        return 0, s == 0 and term == 0 and s_negative and term_negative
    return _special_sum(s, term), False


def _add_block(state: tuple, terms: list, negatives: list[bool], rnd) -> tuple:
    """round(s + t_1 + ... + t_T): the terms and s added exactly, rounded once."""
    s, s_negative = state
    if s.__class__ is int and all(t.__class__ is int for t in terms):
        t = s + sum(terms)
        if t:
            return rnd(t), t < 0
        all_zero = s == 0 and not any(terms)
        return 0, all_zero and s_negative and all(negatives)
    return _special_sum(s, *terms), False


ZERO = (0, False)  # +0


def _sequential(products: list, negatives: list[bool], rnd, fused: bool, checkpoints=frozenset()):
    """The chain s <- round(s + p_i) (fused) or s <- round(s + round(p_i)), from s = +0.

    The same arithmetic as ``_add``, written out in the loop (it runs K times)."""
    s, s_negative, seen = 0, False, {}
    for i, p in enumerate(products):
        if fused:
            q, q_negative = p, negatives[i]
        elif p.__class__ is int:
            q = rnd(p)  # the product rounded on its own; a zero (or an underflow) keeps the product's sign
            q_negative = p < 0 if p else negatives[i]
        else:
            q, q_negative = p, False
        if s.__class__ is int and q.__class__ is int:
            t = s + q
            if t:
                s, s_negative = rnd(t), t < 0
            else:
                s, s_negative = 0, s == 0 and q == 0 and s_negative and q_negative
        else:
            s, s_negative = _special_sum(s, q), False
        if i + 1 in checkpoints:
            seen[i + 1] = (s, s_negative)
    return (s, s_negative), seen


def _tiles(products: list, negatives: list[bool], rnd, tile: int, start=ZERO):
    state = start
    for j in range(0, len(products), tile):
        state = _add_block(state, products[j : j + tile], negatives[j : j + tile], rnd)
    return state


def slice_bounds(k: int, slices: int) -> list[tuple[int, int]]:
    """Split-K: s contiguous slices of ceil(K/s) terms (the last ones shorter, possibly empty)."""
    length = -(-k // slices)
    return [(min(j * length, k), min((j + 1) * length, k)) for j in range(slices)]


def _split_k(products: list, negatives: list[bool], rnd, tile: int, slices: int):
    partials = [_tiles(products[lo:hi], negatives[lo:hi], rnd, tile) for lo, hi in slice_bounds(len(products), slices)]
    state = partials[0]
    for value, negative in partials[1:]:
        state = _add(state, value, negative, rnd)
    return state


@dataclass(frozen=True)
class DotValue:
    """A rounded result: exact value (Fraction, or nan/±inf), its format and bit pattern."""

    value: Exact
    fmt: FloatFormat
    bits: int

    @property
    def negative_zero(self) -> bool:
        return self.bits == 1 << (self.fmt.width - 1)

    def as_float(self) -> float:
        return -0.0 if self.negative_zero else float(self.value)


def _finish(state: tuple, fmt: FloatFormat, scale: int) -> DotValue:
    v, negative = state
    if v.__class__ is float:
        return DotValue(v, fmt, bits_of_value(v, fmt))
    value = Fraction(v, 1 << scale)
    return DotValue(value, fmt, bits_of_value(value, fmt, negative_zero=(v == 0 and negative)))
