"""The glossary's claims hold: each one that can be computed is computed here, exactly."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ui.glossary import TERMS, help_text


def test_kappa_one_is_no_cancellation_not_no_error():
    """κ = 1 was said to make every order accurate to a few ULPs. A sum of ones has κ = 1, yet in float32
    16,777,216 + 1 rounds back to 16,777,216, so left to right 2·10^7 ones stop at 2^24."""
    text = help_text("kappa")
    assert "a few ULPs" not in text and "16,777,216 + 1 rounds back to 16,777,216" in text
    top = np.float32(2**24)
    assert top + np.float32(1) == top  # a tie, rounded to the even neighbour, which is 2^24 itself
    ones = np.ones(20_000_000, dtype=np.float32)
    assert np.cumsum(ones, dtype=np.float32)[-1] == top  # numpy's cumsum adds left to right
    assert abs(float(top) - 2e7) / 2**-23 / 2**24 > 1e5  # the stall is more than 10^5 ULPs of the exact 2·10^7


def test_one_ulp_is_the_neighbour_only_where_the_answer_is_representable():
    """An error of 1 ULP was said to mean "the neighbouring number of the exact answer": 0.1 is no float32, and
    its correctly rounded value is already 0.37 ULP away from it."""
    text = help_text("ulp")
    assert "Where the exact answer is itself a number of the format" in text and "half a ULP" in text
    nearest = Fraction(float(np.float32(0.1)))
    ulp = Fraction(2) ** -27  # float32 spacing in [2^-4, 2^-3)
    off = abs(nearest - Fraction(1, 10)) / ulp
    assert Fraction(0) < off < Fraction(1, 2)


def test_every_term_is_defined_on_a_page_that_exists():
    import pathlib

    pages = pathlib.Path(__file__).resolve().parents[2] / "pages"
    assert all((pages / f"{t.page}.py").exists() for t in TERMS.values())
