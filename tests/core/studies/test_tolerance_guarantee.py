"""The suggested guarantee holds for every order of summation, whatever the values, given only their RMS: two orders
of the same terms, each result rounded to its format, never differ by more than it (property tests, compared
exactly); the typical tolerance is the smaller one, and the two agree where the sums are short."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.diagnose.envelopes import reordering_bound
from core.studies import reproducible as R
from core.studies.reproducible import FORMATS, NoTolerance, suggest_tolerance

ROUND = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
values = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True,
                   min_value=-(2.0**60), max_value=2.0**60)


def _loop32(xs) -> np.float32:
    acc = np.float32(0)
    for x in xs:
        acc = np.float32(acc + np.float32(x))
    return acc


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["float32", "bfloat16", "float16"]), st.lists(values, min_size=1, max_size=48),
       st.randoms(use_true_random=False), st.sampled_from(R.TOLERANCE_OPS))
def test_two_orders_never_differ_by_more_than_the_guarantee(dtype, xs, rnd, op):
    with np.errstate(over="ignore"):
        x = np.array(xs, dtype=np.float32).astype(ROUND[dtype]).astype(np.float32)  # values of the result's format
    if dtype == "float16" and not np.all(np.isfinite(x)):
        return
    rms = math.sqrt(sum(float(v) ** 2 for v in x) / len(x))
    if rms == 0:
        return
    tol = suggest_tolerance(dtype, len(x), rms * (1 + 2**-50), op=op)  # RMS rounded up: the assumption holds
    shuffled = list(x)
    rnd.shuffle(shuffled)
    a, b = (_loop32(v).astype(ROUND[dtype]) for v in (x, shuffled))  # float32 accumulation, rounded once
    if not (np.isfinite(a) and np.isfinite(b)):
        return
    diff = abs(Fraction(float(a)) - Fraction(float(b)))
    assert diff <= Fraction(tol.guarantee_atol) + Fraction(tol.guarantee_rtol) * abs(Fraction(float(b)))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "tf32"])
@pytest.mark.parametrize("k", [1, 16, 4096, 65_536, 10**6])
@pytest.mark.parametrize("op", R.TOLERANCE_OPS)
def test_the_guarantee_is_the_worst_case_bound_and_at_least_the_typical(dtype, k, op):
    tol = suggest_tolerance(dtype, k, 2.0, op=op)
    acc = FORMATS[tol.accumulate]
    assert tol.guarantee_atol0 >= float(reordering_bound(k, 2.0 * k, acc))  # 2 gamma_K K RMS, and more
    assert tol.guarantee_atol >= tol.atol and tol.ratio >= 1
    assert tol.guarantee_rtol >= tol.guarantee_rtol0 and tol.guarantee_atol >= tol.guarantee_atol0
    assert tol.guarantee_atol <= 1.1 * tol.guarantee_atol0
    if dtype in ("float32", "float64", "tf32"):  # no output rounding: all of it absolute
        assert tol.guarantee_rtol == 0


def test_the_numbers_at_a_million_float32_terms():
    tol = suggest_tolerance("float32", 10**6)
    assert tol.line == "rtol=4.8e-06 atol=4.8e-03"  # the typical tolerance, unchanged
    assert tol.guarantee_line == "rtol=0.0e+00 atol=1.3e+05"  # 2 gamma_K K: about 12.7 % of K * RMS
    assert 2.6e7 < tol.ratio < 2.8e7


@pytest.mark.parametrize(("dtype", "k", "accumulate"), [("bfloat16", 256, "bfloat16"), ("float16", 2048, "float16"),
                                                        ("float32", 2**24, None), ("float16", 2**24, None),
                                                        ("tf32", 2**24, None)])
def test_no_tolerance_from_k_u_of_one(dtype, k, accumulate):
    """From K u = 1 on (K = 2^p), in both kinds: one term fewer still has both."""
    for n in (k, 2 * k, 10**9):
        with pytest.raises(NoTolerance, match="No tolerance can mean anything here"):
            suggest_tolerance(dtype, n, 1.0, accumulate)
    assert suggest_tolerance(dtype, k - 1, 1.0, accumulate).guarantee_atol < math.inf
