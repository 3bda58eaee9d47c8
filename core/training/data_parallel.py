"""Data-parallel training on a real torch.distributed process group (gloo), beside one process.

W worker processes on this machine train the Training divergence model together: every step
each rank computes the gradient of its shard of the global batch, the gradients are
all-reduced by gloo, and every rank applies the same update. Rank 0 also trains the same
model alone on the whole global batch (the one-process run), and compares the two step by
step with the same records as the Training divergence pair (``core.training.pair.StepRecord``).

What the workers do, and why it is what DistributedDataParallel does:

* shards: rank r takes examples r, r+W, r+2W, ... of each global batch (the strided split of
  ``torch.utils.data.DistributedSampler``), and its loss is the mean over its shard;
* gradients are multiplied by 1/W *before* the all-reduce, which then sums them: DDP's
  reducer does exactly this when no communication hook is set (``Reducer::
  mark_variable_ready_dense`` in torch/csrc/distributed/c10d/reducer.cpp copies
  ``grad * (1 / world_size)`` into the bucket), so the all-reduce computes the average. For W a
  power of two, multiplying by 1/W is exact, so "sum then divide" would give the same bits;
* all parameters' gradients go into one flat bucket in a fixed order (DDP buckets them too; a
  model this small fits in its first bucket) and one ``dist.all_reduce`` sums it.

Process hygiene. The parent never changes its own process-global state: the workers get
``OMP_NUM_THREADS=1`` through their environment, so torch starts with one thread in each. The
rendezvous port is race-free: the parent binds a socket to 127.0.0.1 port 0 and hands the
bound, listening socket to rank 0's TCPStore (``master_listen_fd``); gloo's own sockets are
bound to the loopback interface (``GLOO_SOCKET_IFNAME``). All workers share one process group,
which is killed as a whole on any failure, timeout or cancellation; a worker also exits when
its stdin closes (the parent died) or when its own deadline passes. The supervisor samples the
resident memory (RSS, and PSS where Linux reports it) of every worker and stops the run if one
exceeds ``WORKER_MEMORY_CAP``. At most one run at a time per server process.

The emulation (``emulate_run``) is the one-process stand-in for many devices: k shards, the
per-shard gradients computed batched (``torch.func.vmap``), combined in a collective model's
order (``core.kernels.collectives``). It is a model; the live run is the real engine.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import hashlib
import json
import os
import queue
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.func import grad, vmap

from core.kernels import collectives
from core.training.pair import (
    PARAM_NAMES,
    DivergenceSummary,
    StepRecord,
    TrainSettings,
    batch_schedule,
    forward,
    init_params,
    spirals,
    summarize,
)

ROOT = Path(__file__).resolve().parents[2]

# The run shown on the Many devices page and by scripts/data_parallel.py: the Training divergence
# model and data, with a global batch of 1,024 examples, so that 1, 2, 4 processes and 8, 64 and
# 1,024 emulated devices all split it into equal shards.
DP_SETTINGS = TrainSettings(source="none", batch=1024, n_points=2048, steps=200, lr=1.0)
WORLD_SIZES = (1, 2, 4)  # offered on the page
MAX_WORLD_SIZE = 8  # the most processes a run may start (the command line's limit too)
MAX_LIVE_STEPS = 2000
EMULATED_KS = (8, 64, 1024)
MAX_EMULATED_STEPS = 400

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


# What a worker process runs: this module's _worker_main, with the config as its one argument.
WORKER_ENTRY = "from core.training.data_parallel import _worker_main; _worker_main()"


class DataParallelError(RuntimeError):
    """A run could not be started or did not finish; the message says why, in plain words."""

    def __init__(self, message: str, pids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.pids = pids


class Busy(DataParallelError):
    """Another run holds the process group slot of this server."""


class NoRoom(DataParallelError):
    """Not enough free memory for the workers."""


# ---------------------------------------------------------------------- the training


def _loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(forward(params, xb), yb)


def _optimizer(params: dict[str, torch.Tensor], settings: TrainSettings) -> torch.optim.Optimizer:
    """The Training divergence pair's optimizer (core.training.pair), built the same way."""
    ps = [params[k] for k in PARAM_NAMES]
    if settings.optimizer == "adam":
        return torch.optim.Adam(ps, lr=settings.lr, foreach=False)
    return torch.optim.SGD(ps, lr=settings.lr, momentum=0.9, foreach=False)


