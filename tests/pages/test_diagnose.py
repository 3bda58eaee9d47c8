"""AppTest: the Diagnose a mismatch page — bundled examples, uploads, pastes, loss logs, links, bad input."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.diagnose.examples import EXAMPLES, LOG_EXAMPLES, at_calm_lr, make_example, make_log_example
from core.diagnose.logs import diagnose_logs
from core.diagnose.tolerances import GUARANTEE_KIND, TYPICAL_ASSUMES, TYPICAL_KIND
from core.diagnose.verdict import VERDICT_HEADS, diagnose
from tests.pages.conftest import ROOT, TIMEOUT, all_text, shown
from tests.pages.test_hostile import HOST, PAYLOADS, assert_nothing_live, url_params
from ui.diagnose_view import envelope_tolerance_lines

PAGE = str(ROOT / "pages" / "diagnose.py")


def open_page(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=TIMEOUT * 3)
    at.query_params.update(params)
    return at.run()


def boxes(at: AppTest) -> str:
    return "\n".join(shown(str(e.value)).replace("**", "") for kind in ("success", "warning", "error", "info")
                      for e in getattr(at, kind))


def npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def pt(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def codes(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


@pytest.mark.parametrize("key", list(EXAMPLES))
def test_each_bundled_example_shows_the_live_verdict(key):
    at = open_page(example=key)
    assert not at.exception, at.exception
    ex = make_example(key)
    d = diagnose(ex.actual, ex.expected, inputs=ex.inputs, reduction_length=ex.reduction_length)
    text = boxes(at)
    assert text.count(VERDICT_HEADS[d.verdict]) >= 1
    assert shown(d.sentence) in text
    if d.assert_line:
        assert d.assert_line in codes(at)
    else:
        assert "What to check next" in all_text(at)
        assert not any(c.startswith("torch.testing.assert_close") for c in codes(at))
    assert ex.code in codes(at)
    assert "orders of the same" in all_text(at)  # the simulation, folded in its expander
    # neither side is the reference: both are judged against the exact result of the example's inputs
    assert d.accuracy is not None and d.accuracy.source == "exact"
    assert d.accuracy.headline in all_text(at) and d.accuracy.sentence in all_text(at)
    assert "expected" not in " ".join(m.label for m in at.metric)
    if key == "threads":
        same = bool((ex.actual == ex.expected).item())
        assert ("same bits" in all_text(at) or "single thread" in all_text(at)) == same
    if key in ("bfloat16", "tf32"):
        assert d.verdict == "reduced_precision" and d.explanation == key
    if key == "bug":
        assert d.verdict == "too_large" and "Pattern check: 1 element(s)" in all_text(at)


def test_unticking_reduced_precision_rules_it_out():
    at = open_page(example="bfloat16")
    assert "Explained by reduced precision:" in boxes(at)
    at.checkbox(key="dg_reduced").uncheck().run()
    assert not at.exception
    assert "Too large for rounding:" in boxes(at)
    assert at.query_params["reduced"] == "False"


def test_upload_npy_pair_with_the_summed_inputs():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 3000)).astype(np.float32)
    actual, expected = np.add.accumulate(x, axis=1)[:, -1], x.sum(axis=1)
    at = open_page(source="upload")
    assert not at.exception and "Upload the two results" in boxes(at)
    at.file_uploader(key="dg_up_actual").upload("actual.npy", npy(actual)).run()
    at.file_uploader(key="dg_up_expected").upload("expected.npy", npy(expected)).run()
    assert not at.exception
    assert "Normal rounding noise:" in boxes(at)
    assert "Give the inputs" in boxes(at)  # no simulation without them
    at.file_uploader(key="dg_up_a").upload("x.npy", npy(x)).run()
    assert not at.exception
    text = all_text(at)
    assert "K (terms per sum): 3,000" in text and "orders of the same 3,000 terms" in text


def test_upload_torch_matrix_product_and_csv():
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(32, 200, generator=g), torch.randn(200, 16, generator=g)
    at = open_page(source="upload")
    at.file_uploader(key="dg_up_actual").upload("gpu.pt", pt({"out": (a.double() @ b.double()).float()})).run()
    at.file_uploader(key="dg_up_expected").upload("cpu.pt", pt(a @ b)).run()
    at.file_uploader(key="dg_up_a").upload("a.pt", pt(a)).run()
    at.file_uploader(key="dg_up_b").upload("b.pt", pt(b)).run()
    assert not at.exception
    assert "Normal rounding noise:" in boxes(at) or "Identical:" in boxes(at)
    assert "K (terms per sum): 200" in all_text(at)
    csv_a = "\n".join(",".join(f"{v:.9g}" for v in row) for row in (a @ b).tolist()).encode()
    bug = (a @ b).clone()
    bug[3, 4] *= 1.05
    csv_b = "\n".join(",".join(f"{v:.9g}" for v in row) for row in bug.tolist()).encode()
    at = open_page(source="upload")
    at.file_uploader(key="dg_up_actual").upload("a.csv", csv_b, "text/csv").run()
    at.file_uploader(key="dg_up_expected").upload("e.csv", csv_a, "text/csv").run()
    assert not at.exception and "Too large for rounding:" in boxes(at)


def test_bad_uploads_are_refused_with_a_reason():
    at = open_page(source="upload")
    at.file_uploader(key="dg_up_actual").upload("bad.npy", b"\x93NUMPY garbage").run()
    assert not at.exception and any("damaged or cut short" in e.value for e in at.error)
    at.file_uploader(key="dg_up_actual").upload("random.npy", b"PK\x03\x04 not numpy at all").run()
    assert any("is not a .npy file" in e.value and "object array" not in e.value for e in at.error)
    at.file_uploader(key="dg_up_actual").upload("a.npy", npy(np.ones(4, np.float32))).run()
    at.file_uploader(key="dg_up_expected").upload("e.npy", npy(np.ones(4, np.float64))).run()
    assert any("Result A is float32 but result B is float64" in e.value for e in at.error)
    at.file_uploader(key="dg_up_expected").upload("e.npy", npy(np.ones(5, np.float32))).run()
    assert any("shape (4,) but result B has shape (5,)" in e.value for e in at.error)
    at.file_uploader(key="dg_up_expected").upload("e.npy", npy(np.ones(4, np.float32))).run()
    at.file_uploader(key="dg_up_a").upload("x.npy", npy(np.ones((3, 7), np.float32))).run()
    assert any("summing the last axis" in shown(e.value) for e in at.error)
    at.file_uploader(key="dg_up_a").upload("x.npy", npy(np.ones((4, 7), np.float32))).run()
    at.number_input(key="dg_k").set_value(9).run()
    assert any("K = 9, but the inputs sum 7 terms" in e.value for e in at.error)
    at.file_uploader(key="dg_up_b").upload("evil.pt", b"PK\x03\x04 not really").run()
    assert not at.exception and any("zip" in shown(e.value) for e in at.error)
    at.file_uploader(key="dg_up_actual").upload("huge.npy", npy(np.zeros(1_000_001, np.float16))).run()
    assert any("at most 1,000,000" in e.value for e in at.error)


def test_pasted_lists():
    at = open_page(source="paste")
    assert "Paste the two results" in boxes(at)
    at.text_area(key="dg_paste_actual").input("tensor([1.0000001, 2.0, 3.0000002, -4.0])").run()
    at.text_area(key="dg_paste_expected").input("1.0 2.0 3.0 -4.0").run()
    assert not at.exception
    text = boxes(at)
    assert any(t in text for t in tuple(VERDICT_HEADS.values()))
    assert "significant digits" in all_text(at)
    assert "numbers" not in at.query_params and not any("1.0000001" in v for v in at.query_params.values())
    at.text_area(key="dg_paste_expected").input("1 2 3").run()
    assert any("Result A holds 4 numbers but result B holds 3" in e.value for e in at.error)
    at.text_area(key="dg_paste_expected").input("1 2 x 4").run()
    assert any("is not a number" in shown(e.value) for e in at.error)


@pytest.mark.parametrize("key", list(LOG_EXAMPLES))
def test_bundled_loss_logs(key):
    at = open_page(source="logs", log_example=key)
    assert not at.exception, at.exception
    a, b, _ = make_log_example(key)
    ld = diagnose_logs(a, b)
    assert shown(ld.sentence) in boxes(at)
    labels = {m.label: m.value for m in at.metric}
    assert labels["First differing step"] == f"{ld.first_step:,}"
    assert (labels["Jump at step"] == "none") == (ld.jump_step is None)
    if key == "reordered":  # amplification depends on the learning rate: the same pair at the page's default
        assert at_calm_lr() in all_text(at)


def test_loss_logs_uploaded_and_pasted():
    a, b = make_log_example("jump")[:2]
    a = type(a)(steps=a.steps, values=[float(v) for v in a.values], resolution=a.resolution, source=a.source)
    b = type(b)(steps=b.steps, values=[float(v) for v in b.values], resolution=b.resolution, source=b.source)
    tb_a = "Wall time,Step,Value\n" + "\n".join(f"1.7e9,{s},{v!r}" for s, v in zip(a.steps, a.values, strict=True))
    tb_b = "Wall time,Step,Value\n" + "\n".join(f"1.7e9,{s},{v!r}" for s, v in zip(b.steps, b.values, strict=True))
    at = open_page(source="logs", logs="upload")
    at.file_uploader(key="dg_log_a").upload("a.csv", tb_a.encode(), "text/csv").run()
    at.file_uploader(key="dg_log_b").upload("b.csv", tb_b.encode(), "text/csv").run()
    assert not at.exception and "A jump at step 120" in boxes(at)
    at = open_page(source="logs", logs="paste")
    at.text_area(key="dg_log_paste_a").input("\n".join(f"{s},{v!r}" for s, v in zip(a.steps, a.values,
                                                                                      strict=True))).run()
    at.text_area(key="dg_log_paste_b").input("\n".join(f"{v!r}" for v in a.values)).run()
    assert not at.exception and "Identical" in boxes(at)
    at.text_area(key="dg_log_paste_b").input("2,1\n1,1").run()
    assert any("increase" in e.value for e in at.error)


def test_state_lives_in_the_link():
    at = open_page(source="upload", k="512", format="bfloat16", reduced="False")
    assert not at.exception
    ss = at.session_state
    assert (ss["dg_source"], ss["dg_k"], ss["dg_format"], ss["dg_reduced"]) == ("upload", 512, "bfloat16", False)
    at.radio(key="dg_source").set_value("example").run()
    at.selectbox(key="dg_example").set_value("tf32").run()
    assert at.query_params["example"] == "tf32" and at.query_params["source"] == "example"
    at = open_page(source="cuda", k="-1", example="nope", junk="1")
    assert not at.exception
    text = all_text(at)
    assert "“source=cuda” was ignored" in text and "“k=-1” was ignored" in text and "Unknown link" in text


def test_link_values_and_file_names_are_inert():
    params = url_params("diagnose")
    assert set(params) >= {"source", "example", "k", "format", "reduced"}
    query = {name: PAYLOADS[i % len(PAYLOADS)] for i, name in enumerate(params)}
    query.update({payload: "1" for payload in PAYLOADS})
    assert_nothing_live(open_page(**query))
    at = open_page(source="upload")
    at.file_uploader(key="dg_up_actual").upload(f"![t](https://{HOST}/t.png).npy", b"\x93NUMPY junk").run()
    assert_nothing_live(at)
    at.file_uploader(key="dg_up_actual").upload(f"[x](https://{HOST}).csv", b"1\n2\n").run()
    at.file_uploader(key="dg_up_expected").upload(f"https://{HOST}/e.csv", b"1\n2\n3\n").run()
    assert_nothing_live(at)
    at = open_page(source="paste")
    at.text_area(key="dg_paste_actual").input(f"1 2 https://{HOST}/x").run()
    assert_nothing_live(at)


@pytest.mark.parametrize("key", ["batch", "tf32"])
def test_the_tolerances_for_other_runs_are_each_named_for_what_they_are(key):
    """The explanation's envelope is the typical tolerance, not a guarantee; the one for every order is its bound."""
    at = open_page(example=key)
    assert not at.exception, at.exception
    ex = make_example(key)
    d = diagnose(ex.actual, ex.expected, inputs=ex.inputs, reduction_length=ex.reduction_length)
    captions = [c.value for c in at.caption]
    assert envelope_tolerance_lines(d)[0] in captions and envelope_tolerance_lines(d)[1] in captions
    text = " ".join(captions)
    assert f"{TYPICAL_KIND}, for what this explanation typically allows" in text and TYPICAL_ASSUMES in text
    assert f"{GUARANTEE_KIND}: rtol=" in text and "computed from the inputs" in text
    assert "To accept anything the explanation allows" not in text
    assert "It is fitted to these two results: another run, machine or GPU can differ more." in text


