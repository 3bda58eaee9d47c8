"""core.crowd.sharedrun: one run per preset for the whole room, each session's view bit for bit its own run."""

from __future__ import annotations

import threading
from dataclasses import replace

import numpy as np
import pytest

from core.crowd.bytecache import GRIDS, SHARED_RUNS
from core.crowd.runner import current_run
from core.crowd.sharedrun import PRESET_SETTINGS, RunView, SharedRun, run_bytes, shared_run
from core.training.mlp import MAX_STEPS, PRESETS, TrainSettings
from core.training.pair import PairedRun

PRESET = TrainSettings()  # the talk's scenario: "Hidden units reordered (SGD, lr 0.5)"


def bits(records) -> list[tuple]:
    return [(r.step, r.loss_a_bits, r.loss_b_bits, r.differing_bits, r.param_distance) for r in records]


@pytest.fixture(autouse=True)
def empty_caches():
    SHARED_RUNS.clear()
    GRIDS.clear()
    yield
    SHARED_RUNS.clear()
    GRIDS.clear()


@pytest.fixture(scope="module")
def clean() -> list:
    """The preset's first 60 steps, from a pair of its own (what each session computed before)."""
    return PairedRun(PRESET).run(60)


def test_two_sessions_of_a_preset_share_one_computation(clean):
    one, two = {}, {}
    a, b = current_run(one, "td_run", PRESET), current_run(two, "td_run", PRESET)
    assert a is not b and a.shared is b.shared and PRESET in PRESET_SETTINGS
    a.request(30)
    a.advance_requested(30)
    assert a.done == 30 and b.done == 0 and a.shared.computed == 30
    b.request(20)
    assert b.advance_requested(20) == clean[:20]  # read, not computed: the run is still at 30
    assert a.shared.computed == 30 and b.ahead == 10 and len(a.shared.computed_by) == 1
    b.request(20)
    b.advance_requested(20)  # 10 read, 10 computed
    assert a.shared.computed == 40 and bits(b.records) == bits(clean[:40]) and bits(a.records) == bits(clean[:30])


def test_a_changed_setting_gets_a_run_of_its_own():
    preset = current_run({}, "td_run", PRESET)
    for changed in (replace(PRESET, lr=0.2), replace(PRESET, steps=40), replace(PRESET, seed=1)):
        assert changed not in PRESET_SETTINGS
        own, other = current_run({}, "td_run", changed), current_run({}, "td_run", changed)
        assert own.shared is not preset.shared and own.shared is not other.shared
        assert SHARED_RUNS.get(changed) is None and not own.for_room  # kept by its session's view only
    assert SHARED_RUNS.get(PRESET) is preset.shared and preset.for_room
    # every preset is shared, each by its own run
    runs = {shared_run(p.settings) for p in PRESETS.values()}
    assert len(runs) == len({p.settings for p in PRESETS.values()})


def test_a_view_is_bit_identical_to_a_sessions_own_run(clean):
    view = RunView(shared_run(PRESET))
    assert bits(view.run(60, chunk=7)) == bits(clean) and view.done == 60
    assert bits(view.records) == bits(clean)
    stepped = RunView(shared_run(PRESET))  # through every way of moving: step, iteration, requests
    got = [stepped.step()]
    it = iter(stepped)
    got += [next(it) for _ in range(4)]
    stepped.request(10)
    got += stepped.advance_requested(3) + stepped.advance_requested(100)
    assert bits(got) == bits(clean[:15]) and stepped.requested == 0


