"""Data-parallel training on a real torch.distributed process group (gloo), supervised from this process.

``run_data_parallel`` starts W worker processes on this machine (core.training.gloo_worker: each
trains a replica on its shard, gloo all-reduces the gradients, rank 0 also trains one process on
the whole batch) and follows them to the end; ``gloo_allreduce`` runs gloo's real all-reduce on
given vectors, one process per rank.

Process hygiene. The parent never changes its own process-global state: the workers get
``OMP_NUM_THREADS=1`` through their environment, so torch starts with one thread in each. The
rendezvous port is race-free: the parent binds a socket to 127.0.0.1 port 0 and hands the
bound, listening socket to rank 0's TCPStore (``master_listen_fd``); gloo's own sockets are
bound to the loopback interface (``GLOO_SOCKET_IFNAME``). All workers share one process group,
which is killed as a whole on any failure, timeout or cancellation; a worker also exits when
its stdin closes (the parent died) or when its own deadline passes. The supervisor samples the
resident memory (RSS, and PSS where Linux reports it) of every worker and stops the run if one
exceeds ``WORKER_MEMORY_CAP``, and starts no run the free memory (core.machines.memory) cannot
hold. At most one run at a time per server process.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch.distributed as dist

from core.machines.memory import memory_room, proc_memory
from core.machines.progress import OnProgress, Progress
from core.training.data_parallel import DP_SETTINGS, MAX_WORLD_SIZE, check_settings
from core.training.gloo_worker import WORKER_ENTRY
from core.training.mlp import TrainSettings
from core.training.pair import StepRecord
from core.training.seeds import DivergenceSummary, summarize

ROOT = Path(__file__).resolve().parents[2]

WORKER_MEMORY_CAP = 1 << 30  # a worker whose resident memory exceeds this stops the run
WORKER_MEMORY_ASSUMED = 512 << 20  # per worker, until this server has measured a run
STARTUP_TIMEOUT = 180.0  # seconds for every worker to import torch and join the group
STEP_TIMEOUT = 60.0  # seconds without progress before the run is called stuck
POLL = 0.05

GLOO_ALGORITHM = (
    "gloo's ring all-reduce: torch's ProcessGroupGloo calls gloo::allreduce without choosing an algorithm "
    "(torch/csrc/distributed/c10d/ProcessGroupGlooDetail.hpp, AsyncAllreduceWork), and gloo runs its ring for "
    "that case (gloo/allreduce.cc); the ring model reproduces its results bit for bit"
)

_RUN_LOCK = threading.Lock()  # one live run at a time in this server process
_MEASURED_WORKER_PEAK: list[int] = []  # the largest per-worker RSS measured by a run in this process


@dataclass(frozen=True, kw_only=True)
class Launch:
    """How one run's workers are started and watched: seconds for all of them to join the group, seconds
    without progress before the run is called stuck, seconds for the whole run (None: the two timeouts
    plus 2 s a step), the Python that runs them, and ``fault`` (tests only, see run_data_parallel)."""

    startup_timeout: float = STARTUP_TIMEOUT
    step_timeout: float = STEP_TIMEOUT
    timeout: float | None = None
    python: str = sys.executable
    fault: dict | None = None


class DataParallelError(RuntimeError):
    """A run could not be started or did not finish; the message says why, in plain words."""

    def __init__(self, message: str, pids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.pids = pids


class Busy(DataParallelError):
    """Another run holds the process group slot of this server."""


class NoRoom(DataParallelError):
    """Not enough free memory for the workers."""


@dataclass(frozen=True, kw_only=True)
class WorkerProgress(Progress):
    """A live run's Progress: ``what`` is the phase ("starting", "training" or "finishing"); ``done``
    counts the workers that joined while starting, then the steps recorded."""

    pids: tuple[int, ...]
    rss_bytes: int  # resident memory of all workers now


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


def _loopback_interface() -> str | None:
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        return None
    for cand in ("lo", "lo0"):
        if cand in names:
            return cand
    return next((n for n in names if n.startswith("lo")), None)


_DROPPED_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
                "PMI_RANK", "PMI_SIZE", "TORCHELASTIC_RUN_ID", "GLOO_DEVICE_TRANSPORT")


def _worker_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV and not k.startswith("TORCHELASTIC_")}
    lo = _loopback_interface()
    if lo is None:
        raise DataParallelError("This machine has no loopback network interface, so the workers cannot talk "
                                "to each other on 127.0.0.1 only.")
    env.update({
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "GLOO_SOCKET_IFNAME": lo, "PYTHONUNBUFFERED": "1", "TORCH_CPP_LOG_LEVEL": "ERROR",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]),
    })
    return env


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


class _Group:
    """The worker processes of one run: started together, killed together."""

    def __init__(self, world: int, cfgs: list[dict], listen: socket.socket, python: str, env: dict,
                 errdir: Path) -> None:
        self.world = world
        self.procs: list[subprocess.Popen] = []
        self.pgid: int | None = None
        self.errfiles = [open(errdir / f"rank{r}.err", "w+b") for r in range(world)]  # noqa: SIM115
        self.events: queue.Queue = queue.Queue()
        self._readers: list[threading.Thread] = []
        try:
            for r, cfg in enumerate(cfgs):
                kwargs: dict = {"process_group": 0 if self.pgid is None else self.pgid}
                if r == 0:
                    kwargs["pass_fds"] = (listen.fileno(),)
                p = subprocess.Popen(
                    [python, "-c", WORKER_ENTRY, json.dumps(cfg)],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.errfiles[r], cwd=str(ROOT), env=env,
                    close_fds=True, **kwargs)
                self.procs.append(p)
                if self.pgid is None:
                    self.pgid = p.pid
                reader = threading.Thread(target=self._read, args=(r, p), daemon=True, name=f"dp-reader-{r}")
                reader.start()
                self._readers.append(reader)
        except OSError as err:
            self.kill()
            raise DataParallelError(f"The worker processes could not be started: {err.strerror or err}. "
                                    "Try fewer workers, or run scripts/data_parallel.py on a machine with "
                                    "room for more processes.", self.pids) from None

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.procs)

    def _read(self, rank: int, p: subprocess.Popen) -> None:
        with contextlib.suppress(Exception):
            for raw in p.stdout:
                line = raw.decode("utf-8", "replace").strip()
                if line.startswith("{"):
                    with contextlib.suppress(json.JSONDecodeError):
                        self.events.put((rank, json.loads(line)))
        self.events.put((rank, None))

    def stderr_tail(self, rank: int) -> str:
        f = self.errfiles[rank]
        with contextlib.suppress(OSError):
            f.flush()
            f.seek(0)
            lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
            return lines[-1][:300] if lines else ""
        return ""

    def memory(self) -> tuple[dict[int, int], int | None]:
        """({rank: resident bytes} of the live workers, their PSS sum or None where /proc has none)."""
        rss, pss, have_pss = {}, 0, True
        for r, p in enumerate(self.procs):
            if p.poll() is None:
                rss[r], s = proc_memory(p.pid)
                if s is None:
                    have_pss = False
                else:
                    pss += s
        return rss, (pss if have_pss and rss else None)

    def kill(self) -> None:
        """SIGKILL the whole process group (and any worker outside it), then reap every worker."""
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signal.SIGKILL)
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
        self.close()

    def close(self, grace: float = 30.0) -> None:
        """Close the workers' stdin (their watchdogs exit), reap them; kill any still there after ``grace`` s."""
        deadline = time.monotonic() + grace
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.stdin.close()
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        if any(p.poll() is None for p in self.procs):
            if self.pgid is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self.pgid, signal.SIGKILL)
            for p in self.procs:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=10)
        for t in self._readers:
            t.join(timeout=5)
        for p in self.procs:
            with contextlib.suppress(Exception):
                p.stdout.close()
        for f in self.errfiles:
            with contextlib.suppress(Exception):
                f.close()


