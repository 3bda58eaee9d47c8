"""ui.training_view.thinned: long step charts draw fewer rows and keep every line's lowest and highest points."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from core.training.mlp import TrainSettings
from core.training.pair import PairedRun
from ui.training_view import CHART_ROWS, bits_strip, loss_chart, records_frame, thinned

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                   st.sampled_from([0.0, -0.0, 5e-324, 1.7976931348623157e308, np.inf, -np.inf, np.nan]))


@settings(max_examples=60)
@given(st.lists(st.tuples(values, values), min_size=1, max_size=3000), st.integers(8, 400))
def test_every_slice_keeps_its_lowest_and_highest_value_of_every_column(rows, limit):
    df = pd.DataFrame({"step": np.arange(1, len(rows) + 1), "a": [r[0] for r in rows], "b": [r[1] for r in rows]})
    out = thinned(df, ["a", "b"], limit)
    if len(df) <= limit:
        assert out is df
        return
    assert len(out) <= limit + 2 and out["step"].is_monotonic_increasing
    assert out["step"].iloc[0] == 1 and out["step"].iloc[-1] == len(df)
    slices = max(1, limit // 4)
    slice_of = (np.arange(len(df)) * slices) // len(df)
    kept = slice_of[out["step"].to_numpy() - 1]
    for column in ("a", "b"):
        whole, shown = df[column].to_numpy(), out[column].to_numpy()
        for s in range(slices):
            part, part_shown = whole[slice_of == s], shown[kept == s]
            finite_or_inf = part[~np.isnan(part)]
            if len(finite_or_inf):
                assert np.nanmin(part_shown) == finite_or_inf.min()
                assert np.nanmax(part_shown) == finite_or_inf.max()


def test_a_long_run_draws_at_most_the_limit_and_a_short_run_every_step():
    run = PairedRun(TrainSettings(steps=1500))
    df = records_frame(run.run(1500))
    drawn = loss_chart(df).to_dict()["datasets"]
    assert max(len(rows) for rows in drawn.values()) <= 2 * (CHART_ROWS + 2)  # two runs, melted
    short = records_frame(run.records[:300])
    assert sum(len(r) for r in loss_chart(short).to_dict()["datasets"].values()) >= 2 * 300
    strip = bits_strip(df).to_dict()
    (rows,) = strip["datasets"].values()
    assert len(rows) <= CHART_ROWS + 2 and set(rows[0]) == {"step", "differing bits"}
    assert max(r["differing bits"] for r in rows) == df["differing bits"].max()
