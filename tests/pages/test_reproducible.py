"""Make my runs reproducible in AppTest: the snippet follows the visitor's choices, costs come from the cached
measurement, what cannot be had is said, the tolerance follows its controls, and the URL keeps the settings."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from core.diagnose.tolerances import GUARANTEE_KIND, TYPICAL_ASSUMES, TYPICAL_KIND
from core.studies.reproducible import live_costs, suggest_tolerance
from core.studies.reproducible_rules import Choice, answer
from tests.pages.conftest import ROOT, all_text

SLOW = 300  # the first run measures the costs and compiles the order-independent sum


def page(params: dict | None = None, opened: bool = True) -> AppTest:
    """The page with its folded GPU-generations section open (``opened``): it is made only once opened."""
    at = AppTest.from_file(str(ROOT / "pages" / "reproducible.py"), default_timeout=SLOW)
    at.query_params.update(params or {})
    if opened:
        at.session_state["rp_open_generations"] = True
    return at.run()


def test_the_gpu_generations_are_modelled_only_once_opened():
    at = page(opened=False)
    assert not at.exception
    section = next(e for e in at.expander if e.label.startswith("Across GPU generations"))
    assert not section.markdown and not section.dataframe


def codes(at: AppTest) -> list[str]:
    return [c.value for c in at.code]


def test_the_default_answer_is_pytorch_training_on_one_gpu_run_to_run():
    at = page()
    assert not at.exception, at.exception
    snippet = codes(at)[0]
    assert snippet == answer(Choice("eager", "gpu", "run_to_run")).snippet()
    for needle in ("CUBLAS_WORKSPACE_CONFIG", "use_deterministic_algorithms(True)", "worker_init_fn",
                   "cudnn.benchmark = False"):
        assert needle in snippet
    text = all_text(at)
    assert "Make my runs reproducible" in text
    det = live_costs().rows["deterministic_cpu"]
    assert "MODEL of that kernel" in text and "A100" in _table_text(at)
    assert "For 1,000,000 values all four give the same bits: each launches 123 blocks of 512 threads" in text
    assert "For 4,000,000 values they give 3 different results (A100; H100 SXM = H200; RTX 4090)" in text
    # a GPU setup: no CPU timing stands for its cost, neither in the headline nor in the list
    assert f"deterministic mode (CPU) {det.text}" not in text and "Measured on this server's CPU:" not in text
    assert "no figure published" in text
    assert not at.warning  # nothing that cannot be had


def _table_text(at: AppTest) -> str:
    return "\n".join(" | ".join(str(v) for v in row) for t in at.table for row in t.value.reset_index().values)


def test_choices_change_the_snippet_and_say_what_cannot_be_had():
    at = page()
    at.selectbox(key="rp_run").set_value("vllm").run()
    assert "VLLM_BATCH_INVARIANT" in codes(at)[0]
    at.selectbox(key="rp_match").set_value("cpu_gpu").run()
    assert not at.exception, at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "cannot be had" in warning and "order-independent" in warning
    assert live_costs().rows["reprosum"].text in warning  # its cost, measured here
    assert at.query_params["run"] == "vllm" and at.query_params["match"] == "cpu_gpu"


def test_close_enough_puts_the_tolerance_in_the_snippet():
    at = page({"match": "close", "dtype": "float32", "k": "1000"})
    assert not at.exception, at.exception
    tol = suggest_tolerance("float32", 1000)
    rtol, atol = (v.split("=")[1] for v in tol.line.split())
    assert f"rtol={rtol}, atol={atol}" in codes(at)[0]
    assert f"rtol={rtol}, atol={atol}" in codes(at)[1]
    # the snippet's tolerance says it is the typical one and gives the guarantee beside it; its setting no longer
    # says that every reordering passes
    assert f"# typical, not a guarantee; for every order of summation: {tol.guarantee_line.replace(' ', ', ')}" \
        in codes(at)[0]
    text = all_text(at)
    assert "A typical tolerance (the rounding envelope)" in text and "usually pass" in text
    assert "That every order passes" in text and "the tolerance below says what it was tested on" not in text


def test_the_page_gives_both_kinds_of_tolerance_with_the_commands_words():
    at = page({"match": "close", "dtype": "float32", "k": "1000000"})
    assert not at.exception, at.exception
    tol = suggest_tolerance("float32", 10**6)
    g_rtol, g_atol = (v.split("=")[1] for v in tol.guarantee_line.split())
    assert f"torch.testing.assert_close(actual, expected, rtol={g_rtol}, atol={g_atol})" in codes(at)
    markdown, captions = [m.value for m in at.markdown], " ".join(c.value for c in at.caption)
    assert f"**{TYPICAL_KIND}**" in markdown and f"**{GUARANTEE_KIND}**" in markdown
    # the same words as python -m scripts.tolerance prints, without the kind the bold line above says
    assert tol.typical_words().removeprefix(f"{TYPICAL_KIND}: ") in captions and TYPICAL_ASSUMES in captions
    assert tol.guarantee_words().removeprefix(f"{GUARANTEE_KIND}: ") in captions
    assert "27,000,000×" in captions  # the guarantee against the typical tolerance at K = 10^6 in float32
    assert any("--op sum --guarantee" in c for c in codes(at))


def test_where_no_tolerance_can_mean_anything_the_page_says_so():
    at = page({"match": "close", "dtype": "float32", "k": str(2**25)})
    assert not at.exception, at.exception
    warning = " ".join(w.value for w in at.warning)
    assert "No tolerance can mean anything here: K·u = 2 ≥ 1 for 33,554,432-term sums accumulated in float32" \
        in warning
    assert "assert_close" not in codes(at)[0] and "# no tolerance can mean anything" in codes(at)[0]
    assert f"**{TYPICAL_KIND}**" not in [m.value for m in at.markdown]


def test_the_tolerance_follows_its_controls():
    at = page()
    at.selectbox(key="rp_dtype").set_value("float64").run()
    at.number_input(key="rp_k").set_value(65536).run()
    assert not at.exception, at.exception
    tol = suggest_tolerance("float64", 65536)
    rtol, atol = (v.split("=")[1] for v in tol.line.split())
    assert any(f"rtol={rtol}, atol={atol}" in c for c in codes(at))
    assert any("python -m scripts.tolerance --dtype float64 --length 65536 --scale 1 --op sum" in c for c in codes(at))
    at.radio(key="rp_op").set_value("matmul").run()
    tol = suggest_tolerance("float64", 65536, op="matmul")
    rtol, atol = (v.split("=")[1] for v in tol.line.split())
    assert any(f"rtol={rtol}, atol={atol}" in c for c in codes(at))
    assert at.query_params["op"] == "matmul"


def test_a_bad_link_gets_a_note_and_the_defaults():
    at = page({"run": "<script>", "k": "-3"})
    assert not at.exception, at.exception
    assert "CUBLAS_WORKSPACE_CONFIG" in codes(at)[0]
    notes = " ".join(c.value for c in at.caption)
    assert "was ignored" in notes
