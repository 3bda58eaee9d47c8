"""The training charts' axes read whole: a title that fits its chart, tick labels without a dangling point."""

from __future__ import annotations

import pandas as pd
import pytest

from ui.training_view import LIVE_HEIGHT, loss_chart, records_frame, relative_gap_chart, seed_chart

# Streamlit's axis title font is about 5.6 px a character (measured in Chromium: "relative loss gap (linear" took
# 139 px). A vertical title is centred on the plot, which is the chart's height less the step axis below it
# (about 45 px with its labels and title); half the title above that centre must stay inside the chart.
PX_PER_CHAR, STEP_AXIS_PX = 5.6, 45


def _y_titles(chart) -> list[str]:
    spec = chart.to_dict()
    return [layer["encoding"]["y"]["title"] for layer in spec.get("layer", [spec])
            if "title" in layer.get("encoding", {}).get("y", {})]


@pytest.mark.parametrize("build", [loss_chart, relative_gap_chart], ids=["loss", "relative gap"])
def test_the_live_charts_vertical_titles_fit_their_height(build):
    """The relative gap's title was cut to "relative loss gap (linear" at the first screen's height."""
    titles = _y_titles(build(records_frame([])))
    assert titles
    room = LIVE_HEIGHT - STEP_AXIS_PX
    for title in titles:
        assert len(title) * PX_PER_CHAR <= room, f"{title!r} is longer than the {room} px its chart leaves it"


@pytest.mark.parametrize("field", ["final loss", "accuracy"])
def test_the_seed_charts_ticks_drop_trailing_zeros(field):
    """Every seed reached accuracy 1.0 and the axis read "1." (or "1.000000"): a tick reads 1."""
    df = pd.DataFrame({"seed": [0, 0, 1, 1], "side": ["A", "B", "A", "B"], "final loss": [0.5, 0.5, 0.25, 0.25],
                       "accuracy": [1.0] * 4})
    spec = seed_chart(df, field).to_dict()
    axes = [layer["encoding"]["y"].get("axis", {}) for layer in spec["layer"] if "axis" in layer["encoding"]["y"]]
    assert axes and all(axis.get("format") == "~g" for axis in axes), axes  # d3's ~g: 1 → "1", 0.25 → "0.25"
