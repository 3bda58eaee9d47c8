"""AppTest: every page restores its settings from a link, and writes them back."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT, all_text


def open_page(name: str, **params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{name}.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    return at.run()


def test_summation_lab_from_a_link():
    at = open_page("summation_lab", n="1000", storage="float16", orders="sequential,kahan", permutations="0")
    assert not at.exception
    t = at.dataframe[0].value
    assert list(t["order"]) == ["Sequential, left to right", "Kahan compensated"]
    assert set(t["bits"].str.len()) == {6}
    assert at.session_state["sl_n"] == 1000
    at.number_input(key="sl_seed").set_value(7).run()
    assert at.query_params["seed"] == "7" and at.query_params["n"] == "1000"


def test_bad_links_fall_back_with_a_note():
    at = open_page("summation_lab", n="ten", storage="float8", junk="1")
    assert not at.exception
    text = all_text(at)
    assert "“n=ten” was ignored" in text and "“storage=float8” was ignored" in text and "Unknown link" in text
    assert at.session_state["sl_n"] == 1_000_000 and at.session_state["sl_storage"] == "float32"


def test_non_associativity_link_and_preset_link():
    at = open_page("non_associativity", format="float16", a="2048", b="1", c="1")
    assert not at.exception and "2048 versus 2050" in at.error[0].value
    at = open_page("non_associativity", preset="256 + 1 + 1 (bfloat16)")
    assert not at.exception and at.session_state["na_fmt"] == "bfloat16" and "256 versus 258" in at.error[0].value


def test_training_cpu_gpu_and_mitigation_links():
    at = open_page("training_divergence", difference="nudge", lr="0.8", steps="40", seed="3")
    assert not at.exception
    s = at.session_state["td_run"].settings
    assert (s.source, s.lr, s.steps, s.seed) == ("nudge", 0.8, 40, 3)
    at = open_page("cpu_vs_gpu", vector="uniform", n="1000", format="float64")
    assert not at.exception and at.session_state["cg_n"] == 1000
    at = open_page("mitigations", storage="bfloat16", seeds="3")
    assert not at.exception and at.session_state["mi_storage"] == "bfloat16"
