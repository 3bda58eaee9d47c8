"""The bit-exact sum models against the real np.sum on the same 10^7-value float32 vector.

The Summation lab and CPU vs GPU run three models of library reduction orders on every vector a
visitor picks: NumPy's pairwise sum (core.kernels.numpy_model), torch's CPU cascade sum with one
and two threads (core.kernels.torch_cpu_model) and PyTorch's CUDA block reduction
(core.kernels.cuda_model). Each must stay fast enough for a page: this prints each model's median
time and its ratio to np.sum of the same values (the peer), and checks the NumPy model's bits
against np.sum and the torch model's against torch.sum (same threads) on the way.
Usage: python -m benchmarks.bench_models [n]
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from benchmarks.timing import median_time
from core.arith.formats import bits_of
from core.kernels.cuda_model import cuda_sum_model
from core.kernels.numpy_model import numpy_pairwise_model
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.machines.globalstate import torch_threads


def main(n: int = 10_000_000) -> None:
    x = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    t_np, ref = median_time(lambda: np.sum(x), 15, warmup=1)
    t_numpy, m_numpy = median_time(lambda: numpy_pairwise_model(x), 5, warmup=1)
    assert bits_of(m_numpy) == bits_of(ref), "the NumPy model must give np.sum's bits"
    t_torch, m_torch = median_time(lambda: torch_cpu_sum_model(x, 2), 5, warmup=1)
    with torch_threads(2):
        real = torch.from_numpy(x).sum()
    agrees = bits_of(m_torch) == bits_of(real)
    t_cuda, _ = median_time(lambda: cuda_sum_model(x), 5, warmup=1)
    print(f"np.sum (peer):                  {t_np * 1e3:8.2f} ms (median of 15)")
    print(f"NumPy pairwise model:           {t_numpy * 1e3:8.2f} ms (median of 5), bits equal np.sum's")
    print(f"torch CPU model, 2 threads:     {t_torch * 1e3:8.2f} ms (median of 5), bits "
          f"{'equal' if agrees else 'DIFFER FROM'} torch.sum's with 2 threads here")
    print(f"CUDA block-reduction model:     {t_cuda * 1e3:8.2f} ms (median of 5)")
    print(f"sum models: NumPy {t_numpy / t_np:.1f}x, torch CPU {t_torch / t_np:.1f}x, CUDA {t_cuda / t_np:.1f}x "
          f"the time of np.sum (n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
