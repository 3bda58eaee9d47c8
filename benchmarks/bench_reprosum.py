"""The order-independent (reproducible) sum against torch.sum and np.sum, same vector.

Timing: core.mitigations.reproducible_sum_cost, the measurement the Mitigations page
shows (warm-up; interleaved repeats in rotating order, each the fastest of 3 calls; the
median of the per-repeat ratios and their quartiles). For information, also: the exact
folds alone (the path for the rare sums the fast path's error bound leaves undecided),
and both sums on one thread in CPU time, which other processes on a busy machine disturb
far less than wall time with several threads (those wait for each other's turns).
Usage: python -m benchmarks.bench_reprosum [n]
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import torch

from benchmarks.timing import median_time
from core.exact import correctly_rounded_sum
from core.formats import FLOAT32
from core.globalstate import torch_threads
from core.mitigations import _exact_sum, reproducible_sum, reproducible_sum_cost


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


def main(n: int = 10_000_000, repeats: int = 31) -> None:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    t = torch.from_numpy(x)
    assert float(reproducible_sum(t)) == float(correctly_rounded_sum(x, FLOAT32))
    t_folds, _ = median_time(lambda: _exact_sum(t), 5, warmup=1)
    cpu_ratio = one_thread_cpu_ratio(t, repeats)
    c = reproducible_sum_cost(n, repeats=repeats)
    print(f"reproducible_sum: {c.seconds * 1e3:8.2f} ms (median of {c.repeats}; correctly rounded, order-independent)")
    print(f"torch.sum:        {c.torch_seconds * 1e3:8.2f} ms ({c.threads} thread{'s' if c.threads > 1 else ''})")
    print(f"np.sum:           {c.numpy_seconds * 1e3:8.2f} ms")
    print(f"exact folds alone:{t_folds * 1e3:8.2f} ms (the path for sums the error bound leaves undecided)")
    print(f"one thread, CPU time: {cpu_ratio:.1f}x torch.sum (median of {repeats})")
    print(f"ratio quartiles:  {c.vs_torch_iqr[0]:.1f}-{c.vs_torch_iqr[1]:.1f}x torch.sum, "
          f"{c.vs_numpy_iqr[0]:.1f}-{c.vs_numpy_iqr[1]:.1f}x np.sum")
    print(f"reproducible sum: {c.vs_torch:.1f}x the time of torch.sum, {c.vs_numpy:.1f}x the time of np.sum "
          f"(n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
