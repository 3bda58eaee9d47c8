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
