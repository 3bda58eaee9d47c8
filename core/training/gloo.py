"""Data-parallel training on a real torch.distributed process group (gloo), run from this process.

``run_data_parallel`` starts W worker processes on this machine (core.training.gloo_worker: each
trains a replica on its shard, gloo all-reduces the gradients, rank 0 also trains one process on
the whole batch) and follows them to the end; ``gloo_allreduce`` runs gloo's real all-reduce on
given vectors, one process per rank. Both hand the workers to core.training.gloo_supervisor, which
starts them, follows them and leaves no process behind. Here: whether a run may start at all (no
run the free memory, core.machines.memory, cannot hold; at most one run at a time per server
process) and what a finished run is.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from core.machines.memory import memory_room
from core.machines.progress import OnProgress
from core.training.data_parallel import DP_SETTINGS, MAX_WORLD_SIZE, check_settings
from core.training.gloo_supervisor import STARTUP_TIMEOUT, STEP_TIMEOUT, DataParallelError, Launch, supervise
from core.training.mlp import TrainSettings
from core.training.pair import StepRecord
from core.training.seeds import DivergenceSummary, summarize

WORKER_MEMORY_ASSUMED = 512 << 20  # per worker, until this server has measured a run

GLOO_ALGORITHM = (
    "gloo's ring all-reduce: torch's ProcessGroupGloo calls gloo::allreduce without choosing an algorithm "
    "(torch/csrc/distributed/c10d/ProcessGroupGlooDetail.hpp, AsyncAllreduceWork), and gloo runs its ring for "
    "that case (gloo/allreduce.cc); the ring model reproduces its results bit for bit"
)

_RUN_LOCK = threading.Lock()  # one live run at a time in this server process
_MEASURED_WORKER_PEAK: list[int] = []  # the largest per-worker RSS measured by a run in this process


class Busy(DataParallelError):
    """Another run holds the process group slot of this server."""


class NoRoom(DataParallelError):
    """Not enough free memory for the workers."""


@dataclass(frozen=True, kw_only=True)
class DataParallelResult:
    world_size: int
    steps: int
    settings: TrainSettings
    records: list[StepRecord] = field(repr=False)
    summary: DivergenceSummary
    replicas_identical: bool
    threads_per_worker: tuple[int, ...]
    peak_rss_bytes: int  # largest sampled sum of the workers' resident memory
    peak_pss_bytes: int | None  # the same for PSS (shared pages split between processes), where Linux has it
    worker_max_rss: tuple[int, ...]  # each worker's own peak resident memory (getrusage)
    digests: tuple[str, ...] = field(repr=False)  # the replicas' weights after every step (weights_digest)
    startup_s: float
    wall_s: float
    torch_version: str
    pids: tuple[int, ...]

    def line(self) -> str:
        head = f"data-parallel (gloo, world size {self.world_size})"
        first, rel = self.summary.first_difference, self.summary.first_rel_1pct
        if first is None:
            return f"{head}: bit-identical to one process for {self.steps} steps"
        t = (f"first more than 1% apart at step {rel}" if rel is not None
             else f"never more than 1% apart within {self.steps} steps")
        return f"{head}: first differs from one process at step {first}, {t}"


def worker_memory_estimate() -> tuple[int, str]:
    """(bytes per worker, where that number comes from): measured by an earlier run here, or assumed."""
    if _MEASURED_WORKER_PEAK:
        return int(max(_MEASURED_WORKER_PEAK) * 1.25), "measured by an earlier run on this server, plus a quarter"
    return WORKER_MEMORY_ASSUMED, "assumed until a run on this server measures it"


def room_for(world_size: int) -> tuple[bool, str]:
    """Whether ``world_size`` workers fit in the free memory, and a sentence that says why."""
    per, why = worker_memory_estimate()
    need = world_size * per
    room = memory_room()
    if room.available_bytes is None:
        return True, f"{world_size} worker(s) need about {need / 2**20:,.0f} MB ({why}); {room.source}."
    ok = room.available_bytes >= need
    return ok, (f"{world_size} worker(s) need about {need / 2**20:,.0f} MB ({why}); "
                f"{room.available_bytes / 2**20:,.0f} MB free by {room.source}.")


def run_data_parallel(world_size: int, steps: int, settings: TrainSettings = DP_SETTINGS, *,
                      on_progress: OnProgress | None = None, wait: bool = True,
                      check_room: bool = True, startup_timeout: float = STARTUP_TIMEOUT,
                      step_timeout: float = STEP_TIMEOUT, timeout: float | None = None,
                      python: str = sys.executable, fault: dict | None = None) -> DataParallelResult:
    """Train with ``world_size`` gloo workers for ``steps`` steps and compare with one process.

    ``on_progress`` gets a WorkerProgress while the workers start and every few steps; it may
    raise to cancel the run (the workers are killed, the exception propagates). With
    ``wait=False`` a second concurrent call raises Busy instead of waiting its turn.
    ``fault`` (tests only) makes one rank fail: {"rank": r, "step": s, "kind": "raise"|"exit"|"hang"}.
    ``startup_timeout``, ``step_timeout``, ``timeout``, ``python`` and ``fault`` are Launch's fields; they
    are keywords of their own because this is the entry point that the page, scripts/data_parallel.py and
    the tests call with one or two of them, and they travel on as one Launch.
    """
    try:
        check_settings(settings, world_size, steps)
    except ValueError as err:
        raise DataParallelError(str(err)) from None
    if world_size > MAX_WORLD_SIZE:
        raise DataParallelError(f"A live run starts at most {MAX_WORLD_SIZE} processes.")
    if not _RUN_LOCK.acquire(blocking=wait):
        raise Busy("Another data-parallel run is in progress on this server; try again when it has finished.")
    try:
        if check_room:
            ok, why = room_for(world_size)
            if not ok:
                raise NoRoom(f"Not enough free memory for {world_size} worker processes: {why}")
        cfg = {"settings": asdict(replace(settings, steps=max(settings.steps, steps))), "steps": steps}
        launch = Launch(startup_timeout=startup_timeout, step_timeout=step_timeout, timeout=timeout,
                        python=python, fault=fault)
        out = supervise(world_size, "train", cfg, total=steps, on_progress=on_progress, launch=launch)
    finally:
        _RUN_LOCK.release()
    done = out["done"]
    peaks = tuple(int(done[r]["max_rss"]) for r in range(world_size))
    _MEASURED_WORKER_PEAK.append(max(peaks))
    del _MEASURED_WORKER_PEAK[:-1]
    records = out["records"]
    return DataParallelResult(
        world_size=world_size, steps=steps, settings=settings, records=records, summary=summarize(records),
        replicas_identical=all(done[r].get("replicas_identical", False) for r in range(world_size)),
        threads_per_worker=tuple(int(out["ready"][r]["threads"]) for r in range(world_size)),
        # no /proc to sample (not Linux): the workers' own peaks, added, bound the group's peak from above
        peak_rss_bytes=out["peak_rss"] or sum(peaks), peak_pss_bytes=out["peak_pss"], worker_max_rss=peaks,
        digests=tuple(out["digests"]),
        startup_s=out.get("startup_s", 0.0), wall_s=out["wall_s"], torch_version=out["ready"][0]["torch"],
        pids=out["pids"],
    )


def gloo_allreduce(*arrays: np.ndarray, startup_timeout: float = STARTUP_TIMEOUT,
                   step_timeout: float = STEP_TIMEOUT, python: str = sys.executable) -> list[np.ndarray]:
    """torch's real gloo all-reduce (sum) in separate processes, one process per row.

    Each array holds one float32 vector per rank (shape (ranks, elements), the same number of
    ranks for all); each is all-reduced by ``dist.all_reduce`` in turn. Returns, per array,
    every rank's result (same shape).
    """
    vs = [np.ascontiguousarray(a, dtype=np.float32) for a in arrays]
    if not vs or any(v.ndim != 2 or v.shape[1] < 1 for v in vs) or len({v.shape[0] for v in vs}) != 1:
        raise ValueError("need arrays of shape (ranks, elements), all with the same number of ranks")
    world = vs[0].shape[0]
    if not 1 <= world <= MAX_WORLD_SIZE:
        raise ValueError(f"between 1 and {MAX_WORLD_SIZE} ranks")
    with tempfile.TemporaryDirectory(prefix="dp-probe-") as tmp:
        inputs = Path(tmp) / "inputs.npz"
        np.savez(inputs, **{f"a{i:03d}": v for i, v in enumerate(vs)})
        launch = Launch(startup_timeout=startup_timeout, step_timeout=step_timeout, python=python)
        supervise(world, "probe", {"inputs": str(inputs), "outdir": tmp}, total=1, on_progress=None, launch=launch)
        per_rank = []
        for r in range(world):
            with np.load(Path(tmp) / f"rank{r}.npz") as f:
                per_rank.append([f[f"a{i:03d}"] for i in range(len(vs))])
        return [np.stack([per_rank[r][i] for r in range(world)]) for i in range(len(vs))]


@dataclass(frozen=True)
class LiveSettings:
    """A live run: ``world`` worker processes training ``steps`` steps."""

    world: int = 2
    steps: int = 100
