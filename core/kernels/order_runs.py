"""How each order of core.kernels.orders.ORDERS runs: one function per entry, and the shapes it is reused in.

An entry's ``run`` takes a ``SumInput`` (the stored values, the same values in the working dtype, the
threads) and returns a ``Ran``: the value and, where the bound needs it, the additions on the longest
path. The real NumPy and torch sums run here as they are; the models and the textbook orders call
core.kernels.numpy_model, torch_cpu_model, cuda_model, webgpu and sums. Beside them: how an order sums
many short rows at once (a ``RowShape``'s function) and how it is written out addition by addition for a
small vector (a ``TreeShape``'s ``combine`` and ``leaves``, for core.kernels.trees).

Module-level functions, not lambdas: a result that holds an Order can still be pickled (a lambda cannot).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from core.arith.exact import correctly_rounded_sum
from core.arith.formats import BFLOAT16 as BFLOAT16_FORMAT
from core.arith.formats import FORMATS, to_scalar, to_torch
from core.kernels import webgpu
from core.kernels.cuda_model import cuda_config_for, cuda_launch, cuda_sum_model, tree_depth
from core.kernels.numpy_model import numpy_pairwise_model, tree_depth_numpy
from core.kernels.order_types import Ran, SumInput
from core.kernels.sums import (
    compensated,
    lane_length,
    lanes_depth,
    lanes_then_pairwise,
    pairwise,
    sequential,
    split_depth,
    split_sequential,
)
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.machines.globalstate import torch_threads

BFLOAT16 = BFLOAT16_FORMAT.numpy_dtype


def correctly_rounded(values: np.ndarray, working: str) -> np.generic:
    r = correctly_rounded_sum(values, FORMATS[working])
    with np.errstate(over="ignore"):
        return np.array(float(r)).astype(FORMATS[working].numpy_dtype)[()]


# ------------------------------------------------------------------ the libraries, live and modelled


def _torch_sum(values: np.ndarray, working: str, threads: int) -> np.generic:
    t = to_torch(values)
    dtype = FORMATS[working].torch_dtype
    with torch_threads(threads):
        r = t.sum() if t.dtype == dtype else t.sum(dtype=dtype)
    return to_scalar(r)


def run_numpy(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.sum(x) if n else x.dtype.type(0)
    depth = n - 1 if x.dtype == BFLOAT16 else tree_depth_numpy(n)
    return Ran(value=v, depth=depth, provenance=f"real np.sum, NumPy {np.__version__}, on this CPU")


def run_numpy_model(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    if x.dtype == BFLOAT16:  # NumPy's pairwise loop exists only for its own float types;
        # for ml_dtypes' bfloat16, np.sum runs the generic loop, left to right
        return Ran(value=sequential(x), depth=n - 1, note=" (bfloat16: NumPy sums left to right)")
    return Ran(value=numpy_pairwise_model(x), depth=tree_depth_numpy(n),
               note=" (bit-identical to np.sum in 10,151 of 10,151 tested cases)")


def _torch(s: SumInput, k: int) -> Ran:
    # depth n - 1: not derived; the sequential bound is valid for any order
    return Ran(value=_torch_sum(s.values, s.working, k), depth=s.x.size - 1,
               provenance=f"real torch.sum, torch {torch.__version__}, this CPU, {k} thread{'s' if k > 1 else ''}")


def run_torch_1(s: SumInput) -> Ran:
    return _torch(s, 1)


def run_torch_all(s: SumInput) -> Ran:
    return _torch(s, s.threads)


def run_torch_model(s: SumInput) -> Ran:
    return Ran(value=torch_cpu_sum_model(s.x, threads=s.threads), depth=s.x.size - 1,
               note=f" ({s.threads} threads; bit-identical to torch.sum in every case tested on torch 2.13 x86-64)")


def run_cuda_model(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    cfg = cuda_config_for(n, x.dtype)
    launch = cuda_launch(n, cfg)
    return Ran(value=cuda_sum_model(x, cfg), depth=tree_depth(n, cfg, x.dtype),
               note=(f" ({launch.blocks} blocks × {launch.threads_per_block} threads as chosen for "
                     f"{cfg.sm_count} SMs, H100/H200-like; not checked against a GPU)"))


def run_webgpu_tree(s: SumInput) -> Ran:
    return Ran(value=webgpu.workgroup_tree(s.x), depth=webgpu.workgroup_tree_depth(s.x.size))


# -------------------------------------------------------------------------- the textbook orders


def run_kahan(s: SumInput) -> Ran:
    return Ran(value=compensated(s.x, "kahan"), depth=lane_length(s.x.size))  # depth: values per lane


def run_neumaier(s: SumInput) -> Ran:
    return Ran(value=compensated(s.x, "neumaier"), depth=lane_length(s.x.size))


def run_sequential(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x))


def run_reverse(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x[::-1]))


def run_sorted_asc(s: SumInput) -> Ran:
    return Ran(value=sequential(np.sort(s.x)))


def run_sorted_desc(s: SumInput) -> Ran:
    return Ran(value=sequential(np.sort(s.x)[::-1]))


def _by_magnitude(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.abs(x), kind="stable")


def run_sorted_abs(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x[_by_magnitude(s.x)]))


def run_pairwise(s: SumInput) -> Ran:
    return Ran(value=pairwise(s.x))


def run_lanes_8(s: SumInput) -> Ran:
    return Ran(value=lanes_then_pairwise(s.x, 8), depth=lanes_depth(s.x.size, 8))


def run_lanes_32(s: SumInput) -> Ran:
    return Ran(value=lanes_then_pairwise(s.x, 32), depth=lanes_depth(s.x.size, 32))


def run_split_4(s: SumInput) -> Ran:
    return Ran(value=split_sequential(s.x, 4), depth=split_depth(s.x.size, 4))


def run_correct(s: SumInput) -> Ran:
    return Ran(value=correctly_rounded(s.values, s.working))


# ------------------------------------------------------------------- many short rows at once


def reverse_rows(x: np.ndarray) -> np.ndarray:
    return sequential(x[..., ::-1])


def lanes_8_rows(x: np.ndarray) -> np.ndarray:
    return lanes_then_pairwise(x, 8)


def lanes_32_rows(x: np.ndarray) -> np.ndarray:
    return lanes_then_pairwise(x, 32)


def split_4_rows(x: np.ndarray) -> np.ndarray:
    return split_sequential(x, 4)


# ------------------------------------------------------------ the orders as trees of additions


def reversed_leaves(x: np.ndarray) -> Sequence[int]:
    return range(x.size)[::-1]


def by_magnitude_leaves(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.abs(x.astype(np.float64)), kind="stable")


def chain_tree(b, ids: list[int]) -> int:
    return b.chain(ids)


def balanced_tree(b, ids: list[int]) -> int:
    return b.balanced(ids)


def numpy_tree(b, ids: list[int]) -> int:
    """NumPy's pairwise scheme for n <= 128: n < 8 sequential; else 8 strided accumulators, then the tail."""
    n = len(ids)
    if n < 8:
        return b.chain(ids)
    r = [b.chain(ids[j : n - n % 8 : 8]) for j in range(8)]
    root = b.add(b.add(b.add(r[0], r[1]), b.add(r[2], r[3])), b.add(b.add(r[4], r[5]), b.add(r[6], r[7])))
    for i in ids[n - n % 8 :]:
        root = b.add(root, i)
    return root


def cuda_tree(b, ids: list[int]) -> int:
    """core.kernels.cuda_model's reduction for a small vector, addition by addition.

    For n <= 32 the kernel (``cuda_launch``, torch 2.13) runs one block of ``last_pow2(n)``
    threads without vector loads: thread t's accumulators hold elements t, t + T, ... (combined
    left to right; their +0 padding adds nothing), then the block's lanes combine by warp
    shuffles with decreasing offsets T/2, ..., 1: lane t adds lane t + offset.
    """
    n = len(ids)
    launch = cuda_launch(n)
    if launch.vectorized or launch.blocks != 1 or launch.threads_per_block > 32:
        raise ValueError(f"the CUDA tree is drawn for one warp-sized block, not for n = {n}")
    width = launch.threads_per_block
    lanes = [b.chain([ids[t + m * width] for m in range(launch.accumulators) if t + m * width < n])
             for t in range(width)]
    while len(lanes) > 1:  # shfl_down, offset = width/2, ..., 1
        half = len(lanes) // 2
        lanes = [b.add(lanes[t], lanes[t + half]) for t in range(half)]
    return lanes[0]
