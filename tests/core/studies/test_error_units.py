"""Errors and bounds in one unit (core.studies.sumlab.bound_in_ulps, relative_error), and the glossary's anchors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from core.arith.formats import FORMATS, error_in_ulps, ulp
from core.studies.sumlab import HUGE_ULPS, bound_in_ulps, relative_error, run_lab

F32, F64 = FORMATS["float32"], FORMATS["float64"]


def test_bound_in_ulps_uses_the_error_columns_unit():
    exact = Fraction(3, 2)  # in [1, 2): a float64 ULP is 2^-52
    assert bound_in_ulps(Fraction(2) ** -50, exact, F64) == 4.0
    assert bound_in_ulps(None, exact, F64) is None
    assert bound_in_ulps(Fraction(1), math.inf, F64) is None  # no finite exact sum: nothing to convert


def test_every_lab_error_in_ulps_lies_within_its_bound_in_ulps():
    values = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    lab = run_lab(values, "float32", "float32", ("sequential", "pairwise", "kahan"))
    for row in lab.rows:
        m = row.metrics
        b = bound_in_ulps(m.bound, lab.exact, lab.fmt)
        assert b is not None and abs(m.ulps) <= b
        # the same ratio as the absolute numbers: both divided by one ULP of the exact sum
        assert math.isclose(b, float(m.bound / ulp(lab.exact, F32)), rel_tol=1e-12)


def test_relative_error_of_the_whole_answer():
    # 1e16 + 1 - 1e16 in float64 gives 0 for an exact sum of 1: 2^52 ULPs, relative error 1
    exact = Fraction(1)
    assert error_in_ulps(Fraction(0), exact, F64) == -(2.0**52) and HUGE_ULPS <= 2.0**52
    assert relative_error(Fraction(0), exact) == 1.0
    assert relative_error(Fraction(3, 2), Fraction(1)) == 0.5
    assert relative_error(Fraction(1), Fraction(0)) is None  # undefined for an exact 0
    assert relative_error(math.inf, Fraction(1)) == math.inf


def test_glossary_anchor_is_streamlits_heading_anchor():
    from ui.glossary import TERMS

    assert TERMS["ulp"].anchor == "what-is-a-ulp"
    assert TERMS["kappa"].anchor == "what-is-the-condition-number-κ"
    assert {t.page for t in TERMS.values()} <= {"non_associativity", "summation_lab"}
