"""What one worker process of a live data-parallel run does (started by core.training.gloo_supervisor).

Every step each rank computes the gradient of its shard of the global batch, the gradients are
all-reduced by gloo, and every rank applies the same update. Rank 0 also trains the same model
alone on the whole global batch (the one-process run), and reports a record of each step as one
JSON line on its stdout. Why this is what DistributedDataParallel does:

* shards: rank r takes examples r, r+W, r+2W, ... of each global batch (the strided split of
  ``torch.utils.data.DistributedSampler``), and its loss is the mean over its shard;
* gradients are multiplied by 1/W *before* the all-reduce, which then sums them: DDP's
  reducer does exactly this when no communication hook is set (``Reducer::
  mark_variable_ready_dense`` in torch/csrc/distributed/c10d/reducer.cpp copies
  ``grad * (1 / world_size)`` into the bucket), so the all-reduce computes the average. For W a
  power of two, multiplying by 1/W is exact, so "sum then divide" would give the same bits;
* all parameters' gradients go into one flat bucket in a fixed order (DDP buckets them too; a
  model this small fits in its first bucket) and one ``dist.all_reduce`` sums it.

A worker exits when its stdin closes (the parent died), when its own deadline passes, and (on
Linux) with its parent. ``_fault`` injects failures for the tests.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from core.arith.formats import same_bits
from core.machines.memory import proc_kib
from core.training.data_parallel import _data, _record, _Replica, shards, weights_digest
from core.training.mlp import TrainSettings

# What a worker process runs: this module's _worker_main, with the config as its one argument.
WORKER_ENTRY = "from core.training.gloo_worker import _worker_main; _worker_main()"


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
    """This worker's own peak resident memory. On Linux the high-water mark of its address space
    (VmHWM), because getrusage's ru_maxrss is preserved across execve: a worker started by a large
    server process would report the server's size. Elsewhere ru_maxrss."""
    hwm = proc_kib("/proc/self/status", "VmHWM:")
    if hwm is not None:
        return hwm
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
    same = all(same_bits(g, mine) for g in gathered)
    _emit({"event": "done", "rank": rank, "max_rss": _max_rss_bytes(), "replicas_identical": same})
