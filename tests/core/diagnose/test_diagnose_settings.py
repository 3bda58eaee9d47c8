"""core.diagnose.loaders's page-facing pieces: DiagnoseSettings' derived options, and the checks that
say why two results (or a K and the inputs) cannot be diagnosed together."""

from __future__ import annotations

import numpy as np

from core.diagnose.inputs import prepare_inputs
from core.diagnose.loaders import DiagnoseSettings, Loaded, load_pasted, pair_problem, reduction_length_problem


def _loaded(shape, dtype=np.float32, fmt="float32") -> Loaded:
    return Loaded(values=np.zeros(shape, dtype=dtype), fmt=fmt, source="test")


def test_settings_derive_the_options_diagnose_takes():
    s = DiagnoseSettings()
    assert (s.source, s.reduced_precision, s.k, s.fmt, s.text_format) == ("example", "any", None, None, "float32")
    s = DiagnoseSettings(source="paste", reduced=False, k=512, format_choice="bfloat16")
    assert (s.reduced_precision, s.fmt, s.text_format) == ("none", "bfloat16", "bfloat16")
    assert hash(s) == hash(DiagnoseSettings(source="paste", reduced=False, k=512, format_choice="bfloat16"))


def test_uploads_must_share_format_and_shape():
    assert pair_problem(_loaded((2, 3)), _loaded((2, 3))) is None
    msg = pair_problem(_loaded((2, 3)), _loaded((2, 3), np.float64, "float64"))
    assert msg.startswith("Result A is float32 but result B is float64")
    msg = pair_problem(_loaded((2, 3)), _loaded((3, 2)))
    assert "shape (2, 3)" in msg and "shape (3, 2)" in msg
    # format first: a pair that differs in both is told about the format
    assert "float64" in pair_problem(_loaded((2,)), _loaded((3,), np.float64, "float64"))


def test_pasted_lists_must_match_one_for_one():
    a, b = load_pasted("1, 2, 3", "float32"), load_pasted("1 2", "float32")
    assert pair_problem(a, b, pasted=True) == ("Result A holds 3 numbers but result B holds 2: they must match one "
                                                "for one.")
    assert pair_problem(a, load_pasted("3\n2\n1", "float32"), pasted=True) is None


def test_k_must_agree_with_the_inputs():
    inputs = prepare_inputs(np.ones((4, 7), np.float32), (4,))  # seven terms summed into each element
    assert inputs.k == 7
    assert reduction_length_problem(7, inputs) is None
    assert reduction_length_problem(None, inputs) is None and reduction_length_problem(5, None) is None
    assert reduction_length_problem(5, inputs) == "K = 5, but the inputs sum 7 terms per element."
