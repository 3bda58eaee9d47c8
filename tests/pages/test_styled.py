"""ui.talk.styled: presenter mode sizes every chart's text for a projector, text drawn as data included."""

from __future__ import annotations

import numpy as np

from core.kernels.trees import build_tree
from ui.sumlab_view import tree_picture
from ui.talk import PRESENTER_CHART_TEXT, PRESENTER_MIN_HEIGHT, styled


def _tree_chart(presenter_mode: bool):
    tree = build_tree(np.array([1.0, 2.0**-24, 3.0, -1.5, 0.25, 7.0, 1e-3, 2.0], dtype=np.float32), "float32",
                      "pairwise")
    return styled(tree_picture(tree, height=200).copy(), presenter_mode=presenter_mode)


def test_presenter_mode_sizes_axes_legends_and_text_marks():
    spec = _tree_chart(True).to_dict()
    config = spec["config"]
    assert config["axis"]["labelFontSize"] == PRESENTER_CHART_TEXT["axis_label"]
    assert config["legend"]["labelFontSize"] == PRESENTER_CHART_TEXT["legend_label"]
    assert config["text"]["fontSize"] == PRESENTER_CHART_TEXT["mark_text"]
    assert spec["height"] >= PRESENTER_MIN_HEIGHT
    # the leaves' values are a text mark that sets no size of its own, so the config's size applies
    texts = [layer["mark"] for layer in spec["layer"] if layer["mark"]["type"] == "text"]
    assert texts and all("fontSize" not in mark for mark in texts)


def test_normal_mode_leaves_the_chart_as_it_was():
    spec = _tree_chart(False).to_dict()
    assert "text" not in spec.get("config", {}) and spec["height"] == 200


def test_charts_with_legends_beside_them_get_the_height_their_entries_need():
    from ui.talk import LEGEND_ROW_PX, height_for_legends

    assert height_for_legends(260, 2, presenter_mode=False) == 260  # a short legend: the chart's own height
    tall = height_for_legends(260, 9, presenter_mode=True)
    assert tall >= 9 * LEGEND_ROW_PX[True] > 260
    assert height_for_legends(260, 8, 2, presenter_mode=True) > height_for_legends(260, 8, presenter_mode=True)
    assert height_for_legends(260, 9, presenter_mode=True) > height_for_legends(260, 9, presenter_mode=False)


def test_the_random_orders_histogram_is_tall_enough_for_every_marked_order():
    import pandas as pd

    from ui.sumlab_view import permutation_histogram

    # each marked order has its own labelled row on the right axis (no legend): 12 px text needs about 20 px a row
    marks = pd.DataFrame({"label": [f"order {i}" for i in range(12)], "ulps": [float(i) for i in range(12)]})
    chart = permutation_histogram(pd.DataFrame({"ulps": [0.0, 1.0, -2.0]}), marks).to_dict()
    assert chart["height"] >= 12 * 20 + 60  # and the x axis below the rows
    dots = next(layer for layer in chart["layer"] if layer["mark"]["type"] == "point")
    assert dots["encoding"]["y"]["axis"]["labelOverlap"] is False  # no row's label is dropped