class _Replica:
    """One copy of the model and its optimizer, from the pair's initial weights."""

    def __init__(self, settings: TrainSettings) -> None:
        dt = torch.float32 if settings.dtype == "float32" else torch.float64
        base = init_params(settings.hidden, settings.classes, settings.seed)
        self.params = {k: base[k].to(dt).clone().requires_grad_(True) for k in PARAM_NAMES}
        self.opt = _optimizer(self.params, settings)
        self.sizes = [self.params[k].numel() for k in PARAM_NAMES]

    def measure(self, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss and logits on a batch, with the weights as they are (nothing changes)."""
        with torch.no_grad():
            logits = forward(self.params, xb)
            return F.cross_entropy(logits, yb), logits

    def train_step(self, xb: torch.Tensor, yb: torch.Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        _loss(self.params, xb, yb).backward()
        self.opt.step()

    def local_gradient(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """The gradient of the mean loss over this batch, flattened in PARAM_NAMES order (a fresh tensor)."""
        self.opt.zero_grad(set_to_none=True)
        _loss(self.params, xb, yb).backward()
        return torch.cat([self.params[k].grad.reshape(-1) for k in PARAM_NAMES])

    def apply(self, flat: torch.Tensor) -> None:
        """Use ``flat`` as the gradient and take one optimizer step."""
        offset = 0
        for k, n in zip(PARAM_NAMES, self.sizes, strict=True):
            p = self.params[k]
            p.grad = flat[offset:offset + n].reshape(p.shape).clone()
            offset += n
        self.opt.step()

    def flat(self) -> torch.Tensor:
        return torch.cat([self.params[k].detach().reshape(-1) for k in PARAM_NAMES])


def weights_digest(flat: torch.Tensor) -> str:
    """A short fingerprint of a replica's weights (equal bits, equal digest), to compare runs step by step."""
    return hashlib.blake2b(flat.numpy().tobytes(), digest_size=8).hexdigest()


def first_divergence(a: tuple[str, ...] | list[str], b: tuple[str, ...] | list[str]) -> int | None:
    """The first step (1-based) at which two runs' weights differ, over the steps both have; None: never."""
    return next((i + 1 for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def _bits(v: float, dtype: torch.dtype) -> int:
    if dtype == torch.float64:
        return struct.unpack("<Q", struct.pack("<d", v))[0]
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _record(step: int, loss_a: torch.Tensor, loss_b: torch.Tensor, logits_a: torch.Tensor,
            logits_b: torch.Tensor, yb: torch.Tensor, fa: torch.Tensor, fb: torch.Tensor) -> StepRecord:
    """The Training divergence pair's record of one step: A is one process, B the data-parallel replica."""
    la, lb = float(loss_a), float(loss_b)
    wide = fa.dtype == torch.float64
    int_t, uint_t = (torch.int64, np.uint64) if wide else (torch.int32, np.uint32)
    xor = (fa.view(int_t) ^ fb.view(int_t)).numpy().view(uint_t)
    abs_diff = abs(la - lb)
    return StepRecord(
        step=step, loss_a=la, loss_b=lb, loss_a_bits=_bits(la, loss_a.dtype), loss_b_bits=_bits(lb, loss_b.dtype),
        abs_diff=abs_diff, rel_diff=abs_diff / abs(la) if la else (0.0 if la == lb else float("inf")),
        param_distance=float(torch.linalg.vector_norm(fa.double() - fb.double())),
        differing_bits=int(np.bitwise_count(xor).sum()), total_bits=fa.numel() * 8 * fa.element_size(),
        acc_a=float((logits_a.argmax(1) == yb).double().mean()),
        acc_b=float((logits_b.argmax(1) == yb).double().mean()),
    )


def _data(settings: TrainSettings, steps: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    x64, y = spirals(settings.n_points, settings.classes, settings.seed)
    schedule = batch_schedule(len(y), settings.batch, steps, settings.seed)
    dt = torch.float32 if settings.dtype == "float32" else torch.float64
    return torch.from_numpy(x64).to(dt), torch.from_numpy(y), schedule


def shards(idx: np.ndarray, k: int) -> list[np.ndarray]:
    """Rank r's examples of a global batch: positions r, r+k, r+2k, ... (DistributedSampler's split)."""
    return [idx[r::k] for r in range(k)]


def check_settings(settings: TrainSettings, world_size: int, steps: int, max_steps: int = MAX_LIVE_STEPS) -> None:
    """ValueError with a plain reason when a run cannot have these settings."""
    settings.validate()
    if settings.dtype != "float32":
        raise ValueError("the data-parallel runs train in float32")
    if not 1 <= world_size <= max(MAX_WORLD_SIZE, max(EMULATED_KS)):
        raise ValueError(f"the number of ranks must be between 1 and {max(EMULATED_KS):,}")
    if settings.batch % world_size:
        raise ValueError(f"the global batch of {settings.batch:,} examples does not split evenly over "
                         f"{world_size} ranks")
    if not 1 <= steps <= max_steps:
        raise ValueError(f"steps must be between 1 and {max_steps:,}")


# -------------------------------------------------------------------------- the worker


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _guard_worker(deadline: float) -> None:
    """Exit when the parent goes away (stdin closes), at the deadline, and with the parent (Linux)."""
    def stdin_watch():
        with contextlib.suppress(Exception):
            while sys.stdin.buffer.read(1):
                pass
        os._exit(70)

    def deadline_watch():
        time.sleep(max(0.0, deadline - time.time()))
        os._exit(71)

    threading.Thread(target=stdin_watch, daemon=True).start()
    threading.Thread(target=deadline_watch, daemon=True).start()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() == 1:
                os._exit(72)


def _max_rss_bytes() -> int:
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def _fault(cfg: dict, rank: int, step: int) -> None:
    f = cfg.get("fault")
    if not f or f.get("rank") != rank or f.get("step") != step:
        return
    if f.get("kind") == "hang":
        time.sleep(10**6)
    if f.get("kind") == "exit":
        os._exit(3)
    raise RuntimeError(f"injected failure at step {step}")


def _worker_main() -> None:
    """Entry point of a worker process: python -c '...; _worker_main()' CONFIG_JSON."""
    cfg = json.loads(sys.argv[1])
    rank, world = cfg["rank"], cfg["world"]
    _guard_worker(cfg["deadline"])
    try:
        timeout = datetime.timedelta(seconds=cfg["op_timeout"])
        if rank == 0:
            store = dist.TCPStore("127.0.0.1", cfg["port"], world, True, timeout,
                                  wait_for_workers=False, master_listen_fd=cfg["listen_fd"])
        else:
            store = dist.TCPStore("127.0.0.1", cfg["port"], world, False, timeout)
        _fault(cfg, rank, 0)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=timeout)
        _emit({"event": "ready", "rank": rank, "pid": os.getpid(), "threads": torch.get_num_threads(),
               "torch": torch.__version__})
        if cfg["mode"] == "probe":
            with np.load(cfg["inputs"]) as data:
                results = {}
                for name in sorted(data.files):
                    t = torch.from_numpy(np.array(data[name][rank], dtype=np.float32))
                    dist.all_reduce(t)
                    results[name] = t.numpy()
            np.savez(Path(cfg["outdir"]) / f"rank{rank}.npz", **results)
            _emit({"event": "done", "rank": rank, "max_rss": _max_rss_bytes()})
        else:
            _train_worker(cfg, rank, world, dist)
        dist.destroy_process_group()
    except Exception as err:  # reported to the parent as one line, then a clean exit code
        sys.stderr.write(f"rank {rank}: {type(err).__name__}: {err}\n")
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


def _train_worker(cfg: dict, rank: int, world: int, dist) -> None:
    settings = TrainSettings(**cfg["settings"])
    steps = cfg["steps"]
    x, y, schedule = _data(settings, steps)
    dp = _Replica(settings)
    one = _Replica(settings) if rank == 0 else None
    scale = 1.0 / world
    for t in range(steps):
        _fault(cfg, rank, t + 1)
        idx = schedule[t]
        if one is not None:
            xb, yb = x[idx], y[idx]
            loss_a, logits_a = one.measure(xb, yb)
            loss_b, logits_b = dp.measure(xb, yb)
        mine = shards(idx, world)[rank]
        grad = dp.local_gradient(x[mine], y[mine]) * scale  # DDP: grad * (1/W) into the bucket, then SUM
        dist.all_reduce(grad)
        dp.apply(grad)
        if one is not None:
            one.train_step(xb, yb)
            fb = dp.flat()
            rec = _record(t + 1, loss_a, loss_b, logits_a, logits_b, yb, one.flat(), fb)
            _emit({"event": "step", "record": asdict(rec), "digest": weights_digest(fb)})
    # every replica must hold the same weights: gather all of them on every rank and compare bits
    mine = dp.flat()
    gathered = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    same = all(torch.equal(g.view(torch.int32), mine.view(torch.int32)) for g in gathered)
    _emit({"event": "done", "rank": rank, "max_rss": _max_rss_bytes(), "replicas_identical": same})


# ---------------------------------------------------------------------- the supervisor


@dataclass(frozen=True)
class Progress:
    phase: str  # "starting", "training" or "finishing"
    done: int  # steps recorded (or workers ready while starting)
    total: int
    pids: tuple[int, ...]
    rss_bytes: int  # resident memory of all workers now


@dataclass(frozen=True)
class Room:
    available_bytes: int | None  # None: nothing here reports free memory
    source: str


@dataclass(frozen=True)
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
        t = str(rel) if rel is not None else f"never within {self.steps} steps"
        return f"{head}: first differs from one process at step {first}, more than 1% apart from step {t}"


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


def _proc_kib(path: str, field: str) -> int | None:
    """The value of a ``field:  N kB`` line of a /proc file, in bytes; None when unreadable or absent."""
    try:
        with open(path) as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith(field)), None)
    except OSError:
        return None


def _proc_memory(pid: int) -> tuple[int, int | None]:
    """(RSS, PSS or None) of a process in bytes, from /proc; (0, None) when it cannot be read."""
    rss = _proc_kib(f"/proc/{pid}/status", "VmRSS:")
    if rss is None:
        return 0, None
    return rss, _proc_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


def memory_room() -> Room:
    """Free memory for new processes: the tighter of the container's limit and the machine's MemAvailable."""
    found: list[tuple[int, str]] = []
    for limit_file, usage_file, what in (
        ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current", "the container's memory limit (cgroup v2)"),
        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes",
         "the container's memory limit (cgroup v1)"),
    ):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 1 << 60:
            found.append((max(0, int(limit) - usage), what))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append((int(line.split()[1]) * 1024, "the machine's available memory"))
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        return Room(None, "nothing on this machine reports free memory")
    avail, source = min(found)
    return Room(avail, source)


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
                rss[r], s = _proc_memory(p.pid)
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


