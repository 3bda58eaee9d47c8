"""core.arith.metrics' one error report: a result against its exact value (``measure``, ``evaluate``), the bound
kinds as an enum of callables, and the one ULP formatter (``UlpText``) with the texts the pages show."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from core.arith.formats import FORMATS, bits_of, value_of_bits
from core.arith.metrics import (
    BoundKind,
    ErrorReport,
    a_priori_bound,
    bound_cell,
    evaluate,
    gamma,
    measure,
    ulps_brief,
    ulps_cell,
    ulps_count,
    ulps_gap,
    ulps_short,
    ulps_tenths,
    ulps_text,
    ulps_whole,
)
from core.arith.ulps import error_in_ulps, ulp
from core.kernels.orders import ORDERS

F16, F32, F64 = FORMATS["float16"], FORMATS["float32"], FORMATS["float64"]


def test_every_order_names_a_bound_kind_whose_factor_gives_its_bound():
    assert all(isinstance(o.bound, BoundKind) for o in ORDERS.values())  # named by value, held as the member
    u, s = F32.unit_roundoff, Fraction(7)
    for kind in BoundKind:
        # the member and its value are the same kind; the bound is the member's factor times sum|x|
        assert a_priori_bound(kind, 9, s, F32, 3) == a_priori_bound(kind.value, 9, s, F32, 3)
        assert a_priori_bound(kind, 9, s, F32, 3) == kind.factor(9, 3, u) * s
    assert BoundKind.SEQUENTIAL.factor(9, None, u) == gamma(8, u)
    assert BoundKind.PAIRWISE.factor(9, None, u) == gamma(4, u)
    assert BoundKind.COMPENSATED.factor(10**6, None, F16.unit_roundoff) is None  # m u >= 1: no finite bound
    with pytest.raises(ValueError):
        BoundKind("magic")


def test_measure_is_exact_against_fractions():
    exact = Fraction(1, 10)
    v = np.float32(0.1)
    bits = bits_of(v)
    value = value_of_bits(bits, F32)
    bound = Fraction(1, 10**8)
    m = measure(value, F32, exact, bound, bits)
    assert m == evaluate(v, exact, F32, bound)  # a NumPy scalar, decoded, gives the same report
    assert m.abs_error == abs(value - exact) and m.ulps == error_in_ulps(value, exact, F32)
    assert m.rel_error == float(abs(value - exact) / exact)
    assert m.bound_ulps == float(bound / ulp(exact, F32)) and m.within_bound is (m.abs_error <= bound)
    assert m.correct_digits == pytest.approx(-math.log10(m.rel_error))
    assert measure(value, F32, exact).bits == bits  # the bits follow from the value when no sign is lost


def test_measure_keeps_negative_zero_and_reads_non_finite_results():
    zero = measure(Fraction(0), F64, Fraction(0), Fraction(0), bits=1 << 63)
    assert zero.negative_zero and zero.ulps == 0 and zero.within_bound
    up = measure(math.inf, F16, Fraction(70000), Fraction(1))
    assert up.overflowed and up.ulps == math.inf and up.abs_error == math.inf and up.within_bound is None
    assert measure(-math.inf, F16, Fraction(-70000)).ulps == -math.inf
    same = measure(math.nan, F32, math.nan)
    assert math.isnan(same.ulps) and same.abs_error == 0 and same.bound_ulps is None
    # a nonzero result for an exact 0: its bound is past float64's range in ULPs of 0, and says so
    far = measure(Fraction(2), F64, Fraction(0), Fraction(4))
    assert far.ulps == math.inf and far.bound_ulps == math.inf and far.within_bound and far.rel_error is None


def test_one_formatter_writes_every_pages_texts():
    # a sentence, a metric, a table cell, a bound cell
    assert ulps_text(3.5) == "+3.5 ULP" and ulps_text(math.inf) == "∞ (overflowed)" and ulps_text(math.nan) == \
        "undefined"
    assert ulps_text(-(2.0**52), 1.0) == "-4.504e+15 ULP (relative error 1)" and ulps_text(12.0, 1e-7) == "+12 ULP"
    assert ulps_short(-62_640_000.0) == "-6.26e7 ULP" and ulps_short(-104.7) == "-104.7 ULP"
    assert ulps_cell(-1.25) == "-1.25" and ulps_cell(math.inf) == "+∞" and ulps_cell(-math.inf) == "−∞"
    assert bound_cell(1234.6) == "±1235" and bound_cell(None) == "—"
    assert ulps_brief(0.25) == "+0.25" and ulps_brief(-1234.5) == "-1.23e+03"  # an addition's rounding, a range
    # the diagnosis' sentences: a count with its unit
    assert ulps_count(1.0) == "1 ULP" and ulps_count(3.0) == "3 ULPs" and ulps_count(0.25) == "0.25 ULPs"
    assert ulps_count(12_345.0) == "1.23e+04 ULPs"
    # the serving page's gaps: one decimal below 1,000, whole ULPs with separators above
    assert ulps_gap(12.34) == "12.3" and ulps_gap(12_345.6) == "12,346" and ulps_gap(None) == "—"
    assert ulps_tenths(1.0) == "1.0 ULPs" and ulps_tenths(0.46) == "0.5 ULPs" and ulps_tenths(1234.5) == "1,234.5 ULPs"
    assert ulps_whole(1.0) == "1 ULP" and ulps_whole(12_345.6) == "12,346 ULPs"


def test_an_error_report_is_frozen_and_keyword_only():
    with pytest.raises(TypeError):
        ErrorReport(Fraction(1), F32)  # type: ignore[misc]
