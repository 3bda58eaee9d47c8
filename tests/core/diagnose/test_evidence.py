"""core.diagnose.evidence: the Diagnose page's medians, histograms and ULP sizes, checked against the
diagnosis they come from (counts by hand, ULPs against np.spacing, medians against sorted values)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.arith.metrics import GrowthFit
from core.diagnose.evidence import (
    difference_evidence,
    fitted_curve,
    log_histogram,
    outlier_positions,
    share_histogram,
    simulation_evidence,
    typical_relative,
    ulp_sizes,
)
from core.diagnose.examples import diagnosed_example
from core.diagnose.verdict import diagnose


@pytest.fixture(scope="module")
def matmul():
    """A float32 product against its float64 value: every element differs by rounding, inputs given."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 64)).astype(np.float32), rng.standard_normal((64, 6)).astype(np.float32)
    actual = a @ b
    expected = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return diagnose(actual, expected, inputs=(a, b), reduction_length=64)


def test_log_histogram_counts_on_quarter_decades():
    h = log_histogram(np.array([1.0, 1.5, 10.0, 0.0, -3.0, np.inf, np.nan]))
    assert sum(h.count) == 3  # zero, negative and non-finite values are left out
    assert h.lo[0] == 1.0 and h.hi[-1] == 10.0 and len(h.count) == 4  # log10 from 0 to 1 in quarters
    assert all(math.isclose(math.log10(hi) - math.log10(lo), 0.25) for lo, hi in zip(h.lo, h.hi, strict=True))
    assert h.count == (2, 0, 0, 1)
    one = log_histogram(np.array([3.0, 3.0]))
    assert one.count == (2,) and one.lo[0] <= 3.0 <= one.hi[0]  # one value: one bin around it
    assert log_histogram(np.array([0.0, np.nan])).empty
    assert len(log_histogram(np.logspace(-30, 30, 1000)).count) == 40  # at most the bin limit


def test_share_histogram_divides_by_the_finite_values():
    s = share_histogram(np.array([1.0, 1.0, 0.0, np.inf]))  # three finite values, two of them shown
    assert s.histogram.count == (2,) and s.share == (2 / 3,)


def test_ulp_sizes_are_the_spacing_of_b_where_the_elements_differ(matmul):
    d = matmul
    unit = ulp_sizes(d)
    differ = ~np.isnan(d.abs_diff) & (d.abs_diff > 0)
    assert differ.any() and np.isnan(unit[~differ]).all()
    spacing = np.spacing(np.abs(np.float32(d.scale[differ])).astype(np.float32)).astype(np.float64)
    np.testing.assert_allclose(unit[differ], d.abs_diff[differ] / d.ulp_diff[differ])
    assert np.all(unit[differ] > 0) and np.all(unit[differ] <= 2 * spacing + 1e-300)


def test_difference_histogram_counts_every_differing_element_and_marks_each_envelope(matmul):
    d = matmul
    for kind in ("ulp", "rel"):
        ev = difference_evidence(d, kind)
        assert sum(ev.histogram.count) == d.n_differ
        assert [m.key for m in ev.marks] == [e.key for e in d.envelopes][: len(ev.marks)]
        reorder = next(m for m in ev.marks if m.index == 0)
        differ = ~np.isnan(d.abs_diff) & (d.abs_diff > 0)
        if kind == "ulp":
            expect = np.median(d.envelopes[0].envelope[differ] / ulp_sizes(d)[differ])
        else:
            expect = np.median(d.envelopes[0].envelope[differ] / np.abs(d.scale[differ]))
        assert reorder.at == pytest.approx(float(expect), rel=1e-12)
    with pytest.raises(ValueError):
        difference_evidence(d, "bits")


def test_identical_results_have_no_histogram():
    x = np.arange(6, dtype=np.float32)
    ev = difference_evidence(diagnose(x, x.copy(), reduction_length=4), "ulp")
    assert ev.histogram.empty and ev.marks == ()


def test_typical_relative_is_each_envelopes_median_over_the_scale(matmul):
    d = matmul
    rel = typical_relative(d)
    assert len(rel) == len(d.envelopes)
    fin = ~np.isnan(d.abs_diff)
    mags = np.abs(d.scale[fin])
    by_hand = sorted(d.envelopes[0].typical[fin] / mags)
    n = len(by_hand)
    median = by_hand[n // 2] if n % 2 else (by_hand[n // 2 - 1] + by_hand[n // 2]) / 2
    assert rel[0] == pytest.approx(median, rel=1e-12)


def test_outliers_are_given_as_positions_in_the_results_shape():
    rng = np.random.default_rng(1)
    exp = rng.standard_normal((20, 30)).astype(np.float32)
    act = exp.copy()
    act[3, 7] += 1.0  # one isolated element far beyond rounding
    d = diagnose(act, exp, reduction_length=64)
    assert d.pattern is not None and d.pattern.localized
    assert (3, 7) in outlier_positions(d)
    assert len(outlier_positions(d, 0)) == 0


def test_simulation_evidence_matches_the_simulation():
    d = diagnosed_example("batch").diagnosis
    sim = d.simulation
    assert sim is not None
    ev = simulation_evidence(sim, d.explanation)
    assert ev.spread == float(np.max(sim.pair_diffs_ulps))
    assert ev.actual_max == float(np.max(sim.actual_err / sim.unit))
    assert ev.expected_median == float(np.median(sim.expected_err / sim.unit))
    assert ev.actual_median <= ev.actual_max and ev.expected_median <= ev.expected_max
    assert sum(ev.user.histogram.count) == int(np.sum(sim.user_ulps > 0))
    assert (ev.reduced is not None) == (d.explanation is not None and d.explanation in sim.reduced)


def test_the_fitted_growth_is_drawn_over_the_steps_it_was_fitted_on():
    fit = GrowthFit(slope=math.log(2) / 10, intercept=math.log(1e-7), first_step=20, last_step=70)
    c = fitted_curve(fit, points=6)
    assert c.steps == (20.0, 30.0, 40.0, 50.0, 60.0, 70.0)
    assert c.values[0] == pytest.approx(1e-7 * 2**2) and c.values[-1] == pytest.approx(1e-7 * 2**7)  # doubling every 10
    assert fitted_curve(None) is None
    assert fitted_curve(GrowthFit(slope=0.0, intercept=0.0, first_step=0, last_step=5)) is None
