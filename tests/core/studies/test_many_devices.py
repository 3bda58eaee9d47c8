"""core.studies.many_devices: the Many devices page's kept work and the rates its estimates use."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from core.crowd.bytecache import EMULATIONS, ORDER_STUDIES, STUDY_RATES
from core.studies.many_devices import (
    PUNCH_RANKS,
    LiveTime,
    emulate_missing,
    finished_emulations,
    finished_order_study,
    last_live_time,
    missing_emulations,
    punch_allreduce,
    record_live_time,
    record_study_time,
    run_order_study,
    seconds_per_k,
)
from core.training.emulate import emulate_run, order_study


@pytest.fixture
def fresh_rates():
    saved = {k: STUDY_RATES.get(k) for k in ("per k", "live")}
    STUDY_RATES.clear()
    yield
    STUDY_RATES.clear()
    for k, v in saved.items():
        if v is not None:
            STUDY_RATES.put(k, v)


def test_the_rate_per_k_is_the_last_studys_else_the_first_screens(fresh_rates):
    assert seconds_per_k(0.7) == 0.7
    record_study_time(0, 5.0)  # nothing studied: nothing kept
    assert seconds_per_k(0.7) == 0.7
    record_study_time(28, 14.0)
    assert seconds_per_k(0.7) == 0.5


def test_a_live_runs_times_are_kept_for_the_next_estimate(fresh_rates):
    assert last_live_time() is None
    record_live_time(SimpleNamespace(world_size=2, steps=10, startup_s=3.5, wall_s=9.0))
    assert last_live_time() == LiveTime(world_size=2, steps=10, startup_s=3.5, wall_s=9.0)


def test_the_first_screens_comparison_is_the_8_rank_study_and_timed():
    t = punch_allreduce()
    assert t.comparison == order_study((PUNCH_RANKS,))[0] and t.seconds > 0
    assert punch_allreduce() is t  # kept for every visitor


def test_an_order_study_is_kept_with_its_rate(fresh_rates):
    ks = (2, 3)
    ORDER_STUDIES.discard(ks)
    assert finished_order_study(ks) is None
    seen = []
    study = run_order_study(ks, seen.append)
    assert study == order_study(ks) and [p.done for p in seen] == [1, 2]
    assert finished_order_study(ks) is study and seconds_per_k(99.0) < 99.0


def test_emulations_are_run_once_in_order_and_reported_in_runs():
    keys = [(2, "ring_gloo", 10), (4, "tree_nccl", 10)]
    for k in keys:
        EMULATIONS.discard(k)
    assert missing_emulations(keys) == keys and finished_emulations(keys) == []
    seen = []
    emulate_missing(keys, seen.append)
    assert missing_emulations(keys) == [] and seen and seen[-1].fraction == 1.0
    assert all(0 <= p.fraction <= 1 for p in seen) and [p.fraction for p in seen] == sorted(p.fraction for p in seen)
    assert seen[-1].what == "4 devices: step 10 of 10"
    runs = finished_emulations(keys)
    assert [(r.ranks, r.model, r.steps) for r in runs] == keys
    assert runs[0].summary == emulate_run(2, "ring_gloo", 10).summary  # the same numbers as one run alone
