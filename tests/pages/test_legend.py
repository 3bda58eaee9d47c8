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


def test_the_summation_labs_marks_each_have_their_own_row():
    """The lab's random-order chart gives every order its own labelled row, so orders that agree exactly no
    longer hide one another and need no "(under ...)" in their names."""
    import numpy as np

    from core.studies.sumlab import run_lab
    from ui.sumlab_view import permutation_frames

    values = np.array([1.0, 2.0**-30, 3.0, 2.0**-30] * 4, dtype=np.float32)  # several orders agree exactly
    r = run_lab(values, "float32", "same", ("sequential", "reverse", "pairwise", "correct"), permutations=20)
    _, marks = permutation_frames(r)
    assert marks["label"].is_unique and not any(" (under " in label for label in marks["label"])
    assert marks["ulps"].duplicated().any()  # some orders do land on the same result: each keeps its row
