"""A model of the order in which PyTorch's CUDA kernel adds up ``x.sum()`` and ``x.mean()`` of a 1-D contiguous tensor.

The model is pinned to the kernel that torch 2.13.0 ships (``requirements.txt`` pins ``torch==2.13.0``),
and it can also be run with the launch rules of older kernels (``KERNELS``). It has been checked against
published GPU results (``core/kernels/cuda_published.py``, tests/core/test_cuda_model_published.py), and against
a slow loop-by-loop transcription of the kernel and error bounds (tests/core/test_cuda_model.py).
It has not been run against a GPU of our own: no GPU recording for the pinned version is bundled.

Pinned source (kernel ``"torch-2.13"``)
---------------------------------------
* ``aten/src/ATen/native/cuda/Reduce.cuh`` of **pytorch/pytorch at cf30153c4c131c8164ee7798e5022d810682e2cb**,
  the commit that ``torch.version.git_version`` of the torch 2.13.0 wheel names. We read the copy that
  the wheel itself installs (``torch/include/ATen/native/cuda/Reduce.cuh``, sha256
  ``75vqj9_QPOwtfnQhy-ddmP3f2q_dtPJaHtZVxYYd-2U`` in the wheel's RECORD): the release text exactly.
  The wheel's copy has one guard line (``#if !defined(TORCH_STABLE_ONLY) ...``) prepended, so the line
  numbers below are the wheel copy's; the repository file's are one less. The code index we could search
  stores ``pytorch/pytorch``'s ``Reduce.cuh`` only at 2019 commits (6f75eba8, 00ef8f06), so the wheel is
  the only copy of the 2.13 text we had.
  - ``last_pow2`` L31-38; ``mnt_wrapper`` (``MAX_NUM_THREADS = 512``) L60-68;
    ``ReduceConfig::set_block_dimension`` L99-108; ``split_input`` L110-114; ``should_reduce_tail``
    L148-151; ``input_idx`` L153-160; ``staging_memory_offset`` L176-182; ``values_per_thread`` L211-213;
  - ``func_wrapper_t`` (``project`` is a plain cast) L252-276;
  - ``ReduceOp::run`` L402-478 (thread stage, then ``block_x_reduce``, then ``block_y_reduce``, then
    ``global_reduce``); ``thread_reduce`` L480-498; ``input_vectorized_thread_reduce_impl`` L500-559;
    ``thread_reduce_impl`` L561-632; ``block_x_reduce`` L634-671 (warp shuffle L657-670);
    ``block_y_reduce`` L673-690; ``mark_block_finished`` L692-705; ``global_reduce`` L785-917;
  - ``setReduceConfig`` L1039-1186 (vectorisation L1105-1117, warp split and ``ctas_per_output``
    L1135-1185); ``gpu_reduce_kernel`` L1188-1290.
* ``aten/src/ATen/native/SharedReduceOps.h`` of the same wheel (sha256 ``daa62aPH9HVyq4Jk_WZIdpfip3u5-6Gw1VXZZ6rBi14``):
  ``MeanOps`` L152-180, ``project`` returns ``a * factor`` (L164-166).
* ``ReduceSumProdKernel.cu`` and ``ReduceMomentKernel.cu`` are compiled into the CUDA library and are not
  shipped as text, and the index holds no copy at the 2.13 commit. The nearest stored copies:
  ``sum_functor`` in cyyever/pytorch@ca0147539527ba140c53a3f3fac017595692388a (ReduceSumProdKernel.cu,
  lines 13-30: 16-bit types call ``gpu_reduce_kernel<scalar_t, out_t, /*vt0=*/4, /*input_vec_size=*/8>``,
  all others ``gpu_reduce_kernel<scalar_t, out_t>`` with ``vt0 = input_vec_size = 4``) and
  ``mean_kernel_impl`` in two stored ReduceMomentKernel.cu copies of the same generation (16-bit: vt0 4,
  input_vec_size 8; ``factor_t factor = static_cast<factor_t>(iter.num_output_elements()) / iter.numel()``
  with ``factor_t`` = float for float/half/bfloat16 and double for double). We attribute the 16-bit
  change to the PyTorch pull request "Vectorize 8 elements on 16 bit data types for sum/mean"
  (https://github.com/pytorch/pytorch/pull/165055; its diff was
  not read). The 2.13 Reduce.cuh no longer tests ``vt0 >= input_vec_size`` before vectorising (L1106),
  which is what lets vt0 = 4 run with 8-wide vectors; the older copies below still have the test. We
  take these two functions to be equal to 2.13's: the one part of the pin not read from the release.
* ``mean`` reaches this kernel on CUDA: ``TORCH_IMPL_FUNC(mean_out)`` in ReduceOps.cpp sums and divides
  only when ``self.device().is_cpu()``; any other device calls ``mean_stub`` (``mean_kernel_cuda``).

The kernel, stage by stage, for a full reduction of ``n`` contiguous elements (one output)
-------------------------------------------------------------------------------------------
1. Launch (``setReduceConfig``). ``dim0 = n``, ``dim1 = 1``. If ``dim0 >= 128`` the input is read in
   vectors of ``input_vec_size`` (4 for float32/float64, 8 for float16/bfloat16) and ``dim0 /=
   input_vec_size``. ``block_width = last_pow2(dim0)`` if ``dim0 < 512`` else 512; ``block_height =
   1``. ``values_per_thread = ceil(n / block_width)`` counts *elements* even when the thread reads
   vectors. If it is at least 16 the input is split across warps (a no-op with one row), and if it is at
   least 256 the input is split over ``ctas_per_output = max(min(ceil(target / 1), ceil(vpt / 16)),
   ceil(vpt / 256))`` blocks, ``target = multiProcessorCount * (maxThreadsPerMultiProcessor /
   block_width)``. Example: n = 10**6 float32 on an H100 (132 SMs): 512 threads x 123 blocks.
2. Thread stage. Thread ``g = block * block_width + lane`` of ``T = block_width * blocks``.
   *Vectorised* (``input_vectorized_thread_reduce_impl``): accumulators ``value_list[0..vec-1]`` start
   at ``+0.0``; the thread loads vectors ``g, g + T, g + 2T, ...`` and adds element ``i`` of each vector
   to accumulator ``i``; then the ``n % vec`` tail elements go to lanes ``0, 1, ...`` of block 0, into
   accumulator 0; then ``((a0 + a1) + a2) + ...``. *Scalar* (``thread_reduce_impl``, n < 128):
   ``vt0 = 4`` accumulators, element ``g + m T`` to accumulator ``m % 4``, then combined left to right.
   The data pointer is assumed aligned to the vector (``shift == 0``): true for a fresh tensor from the
   caching allocator, not for every slice.
3. Block stage (``block_x_reduce``). Shared memory: ``v[t] += v[t + offset]`` for ``offset =
   block_width/2, ..., 32``; then the warp shuffle ``v += shfl_down(v, offset)`` with **decreasing**
   offsets ``dim_x/2, ..., 2, 1`` (L657-663: "fix CUDA to have offset decreasing for better numerics
   matching Triton"), so the whole block is one halving tree ``v[t] + v[t + w/2]``. ``block_y_reduce``
   does nothing with one row.
4. Grid stage (``global_reduce``), when ``ctas_per_output > 1``. Each block writes its value to a staging
   buffer; the block that increments the semaphore last reads the partials in a fixed order: thread ``t``
   adds partials ``t, t + block_width, ...`` to ``+0.0``, then the block reduces as in 3. The result
   does not depend on which block finishes last.
5. Result. ``sum``: the accumulator (float32 for 16-bit inputs) is cast once to the output type
   (``project``). ``mean`` (``MeanOps``): the same reduction, then ``project`` returns ``a * factor`` in
   the accumulation type, ``factor = float(1) / float(n)`` (a float32 for float32, float16 and
   bfloat16; a double for double), then one cast to the output type (so a 16-bit mean is rounded twice:
   to float32 by the multiply, then to 16 bits).

Kernel versions
---------------
The model runs with the launch rules of the pinned kernel or of an older one: ``KERNELS`` in
core.kernels.cuda_launch, whose docstring says what each changes and where it was read.

Assumptions
-----------
A1 Every ``a + b`` and the mean's ``a * factor`` is one IEEE round-to-nearest-even operation in the
   accumulation type (PyTorch is not built with fast-math; a lone add or multiply is not contracted
   into an FMA). ``+0.0`` is the identity, so padding with zeros is exact.
A2 ``warpSize = 32`` (NVIDIA). ROCm builds take other branches (``#if defined(USE_ROCM)``: increasing
   shuffle offsets, ``min_values_per_thread = 128``, at least 64 blocks) and are not modelled.
A3 Inputs whose byte extent exceeds 2**31 - 1 are split by ``iter.with_32bit_indexing()``; not modelled
   (``NotImplementedError``).
A4 ``multiProcessorCount`` and ``maxThreadsPerMultiProcessor`` are inputs (``sm_count``,
   ``max_threads_per_sm``): 132 and 2048 for an H100/H200 SXM, 1536 on sm_86/sm_89 parts.
"""

