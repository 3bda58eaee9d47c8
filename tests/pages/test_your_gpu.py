"""AppTest: CPU vs GPU with a visitor's GPU that has answered (the judged result as the page keeps it), the room's
button and tally, and a refused report. The browser's own part runs in tests/e2e/test_your_gpu_browser.py."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.arith.vectors import VectorSpec, generate
from core.crowd import room
from core.studies.your_gpu import ReportError, Unavailable, expected, job_name, judge
from tests.core.studies.test_your_gpu import honest
from tests.pages.conftest import ROOT, TIMEOUT, all_text, shown

SPEC = VectorSpec(kind="normal", n=10_000, seed=0, storage="float32")
LINK = {"vector": "normal", "n": "10000", "format": "float32"}


@pytest.fixture(scope="module")
def judged():
    exp = expected(SPEC, generate(SPEC).values)
    return judge(honest(exp), exp)


@pytest.fixture
def the_room(monkeypatch, tmp_path):
    r = room.Room(tmp_path / "room.db", min_interval_s=0)
    monkeypatch.setattr(room, "_ROOM", r)
    return r


def page(outcome, params: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)
    at.query_params.update(params or LINK)
    at.session_state["_yg_judged"] = (job_name(SPEC), "{}", outcome)
    return at.run()


def test_your_gpu_stands_beside_the_cpu_on_the_first_screen(judged):
    at = page(judged)
    labels = [m.label for m in at.metric]
    assert labels[2] == "Your GPU, live (acme tile-9)" and labels[3] == "Exact sum, rounded once"
    text = shown(all_text(at))
    assert "Your GPU (acme tile-9), live: its workgroup tree is" in text
    assert "the model predicted its bits exactly" in text
    assert "2 different sums from 8 runs" in text
    assert not at.exception


def test_adding_to_the_room_and_the_speakers_tally(judged, the_room):
    at = page(judged)
    at.button(key="yg_room_add").click().run()
    assert "Added: the speaker's screen counts your GPU" in shown(all_text(at))
    assert len(the_room.entries()) == 1
    at = page(judged, {**LINK, "room": "on", "talk": "1"})
    text = shown(all_text(at))
    assert "1 answered" in text and "workgroup tree (modelled)" in str([d.value for d in at.dataframe])
    assert not at.exception


def test_a_refused_report_and_no_webgpu_each_get_one_line(judged):
    text = shown(all_text(page(ReportError("the workgroup tree's sum is farther from the exact sum than any order"))))
    assert "Your browser's GPU results were refused: the workgroup tree" in text
    at = page(Unavailable(reason="this browser has no WebGPU (navigator.gpu is missing)"))
    assert "**Your GPU, live:** not here: this browser has no WebGPU" in shown(all_text(at))
    assert "Your GPU, live" not in " ".join(m.label for m in at.metric)


def test_a_result_for_another_vector_is_not_shown(judged):
    at = page(judged, {**LINK, "n": "100000"})
    assert "Your GPU, live" not in " ".join(m.label for m in at.metric)
    assert not at.exception