def _supervise(world: int, mode: str, extra: dict, *, total: int, on_progress: Callable[[Progress], None] | None,
               startup_timeout: float, step_timeout: float, timeout: float | None, python: str,
               fault: dict | None) -> dict:
    """Start the workers, follow them to the end, and always leave no process behind."""
    _check_backend()
    env = _worker_env()
    deadline_s = timeout if timeout is not None else startup_timeout + step_timeout + 2.0 * total
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dp-") as tmp:
        listen = _listening_socket()
        port = listen.getsockname()[1]
        base = {"mode": mode, "world": world, "port": port, "op_timeout": step_timeout,
                "deadline": time.time() + deadline_s + 30.0, "fault": fault, **extra}
        cfgs = [{**base, "rank": r, "listen_fd": listen.fileno() if r == 0 else None} for r in range(world)]
        try:
            group = _Group(world, cfgs, listen, python, env, Path(tmp))
        finally:
            listen.close()  # rank 0 holds its own copy; the parent no longer needs the port
        out = {"records": [], "digests": [], "ready": {}, "done": {}, "peak_rss": 0, "peak_pss": None,
               "pids": group.pids}
        try:
            _follow(group, world, total, out, on_progress, started, startup_timeout, step_timeout, deadline_s)
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


def _follow(group: _Group, world: int, total: int, out: dict, on_progress, started: float,
            startup_timeout: float, step_timeout: float, deadline_s: float) -> None:
    eof: set[int] = set()
    last_progress = time.monotonic()
    last_sample = 0.0
    rss_now = 0

    def report(phase: str, done: int, of: int) -> None:
        if on_progress is not None:
            on_progress(Progress(phase, done, of, group.pids, rss_now))

    report("starting", 0, world)
    while len(out["done"]) < world or len(eof) < world:
        now = time.monotonic()
        if now - last_sample >= 0.1:
            last_sample = now
            per_worker, pss = group.memory()
            rss = sum(per_worker.values())
            rss_now = rss or rss_now  # keep the last reading once the workers have exited
            out["peak_rss"] = max(out["peak_rss"], rss)
            if pss is not None:
                out["peak_pss"] = max(out["peak_pss"] or 0, pss)
            over = [r for r, b in per_worker.items() if b > WORKER_MEMORY_CAP]
            if over:
                raise DataParallelError(f"Worker {over[0]} used more than {WORKER_MEMORY_CAP / 2**20:,.0f} MB of "
                                        "memory, so the run was stopped.", group.pids)
        batch = []
        try:
            batch.append(group.events.get(timeout=POLL))
            while True:
                batch.append(group.events.get_nowait())
        except queue.Empty:
            pass
        for rank, ev in batch:
            if ev is None:
                eof.add(rank)
            elif ev.get("event") == "ready":
                out["ready"][rank] = ev
                last_progress = time.monotonic()
                if len(out["ready"]) == world:
                    out["startup_s"] = time.monotonic() - started
                report("starting", len(out["ready"]), world)
            elif ev.get("event") == "step":
                out["records"].append(StepRecord(**ev["record"]))
                out["digests"].append(str(ev.get("digest", "")))
                last_progress = time.monotonic()
                if len(out["records"]) % 5 == 0 or len(out["records"]) == total:
                    report("training", len(out["records"]), total)
            elif ev.get("event") == "done":
                out["done"][rank] = ev
                last_progress = time.monotonic()
        failed = [(r, code) for r, code in ((r, p.poll()) for r, p in enumerate(group.procs))
                  if code not in (None, 0) or (code == 0 and r not in out["done"] and r in eof)]
        if failed:
            raise DataParallelError(" ".join(
                f"Worker {r} stopped (exit code {code}) before the run finished. {group.stderr_tail(r)}".strip()
                for r, code in failed), group.pids)
        now = time.monotonic()
        if len(out["ready"]) < world and now - started > startup_timeout:
            raise DataParallelError(f"The workers did not all start within {startup_timeout:.0f} s "
                                    f"({len(out['ready'])} of {world} joined the group); the machine may be "
                                    "too busy.", group.pids)
        if len(out["ready"]) == world and now - last_progress > step_timeout:
            raise DataParallelError(f"No worker made progress for {step_timeout:.0f} s, so the run was stopped.",
                                    group.pids)
        if now - started > deadline_s:
            raise DataParallelError(f"The run took longer than {deadline_s:.0f} s and was stopped.", group.pids)
    report("finishing", total, total)


