"""core.arith.metrics.growth_fit: the one exponential fit of a growing gap (training pair, loss logs), and
relative_gap, the one relative gap it is fitted to."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.arith.metrics import growth_fit, relative_gap


def test_an_exact_exponential_is_recovered_up_to_saturation():
    steps = np.arange(100)
    gap = np.where(steps < 10, 0.0, 1e-7 * np.exp(0.2 * (steps - 10)))
    gap = np.minimum(gap, 1e-3)  # saturates: the fit stops where the gap reaches 10% of its largest value
    fit = growth_fit(steps, gap, start=10)
    assert fit.slope == pytest.approx(0.2, rel=1e-9)
    assert fit.at(10) == pytest.approx(1e-7, rel=1e-9)
    assert fit.doubling_steps == pytest.approx(math.log(2) / 0.2)
    assert fit.first_step == 10
    assert fit.last_step == int(np.flatnonzero(gap >= 1e-4)[0])  # the first step at 10% of the largest gap


def test_non_finite_and_non_positive_values_are_left_out():
    steps = np.arange(20)
    gap = 1e-6 * np.exp(0.1 * steps)
    gap[[3, 7]] = [math.nan, 0.0]
    gap[5] = math.inf
    fit = growth_fit(steps, gap, start=0, saturation=1.0)
    assert fit.slope == pytest.approx(0.1, rel=1e-9)


def test_too_few_points_or_a_shrinking_gap():
    assert growth_fit([0, 1, 2], [1e-7, 2e-7, 4e-7], start=0) is None  # fewer than 5 points
    assert growth_fit([0], [1.0], start=0) is None
    shrinking = growth_fit(np.arange(10), np.exp(-np.arange(10.0)), start=0, saturation=2.0)  # never saturates
    assert shrinking.slope < 0 and shrinking.doubling_steps is None


def test_relative_gap_against_the_first_or_the_larger():
    assert relative_gap(4.0, 5.0) == 0.25 and relative_gap(4.0, 5.0, scale="larger") == 0.2
    assert isinstance(relative_gap(4.0, 5.0), float)
    a, b = np.array([4.0, -2.0, 1.0]), np.array([5.0, -1.0, 1.0])
    assert relative_gap(a, b).tolist() == [0.25, 0.5, 0.0]
    assert relative_gap(a, b, scale="larger").tolist() == [0.2, 0.5, 0.0]


def test_relative_gap_has_one_zero_rule_for_both_scales():
    """Equal values are 0 apart (two zeros, equal infinities, two NaNs); any other pair with a zero scale or a
    value that is not finite is infinitely apart."""
    nan, inf = math.nan, math.inf
    a = np.array([0.0, inf, nan, 0.0, 1.0, nan, inf, 1.0, -0.0])
    b = np.array([0.0, inf, nan, 1.0, nan, 1.0, 1.0, inf, 0.0])
    assert relative_gap(a, b).tolist() == [0.0, 0.0, 0.0, inf, inf, inf, inf, inf, 0.0]
    assert relative_gap(a, b, scale="larger").tolist() == [0.0, 0.0, 0.0, 1.0, inf, inf, inf, inf, 0.0]
    assert relative_gap(0.0, 1e-300) == inf and relative_gap(-inf, inf) == inf
