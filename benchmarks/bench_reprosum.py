"""The order-independent (reproducible) sum against torch.sum and np.sum, same vector.

Timing: core.studies.mitigations.reproducible_sum_cost, the measurement the Mitigations page
shows (warm-up; interleaved repeats in rotating order, each the fastest of 3 calls; the
median of the per-repeat ratios and their quartiles). For information, also: the exact
folds alone (the path for the rare sums the fast path's error bound leaves undecided),
and both sums on one thread in CPU time, which other processes on a busy machine disturb
far less than wall time with several threads (those wait for each other's turns); the
floor, core.kernels.widesum's one pass over the data timed alone (which no bookkeeping can go
below); and the fast path through torch reductions instead (the path on a GPU, and on a
CPU without numba), measured the same way. The load average is printed before and after:
on a shared machine, a ratio measured under load is not the cost.
Usage: python -m benchmarks.bench_reprosum [n]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np
import torch

from benchmarks.timing import median_time
from core.arith.exact import correctly_rounded_sum
from core.arith.formats import FLOAT32
from core.kernels import widesum
from core.kernels.reprosum import _decided_sum, _exact_sum, _widesum, reproducible_sum
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.machines.timing import interleaved_times
from core.studies.mitigations import reproducible_sum_cost


def one_thread_cpu_ratio(t: torch.Tensor, repeats: int) -> float:
    """Median over interleaved repeats of CPU time (this thread) of reproducible_sum over torch.sum."""
    ratios = []
    with torch_threads(1):
        reproducible_sum(t)
        for _ in range(repeats):
            t0 = time.thread_time()
            t.sum()
            t1 = time.thread_time()
            reproducible_sum(t)
            t2 = time.thread_time()
            ratios.append((t2 - t1) / max(t1 - t0, 1e-9))
    return statistics.median(ratios)


def pass_ratios(t: torch.Tensor, repeats: int, inner: int = 3) -> dict[str, float]:
    """core.kernels.widesum's pass alone, and the fast path through torch reductions, each against
    torch.sum: median over interleaved repeats (rotating order, each the fastest of ``inner``
    calls) of the per-repeat ratio."""
    a = t.numpy()
    fns = {
        "torch.sum": lambda: t.sum(),
        "core.kernels.widesum's one pass (the floor)": lambda: _widesum().block_sums(a, torch.get_num_threads(),
                                                                              PROCESS_THREADS),
        "fast path through torch reductions (GPU path)": lambda: _decided_sum(t, FLOAT32, kernel=False),
    }
    times = interleaved_times(fns, repeats, inner, warmup=1)
    keys = list(fns)
    return {k: statistics.median(a / b for a, b in zip(times[k], times["torch.sum"], strict=True)) for k in keys[1:]}


def main(n: int = 10_000_000, repeats: int = 31) -> None:
    load_before = os.getloadavg()
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    t = torch.from_numpy(x)
    assert float(reproducible_sum(t)) == float(correctly_rounded_sum(x, FLOAT32))
    t_folds, _ = median_time(lambda: _exact_sum(t), 5, warmup=1)
    cpu_ratio = one_thread_cpu_ratio(t, repeats)
    floor = pass_ratios(t, repeats)
    c = reproducible_sum_cost(n, repeats=repeats)
    load_after = os.getloadavg()
    print(f"reproducible_sum: {c.seconds * 1e3:8.2f} ms (median of {c.repeats}; correctly rounded, order-independent)")
    print(f"torch.sum:        {c.torch_seconds * 1e3:8.2f} ms ({c.threads} thread{'s' if c.threads > 1 else ''})")
    print(f"np.sum:           {c.numpy_seconds * 1e3:8.2f} ms")
    print(f"exact folds alone:{t_folds * 1e3:8.2f} ms (the path for sums the error bound leaves undecided)")
    print(f"one thread, CPU time: {cpu_ratio:.1f}x torch.sum (median of {repeats})")
    llc = widesum.CACHE_BYTES
    print(f"prefetch: {'kept' if widesum.keeps_in_cache(x.nbytes) else 'streamed'} (vector {x.nbytes / 2**20:.0f} MiB; "
          f"last-level cache {'not reported' if llc is None else f'{llc / 2**20:.0f} MiB'})")
    print("alone: " + ", ".join(f"{k} {v:.1f}x" for k, v in floor.items()) + " torch.sum")
    print(f"load average (1 min) before / after: {load_before[0]:.2f} / {load_after[0]:.2f} "
          f"on {os.cpu_count()} CPUs")
    print(f"ratio quartiles:  {c.vs_torch_iqr[0]:.1f}-{c.vs_torch_iqr[1]:.1f}x torch.sum, "
          f"{c.vs_numpy_iqr[0]:.1f}-{c.vs_numpy_iqr[1]:.1f}x np.sum")
    print(f"reproducible sum: {c.vs_torch:.1f}x the time of torch.sum, {c.vs_numpy:.1f}x the time of np.sum "
          f"(n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