def run_data_parallel(world_size: int, steps: int, settings: TrainSettings = DP_SETTINGS, *,
                      on_progress: Callable[[Progress], None] | None = None, wait: bool = True,
                      check_room: bool = True, startup_timeout: float = STARTUP_TIMEOUT,
                      step_timeout: float = STEP_TIMEOUT, timeout: float | None = None,
                      python: str = sys.executable, fault: dict | None = None) -> DataParallelResult:
    """Train with ``world_size`` gloo workers for ``steps`` steps and compare with one process.

    ``on_progress(Progress)`` is called while the workers start and every few steps; it may
    raise to cancel the run (the workers are killed, the exception propagates). With
    ``wait=False`` a second concurrent call raises Busy instead of waiting its turn.
    ``fault`` (tests only) makes one rank fail: {"rank": r, "step": s, "kind": "raise"|"exit"|"hang"}.
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
        out = _supervise(world_size, "train", cfg, total=steps, on_progress=on_progress,
                         startup_timeout=startup_timeout, step_timeout=step_timeout, timeout=timeout,
                         python=python, fault=fault)
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
        _supervise(world, "probe", {"inputs": str(inputs), "outdir": tmp}, total=1, on_progress=None,
                   startup_timeout=startup_timeout, step_timeout=step_timeout, timeout=None, python=python,
                   fault=None)
        per_rank = []
        for r in range(world):
            with np.load(Path(tmp) / f"rank{r}.npz") as f:
                per_rank.append([f[f"a{i:03d}"] for i in range(len(vs))])
        return [np.stack([per_rank[r][i] for r in range(world)]) for i in range(len(vs))]


# ------------------------------------------------------------------------ the emulation


def shard_gradients(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                    parts: list[np.ndarray]) -> np.ndarray:
    """Each shard's gradient of its mean loss, as rows of a float32 array (shards, parameters).

    Shards of equal size are computed together with ``torch.func.vmap``.
    """
    detached = {k: v.detach() for k, v in params.items()}
    out = np.empty((len(parts), sum(v.numel() for v in detached.values())), dtype=np.float32)
    by_size: dict[int, list[int]] = {}
    for r, part in enumerate(parts):
        by_size.setdefault(len(part), []).append(r)
    for rows in by_size.values():
        idx = torch.from_numpy(np.stack([parts[r] for r in rows]))
        g = vmap(grad(_loss), in_dims=(None, 0, 0))(detached, x[idx], y[idx])
        out[rows] = torch.cat([g[k].reshape(len(rows), -1) for k in PARAM_NAMES], dim=1).numpy()
    return out


@dataclass(frozen=True)
class EmulatedRun:
    ranks: int
    model: str
    steps: int
    records: list[StepRecord] = field(repr=False)
    summary: DivergenceSummary
    digests: tuple[str, ...] = field(repr=False)  # the emulated replica's weights after every step


def emulate_run(ranks: int, model: str, steps: int, settings: TrainSettings = DP_SETTINGS,
                on_progress: Callable[[int], None] | None = None, every: int = 10,
                per_shard: str = "vmap") -> EmulatedRun:
    """The data-parallel run on ``ranks`` emulated devices, in this process, beside one process.

    Every step: the gradient of each of the ``ranks`` shards, times 1/ranks (as DDP), summed in
    ``model``'s order (core.kernels.collectives), one optimizer step. ``on_progress(steps done)`` is
    called every ``every`` steps and may raise to stop. ``per_shard="loop"`` computes each
    shard's gradient by its own backward pass, exactly as a worker does (slow for many shards);
    the default batches them with torch.func.vmap.
    """
    check_settings(settings, ranks, steps, MAX_EMULATED_STEPS)
    if model not in collectives.MODELS:
        raise ValueError(f"unknown collective model {model!r}")
    if per_shard not in ("vmap", "loop"):
        raise ValueError("per_shard is 'vmap' or 'loop'")
    x, y, schedule = _data(settings, steps)
    one, dp = _Replica(settings), _Replica(settings)
    scale = np.float32(1.0 / ranks)
    records, digests = [], []
    for t in range(steps):
        idx = schedule[t]
        xb, yb = x[idx], y[idx]
        loss_a, logits_a = one.measure(xb, yb)
        loss_b, logits_b = dp.measure(xb, yb)
        parts = shards(idx, ranks)
        if per_shard == "loop":
            g = np.stack([dp.local_gradient(x[p], y[p]).numpy() for p in parts]) * scale
        else:
            g = shard_gradients(dp.params, x, y, parts) * scale
        dp.apply(torch.from_numpy(collectives.allreduce(g, model)))
        one.train_step(xb, yb)
        fb = dp.flat()
        records.append(_record(t + 1, loss_a, loss_b, logits_a, logits_b, yb, one.flat(), fb))
        digests.append(weights_digest(fb))
        if on_progress is not None and ((t + 1) % every == 0 or t + 1 == steps):
            on_progress(t + 1)
    return EmulatedRun(ranks, model, steps, records, summarize(records), tuple(digests))


def rank_gradients(ranks: int, settings: TrainSettings = DP_SETTINGS) -> np.ndarray:
    """The vectors an all-reduce sums at the first step: every rank's shard gradient times 1/ranks."""
    if not 1 <= ranks <= settings.batch:
        raise ValueError(f"between 1 and {settings.batch:,} ranks (one example each at most)")
    x, y, schedule = _data(settings, 1)
    params = _Replica(settings).params
    g = shard_gradients(params, x, y, shards(schedule[0], ranks))
    return g * np.float32(1.0 / ranks)