def test_the_default_examples_verdict_is_the_punchline_and_an_assumed_k_says_so():
    """The verdict started below the first screen; K = 0 was read as 65,536 without a word."""
    at = open_page()
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert labels[0] == "Elements differing"
    at = open_page(source="paste")
    at.text_area(key="dg_paste_actual").set_value("1.0, 2.0000002, 3.0").run()
    at.text_area(key="dg_paste_expected").set_value("1.0, 2.0, 3.0").run()
    assert not at.exception
    assert "K (assumed)" in [m.label for m in at.metric]
    assert any("K = 0 means unknown" in c.value and "65,536" in c.value for c in at.caption)


def test_a_pasted_reference_judges_both_sides_and_a_bad_one_is_refused_next_to_its_box():
    """Neither side is the reference by default; a reference (e.g. float64) judges both. A bad reference gets its
    message inside the reference's box, and the two results, their verdict and the texts typed stay."""
    at = open_page(source="paste")
    a_text, b_text = "1.0000001, 2.0, 3.0000002, -4.0", "1 2 3 -4"
    at.text_area(key="dg_paste_actual").input(a_text).run()
    at.text_area(key="dg_paste_expected").input(b_text).run()
    assert not at.exception
    assert any("Neither result is the reference" in c.value for c in at.caption)  # no reference: it says so
    verdict = boxes(at)
    at.text_area(key="dg_paste_reference").input("1.00000005 2 3.0000001 -4").run()
    assert not at.exception
    a = np.array([1.0000001, 2.0, 3.0000002, -4.0], np.float32)
    b = np.array([1, 2, 3, -4], np.float32)
    d = diagnose(a, b, reference=np.array([1.00000005, 2, 3.0000001, -4]))
    assert d.accuracy.headline in all_text(at) and d.accuracy.sentence in all_text(at)
    for bad, why in (("1 2 x -4", "is not a number"),
                     ("1 2 3", "The reference holds 3 numbers but the results hold 4")):
        at.text_area(key="dg_paste_reference").input(bad).run()
        assert not at.exception
        errors = [shown(e.value) for e in at.error]
        assert any(why in e for e in errors), errors
        assert boxes(at).startswith(verdict.split("\n")[0])  # the verdict of A and B stays
        assert at.text_area(key="dg_paste_actual").value == a_text
        assert at.text_area(key="dg_paste_reference").value == bad
        assert d.accuracy.headline not in all_text(at)


