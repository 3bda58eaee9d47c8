"""Errors and bounds in one unit (core.arith.metrics.bound_in_ulps, relative_error), and the glossary's anchors."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from core.arith.formats import FORMATS
from core.arith.metrics import HUGE_ULPS, bound_in_ulps, relative_error
from core.arith.ulps import error_in_ulps, ulp
from core.studies.sumlab import run_lab

F32, F64 = FORMATS["float32"], FORMATS["float64"]


def test_bound_in_ulps_uses_the_error_columns_unit():
    exact = Fraction(3, 2)  # in [1, 2): a float64 ULP is 2^-52
    assert bound_in_ulps(Fraction(2) ** -50, exact, F64) == 4.0
    assert bound_in_ulps(None, exact, F64) is None
    assert bound_in_ulps(Fraction(1), math.inf, F64) is None  # no finite exact sum: nothing to convert
    assert bound_in_ulps(Fraction(1), Fraction(0), F64) == math.inf  # 2^1074 ULPs of 0: past float64, not a crash


def test_every_lab_error_in_ulps_lies_within_its_bound_in_ulps():
    values = np.random.default_rng(3).standard_normal(10_000).astype(np.float32)
    lab = run_lab(values, "float32", "float32", ("sequential", "pairwise", "kahan"))
    for row in lab.rows:
        m = row.metrics
        b = bound_in_ulps(m.bound, lab.exact, lab.fmt)
        assert b is not None and abs(m.ulps) <= b and b == m.bound_ulps
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
    assert {t.page for t in TERMS.values()} <= {"non_associativity", "summation_lab", "gpu_arithmetic"}
    assert TERMS["split_k"].anchor == "what-is-split-k" and TERMS["eta"].anchor == "what-is-η"


def test_metric_ulps_are_short_and_abs_rel_text_reads_the_cancelled_answer():
    from ui.render import abs_rel_text, ulps_short

    assert ulps_short(-62_640_000.0) == "-6.26e7 ULP" and ulps_short(3.5) == "+3.5 ULP"
    assert ulps_short(-104.7) == "-104.7 ULP" and ulps_short(math.nan) == "undefined"
    assert all(len(ulps_short(x)) <= 13 for x in (-1.23456e300, 9.99e99, -99_999.0, 1e5, -4.5e15))
    # 1e8 + 1 − 1e8 + 3 + 4 in float32: 7 for the exact 8
    exact, got = Fraction(8), Fraction(7)
    rel = relative_error(got, exact)
    assert abs_rel_text(abs(got - exact), rel) == "absolute error 1, relative error 0.125"
    assert "undefined" in abs_rel_text(Fraction(1), None)


def test_one_table_renderer_writes_both_labs_cells():
    """ui.render.error_cells: the Summation lab's and GPU arithmetic's tables, from one ErrorReport each."""
    from core.arith.metrics import measure
    from ui.render import error_cells

    refused = error_cells(None)  # a model that does not apply
    assert refused["value"] == "does not apply" and set(refused.values()) == {"does not apply", "—"}
    up = error_cells(measure(math.inf, FORMATS["float16"], Fraction(70000), Fraction(1)))
    assert (up["error (ULPs)"], up["within bound"], up["|error| (absolute)"]) == ("+∞", "overflow", "∞")
    unbounded = error_cells(measure(Fraction(1), F32, Fraction(1)), "a-priori bound", "no finite bound (why)")
    assert unbounded["a-priori bound (ULPs)"] == unbounded["a-priori bound (absolute)"] == "no finite bound (why)"
    assert unbounded["within bound"] == "— (no finite bound)" and unbounded["correct digits"] == "∞"
    near = error_cells(measure(Fraction(3, 2), F64, Fraction(3, 2) + Fraction(1, 2**60), Fraction(1, 2**50)))
    assert (near["value"], near["error (ULPs)"], near["bound (ULPs)"], near["within bound"]) == \
        ("1.5", "-0.003906", "±4", "yes")
    assert error_cells(measure(Fraction(0), F64, Fraction(0), bits=1 << 63))["value"] == "-0"
