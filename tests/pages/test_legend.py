"""ui.legend.name_hidden: a series drawn exactly on top of another says so in its legend entry."""

from __future__ import annotations

import pandas as pd

from ui.legend import name_hidden


def test_a_line_on_top_of_another_names_it():
    df = pd.DataFrame({"model": ["fma"] * 3 + ["separate"] * 3 + ["tf32"] * 3,
                       "K": [1, 2, 4] * 3, "err": [0, 1, 2, 0, 1, 2, 0, 3, 5]})
    out = name_hidden(df, "model", "K", "err")
    assert list(dict.fromkeys(out["model"])) == ["fma", "separate (under fma)", "tf32"]
    assert list(df["model"].unique()) == ["fma", "separate", "tf32"]  # the frame given is left as it was


def test_marks_at_one_position_and_nothing_hidden():
    marks = pd.DataFrame({"label": ["exact sum", "fixed order", "order-independent sum"], "ulps": [0.0, 1.5, 0.0]})
    assert list(name_hidden(marks, "label", "ulps")["label"]) == [
        "exact sum", "fixed order", "order-independent sum (under exact sum)"]
    apart = pd.DataFrame({"label": ["a", "b"], "ulps": [0.0, 0.5]})
    assert name_hidden(apart, "label", "ulps") is apart
    assert name_hidden(apart.iloc[:0], "label", "ulps").empty


def test_the_summation_labs_marks_say_which_order_lies_under_which():
    import numpy as np

    from core.studies.sumlab import run_lab
    from ui.sumlab_view import permutation_frames

    values = np.array([1.0, 2.0**-30, 3.0, 2.0**-30] * 4, dtype=np.float32)  # several orders agree exactly
    r = run_lab(values, "float32", "same", ("sequential", "reverse", "pairwise", "correct"), permutations=20)
    _, marks = permutation_frames(r)
    hidden = [label for label in marks["label"] if " (under " in label]
    assert hidden  # exact sums of these values: some orders land on the exact sum, or on each other
    for label in hidden:
        under = label.split(" (under ", 1)[1][:-1]
        assert marks.loc[marks["label"] == under, "ulps"].iloc[0] == marks.loc[marks["label"] == label, "ulps"].iloc[0]