from __future__ import annotations

import math

import numpy as np

from core.kernels.cuda_launch import (
    ACCUMULATION_DTYPES,
    KERNELS,
    PINNED_KERNEL,
    CudaLaunch,
    CudaReduceConfig,
    cuda_config_for,
    cuda_launch,
    numpy_dtype,
)

WARP_SIZE = 32
INT32_MAX = 2**31 - 1  # past this byte extent PyTorch splits the input (A3)


def _padded(a: np.ndarray, size: int) -> np.ndarray:
    """``a`` followed by +0.0 up to ``size`` elements."""
    if a.size == size:
        return a
    out = np.zeros(size, dtype=a.dtype)
    out[: a.size] = a
    return out


def _thread_values(xa: np.ndarray, launch: CudaLaunch) -> np.ndarray:
    """Each thread's value after its own loop and the left-to-right combine of its accumulators."""
    n, t_all, acc = xa.size, launch.threads, xa.dtype
    if launch.vectorized:
        v = launch.vec
        full = n // v  # whole vectors; the n % v rest is the tail
        rounds = -(-full // t_all)
        grid = _padded(xa[: full * v], rounds * t_all * v).reshape(rounds, t_all, v)
        accs = np.zeros((t_all, v), dtype=acc)
        for k in range(rounds):  # idx = g, g + T, ...: one vector per thread per round
            accs += grid[k]
        rest = xa[full * v :]
        accs[: rest.size, 0] += rest  # tail: lanes 0.. of block 0, accumulator 0
        columns = [accs[:, i] for i in range(v)]
    else:
        a = launch.accumulators
        rounds = -(-n // (t_all * a))
        grid = _padded(xa, rounds * a * t_all).reshape(rounds, a, t_all)
        accs = np.zeros((a, t_all), dtype=acc)
        for k in range(rounds):  # element g + m T goes to accumulator m % a
            accs += grid[k]
        columns = [accs[i] for i in range(a)]
    value = columns[0].copy()
    for col in columns[1:]:  # ((a0 + a1) + a2) + a3
        value += col
    return value


def _block_reduce(values: np.ndarray, shuffle: str = "decreasing") -> np.ndarray:
    """``block_x_reduce`` of every row of ``values`` (shape (blocks, block_width)): lane 0's result per row."""
    v = values
    width = v.shape[1]
    while width > WARP_SIZE:  # shared memory: v[t] += v[t + offset], offset = width/2 .. 32
        width //= 2
        v = v[:, :width] + v[:, width : 2 * width]
    if shuffle == "decreasing":
        while width > 1:  # shfl_down with offset width/2, ..., 1: lane t adds lane t + offset
            width //= 2
            v = v[:, :width] + v[:, width : 2 * width]
    else:
        while width > 1:  # shfl_down with offset 1, 2, 4, ...: lane 0 sees adjacent pairs
            v = v[:, 0::2] + v[:, 1::2]
            width //= 2
    return v[:, 0]


def _check_input(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {x.shape}")
    if x.dtype not in ACCUMULATION_DTYPES:
        raise TypeError(f"unsupported dtype {x.dtype}; expected float16, bfloat16, float32 or float64")
    return x


def cuda_reduce_accumulated(x: np.ndarray, config: CudaReduceConfig | None = None) -> np.generic:
    """The model's sum in the accumulation type (float32 for 16-bit inputs), before the final cast."""
    x = _check_input(x)
    acc = ACCUMULATION_DTYPES[x.dtype]
    n = x.size
    if n == 0:
        return acc.type(0)
    if (n - 1) * x.dtype.itemsize + 1 > INT32_MAX:
        raise NotImplementedError("inputs needing 64-bit indexing are split by PyTorch; not modelled")
    launch = cuda_launch(n, config or cuda_config_for(n, x.dtype))
    xa = np.ascontiguousarray(x, dtype=acc)  # widening 16-bit -> float32 is exact
    with np.errstate(over="ignore", invalid="ignore"):
        threads = _thread_values(xa, launch).reshape(launch.blocks, launch.threads_per_block)
        partials = _block_reduce(threads, launch.shuffle)
        if launch.blocks == 1:
            return partials[0]
        width = launch.threads_per_block
        rows = -(-launch.blocks // width)
        staged = _padded(partials, rows * width).reshape(rows, width)
        last = np.zeros(width, dtype=acc)  # value = ident; thread t adds partials t, t + width, ...
        for r in range(rows):
            last += staged[r]
        return _block_reduce(last.reshape(1, width), launch.shuffle)[0]


def cuda_sum_model(x: np.ndarray, config: CudaReduceConfig | None = None) -> np.generic:
    """Model of ``torch.sum`` of a 1-D contiguous CUDA tensor, returned in ``x``'s dtype.

    ``config=None`` uses ``cuda_config_for(len(x), x.dtype)``: the pinned torch 2.13 kernel on an
    H100/H200 with 132 SMs. float16 and bfloat16 (``ml_dtypes.bfloat16``) accumulate in float32 and are
    rounded to nearest even once at the end.
    """
    x = np.asarray(x)
    total = cuda_reduce_accumulated(x, config)
    with np.errstate(over="ignore"):
        return x.dtype.type(total)


def cuda_mean_factor(n: int, dtype, kernel: str = PINNED_KERNEL) -> np.generic:
    """``MeanOps::factor``: ``static_cast<factor_t>(num_output_elements) / numel`` for one output.

    float32 (``fl32(1 / fl32(n))``) for float32, float16 and bfloat16 inputs; for float64 a double in
    the pinned kernel and a float in torch 1.0 (``float factor = float(...) / iter.numel()``).
    """
    dt = numpy_dtype(dtype)
    if dt not in ACCUMULATION_DTYPES:
        raise TypeError(f"unsupported dtype {dt}")
    if dt == np.float64 and KERNELS[kernel].double_mean_factor == "double":
        return np.float64(1.0) / np.float64(n)
    return np.float32(1.0) / np.float32(n)  # int64 -> float rounds to nearest, then one float division


def cuda_mean_model(x: np.ndarray, config: CudaReduceConfig | None = None) -> np.generic:
    """Model of ``torch.mean`` of a 1-D contiguous CUDA tensor, returned in ``x``'s dtype.

    The same reduction as ``cuda_sum_model``, then ``MeanOps::project``: ``sum * factor`` rounded once in
    the accumulation type, then cast to the output type. An empty input gives NaN, as PyTorch fills it.
    """
    x = _check_input(x)
    if x.size == 0:
        return x.dtype.type(np.nan)
    kernel = config.kernel if config is not None else PINNED_KERNEL
    total = cuda_reduce_accumulated(x, config)
    factor = cuda_mean_factor(x.size, x.dtype, kernel)
    with np.errstate(over="ignore", invalid="ignore"):
        projected = total.dtype.type(total * total.dtype.type(factor))  # float factor widened exactly for double
        return x.dtype.type(projected)


def tree_depth(n: int, config: CudaReduceConfig | None = None, dtype=np.float32) -> int:
    """The largest number of roundings on any element's path to the result (for error bounds).

    Additions to the identity ``+0.0`` are exact and not counted.
    """
    launch = cuda_launch(n, config or cuda_config_for(n, dtype))
    t_all = launch.threads
    if launch.vectorized:
        per_acc = -(-(n // launch.vec) // t_all) + (1 if n % launch.vec else 0)
    else:
        per_acc = -(-n // (t_all * launch.accumulators))
    depth = (per_acc - 1) + (launch.accumulators - 1) + int(math.log2(launch.threads_per_block))
    if launch.blocks > 1:
        rows = -(-launch.blocks // launch.threads_per_block)
        depth += (rows - 1) + int(math.log2(launch.threads_per_block))
    return depth