def _listening_socket() -> socket.socket:
    """A TCP socket bound to 127.0.0.1 on a free port (port 0: the kernel picks one), listening."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        s.listen(128)
    except OSError as err:
        s.close()
        raise DataParallelError(f"No local port could be opened for the workers' rendezvous: {err}.") from None
    return s


def _check_backend() -> None:
    if not dist.is_available() or not dist.is_gloo_available():
        raise DataParallelError("This torch build has no torch.distributed gloo backend, so no process group "
                                "can be started here.")


def _supervise(world: int, mode: str, extra: dict, *, total: int, on_progress: OnProgress | None,
               launch: Launch) -> dict:
    """Start the workers, follow them to the end, and always leave no process behind."""
    _check_backend()
    env = _worker_env()
    deadline_s = launch.timeout
    if deadline_s is None:
        deadline_s = launch.startup_timeout + launch.step_timeout + 2.0 * total
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dp-") as tmp:
        listen = _listening_socket()
        port = listen.getsockname()[1]
        base = {"mode": mode, "world": world, "port": port, "op_timeout": launch.step_timeout,
                "deadline": time.time() + deadline_s + 30.0, "fault": launch.fault, **extra}
        cfgs = [{**base, "rank": r, "listen_fd": listen.fileno() if r == 0 else None} for r in range(world)]
        try:
            group = _Group(world, cfgs, listen, launch.python, env, Path(tmp))
        finally:
            listen.close()  # rank 0 holds its own copy; the parent no longer needs the port
        out = {"records": [], "digests": [], "ready": {}, "done": {}, "peak_rss": 0, "peak_pss": None,
               "pids": group.pids}
        try:
            _follow(group, out, total=total, on_progress=on_progress, launch=launch, started=started,
                    deadline_s=deadline_s)
        except BaseException:
            group.kill()
            raise
        group.close()
        bad = [(r, p.returncode) for r, p in enumerate(group.procs) if p.returncode != 0]
        if bad:
            r, code = bad[0]
            raise DataParallelError(f"Worker {r} ended with exit code {code}. {group.stderr_tail(r)}".strip(),
                                    group.pids)
        out["wall_s"] = time.monotonic() - started
        return out


class _Watch:
    """What following a run keeps besides ``out``: closed event streams, last progress, last memory reading."""

    def __init__(self, group: _Group, out: dict, total: int, on_progress: OnProgress | None, started: float):
        self.group, self.out, self.total, self.on_progress, self.started = group, out, total, on_progress, started
        self.eof: set[int] = set()
        self.last_progress, self.last_sample, self.rss_now = time.monotonic(), 0.0, 0

    def report(self, phase: str, done: int, of: int) -> None:
        if self.on_progress is not None:
            self.on_progress(WorkerProgress(what=phase, done=done, total=of, pids=self.group.pids,
                                            rss_bytes=self.rss_now))

    def sample_memory(self) -> None:
        """Read the workers' memory (at most every 0.1 s) into the peaks; stop a worker over the cap."""
        now = time.monotonic()
        if now - self.last_sample < 0.1:
            return
        self.last_sample = now
        per_worker, pss = self.group.memory()
        rss = sum(per_worker.values())
        self.rss_now = rss or self.rss_now  # keep the last reading once the workers have exited
        self.out["peak_rss"] = max(self.out["peak_rss"], rss)
        if pss is not None:
            self.out["peak_pss"] = max(self.out["peak_pss"] or 0, pss)
        over = [r for r, b in per_worker.items() if b > WORKER_MEMORY_CAP]
        if over:
            raise DataParallelError(f"Worker {over[0]} used more than {WORKER_MEMORY_CAP / 2**20:,.0f} MB of "
                                    "memory, so the run was stopped.", self.group.pids)

    def take_events(self) -> None:
        """The events that arrived (the first waited for ``POLL`` s): a stream closed (None), ready, step, done."""
        out, world, arrived = self.out, self.group.world, []
        with contextlib.suppress(queue.Empty):
            arrived.append(self.group.events.get(timeout=POLL))
            while True:
                arrived.append(self.group.events.get_nowait())
        for rank, ev in arrived:
            if ev is None:
                self.eof.add(rank)
                continue
            kind = ev.get("event")
            if kind in ("ready", "step", "done"):
                self.last_progress = time.monotonic()
            if kind == "ready":
                out["ready"][rank] = ev
                if len(out["ready"]) == world:
                    out["startup_s"] = time.monotonic() - self.started
                self.report("starting", len(out["ready"]), world)
            elif kind == "step":
                out["records"].append(StepRecord(**ev["record"]))
                out["digests"].append(str(ev.get("digest", "")))
                if len(out["records"]) % 5 == 0 or len(out["records"]) == self.total:
                    self.report("training", len(out["records"]), self.total)
            elif kind == "done":
                out["done"][rank] = ev


