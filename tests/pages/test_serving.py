"""Serving page in AppTest: the punchline shows what core served for the same settings; the batch-invariant
toggle gives one completion; bad prompts and large N get messages next to the controls."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.serving.engine import ServeSettings, fork_study
from tests.pages.conftest import ROOT, all_text, shown

SLOW = 300  # three servings of the schedule on a shared CPU


def page(params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "serving.py"), default_timeout=SLOW)
    at.query_params.update(params or {})
    return at.run()


def test_the_punchline_counts_what_core_served():
    at = page({"requests": "12"})
    assert not at.exception, at.exception
    study = fork_study(ServeSettings(requests=12))
    text = shown(all_text(at))
    k = study.ordinary.distinct
    assert f"12 identical requests at temperature 0 gave {k} different completion{'s' if k > 1 else ''}" in text
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["With batch-invariant kernels"] == "1" and metrics["Distinct completions"] == str(k)
    assert "MODEL of a GPU" in text  # the default ordinary kernels are a model, and say so
    assert "Served alone (a batch of one): the baker painted" in text
    # the throughputs stand on the cost's basis (CPU time against this CPU's own kernels): their ratio is the cost
    base = float(metrics["Own kernels, CPU time"].split()[0].replace(",", ""))
    inv = float(metrics["Batch-invariant, CPU time"].split()[0].replace(",", ""))
    cost = float(metrics["Batch-invariant cost"].rstrip("×"))
    assert metrics["Own kernels, CPU time"].endswith("tokens/s")
    assert abs(base / inv - cost) <= 0.01 + 0.005 * cost, (base, inv, cost)
    assert "batch-invariant kernels" in text and "takeaway" in text.lower()


def test_batch_invariant_on_gives_one_completion():
    at = page({"requests": "10", "invariant": "True", "format": "float32", "kernels": "default"})
    assert not at.exception, at.exception
    assert "10 identical requests at temperature 0 gave 1 different completion" in shown(all_text(at))


def test_a_prompt_outside_the_alphabet_gets_a_message_not_a_traceback():
    at = page({"requests": "5"})
    at.text_input(key="sv_prompt").input("<b>Hi</b> https://x.y").run()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "alphabet" in errors and "<b>" not in errors  # inert: escaped, never markup
    assert "Change the settings below to serve" in all_text(at)


def test_large_n_is_over_the_budget_with_a_message():
    at = page({"requests": "2000"})
    assert not at.exception, at.exception
    assert any("more than one request may use" in e.value for e in at.error)


def test_completions_show_no_raw_markup_and_no_none():
    """The generated text is marked with a background, not with ** (which a leading space leaves
    literal), and a group that never departs has dashes in the table, not None."""
    at = page({"requests": "12"})
    assert not at.exception, at.exception
    served = [m.value for m in at.markdown if "the baker painted" in m.value]
    # after the prompt: the generated text (the group counts before it, "**7×**", are bold as they should be)
    assert served and all("**" not in m.split("the baker painted", 1)[1] for m in served), served
    assert any(":blue-background[" in m for m in served)
    for df in at.dataframe:
        cells = df.value.astype(str).to_numpy().ravel().tolist()
        assert not any(c in ("None", "nan", "NaN", "<NA>") for c in cells), cells


def test_the_own_kernels_caption_states_what_was_measured():
    """The caption under "How rare is a fork?" quotes the share of rows whose bits moved, in each format."""
    for fmt in ("float32", "bfloat16"):
        at = page({"requests": "10", "format": fmt, "kernels": "default"})
        assert not at.exception, at.exception
        metrics = {m.label: m.value for m in at.metric}
        measured = metrics["Rows whose bits moved"]
        note = next(c.value for c in at.caption if c.value.startswith("With this CPU's own kernels"))
        if measured == "0.0%":
            assert "no logit row's bits moved" in note, note
        else:
            assert f"the bits of {measured} of the logit rows moved ({fmt}" in note, (measured, note)
