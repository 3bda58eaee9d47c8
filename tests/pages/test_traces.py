"""Where two runs part, in AppTest: the punchline shows what core.traces computes for each bundled pair;
uploads are validated, refused with a message next to the uploader, and compared when both are good."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.traces.files import dumps
from core.traces.pairs import PAIRS, run_pair
from tests.pages.conftest import ROOT, all_text, shown

SLOW = 240


def everything(at: AppTest) -> str:
    """What the page shows, its code blocks (the one-line answer) included."""
    return shown(all_text(at)) + "\n" + "\n".join(c.value for c in at.code)


def page() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "traces.py"), default_timeout=SLOW).run()


@pytest.fixture(scope="module")
def results():
    return {k: run_pair(k) for k in PAIRS}


def test_default_pair_opens_on_its_first_difference(results):
    at = page()
    assert not at.exception, at.exception
    c = results["lm-batch"].comparison
    text = everything(at)
    assert c.line in text  # the one-line answer, as the command prints it
    if c.first is None:
        assert "give the same bits in all" in text
    else:
        assert f"The runs part at op {c.first.a.index} of {c.n_a}" in text
        metrics = {m.label: m.value for m in at.metric}
        assert metrics["Born or inherited"] == c.first.judgement.state
        assert metrics["Against rounding"] == c.first.judgement.verdict
    assert "Traced live on this server" in text


@pytest.mark.parametrize("key", [k for k in PAIRS if k != "lm-batch"])
def test_every_bundled_pair_shows_its_answer(key, results):
    at = page()
    at.selectbox(key="tr_pair").set_value(key).run()
    assert not at.exception, at.exception
    c = results[key].comparison
    assert c.line in everything(at)


def test_the_planted_bug_is_beyond_rounding_at_its_op():
    at = page()
    at.selectbox(key="tr_pair").set_value("mlp-planted").run()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Born or inherited"] == "born here" and metrics["Against rounding"] == "beyond rounding"
    assert metrics["First difference"].startswith("op 1 of")


def test_upload_mode_asks_for_two_files_and_keeps_the_page():
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    assert not at.exception, at.exception
    text = everything(at)
    assert "Upload two trace files" in text and "python -m scripts.trace run" in text
    assert not at.error


def test_uploaded_traces_are_validated_and_compared(results):
    r = results["lm-batch"]
    good_a, good_b = dumps(r.trace_a).encode(), dumps(r.trace_b).encode()
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_up_a").upload("gpu.json", good_a, "application/json").run()
    at.file_uploader(key="tr_up_b").upload("broken.json", b'{"format": "op-trace"}', "application/json").run()
    assert not at.exception, at.exception
    errors = " ".join(e.value for e in at.error)
    assert "broken.json" in errors and "not a valid trace file" in errors
    at.file_uploader(key="tr_up_b").upload("laptop.json", b"\xff\xfe not text", "application/json").run()
    assert "not UTF-8" in " ".join(e.value for e in at.error)
    at.file_uploader(key="tr_up_b").upload("laptop.json", good_b, "application/json").run()
    assert not at.exception and not at.error
    text = everything(at)
    assert r.comparison.line in text and "Uploaded by you" in text


def test_text_from_an_uploaded_trace_is_inert(results):
    t = json.loads(dumps(results["mlp-planted"].trace_b))
    t["machine"]["device_name"] = "**bold** <b>html</b> [link](https://example.com)"
    for op in t["ops"]:
        op["module"] = "<img src=x onerror=alert(1)>"
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_up_a").upload("a.json", dumps(results["mlp-planted"].trace_a).encode()).run()
    at.file_uploader(key="tr_up_b").upload("b.json", json.dumps(t).encode()).run()
    assert not at.exception, at.exception
    md = " ".join(m.value for m in at.markdown) + " ".join(c.value for c in at.caption)
    assert "<b>html</b>" not in md and "](https" not in md and "<img" not in md
    assert "\\*\\*bold\\*\\*" in md  # escaped: shown as the literal text


def test_a_link_reopens_the_same_pair():
    at = AppTest.from_file(str(ROOT / "pages" / "traces.py"), default_timeout=SLOW)
    at.query_params.update({"pair": "mlp-planted", "only_differences": "False"})
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="tr_pair").value == "mlp-planted"
    assert at.toggle(key="tr_only").value is False
    assert {m.label: m.value for m in at.metric}["Against rounding"] == "beyond rounding"


def test_the_autocast_pair_names_a_format_change(results):
    at = page()
    at.selectbox(key="tr_pair").set_value("mlp-bf16").run()
    assert not at.exception, at.exception
    c = results["mlp-bf16"].comparison
    metrics = {m.label: m.value for m in at.metric}
    assert c.cast is not None and metrics["What differs"] == "format change"
    assert metrics["Formats"] == "float32 to bfloat16" and metrics["First difference (in B)"].startswith("op ")
    text = everything(at)
    assert c.line in text and "A format change is expected" in text


def test_uploaded_traces_of_a_transformers_model(tmp_path):
    """GPT-2 from a config (tests/corpus), traced in float32, in bfloat16, and at batch 4 following row 0:
    the page reads the files and gives the same answers as the command line."""
    from core.traces.compare import compare
    from core.traces.models import RunSettings
    from core.traces.run import make_trace

    spec = "tests/corpus/gpt2.py:make"
    f32, bf16 = make_trace(RunSettings(model=spec)), make_trace(RunSettings(model=spec, dtype="bfloat16"))
    row = make_trace(RunSettings(model=spec, args=(("batch", "4"),), follow_row=0))
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_up_a").upload("f32.json", dumps(f32).encode(), "application/json").run()
    at.file_uploader(key="tr_up_b").upload("bf16.json", dumps(bf16).encode(), "application/json").run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    text = everything(at)
    assert compare(f32, bf16).line in text and "format change, float32 to bfloat16" in text
    assert {m.label: m.value for m in at.metric}["What differs"] == "format change"
    at.file_uploader(key="tr_up_b").upload("row.json", dumps(row).encode(), "application/json").run()
    assert not at.exception and not at.error
    text = everything(at)
    assert compare(f32, row).line in text and "batch 4 (row 0 followed)" in text


def test_commands_sit_in_a_collapsed_expander_and_k_shows_a_dash(results):
    at = page()
    assert not at.exception, at.exception
    mine = [e for e in at.expander if e.label == "Trace your own model"]
    assert len(mine) == 1
    assert any("python -m scripts.trace run" in c.value for c in mine[0].code)
    outside = [c.value for c in at.code if c not in list(mine[0].code)]
    assert not any("python -m scripts.trace" in v for v in outside)
    assert not any("python -m scripts.trace" in m.value for m in at.markdown)
    at.toggle(key="tr_only").set_value(False).run()
    ks = list(at.dataframe[0].value["K"])
    assert "—" in ks and all(k == "—" or k.replace(",", "").isdigit() for k in ks) and None not in ks


def test_a_flipped_choice_is_named_on_the_page():
    """Two traces of tests/corpus/argmax.py, one with a rounding-sized plant that flips its argmax, uploaded:
    the page says where the choice flips, in one sentence, beside the one-line answer."""
    from core.traces.compare import compare
    from core.traces.models import RunSettings
    from core.traces.run import make_trace

    spec = "tests/corpus/argmax.py:make"
    a = make_trace(RunSettings(model=spec))
    b = make_trace(RunSettings(model=spec, perturb_op=1, perturb_size=2.0 ** -22))
    c = compare(a, b)
    at = page()
    at.radio(key="tr_source").set_value("upload").run()
    at.file_uploader(key="tr_up_a").upload("a.json", dumps(a).encode(), "application/json").run()
    at.file_uploader(key="tr_up_b").upload("b.json", dumps(b).encode(), "application/json").run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    warnings = shown(" ".join(w.value for w in at.warning))
    assert "A choice flips at op 3, aten.argmax in model: a rounding-sized difference in its input changed its " \
           "choice" in warnings
    assert c.line in everything(at) and c.line.endswith("a choice flips at op 3, aten.argmax.default in model")


def test_the_size_column_is_short_enough_to_fit(results):
    """The table's size column says a difference's size in a few words (its whole sentence, with the envelope, was
    cut where the column ended at 1280 px); the first difference's full sentence stays above the table."""
    at = page()
    assert not at.exception, at.exception
    first = results["lm-batch"].comparison.first
    sizes = [s for s in at.dataframe[0].value["size"] if s]
    assert sizes and max(map(len, sizes)) <= 40, sizes
    if first is not None and first.judgement.size is not None:
        f = first.judgement.size
        assert sizes[0].startswith(f"{f.differing} of {f.sampled}")
        assert first.judgement.size.text() in everything(at)
