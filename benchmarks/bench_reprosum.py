"""The order-independent (reproducible) sum against torch.sum and np.sum, same vector.

Usage: python -m benchmarks.bench_reprosum [n]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from benchmarks.timing import median_time
from core.exact import correctly_rounded_sum
from core.formats import FLOAT32
from core.mitigations import reproducible_sum


def main(n: int = 10_000_000) -> None:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    t = torch.from_numpy(x)
    assert float(reproducible_sum(t)) == float(correctly_rounded_sum(x, FLOAT32))
    t_repro, _ = median_time(lambda: reproducible_sum(t), 7, warmup=1)
    t_torch, _ = median_time(lambda: t.sum(), 15, warmup=1)
    t_np, _ = median_time(lambda: np.sum(x), 15, warmup=1)
    print(f"reproducible_sum: {t_repro * 1e3:8.2f} ms (median of 7; correctly rounded, order-independent)")
    print(f"torch.sum:        {t_torch * 1e3:8.2f} ms ({torch.get_num_threads()} threads)")
    print(f"np.sum:           {t_np * 1e3:8.2f} ms")
    print(f"reproducible sum: {t_repro / t_torch:.1f}x the time of torch.sum, {t_repro / t_np:.1f}x the time of np.sum "
          f"(n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
