"""core.crowd.runner.session_value: one slot of a session's own results, computed by one script run at a time."""

from __future__ import annotations

import threading
import time

import pytest

from core.crowd.runner import session_value


def test_the_slot_keeps_the_last_value_for_its_key():
    state: dict = {}
    calls = []

    def compute(v):
        return lambda: calls.append(v) or v

    assert session_value(state, "_r", "a", compute(1)) == 1
    assert session_value(state, "_r", "a", compute(2)) == 1 and calls == [1]  # the same data: not computed again
    assert session_value(state, "_r", "b", compute(3)) == 3  # other data: computed, and the slot holds it alone
    assert state["_r"] == ("b", 3)
    assert session_value(state, "_r", "a", compute(4)) == 4 and calls == [1, 3, 4]


def test_a_failed_computation_keeps_nothing():
    state: dict = {}
    session_value(state, "_r", "a", lambda: 1)

    def fail():
        raise ValueError("bad file")

    with pytest.raises(ValueError):
        session_value(state, "_r", "b", fail)
    assert state["_r"] == ("a", 1)


def test_two_script_runs_of_one_session_compute_once():
    """Streamlit may start a session's next run while its previous one still computes: the second waits."""
    state: dict = {}
    calls, got = [], []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return "diagnosis"

    runs = [threading.Thread(target=lambda: got.append(session_value(state, "_r", "k", slow))) for _ in range(2)]
    for t in runs:
        t.start()
    for t in runs:
        t.join(5)
    assert got == ["diagnosis", "diagnosis"] and calls == [1]
