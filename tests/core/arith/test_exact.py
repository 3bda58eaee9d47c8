"""core.arith.exact: exact mpf values and decimal expansions, independent of mpmath's precision."""

from __future__ import annotations

import decimal
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.arith.exact import abbreviate, exact_decimal, mpf_to_fraction, shortest_repr, to_mpf
from core.arith.formats import FLOAT16, FLOAT32, FLOAT64, FORMATS, round_to_format
from tests.strategies import finite_values


@pytest.mark.parametrize("name", list(FORMATS))
@given(data=st.data())
def test_to_mpf_is_exact_at_default_precision(name, data):
    v = data.draw(finite_values(FORMATS[name]))
    big = v * 3 + Fraction(1, 2**1100)  # needs far more than mp.prec = 53 bits
    assert mpmath.mp.prec == 53
    assert mpf_to_fraction(to_mpf(v)) == v
    assert mpf_to_fraction(to_mpf(big)) == big
    assert mpmath.mp.prec == 53


def test_to_mpf_specials_and_non_dyadic():
    assert mpmath.isinf(to_mpf(math.inf)) and to_mpf(-math.inf) < 0
    assert mpmath.isnan(to_mpf(math.nan))
    with pytest.raises(ValueError):
        to_mpf(Fraction(1, 3))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_exact_decimal_matches_decimal_module(x):
    ctx = decimal.Context(prec=2000)
    ref = format(ctx.create_decimal(x), "f")  # Decimal(float) is exact
    ref = ref.rstrip("0").rstrip(".") if "." in ref else ref
    ref = "0" if ref in ("-0", "") else ref
    assert exact_decimal(Fraction(x)) == ref
    assert Fraction(exact_decimal(Fraction(x))) == Fraction(x)


def test_exact_decimal_known_values():
    assert exact_decimal(round_to_format(Fraction(1, 10), FLOAT64)) == (
        "0.1000000000000000055511151231257827021181583404541015625"
    )
    assert exact_decimal(round_to_format(Fraction(1, 10), FLOAT32)) == "0.100000001490116119384765625"
    assert exact_decimal(Fraction(-3, 4)) == "-0.75"
    assert exact_decimal(Fraction(2**70)) == str(2**70)
    assert exact_decimal(math.inf) == "inf" and exact_decimal(-math.inf) == "-inf"
    assert len(exact_decimal(FLOAT64.min_subnormal)) == 2 + 1074  # "0." and 1074 digits
    with pytest.raises(ValueError):
        exact_decimal(Fraction(1, 3))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_shortest_repr_float64_matches_python_repr(x):
    s = shortest_repr(Fraction(x), FLOAT64)
    assert float(s) == x
    # Python's repr is the shortest round-trip string: same number of significant digits
    r = repr(abs(x)).split("e")[0].replace(".", "").lstrip("0").rstrip("0") or "0"
    digits = s.split("e")[0].lstrip("-").replace(".", "").strip("0") or "0"
    assert len(digits) == len(r)


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_shortest_repr_float32_round_trips_and_is_as_short_as_numpy(x):
    v = Fraction(x)
    s = shortest_repr(v, FLOAT32)
    assert round_to_format(Fraction(s), FLOAT32) == v
    ref = np.format_float_positional(np.float32(x), unique=True, trim="-")
    digits_ref = ref.lstrip("-").replace(".", "").strip("0") or "0"
    digits = s.lstrip("-").split("e")[0].replace(".", "").strip("0") or "0"
    assert len(digits) <= len(digits_ref)


@given(st.floats(width=16, allow_nan=False, allow_infinity=False), st.integers(1, 25),
       st.sampled_from(["float16", "float32", "float64"]))
def test_shortest_repr_does_not_rest_on_its_digit_hint(x, hint, name):
    """The search starts at NumPy's digit count; with any other start it returns what a search from one digit
    returns (a start that is too long is caught by checking one digit fewer)."""
    from unittest import mock

    from core.arith import exact
    from core.arith.formats import FORMATS

    fmt = FORMATS[name]
    v = Fraction(x)
    with mock.patch.object(exact, "_digits_hint", lambda *_: 1):
        from_one = shortest_repr(v, fmt)
    with mock.patch.object(exact, "_digits_hint", lambda *_: hint):
        assert shortest_repr(v, fmt) == from_one
    assert shortest_repr(v, fmt) == from_one


def test_shortest_repr_small_formats():
    assert shortest_repr(FLOAT16.max_finite, FLOAT16) == "65500"
    assert shortest_repr(round_to_format(Fraction(1, 10), FLOAT16), FLOAT16) == "0.1"
    assert shortest_repr(FLOAT64.min_subnormal, FLOAT64) == "5e-324"
    assert shortest_repr(Fraction(0), FLOAT32) == "0"


def test_abbreviate():
    assert abbreviate("0.125") == "0.125"
    long = "1." + "2" * 200
    short = abbreviate(long, 60)
    assert len(short) < 90 and "more digits" in short and short.startswith("1.22")