STUDY_KS = (*range(2, 17), 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1000, 1024)


def order_study(ks: tuple[int, ...] = STUDY_KS, settings: TrainSettings = DP_SETTINGS,
                on_progress: Callable[[int, int], None] | None = None) -> tuple[collectives.Comparison, ...]:
    """collectives.compare for each k: the training pair's first-step gradients on k ranks.

    ``on_progress(done, total)`` after each k; it may raise to stop.
    """
    out = []
    for i, k in enumerate(ks):
        out.append(collectives.compare(rank_gradients(k, settings)))
        if on_progress is not None:
            on_progress(i + 1, len(ks))
    return tuple(out)


# --------------------------------------------------------------------------- the page's questions


def study_ks(largest: int) -> tuple[int, ...]:
    """The numbers of ranks the order study covers, up to ``largest``."""
    return tuple(k for k in STUDY_KS if k <= largest)


@dataclass(frozen=True)
class LiveSettings:
    """A live run: ``world`` worker processes training ``steps`` steps."""

    world: int = 2
    steps: int = 100


@dataclass(frozen=True)
class EmulationSettings:
    """Emulated runs: the all-reduce model, the numbers of devices and the steps."""

    model: str = "ring_gloo"
    ks: tuple[int, ...] = EMULATED_KS
    steps: int = 100

    def keys(self) -> list[tuple[int, str, int]]:
        """One (ranks, model, steps) per chosen number of devices, fewest devices first."""
        return [(k, self.model, self.steps) for k in sorted(self.ks)]


class RunPair(NamedTuple):
    """Two runs and the first step where their weights differ (None: never in ``steps`` steps)."""

    run: str
    against: str
    first_difference: int | None
    steps: int


def run_pairs(runs: list[EmulatedRun], steps: int, live: DataParallelResult | None = None) -> list[RunPair]:
    """Every pair of emulated runs, and the live run against each when it trained as many steps."""
    out = [RunPair(f"{a.ranks:,} devices", f"{b.ranks:,} devices", first_divergence(a.digests, b.digests), steps)
           for i, a in enumerate(runs) for b in runs[i + 1:]]
    if live is not None and live.steps == steps:
        out += [RunPair(f"{live.world_size} live workers (gloo)", f"{r.ranks:,} devices",
                        first_divergence(live.digests, r.digests), steps) for r in runs]
    return out


def earliest_apart(runs: list[EmulatedRun]) -> EmulatedRun | None:
    """The run whose loss is first more than 1% from one process's (None if none gets there)."""
    return min((r for r in runs if r.summary.first_rel_1pct), key=lambda r: r.summary.first_rel_1pct, default=None)
