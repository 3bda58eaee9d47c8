"""The worker processes of one live gloo run, supervised from this process: started, followed, torn down.

``supervise`` starts W workers on this machine (core.training.gloo_worker's entry), follows their events
to the end and always leaves no process behind; core.training.gloo calls it for a training run and for
gloo's all-reduce on given vectors.

Process hygiene. The parent never changes its own process-global state: the workers get
``OMP_NUM_THREADS=1`` through their environment, so torch starts with one thread in each. The
rendezvous port is race-free: the parent binds a socket to 127.0.0.1 port 0 and hands the
bound, listening socket to rank 0's TCPStore (``master_listen_fd``); gloo's own sockets are
bound to the loopback interface (``GLOO_SOCKET_IFNAME``). All workers share one process group,
which is killed as a whole on any failure, timeout or cancellation; a worker also exits when
its stdin closes (the parent died) or when its own deadline passes. The supervisor samples the
resident memory (RSS, and PSS where Linux reports it) of every worker and stops the run if one
exceeds ``WORKER_MEMORY_CAP``.
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
from dataclasses import dataclass
from pathlib import Path

import torch.distributed as dist

from core.machines.memory import proc_memory
from core.machines.progress import OnProgress, Progress
from core.training.gloo_worker import WORKER_ENTRY
from core.training.pair import StepRecord

ROOT = Path(__file__).resolve().parents[2]

WORKER_MEMORY_CAP = 1 << 30  # a worker whose resident memory exceeds this stops the run
STARTUP_TIMEOUT = 180.0  # seconds for every worker to import torch and join the group
STEP_TIMEOUT = 60.0  # seconds without progress before the run is called stuck
POLL = 0.05


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


@dataclass(frozen=True, kw_only=True)
class WorkerProgress(Progress):
    """A live run's Progress: ``what`` is the phase ("starting", "training" or "finishing"); ``done``
    counts the workers that joined while starting, then the steps recorded."""

    pids: tuple[int, ...]
    rss_bytes: int  # resident memory of all workers now


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


def supervise(world: int, mode: str, extra: dict, *, total: int, on_progress: OnProgress | None,
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
