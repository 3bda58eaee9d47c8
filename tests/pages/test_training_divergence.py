"""AppTest: the Training divergence page steps, plays, resets and runs its mitigations."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.training import PRESETS, PairedRun, TrainSettings, summarize
from tests.pages.conftest import ROOT, TIMEOUT, all_text


@pytest.fixture
def td() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "training_divergence.py"), default_timeout=TIMEOUT).run()


def metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_starts_paused_with_the_default_preset(td):
    assert not td.exception
    assert td.session_state["td_run"].done == 0
    assert "Press Play" in all_text(td)
    assert td.session_state["td_source"] == "permute_hidden"


def test_step_applies_one_update_and_shows_both_losses_with_bits(td):
    td.button(key="td_step").click().run()
    assert not td.exception
    run = td.session_state["td_run"]
    assert run.done == 1
    text = all_text(td)
    assert f"{run.records[0].loss_a:.9g}" in text and "fp-bits" in text  # full float32 digits, bit pattern
    assert metrics(td)["First step that differs"] == "1"
    td.button(key="td_step10").click().run()
    assert td.session_state["td_run"].done == 11


def test_play_runs_to_the_end_and_matches_core(td):
    td.button(key="td_play").click().run()
    assert not td.exception
    run = td.session_state["td_run"]
    assert run.finished and run.done == 500
    expected = summarize(PairedRun(TrainSettings()).run(500))
    m = metrics(td)
    assert m["Loss gap above 1% from step"] == str(expected.first_rel_1pct)
    assert m["‖Δθ‖ doubles every"] == f"{expected.doubling_steps:.1f} steps"
    assert len(td.get("vega_lite_chart")) >= 5  # losses, gaps, bits, two decision boundaries
    td.button(key="td_reset").click().run()
    assert td.session_state["td_run"].done == 0


def test_changing_a_setting_starts_a_new_pair(td):
    td.button(key="td_step").click().run()
    td.selectbox(key="td_source").select("none").run()
    assert td.session_state["td_run"].done == 0
    td.button(key="td_step10").click().run()
    assert metrics(td)["First step that differs"] == "none yet"
    td.number_input(key="td_lr").set_value(0.2).run()
    assert td.session_state["td_run"].settings.lr == 0.2 and td.session_state["td_run"].done == 0


def test_presets_load_their_settings(td):
    name = "bfloat16 autocast"
    td.selectbox(key="td_preset").select(name).run()
    assert not td.exception
    assert td.session_state["td_run"].settings == PRESETS[name].settings
    assert PRESETS[name].note in all_text(td)


def test_float64_mitigation_and_seed_study(td):
    td.number_input(key="td_steps").set_value(200).run()
    td.button(key="td_f64").click().run()
    assert not td.exception
    text = all_text(td)
    assert "float32 pair: more than 1% apart from step **113**" in text
    assert "float64 pair: **not within 200 steps**" in text
    td.number_input(key="td_k").set_value(2).run()
    td.button(key="td_seeds").click().run()
    assert not td.exception
    summary = td.dataframe[-1].value
    assert list(summary.index) == ["A", "B"]