def test_an_uploaded_reference_and_inputs_judge_both_results():
    rng = np.random.default_rng(3)
    x = rng.random((16, 4096)).astype(np.float32)
    loop = np.add.accumulate(x, axis=1)[:, -1]
    pairwise = x.sum(axis=1)  # NumPy's pairwise sum
    at = open_page(source="upload")
    at.file_uploader(key="dg_up_actual").upload("a.npy", npy(loop)).run()
    at.file_uploader(key="dg_up_expected").upload("b.npy", npy(pairwise)).run()
    at.file_uploader(key="dg_up_a").upload("x.npy", npy(x)).run()
    assert not at.exception
    d = diagnose(loop, pairwise, inputs=x)
    assert d.accuracy.source == "exact" and d.accuracy.headline in all_text(at)
    at.file_uploader(key="dg_up_reference").upload("r.npy", npy(np.ones(3))).run()
    assert not at.exception
    assert any("The reference has shape (3,) but the results have shape (16,)" in e.value for e in at.error)
    assert d.accuracy.headline in all_text(at)  # the exact reference of the inputs still judges both
    ref = x.astype(np.float64).sum(axis=1)
    at.file_uploader(key="dg_up_reference").upload("r.npy", npy(ref)).run()
    assert not at.exception
    given = diagnose(loop, pairwise, inputs=x, reference=ref)
    assert given.accuracy.source == "given" and given.accuracy.sentence in all_text(at)


