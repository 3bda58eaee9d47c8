"""The count of page runs in progress and the CPU time one takes, from which a crowd's wait is estimated."""

from __future__ import annotations

import threading
import time

import pytest

from core.crowd.arrivals import Arrivals


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_run_sees_the_runs_ahead_and_gives_its_place_back_however_it_ends():
    arrivals = Arrivals()
    with arrivals.run() as first:
        assert first.ahead == 0 and first.wait_s == 0.0 and first.measured_runs == 0
        with arrivals.run() as second:
            assert second.ahead == 1 and arrivals.running == 2
    assert arrivals.running == 0
    with pytest.raises(RuntimeError), arrivals.run():
        raise RuntimeError("a rerun or a stop raises through the run")
    assert arrivals.running == 0 and arrivals.snapshot().measured_runs == 3


def test_the_estimate_is_the_runs_ahead_times_the_median_cpu_of_a_run():
    # recent_s=0: the wall-time rule (the next test) would take over on a busy machine, where wall > CPU time
    arrivals = Arrivals(window=5, recent_s=0.0)
    for seconds in (0.02, 0.02, 0.02, 0.02):
        with arrivals.run():
            _spin(seconds)
    with arrivals.run():
        _spin(0.3)  # one long computation does not make every later estimate long
    crowd = arrivals.snapshot()
    assert 0.02 <= crowd.cpu_per_run_s < 0.1 and crowd.measured_runs == 5
    with arrivals.run(), arrivals.run(), arrivals.run() as third:
        assert third.ahead == 2 and third.wait_s == pytest.approx(2 * crowd.cpu_per_run_s)


def test_with_runs_ahead_what_the_runs_just_ended_took_counts_too():
    """A crowd's runs wait for the interpreter: their wall time, not their CPU time, is what a newcomer waits."""
    arrivals = Arrivals(recent_s=60)
    with arrivals.run():
        time.sleep(0.3)  # a run that waited, holding no CPU
    alone = arrivals.snapshot()
    assert alone.recent_wall_s >= 0.3 and alone.wait_s == 0.0  # nobody ahead: no wait
    with arrivals.run(), arrivals.run() as second:
        assert second.ahead == 1 and second.wait_s >= 0.3
    assert Arrivals(recent_s=0.0).snapshot().recent_wall_s == 0.0


def test_cpu_time_not_waiting_time_is_what_a_run_costs():
    """A run that sleeps (waits on a lock, a slot, the network) holds no CPU, and is counted as cheap."""
    arrivals = Arrivals()
    with arrivals.run():
        time.sleep(0.2)
    assert arrivals.snapshot().cpu_per_run_s < 0.1


def test_many_threads_leave_the_count_at_zero():
    arrivals, seen = Arrivals(), []

    def visit():
        for _ in range(200):
            with arrivals.run() as crowd:
                seen.append(crowd.ahead)

    threads = [threading.Thread(target=visit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert arrivals.running == 0 and max(seen) <= 7 and min(seen) >= 0
    assert arrivals.snapshot().measured_runs == 64  # the window's length


def test_a_window_holds_at_least_one_run():
    with pytest.raises(ValueError):
        Arrivals(window=0)
