"""Many devices page in AppTest: at rest, a live gloo run, the order study and the emulation, each
showing exactly what core computes for the same settings; no room and bad links give messages."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import core.machines.memory as memory
import core.training.data_parallel as dp
import core.training.emulate as emulate
import core.training.gloo as gloo
from core.kernels.collectives import COLLECTIVE_MODELS
from tests.pages.conftest import ROOT, TIMEOUT, all_text
from ui.many_devices_view import short_step, step_text

SLOW = 600  # a live run starts processes that import torch; the emulation trains for real


def page(params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "many_devices.py"), default_timeout=TIMEOUT)
    at.query_params.update(params or {})
    return at.run()


def cells(at: AppTest) -> list[str]:
    out = []
    for df in at.dataframe:
        out += [str(v) for v in df.value.to_numpy().ravel()]
    return out


def test_page_at_rest_explains_and_offers_the_three_parts():
    at = page()
    assert not at.exception, at.exception
    text = all_text(at)
    for part in ("A real process group on this server", "on 2 to 1,024 devices (models)",
                 "emulated in one process", "Takeaway"):
        assert part in text
    assert at.radio(key="md_world").value == 2
    assert {b.key for b in at.button} >= {"md_run", "md_study_go", "md_emulate"}
    assert "Press the button to start the workers" in text


def test_a_computed_result_is_on_the_first_screen_without_a_button():
    """Many devices showed nothing until a button was pressed."""
    at = page()
    assert not at.exception
    c = emulate.order_study((8,))[0]
    pair = next(p for p in c.pairs if {p.a, p.b} == {"ring_gloo", "tree_nccl"})
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Ring vs tree, k = 8: elements apart"] == f"{pair.differing:.0%}"
    assert metrics["Largest gap between the two"] == f"{pair.max_ulp_distance:,} ULP"
    assert pair.differing > 0  # another order, other bits: a model computed exactly, the same on every machine
    assert "md_live" not in at.session_state  # the real gloo run still waits for its button


def test_a_live_run_from_the_page_shows_what_core_measured():
    at = page({"workers": "1", "steps": "10"})
    at.button(key="md_run").click().run(timeout=SLOW)
    assert not at.exception, at.exception
    r = at.session_state["md_live"]
    assert r.world_size == 1 and r.steps == 10
    assert r.line() == "data-parallel (gloo, world size 1): bit-identical to one process for 10 steps"
    assert any(c.value == r.line() for c in at.code)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["First differs from one process"] == short_step(r.summary.first_difference, 10)
    assert "every bit agrees" in all_text(at)
    assert any("MB" in c for c in cells(at))  # the memory facts
    from core.studies.many_devices import LiveTime, last_live_time
    from ui.many_devices_view import live_wait_text

    # the next visitor's estimate is this run's
    assert last_live_time() == LiveTime(world_size=1, steps=10, startup_s=r.startup_s, wall_s=r.wall_s)
    assert f"took {r.startup_s:.0f} s to start its workers and {r.wall_s:.0f} s in all" in live_wait_text()


def test_without_room_the_live_run_is_not_offered(monkeypatch):
    # room_for looks memory_room up in core.training.gloo, so that is where it is replaced
    monkeypatch.setattr(gloo, "memory_room", lambda: memory.Room(1 << 20, "a test limit"))
    at = page()
    assert not at.exception, at.exception
    assert at.button(key="md_run").disabled
    assert any("Not enough free memory" in w.value and "a test limit" in w.value for w in at.warning)


def test_the_order_study_from_the_page_matches_core():
    at = page({"largest_k": "16"})
    if any(b.key == "md_study_go" for b in at.button):  # not yet computed on this server (process)
        at.button(key="md_study_go").click().run(timeout=SLOW)
    assert not at.exception, at.exception
    ks = tuple(k for k in emulate.STUDY_KS if k <= 16)
    study = emulate.order_study(ks)
    c16 = study[-1]
    shown = cells(at)
    for o in c16.outcomes:
        assert COLLECTIVE_MODELS[o.model].name in shown
        assert f"{o.mean_abs_ulps:.3g} ULPs" in shown
    assert len(at.get("vega_lite_chart")) >= 2


def test_the_emulation_from_the_page_matches_core():
    at = page({"devices": "8", "emulated_steps": "10", "model": "tree_nccl"})
    if any(b.key == "md_emulate" for b in at.button):
        at.button(key="md_emulate").click().run(timeout=SLOW)
    assert not at.exception, at.exception
    run = emulate.emulate_run(8, "tree_nccl", 10)
    shown = cells(at)
    assert f"8 devices · {COLLECTIVE_MODELS['tree_nccl'].name}" in shown
    assert step_text(run.summary.first_difference, 10) in shown
    assert step_text(run.summary.first_rel_1pct, 10) in shown


@pytest.mark.parametrize("params", [
    {"workers": "3", "steps": "5000", "devices": "7", "model": "x", "largest_k": "0"},
    {"emulated_steps": "-1", "devices": "8,8,1024"},
])
def test_bad_link_values_are_ignored_with_a_note(params):
    at = page(params)
    assert not at.exception, at.exception
    assert at.radio(key="md_world").value in dp.WORLD_SIZES
    assert 10 <= at.slider(key="md_steps").value <= 200


def test_ring_and_tree_are_explained_before_the_numbers():
    at = page()
    assert not at.exception
    first = at.markdown[0].value
    assert "**ring**" in first and "**tree**" in first  # the punchline's first element, above its metrics


def test_the_order_studys_wait_is_estimated_from_a_measured_rate():
    """'A few seconds' took 26 s: the estimate now counts in the time one value of k took on this server."""
    from core.crowd.bytecache import STUDY_RATES
    from core.studies.many_devices import record_study_time, seconds_per_k
    from ui import many_devices_view as view

    STUDY_RATES.put("per k", 0.5)
    try:
        assert seconds_per_k(9.0) == 0.5  # the last full study's rate wins over the first screen's one k
        assert view.study_estimate(28, 0.5).startswith("about 14–28 s for 28 values of k (0.50 s each")
        record_study_time(28, 28.0)
        assert seconds_per_k(9.0) == 1.0
    finally:
        STUDY_RATES.discard("per k")
    assert seconds_per_k(0.7) == 0.7  # nothing measured yet: the first screen's k = 8 sum
    at = page({"largest_k": "1024"})
    if any(b.key == "md_study_go" for b in at.button):
        assert any("timed on this server" in c.value for c in at.caption)


def test_the_command_line_sits_in_an_expander(monkeypatch):
    monkeypatch.setattr(gloo, "memory_room", lambda: memory.Room(1 << 20, "a test limit"))
    at = page()
    assert not at.exception
    assert not any("python -m" in w.value for w in at.warning)
    assert any("python -m scripts.data_parallel" in c.value for e in at.expander for c in e.code)
