"""core.training.emulate's page-facing helpers: which k the order study covers, the emulation
settings' keys, every pair of runs compared by their weight digests, and the run that parts first.
Built from hand-made runs: no process group, no training."""

from __future__ import annotations

import dataclasses

import core.training.data_parallel as dp
import core.training.emulate as emulate
from core.training.seeds import DivergenceSummary


def _summary(rel: int | None) -> DivergenceSummary:
    return DivergenceSummary(first_difference=1 if rel else None, first_rel_1pct=rel, fit=None)


def _run(ranks: int, digests: tuple[str, ...], rel: int | None = None) -> emulate.EmulatedRun:
    return emulate.EmulatedRun(
        ranks=ranks, model="ring_gloo", steps=len(digests), records=[], summary=_summary(rel), digests=digests
    )


def test_study_ks_stop_at_the_largest():
    assert emulate.study_ks(16) == tuple(range(2, 17))
    assert emulate.study_ks(1024) == emulate.STUDY_KS
    assert emulate.study_ks(100)[-1] == 96 and all(k <= 100 for k in emulate.study_ks(100))
    assert emulate.study_ks(1) == ()


def test_emulation_keys_sorted_by_devices():
    s = emulate.EmulationSettings("tree_nccl", (1024, 8, 64), 30)
    assert s.keys() == [(8, "tree_nccl", 30), (64, "tree_nccl", 30), (1024, "tree_nccl", 30)]
    assert emulate.EmulationSettings(ks=()).keys() == []
    assert emulate.EmulationSettings().ks == dp.EMULATED_KS and hash(s) == hash(dataclasses.replace(s))


def test_run_pairs_compare_every_pair_and_the_live_run():
    a, b, c = _run(8, ("x", "y", "z")), _run(64, ("x", "q", "z")), _run(1024, ("x", "y", "z"))
    pairs = emulate.run_pairs([a, b, c], 3)
    assert pairs == [emulate.RunPair("8 devices", "64 devices", 2, 3),
                     emulate.RunPair("8 devices", "1,024 devices", None, 3),
                     emulate.RunPair("64 devices", "1,024 devices", 2, 3)]
    assert tuple(pairs[0]) == ("8 devices", "64 devices", 2, 3)  # unpacks as the view's rows do
    live = dataclasses.make_dataclass("Live", ["world_size", "steps", "digests"])(2, 3, ("w", "y", "z"))
    with_live = emulate.run_pairs([a, b], 3, live)
    assert with_live[-2:] == [emulate.RunPair("2 live workers (gloo)", "8 devices", 1, 3),
                              emulate.RunPair("2 live workers (gloo)", "64 devices", 1, 3)]
    assert emulate.run_pairs([a, b], 4, live) == emulate.run_pairs([a, b], 4)  # another number of steps: not compared
    assert emulate.run_pairs([a], 3) == []


def test_earliest_apart_is_the_first_run_past_one_percent():
    runs = [_run(8, ("x",), None), _run(64, ("x",), 40), _run(1024, ("x",), 12)]
    assert emulate.earliest_apart(runs).ranks == 1024
    assert emulate.earliest_apart(runs[:1]) is None and emulate.earliest_apart([]) is None
