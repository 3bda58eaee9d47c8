"""core.training.thinning: a long series keeps at most about ``limit`` rows, and every slice its extremes."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.training.thinning import thinned_rows

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.sampled_from([0.0, -0.0, 5e-324, 1.7976931348623157e308, np.inf, -np.inf, np.nan]))


def test_a_short_series_or_none_keeps_every_row():
    assert thinned_rows([np.arange(5.0)], 5, 5).tolist() == [0, 1, 2, 3, 4]
    assert thinned_rows([], 3000, 10).tolist() == list(range(3000))


def test_a_spike_and_a_dip_inside_one_slice_are_both_kept():
    v = np.zeros(10_000)
    v[4321], v[4322] = 9.0, -9.0  # one slice of 100 steps holds both
    rows = thinned_rows([v], v.size, 200)
    assert {0, 4321, 4322, 9_999} <= set(rows.tolist()) and len(rows) <= 200 + 2


def test_ties_and_nan_keep_the_first_step_of_the_extreme():
    v = np.array([np.nan, 1.0, 3.0, 3.0, 1.0, np.nan] * 2)  # two slices of six with limit 4 and one series
    assert thinned_rows([v], v.size, 4).tolist() == [0, 1, 2, 7, 8, 11]


@settings(max_examples=60)
@given(st.lists(st.tuples(values, values), min_size=1, max_size=3000), st.integers(8, 400))
def test_every_slice_keeps_its_lowest_and_highest_value_of_every_series(rows, limit):
    series = [np.array([r[0] for r in rows]), np.array([r[1] for r in rows])]
    kept = thinned_rows(series, len(rows), limit)
    if len(rows) <= limit:
        assert kept.tolist() == list(range(len(rows)))
        return
    assert len(kept) <= limit + 2 and np.all(np.diff(kept) > 0)
    assert kept[0] == 0 and kept[-1] == len(rows) - 1
    slices = max(1, limit // 4)
    slice_of = (np.arange(len(rows)) * slices) // len(rows)
    for whole in series:
        for s in range(slices):
            part, shown = whole[slice_of == s], whole[kept[slice_of[kept] == s]]
            finite_or_inf = part[~np.isnan(part)]
            if len(finite_or_inf):
                assert np.nanmin(shown) == finite_or_inf.min() and np.nanmax(shown) == finite_or_inf.max()
