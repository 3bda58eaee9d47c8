"""Hypothesis strategies shared by the numeric tests.

Values are drawn as raw bit patterns, so every class of value appears: ±0, subnormals,
the smallest normal, the largest finite values, infinities and NaN; plus explicit
boundary cases that random bits would rarely hit.
"""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import strategies as st

from core.arith.formats import FORMATS, FloatFormat, bits_of_value, value_of_bits

FORMAT_NAMES = list(FORMATS)


def boundary_bits(fmt: FloatFormat) -> list[int]:
    values = [
        Fraction(0), fmt.min_subnormal, fmt.min_normal - fmt.min_subnormal, fmt.min_normal,
        fmt.max_finite, Fraction(1), Fraction(1) + fmt.unit_roundoff * 2, Fraction(1) - fmt.unit_roundoff,
    ]
    out = []
    for v in values:
        out += [bits_of_value(v, fmt), bits_of_value(-v, fmt, negative_zero=True)]
    return out


def bit_patterns(fmt: FloatFormat) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(0, (1 << fmt.width) - 1),
        st.sampled_from(boundary_bits(fmt)),
    )


def finite_values(fmt: FloatFormat) -> st.SearchStrategy[Fraction]:
    return bit_patterns(fmt).map(lambda b: value_of_bits(b, fmt)).filter(
        lambda v: not isinstance(v, float)
    )


def any_values(fmt: FloatFormat):
    """Exact values including inf and nan (as floats)."""
    return bit_patterns(fmt).map(lambda b: value_of_bits(b, fmt))


def is_nan(x) -> bool:
    return isinstance(x, float) and math.isnan(x)
