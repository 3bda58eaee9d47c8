"""What the Many devices page computes and keeps for every visitor: all-reduce order studies, emulated
trainings, and the rates its wait estimates are made from.

The numerics are ``core.training.emulate``'s; this module runs them through the named caches of
``core.crowd.bytecache`` (finished work is deterministic for its key, so it is never stale) and times
them, so the page makes one call per result and computes nothing itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from core.crowd.bytecache import EMULATIONS, ORDER_STUDIES, PUNCH_ALLREDUCE, STUDY_RATES
from core.kernels.collectives import Comparison
from core.machines.progress import OnProgress, Progress, report
from core.training.emulate import EmulatedRun, emulate_run, order_study
from core.training.gloo import DataParallelResult

PUNCH_RANKS = 8  # the first screen's all-reduce: 8 ranks, every model (about 0.3 s once the data exist)
RunKey = tuple[int, str, int]  # (ranks, all-reduce model, steps): one emulated training


@dataclass(frozen=True, kw_only=True)
class TimedComparison:
    """One value of k summed in every all-reduce order, and the seconds it took here: the unit of time the
    order study's estimate counts in."""

    comparison: Comparison
    seconds: float


@dataclass(frozen=True, kw_only=True)
class LiveTime:
    """A live gloo run's measured times: the next visitor's estimate of the wait."""

    world_size: int
    steps: int
    startup_s: float
    wall_s: float


def _timed_punch() -> TimedComparison:
    started = time.monotonic()
    c = order_study((PUNCH_RANKS,))[0]
    return TimedComparison(comparison=c, seconds=time.monotonic() - started)


def punch_allreduce() -> TimedComparison:
    """The first screen's 8-rank comparison, shared by every visitor (computed once an hour at most)."""
    return PUNCH_ALLREDUCE.get_or_compute(PUNCH_RANKS, _timed_punch)


def finished_order_study(ks: tuple[int, ...]) -> tuple[Comparison, ...] | None:
    """The order study for these k if some visitor has computed it (None otherwise: it waits for a button)."""
    return ORDER_STUDIES.get(ks)


def run_order_study(ks: tuple[int, ...], on_progress: OnProgress | None = None) -> tuple[Comparison, ...]:
    """Sum every model's gradients for each k, keep the study for every visitor and the time per value of k
    for the next estimate."""
    def compute() -> tuple[Comparison, ...]:
        started = time.monotonic()
        study = order_study(ks, on_progress=on_progress)
        record_study_time(len(ks), time.monotonic() - started)
        return study

    return ORDER_STUDIES.get_or_compute(ks, compute)


def record_study_time(ks: int, seconds: float) -> None:
    """Keep the order study's measured time per value of k: the next estimate's unit."""
    if ks:
        STUDY_RATES.put("per k", seconds / ks)


def seconds_per_k(punch_seconds: float) -> float:
    """Seconds per value of k: the last full study's rate on this server, else the first screen's one k
    (each k sums the same number of gradient elements, so each takes about as long)."""
    rate = STUDY_RATES.get("per k")
    return rate if rate is not None else punch_seconds


def record_live_time(r: DataParallelResult) -> None:
    """Keep the last live run's measured times: the next visitor's estimate."""
    STUDY_RATES.put("live", LiveTime(world_size=r.world_size, steps=r.steps, startup_s=r.startup_s, wall_s=r.wall_s))


def last_live_time() -> LiveTime | None:
    return STUDY_RATES.get("live")


def missing_emulations(keys: list[RunKey]) -> list[RunKey]:
    """The (ranks, model, steps) runs no visitor has emulated yet (or whose result has been evicted)."""
    return [key for key in keys if key not in EMULATIONS]


def finished_emulations(keys: list[RunKey]) -> list[EmulatedRun]:
    """The emulated runs kept for these keys, in their order (those not computed left out)."""
    return [r for r in (EMULATIONS.get(key) for key in keys) if r is not None]


def emulate_missing(missing: list[RunKey], on_progress: OnProgress | None = None) -> None:
    """Emulate each (ranks, model, steps) run in turn, each kept for every visitor; ``on_progress`` counts
    in runs (a run part done counts as that part) and names the current run's step."""
    for i, (k, m, n) in enumerate(missing):
        def step(p: Progress, i: int = i, k: int = k) -> None:
            report(on_progress, done=i + p.fraction, total=len(missing),
                   what=f"{k:,} devices: step {p.done:,} of {p.total:,}")

        EMULATIONS.get_or_compute((k, m, n), lambda k=k, m=m, n=n, step=step: emulate_run(k, m, n, on_progress=step))
