"""Serving page in AppTest: the punchline shows what core served for the same settings; the batch-invariant
toggle gives one completion; bad prompts and large N get messages next to the controls."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.serving.engine import ServeSettings, fork_study
from tests.pages.conftest import ROOT, all_text, reader, shown
from ui.serving_view import headline

SLOW = 300  # three servings of the schedule on a shared CPU


def page(params: dict | None = None, opened: bool = True) -> AppTest:
    """The page with ``params`` in its address; ``opened``: as a reader who has opened its folded sections."""
    at = reader("serving", SLOW) if opened else AppTest.from_file(str(ROOT / "pages" / "serving.py"),
                                                                  default_timeout=SLOW)
    at.query_params.update(params or {})
    return at.run()


def test_the_punchline_counts_what_core_served():
    at = page({"requests": "12"})
    assert not at.exception, at.exception
    study = fork_study(ServeSettings(requests=12))
    text = shown(all_text(at))
    k = study.ordinary.distinct
    assert headline(12, k) in text
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["With batch-invariant kernels"] == "1" and metrics["Distinct completions"] == str(k)
    assert "MODEL of a GPU" in text  # the default ordinary kernels are a model, and say so
    assert "<b>Served alone:</b> the baker painted" in text and "<b>Served alone (a batch of one):</b>" in text
    # the throughputs stand on the cost's basis (CPU time against this CPU's own kernels): their ratio is the cost
    base = float(metrics["Own kernels, CPU time"].split()[0].replace(",", ""))
    inv = float(metrics["Batch-invariant, CPU time"].split()[0].replace(",", ""))
    cost = float(metrics["Batch-invariant cost"].rstrip("×"))
    assert metrics["Own kernels, CPU time"].endswith("tokens/s")
    assert abs(base / inv - cost) <= 0.01 + 0.005 * cost, (base, inv, cost)
    # the cost in the page's one unit, with what it measured (CPU kernels, a tiny model, this server)
    took = f"Batch-invariant serving took **{cost:.2f}× the default's time** here: this CPU's kernels on a tiny model"
    assert took in text
    assert "batch-invariant kernels" in text


def test_the_headline_is_true_for_one_and_for_many_completions():
    assert headline(40, 2) == "40 identical requests at temperature 0 gave 2 different completions"
    assert headline(40, 1) == "40 identical requests at temperature 0 came back all identical"
    assert "different completion" not in headline(1, 1) + headline(5, 1) + headline(5, 0)


def test_batch_invariant_on_gives_one_completion():
    at = page({"requests": "10", "invariant": "True", "format": "float32", "kernels": "default"})
    assert not at.exception, at.exception
    assert "10 identical requests at temperature 0 came back all identical" in shown(all_text(at))
    assert "different completion" not in shown(all_text(at))


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
    # the completions are escaped HTML: no markdown markers, the generated text on a blue background
    assert served and all("**" not in m for m in served), served
    assert all("rgba(28,131,225" in m for m in served)
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
            assert f"the bits of {measured} of the logit rows moved ({fmt})" in note, (measured, note)
            # the kernel path is inferred from the measured bits, never stated as fact
            assert "likely a matrix-vector kernel" in note and "not documented" in note, note
            assert f"at most {metrics['Largest logit move']}" in note, note


def test_the_logits_move_is_stated_as_measured_on_this_tiny_model():
    """The page quotes the largest logit move it measured (in ULPs of the row's largest logit), on what, and that
    deeper models add such moves up; never "an ULP or so" as a general rule."""
    at = page({"requests": "12"})
    assert not at.exception, at.exception
    r = fork_study(ServeSettings(requests=12)).ordinary
    text = shown(all_text(at))
    assert "an ULP or so" not in text
    assert {m.label: m.value for m in at.metric}["Largest logit move"] == f"{r.max_move_ulps:,.1f} ULPs"
    if r.rows_bits_differ:
        assert f"one logit by at most {r.max_move_ulps:,.1f} ULPs of its row's largest logit" in text
    assert "on this tiny model" in text and "layer by layer" in text


def test_commands_and_other_causes_sit_in_collapsed_expanders():
    """No command in the open text; batching is not the only cause (padding, sequence lengths, chunked prefill,
    a prefix cache), with SGLang's and Thinking Machines' addresses."""
    at = page({"requests": "12"})
    assert not at.exception, at.exception
    assert "python -m" not in all_text(at) and "deterministic only for a fixed batch" not in all_text(at)
    inside = {e.label: shown(" ".join([str(x.value) for x in e.markdown] + [str(x.value) for x in e.code]
                                      + [str(x.value) for x in e.caption])) for e in at.expander}
    closed = page({"requests": "12"}, opened=False)  # as the page opens: every section folded, nothing made
    assert closed.expander and all(not e.proto.expanded for e in closed.expander)
    assert not any(c.language == "bash" for c in closed.code)  # the commands are made once their section opens
    assert [e.label for e in closed.expander] == [e.label for e in at.expander]
    commands = next(t for label, t in inside.items() if "yourself" in label)
    assert "python -m scripts.serve_fork" in commands and "python -m scripts.train_tiny_lm" in commands
    causes = next(t for label, t in inside.items() if "Temperature 0 is not enough" in label)
    for cause in ("padding", "sequence lengths", "chunked prefill", "prefix cache",
                  "https://docs.sglang.io/references/faq.html",
                  "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"):
        assert cause in causes, cause


def test_the_caption_names_the_kernels_once():
    """With batch-invariant kernels on, the caption says so once, then what they are (it once read "batch-invariant
    kernels (batch-invariant kernels (fixed tiles…))")."""
    from streamlit.testing.v1 import AppTest

    from tests.pages.conftest import ROOT, TIMEOUT

    at = AppTest.from_file(str(ROOT / "pages" / "serving.py"), default_timeout=TIMEOUT)
    at.query_params["invariant"] = "True"
    at.run()
    captions = " ".join(str(c.value) for c in at.caption).replace("\\", "")
    assert "with batch-invariant kernels (fixed tiles" in captions
    assert "kernels (batch-invariant kernels" not in captions