def test_pasted_inputs_of_one_sum_or_dot_give_the_exact_reference():
    """0.1 + 0.1 + 0.1 in float32: the exact sum of the three float32 values judges both pasted results; a dot's
    vectors that do not match are refused under their box, and the two results keep their verdict."""
    at = open_page(source="paste")
    at.text_area(key="dg_paste_actual").input("0.3").run()
    at.text_area(key="dg_paste_expected").input("0.30000004").run()
    at.text_area(key="dg_paste_x").input("0.1 0.1 0.1").run()
    assert not at.exception
    x = np.full(3, 0.1, np.float32)
    d = diagnose(np.float32([0.3]), np.float32([0.30000004]), inputs=x)
    assert d.accuracy.source == "exact" and d.accuracy.headline in all_text(at)
    assert "K (terms per sum): 3" in all_text(at)
    at.text_area(key="dg_paste_y").input("1 1 1").run()
    dot = diagnose(np.float32([[0.3]]), np.float32([[0.30000004]]), inputs=(x.reshape(1, 3), np.ones((3, 1),
                                                                                                    np.float32)))
    assert not at.exception and dot.accuracy.headline in all_text(at)
    at.text_area(key="dg_paste_y").input("1 1").run()
    assert not at.exception
    assert any("do not multiply" in shown(e.value) for e in at.error)
    alone = diagnose(np.float32([0.3]), np.float32([0.30000004]))  # the results keep their verdict, K unknown
    assert shown(alone.sentence) in boxes(at) and dot.accuracy.headline not in all_text(at)



@pytest.mark.parametrize("key", ["batch", "threads"])
def test_a_large_ulp_count_under_a_normal_verdict_says_why(key):
    """The batch example is normal rounding noise with a difference of about 1,500 ULPs: the page says why that can
    be normal; the threads example (7 ULPs) needs no such word. The metric's label fits its column."""
    from ui.diagnose_view import LARGE_NORMAL_ULPS

    at = open_page(example=key)
    ex = make_example(key)
    d = diagnose(ex.actual, ex.expected, inputs=ex.inputs, reduction_length=ex.reduction_length)
    assert d.verdict == "reordering"
    said = "ULPs can be normal here" in all_text(at)
    assert said == (d.ulp_stats.max >= LARGE_NORMAL_ULPS) and said == (key == "batch")
    assert "Max diff. (ULPs)" in [m.label for m in at.metric]