def _follow(group: _Group, out: dict, *, total: int, on_progress: OnProgress | None, launch: Launch,
            started: float, deadline_s: float) -> None:
    """Read the workers' events into ``out`` until every worker is done, reporting progress and sampling
    memory; raise DataParallelError when a worker fails or uses too much memory, or a timeout passes."""
    world, startup_timeout, step_timeout = group.world, launch.startup_timeout, launch.step_timeout
    watch = _Watch(group, out, total, on_progress, started)
    watch.report("starting", 0, world)
    while len(out["done"]) < world or len(watch.eof) < world:
        watch.sample_memory()
        watch.take_events()
        failed = [(r, code) for r, code in ((r, p.poll()) for r, p in enumerate(group.procs))
                  if code not in (None, 0) or (code == 0 and r not in out["done"] and r in watch.eof)]
        if failed:
            raise DataParallelError(" ".join(
                f"Worker {r} stopped (exit code {code}) before the run finished. {group.stderr_tail(r)}".strip()
                for r, code in failed), group.pids)
        now = time.monotonic()
        if len(out["ready"]) < world and now - started > startup_timeout:
            raise DataParallelError(f"The workers did not all start within {startup_timeout:.0f} s "
                                    f"({len(out['ready'])} of {world} joined the group); the machine may be "
                                    "too busy.", group.pids)
        if len(out["ready"]) == world and now - watch.last_progress > step_timeout:
            raise DataParallelError(f"No worker made progress for {step_timeout:.0f} s, so the run was stopped.",
                                    group.pids)
        if now - started > deadline_s:
            raise DataParallelError(f"The run took longer than {deadline_s:.0f} s and was stopped.", group.pids)
    watch.report("finishing", total, total)


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
        out = _supervise(world_size, "train", cfg, total=steps, on_progress=on_progress, launch=launch)
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
        _supervise(world, "probe", {"inputs": str(inputs), "outdir": tmp}, total=1, on_progress=None, launch=launch)
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