def test_sessions_playing_at_once_compute_each_step_once_and_all_see_the_same_records(clean):
    """Five sessions' script runs press Play together: each step is computed once, every view gets the clean bits."""
    views = [current_run({}, "td_run", PRESET) for _ in range(5)]
    shared = views[0].shared
    calls = []
    real = shared.pair.advance

    def counting(steps, timeout=None):
        calls.append(steps)
        return real(steps, timeout)

    shared.pair.advance = counting
    start = threading.Barrier(len(views))
    errors = []

    def play(view: RunView) -> None:
        try:
            start.wait()
            view.request(60)
            while view.requested:
                view.advance_requested(10)
        except BaseException as err:  # reported below, in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=play, args=(v,)) for v in views]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sum(calls) == 60 == shared.computed  # every step computed once, whoever computed it
    for v in views:
        assert v.done == 60 and bits(v.records) == bits(clean)


def test_the_grid_at_a_views_step_is_that_of_a_pair_at_that_step():
    """A session paused behind the room's run draws the boundaries of its own step, not of the run's."""
    ahead, behind = RunView(shared_run(PRESET)), RunView(shared_run(PRESET))
    ahead.run(25)
    behind.run(10)
    recs, grid = behind.snapshot(20)
    own = PairedRun(PRESET)
    own.run(10)
    expected = own.decision_grid(20)
    assert len(recs) == 10 and all(np.array_equal(g, e) for g, e in zip(grid, expected, strict=True))
    recs, grid = ahead.snapshot(20)  # at the run's own step: from the run itself
    own.run(15)
    assert all(np.array_equal(g, e) for g, e in zip(grid, own.decision_grid(20), strict=True))
    fresh = RunView(shared_run(PRESET))
    zero = PairedRun(PRESET).decision_grid(20)
    assert fresh.snapshot(20)[0] == [] and all(np.array_equal(g, e)
                                                for g, e in zip(fresh.snapshot(20)[1], zero, strict=True))
    assert (PRESET, 10, 20) in GRIDS  # once per (run, step, resolution): kept for every viewer
    assert RunView(shared_run(PRESET)).run(10) and behind.snapshot(20)[1] is GRIDS.get((PRESET, 10, 20))


def test_reset_and_pause_keep_the_run():
    state: dict = {}
    view = current_run(state, "td_run", PRESET)
    view.run(12)
    view.request_to_end()
    view.cancel_requests()
    assert view.requested == 0
    again = current_run(state, "td_run", PRESET, fresh=True)
    assert again is not view and again.done == 0 and again.shared is view.shared  # nothing computed again
    assert again.advance(12) == view.records
    private = current_run(state, "td_run", replace(PRESET, lr=0.3))
    private.run(5)
    reset = current_run(state, "td_run", replace(PRESET, lr=0.3), fresh=True)
    assert reset.shared is private.shared and reset.done == 0 and private.shared.computed == 5


def test_a_run_that_stopped_at_an_error_is_not_handed_to_the_next_viewer():
    view = RunView(shared_run(PRESET))

    def fail(steps, timeout=None):
        raise FloatingPointError("a step failed")

    view.shared.pair.advance = fail
    with pytest.raises(FloatingPointError):
        view.advance(1)
    assert view.shared.broken is not None and SHARED_RUNS.get(PRESET) is None
    after = shared_run(PRESET)
    assert after is not view.shared and RunView(after).advance(2)[-1].step == 2
    assert current_run({"td_run": view}, "td_run", PRESET, fresh=True).shared is after  # a reset leaves it too


def test_shared_runs_are_bounded_in_entries_and_bytes():
    assert run_bytes(replace(PRESET, steps=MAX_STEPS)) <= SHARED_RUNS.max_entry
    assert SHARED_RUNS.max_entries >= len(PRESET_SETTINGS)  # every preset can stay shared at once
    assert len(PRESET_SETTINGS) * run_bytes(PRESET) <= SHARED_RUNS.capacity
    for p in PRESETS.values():
        shared_run(p.settings)
    assert len(SHARED_RUNS) == len(PRESET_SETTINGS) and SHARED_RUNS.nbytes <= SHARED_RUNS.capacity
    assert isinstance(SHARED_RUNS.get(PRESET), SharedRun) and SHARED_RUNS.get(PRESET).nbytes == run_bytes(PRESET)
