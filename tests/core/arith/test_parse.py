"""core.arith.parse: exact parsing, clear messages, and no path to eval."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.arith.formats import FLOAT16, FLOAT32, FLOAT64, round_to_format
from core.arith.parse import MAX_TEXT_LENGTH, ParseError, parse_exact, parse_number

CASES = [
    ("0.1", Fraction(1, 10)),
    ("  -2.5e-3 ", Fraction(-25, 10_000)),
    ("1E8", Fraction(10**8)),
    ("+7", Fraction(7)),
    (".5", Fraction(1, 2)),
    ("5.", Fraction(5)),
    ("1_000", Fraction(1000)),
    ("1/3", Fraction(1, 3)),
    ("-22 / 7", Fraction(-22, 7)),
    ("0x1.8p-3", Fraction(3, 16)),
    ("-0X10", Fraction(-16)),
    ("0x.8", Fraction(1, 2)),
]


@pytest.mark.parametrize(("text", "value"), CASES)
def test_accepted_forms_are_exact(text, value):
    assert parse_exact(text) == value


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "Enter a number"),
        ("   ", "Enter a number"),
        ("abc", "is not a number"),
        ("nan", "NaN"),
        ("-Infinity", "Infinity"),
        ("inf", "Infinity"),
        ("1e999999", "far outside"),
        ("1/0", "denominator"),
        ("__import__('os').system('true')", "is not a number"),
        ("2**10", "is not a number"),
        ("1,5", "is not a number"),
        ("9" * (MAX_TEXT_LENGTH + 1), "at most"),
    ],
)
def test_rejected_with_a_message(text, fragment):
    with pytest.raises(ParseError, match=fragment):
        parse_exact(text)


def test_overflow_is_an_error_with_the_limit():
    with pytest.raises(ParseError, match=r"overflows float16.*65500"):
        parse_number("70000", FLOAT16)
    with pytest.raises(ParseError, match="overflows float32"):
        parse_number("-1e39", FLOAT32)
    assert parse_number("65519", FLOAT16).stored == 65504  # rounds down, below the threshold
    with pytest.raises(ParseError):
        parse_number("65520", FLOAT16)  # exactly halfway past max rounds to inf


def test_underflow_and_rounding_are_reported():
    n = parse_number("1e-400", FLOAT64)
    assert n.stored == 0 and n.underflowed
    n = parse_number("0.1", FLOAT32)
    assert n.was_rounded and n.stored == round_to_format(Fraction(1, 10), FLOAT32)
    assert not parse_number("0.5", FLOAT16).was_rounded


def test_no_double_rounding_through_float64():
    # 1 + 2^-24 + 2^-80 is just above the float32 halfway point between 1 and 1 + 2^-23.
    # Via float64 it first rounds to the tie 1 + 2^-24 and then to even (1.0): wrong.
    text = str(1 + Fraction(1, 2**24) + Fraction(1, 2**80))
    assert parse_number(text, FLOAT32).stored == 1 + Fraction(1, 2**23)


@given(st.text(max_size=60))
def test_arbitrary_text_never_raises_anything_else(text):
    try:
        n = parse_number(text, FLOAT32)
    except ParseError as err:
        assert str(err)
    else:
        assert n.stored == round_to_format(n.exact, FLOAT32)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_repr_and_hex_of_floats_parse_to_the_same_value(x):
    assert parse_number(repr(x), FLOAT64).stored == Fraction(x)  # repr round-trips
    assert parse_exact(x.hex()) == Fraction(x)  # hex is exact
