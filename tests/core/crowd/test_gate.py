"""core.crowd.gate: at most N heavy computations at once, FIFO, reporting the queue, never leaking a slot."""

from __future__ import annotations

import threading
import time

import pytest

from core.crowd.gate import HEAVY, HEAVY_SLOTS, Gate


@pytest.mark.parametrize("slots", [1, 2, 3])
def test_at_most_n_inside_under_20_racing_threads(slots):
    gate = Gate(slots)
    lock = threading.Lock()
    inside = [0]
    most = [0]
    start = threading.Barrier(20)

    def worker():
        start.wait()
        for _ in range(5):
            with gate.hold(poll=0.01):
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.002)
                with lock:
                    inside[0] -= 1

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == slots == gate.max_inside_seen  # the gate filled up, and never beyond
    assert gate.inside == 0 and gate.waiting == 0 and gate.admitted == 100


def test_waiters_hear_how_many_are_ahead_and_enter_first_come_first_served():
    gate = Gate(1)
    heard: dict[str, list[int]] = {"b": [], "c": []}
    order = []

    def waiter(name):
        with gate.hold(on_wait=heard[name].append, poll=0.02):
            order.append(name)

    with gate.hold():
        b = threading.Thread(target=waiter, args=("b",))
        b.start()
        while gate.waiting < 1:
            time.sleep(0.005)
        c = threading.Thread(target=waiter, args=("c",))
        c.start()
        while gate.waiting < 2:
            time.sleep(0.005)
        time.sleep(0.1)  # a few polls
    b.join()
    c.join()
    assert order == ["b", "c"]
    assert heard["b"][0] == 1 and set(heard["b"]) == {1}  # the one inside
    assert heard["c"][0] == 2 and len(heard["c"]) >= 3  # the one inside and b; reported on every poll
    assert gate.inside == 0


def test_the_slot_is_released_when_the_block_raises():
    gate = Gate(1)
    with pytest.raises(ValueError), gate.hold():
        raise ValueError("boom")
    assert gate.inside == 0
    with gate.hold() as ahead:  # not blocked
        assert ahead == 0


def test_a_waiter_that_gives_up_leaves_the_queue():
    gate = Gate(1)

    class Left(Exception):
        pass

    def impatient(k):
        raise Left  # as Streamlit's StopException when the visitor closed the tab

    raised = []

    def wait_impatiently():
        try:
            with gate.hold(on_wait=impatient):
                pass
        except Left:
            raised.append(1)

    with gate.hold():
        t = threading.Thread(target=wait_impatiently)
        t.start()
        t.join(timeout=5)
        assert raised and gate.waiting == 0 and gate.inside == 1
    assert gate.inside == 0
    done = []

    def enter():
        with gate.hold():
            done.append(1)

    t = threading.Thread(target=enter)
    t.start()
    t.join(timeout=5)
    assert done  # nobody is stuck behind the one who left


def test_reentrant_in_one_thread():
    gate = Gate(1)
    with gate.hold(), gate.hold(), gate.hold():
        assert gate.inside == 1
    assert gate.inside == 0


def test_the_server_gate_leaves_a_core_free_and_fits_the_memory_sizing():
    assert 1 <= HEAVY_SLOTS <= 2 and HEAVY.slots == HEAVY_SLOTS
