"""A model of the order in which PyTorch's CUDA kernel adds up ``x.sum()`` of a 1-D contiguous tensor.

This is a model, not yet checked against real hardware.  It was written from the source of
``aten/src/ATen/native/cuda/Reduce.cuh`` and ``ReduceSumProdKernel.cu`` and is tested only
against a slow, loop-by-loop transcription of the same algorithm and against error bounds
(tests/core/test_cuda_model.py).  No GPU was available when it was written.

Source read
-----------
* ``Reduce.cuh`` and ``ReduceSumProdKernel.cu`` as stored for repository ``cyyever/pytorch``
  (a fork that tracks upstream; commits 0660972b2e90 and ca0147539527).  The copy of
  ``pytorch/pytorch`` in the index we could search held only a 2019/2020 version of
  ``Reduce.cuh`` (before input vectorisation and the SM-count-based grid), so upstream's
  current text may differ; see assumption A10.
* The quotes below are lines of that source; the functions they sit in are named.

Algorithm, for a full sum of ``n`` contiguous elements (one output)
--------------------------------------------------------------------
1. Launch shape (``setReduceConfig``).  One output, so the block is ``block_width x 1``
   threads; ``block_width = last_pow2(dim0)`` capped at 512, where ``dim0 = n / vec`` if the
   input is read in vectors, else ``n``.  If every thread would get at least 256 values,
   the input is split over ``blocks`` thread blocks (``ctas_per_output``) so as to fill the
   GPU: ``blocks = max(min(ceil(target / 1), ceil(vpt / 16)), ceil(vpt / 256))`` with
   ``target = sm_count * (max_threads_per_sm // block_width)`` and
   ``vpt = ceil(n / block_width)``.
2. Thread stage.  Global thread ``g = block * block_width + lane`` of ``T`` threads in all.
   *Vectorised* (``input_vectorized_thread_reduce_impl``): the thread loads vectors
   ``g, g + T, g + 2T, ...`` of ``vec`` elements; accumulator ``i`` adds element ``i`` of
   each vector.  The last ``n % vec`` elements go to lanes ``0, 1, ...`` of block 0, into
   accumulator 0.  *Scalar* (``thread_reduce_impl``): the thread reads elements
   ``g + m T``; element ``m`` goes to accumulator ``m % accumulators``.  Either way the
   accumulators start at the identity ``+0.0`` and are then combined left to right,
   ``((a0 + a1) + a2) + a3``.
3. Block stage (``block_x_reduce``).  Shared memory: ``v[t] += v[t + offset]`` for
   ``offset = block_width/2, ..., 32``; then a warp shuffle
   ``v[t] += shfl_down(v, offset)`` with ``offset = 1, 2, 4, 8, 16`` (increasing), which
   makes lane 0's result a balanced tree over *adjacent* pairs:
   ``((v0 + v1) + (v2 + v3)) + ...``.
4. Grid stage (``global_reduce``), only when ``blocks > 1``.  Each block's value goes
   to global memory; the last block to finish reads them in a fixed order: thread ``t``
   adds partials ``t, t + block_width, ...`` to ``+0.0``, and then the block reduces
   as in step 3.  So the result does not depend on which block finishes last.
5. ``float16``/``bfloat16`` accumulate in float32 and are rounded once at the end
   (``ops.project``); float32 accumulates in float32 and float64 in float64.

Assumptions, each with the source line it rests on
--------------------------------------------------
A1  Accumulation type.  ReduceSumProdKernel.cu ``reduce_dispatch``:
    ``if (iter.dtype() == kHalf) { return OpFunctor<at::Half, float>{}(iter); }`` and the
    same for ``kBFloat16``; other types use ``sum_functor<scalar_t>`` with
    ``acc_t = scalar_t``; the combine is ``return a + b;``.
A2  Vector width and accumulators.  ReduceSumProdKernel.cu ``sum_functor``: for 16-bit
    types ``gpu_reduce_kernel<scalar_t, out_t, /*vt0=*/4, /*input_vec_size=*/8>``;
    otherwise ``gpu_reduce_kernel<scalar_t, out_t>`` whose defaults are
    ``int vt0=4, int input_vec_size=vt0`` (Reduce.cuh ``gpu_reduce_kernel``).
A3  When input is vectorised.  Reduce.cuh ``setReduceConfig`` (CUDA branch):
    ``if (reduction_on_fastest_striding_dimension && dim0 > 128 && iter.num_reduce_dims()
    == 1 && vt0 >= input_vec_size)`` then ``config.vectorize_input = true; dim0 /=
    input_vec_size;``.  With A2 this means 16-bit sums are *not* vectorised on CUDA in
    this source version (4 >= 8 is false): they use the scalar path with 4 accumulators.
    A ROCm build takes the ``#ifdef USE_ROCM`` branch ``dim0 >= 128`` without that check.
A4  Block shape.  ``set_block_dimension``: ``dim0_pow2 = dim0 < max_num_threads ?
    last_pow2(dim0) : max_num_threads`` ... ``block_width = std::min(dim0_pow2,
    int(max_num_threads / block_height))`` with ``MAX_NUM_THREADS = 512``
    (``mnt_wrapper``; 256 only for complex double) and ``dim1 = num_outputs = 1``, so
    ``block_height = 1``.
A5  Split over warps and blocks.  ``setReduceConfig``: ``warp_split_threshold =
    std::min<int>(block_height * 16, max_values_per_thread)``; ``blocks_per_sm =
    max_threads_per_mp / config.num_threads``; ``target_grid_size = num_mp *
    blocks_per_sm``; ``config.ctas_per_output = std::max(std::min<int>(ctas_per_output1,
    ctas_per_output2), ctas_per_output3)`` where the three are ``div_up(target_grid_size,
    grid)``, ``div_up(values_per_thread, 16)``, ``div_up(values_per_thread, 256)``, and
    ``values_per_thread() = div_up(num_inputs, step_input)`` counts *elements* (not
    vectors).  ``num_mp`` is ``multiProcessorCount`` (132 on H100/H200 SXM) and
    ``max_threads_per_mp`` is ``maxThreadsPerMultiProcessor`` (2048 on sm_80/sm_90;
    1536 on sm_86/sm_89): both are inputs of this model.
A6  Thread indexing.  ``input_idx()``: ``lane * input_mult[BLOCK_X] + warp *
    input_mult[BLOCK_Y] + cta2 * input_mult[CTA]`` with ``input_mult = {1, block_width,
    block_width}`` from ``split_input``; the stride is ``step_input = block_width *
    blocks``.
A7  Vectorised thread loop.  ``input_vectorized_thread_reduce_impl``: ``while (idx *
    input_vec_size + input_vec_size - 1 < end) { ... value_list[i] =
    ops.reduce(value_list[i], values_vec.val[i], ...); idx += stride; }``; tail:
    ``int idx = tail_start + threadIdx.x; if (idx < end) value_list[0] = ...`` guarded
    by ``should_reduce_tail()`` (``threadIdx.y == 0`` and ``blockIdx.y == 0``); combine:
    ``value_list[0] = ops.combine(value_list[0], value_list[i]);`` for ``i = 1..``.
    The data pointer is assumed aligned to ``vec * itemsize`` bytes (``shift == 0``),
    true for a fresh tensor from the caching allocator, not for every slice.
A8  Scalar thread loop.  ``thread_reduce_impl``: ``while (idx + (vt0 - 1) * stride <
    end)`` loads ``idx + i * stride`` into accumulator ``i``, ``idx += stride * vt0``;
    the tail continues with accumulators ``0, 1, ...`` in order.
A9  Block and grid reduction.  ``block_x_reduce``: ``for (int offset = dim_x/2; offset >=
    warpSize; offset >>= 1)`` over shared memory, then ``for (int offset = 1; offset <
    dim_x; offset <<= 1) { arg_t other = ops.warp_shfl_down(value[i], offset); ...}``.
    ``block_y_reduce`` does nothing with ``blockDim.y == 1``.  ``global_reduce``:
    ``for (; input_offset < config.ctas_per_output; input_offset += step)`` with
    ``input_offset = threadIdx.x`` and ``step = blockDim.x * blockDim.y``, from
    ``value = ident``, then ``block_y_reduce`` and ``block_x_reduce``.  ``warpSize = 32``.
A10 Version.  PyTorch PR #165055 (Oct 2025, "Vectorize 8 elements on 16 bit data types
    for sum/mean") may have enabled 8-wide vectorised loads for 16-bit sums on CUDA in
    later releases; a vendor fork also shows float32 using ``vt0 = 8,
    input_vec_size = 8`` when the reduced size is a multiple of 1024.  We could not read
    either diff.  Pass ``CudaReduceConfig(vec=8, accumulators=8)`` to model those.
A11 Index width.  Inputs whose byte extent exceeds 2^31 - 1 are split into sub-iterators
    by ``iter.with_32bit_indexing()``; that is not modelled (NotImplementedError).
A12 Arithmetic.  Every ``a + b`` is one IEEE round-to-nearest-even addition in the
    accumulation type (no fast-math reassociation, no FMA on a plain add); ``+0.0`` is
    the identity, so padding with zeros is exact (an accumulator that starts at ``+0.0``
    can never become ``-0.0`` under round-to-nearest).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np

WARP_SIZE = 32
MAX_NUM_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
VECTORIZE_MIN_DIM0 = 128  # "dim0 > 128"
INT32_MAX = 2**31 - 1

_BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
_ACCUMULATOR = {
    np.dtype(np.float16): np.dtype(np.float32),
    _BFLOAT16: np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


@dataclass(frozen=True)
class CudaReduceConfig:
    """Launch parameters of the reduction kernel.

    ``threads_per_block``: with ``blocks=None`` the cap (512 in PyTorch) from which the block
    width is chosen as PyTorch does; with ``blocks`` given, the exact block width (a power of
    two).  ``vec`` is ``input_vec_size`` and ``accumulators`` is ``vt0``: the input is read in
    vectors of ``vec`` (with ``vec`` accumulators) only when ``n > 128``, ``vec > 1`` and
    ``accumulators >= vec`` (A3); otherwise element by element into ``accumulators``
    accumulators.
    """

    threads_per_block: int = 512
    blocks: int | None = None  # None: choose like ReduceConfig does for this n and sm_count
    sm_count: int = 132  # H100/H200 SXM
    vec: int = 4  # elements per vector load (input_vec_size)
    accumulators: int = 4  # vt0
    max_threads_per_sm: int = 2048  # maxThreadsPerMultiProcessor (sm_80, sm_90)

    def __post_init__(self) -> None:
        t = self.threads_per_block
        if t < 1 or t & (t - 1):
            raise ValueError(f"threads_per_block must be a power of two, got {t}")
        if self.blocks is not None and self.blocks < 1:
            raise ValueError("blocks must be at least 1")
        if self.vec < 1 or self.accumulators < 1 or self.sm_count < 1 or self.max_threads_per_sm < 1:
            raise ValueError("vec, accumulators, sm_count and max_threads_per_sm must be positive")


@dataclass(frozen=True)
class CudaLaunch:
    """What the kernel actually does for one ``n``: the resolved configuration."""

    n: int
    threads_per_block: int
    blocks: int
    vectorized: bool
    vec: int  # elements per load: config.vec when vectorized, else 1
    accumulators: int  # per thread: config.vec when vectorized, else config.accumulators

    @property
    def threads(self) -> int:
        return self.threads_per_block * self.blocks


def _last_pow2(n: int) -> int:
    """Reduce.cuh ``last_pow2``: the largest power of two <= n, at least 1."""
    return max(1, 1 << (n.bit_length() - 1)) if n > 0 else 1


def _vectorizes(dim0: int, config: CudaReduceConfig) -> bool:
    return dim0 > VECTORIZE_MIN_DIM0 and config.vec > 1 and config.accumulators >= config.vec


def cuda_launch(n: int, config: CudaReduceConfig | None = None) -> CudaLaunch:
    """Resolve ``config`` for ``n`` elements the way ``setReduceConfig`` does (see A3-A6)."""
    if n < 1:
        raise ValueError("n must be at least 1")
    config = config or CudaReduceConfig()
    vectorized = _vectorizes(n, config)
    if config.blocks is not None:
        width, blocks = config.threads_per_block, config.blocks
    else:
        dim0 = n // config.vec if vectorized else n
        cap = config.threads_per_block
        width = _last_pow2(dim0) if dim0 < cap else cap  # set_block_dimension, block_height = 1
        values_per_thread = -(-n // width)  # div_up(num_inputs, step_input): elements, also when vectorized
        block_height = 1  # one output
        split_across_warps = values_per_thread >= min(block_height * MIN_VALUES_PER_THREAD, MAX_VALUES_PER_THREAD)
        target = config.sm_count * (config.max_threads_per_sm // (width * block_height))
        grid_x = 1  # div_up(num_outputs / output_vec_size, step_output)
        blocks = 1
        if split_across_warps and values_per_thread >= MAX_VALUES_PER_THREAD and grid_x <= target:
            blocks = max(
                min(-(-target // grid_x), -(-values_per_thread // MIN_VALUES_PER_THREAD)),
                -(-values_per_thread // MAX_VALUES_PER_THREAD),
            )
    if vectorized and width < config.vec:
        raise ValueError("a vectorized launch needs at least `vec` threads per block for the tail")
    return CudaLaunch(
        n=n,
        threads_per_block=width,
        blocks=blocks,
        vectorized=vectorized,
        vec=config.vec if vectorized else 1,
        accumulators=config.vec if vectorized else config.accumulators,
    )


def _dtype_of(dtype) -> np.dtype:
    text = str(dtype)
    if text.startswith("torch."):
        text = text.removeprefix("torch.")
        return _BFLOAT16 if text == "bfloat16" else np.dtype(text)
    return np.dtype(dtype)


def cuda_config_for(n: int, dtype, sm_count: int = 132, max_threads_per_sm: int = 2048) -> CudaReduceConfig:
    """The configuration torch would use for ``x.sum()`` of ``n`` contiguous elements (see A2-A5).

    ``dtype``: a NumPy dtype (``ml_dtypes.bfloat16`` for bfloat16), or a torch dtype.
    16-bit types get ``vec=8, accumulators=4``, which on CUDA means the scalar path (A3).
    """
    dt = _dtype_of(dtype)
    if dt not in _ACCUMULATOR:
        raise TypeError(f"unsupported dtype {dt}")
    vec = 8 if dt.itemsize == 2 else 4
    base = CudaReduceConfig(sm_count=sm_count, vec=vec, accumulators=4, max_threads_per_sm=max_threads_per_sm)
    launch = cuda_launch(max(n, 1), base)
    return replace(base, threads_per_block=launch.threads_per_block, blocks=launch.blocks)


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


def _block_reduce(values: np.ndarray) -> np.ndarray:
    """``block_x_reduce`` of every row of ``values`` (shape (blocks, block_width)): lane 0's result per row."""
    v = values
    width = v.shape[1]
    while width > WARP_SIZE:  # shared memory: v[t] += v[t + offset], offset = width/2 .. 32
        width //= 2
        v = v[:, :width] + v[:, width : 2 * width]
    while width > 1:  # shfl_down with offset 1, 2, 4, ...: lane 0 sees adjacent pairs
        v = v[:, 0::2] + v[:, 1::2]
        width //= 2
    return v[:, 0]


def cuda_reduce_accumulated(x: np.ndarray, config: CudaReduceConfig | None = None) -> np.generic:
    """The model's sum in the accumulation type (float32 for 16-bit inputs), before the final cast."""
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {x.shape}")
    if x.dtype not in _ACCUMULATOR:
        raise TypeError(f"unsupported dtype {x.dtype}; expected float16, bfloat16, float32 or float64")
    acc = _ACCUMULATOR[x.dtype]
    n = x.size
    if n == 0:
        return acc.type(0)
    if (n - 1) * x.dtype.itemsize + 1 > INT32_MAX:
        raise NotImplementedError("inputs needing 64-bit indexing are split by PyTorch; not modelled")
    launch = cuda_launch(n, config or cuda_config_for(n, x.dtype))
    xa = np.ascontiguousarray(x, dtype=acc)  # widening 16-bit -> float32 is exact
    with np.errstate(over="ignore", invalid="ignore"):
        threads = _thread_values(xa, launch).reshape(launch.blocks, launch.threads_per_block)
        partials = _block_reduce(threads)
        if launch.blocks == 1:
            return partials[0]
        width = launch.threads_per_block
        rows = -(-launch.blocks // width)
        staged = _padded(partials, rows * width).reshape(rows, width)
        last = np.zeros(width, dtype=acc)  # value = ident; thread t adds partials t, t + width, ...
        for r in range(rows):
            last += staged[r]
        return _block_reduce(last.reshape(1, width))[0]


def cuda_sum_model(x: np.ndarray, config: CudaReduceConfig | None = None) -> np.generic:
    """Model of ``torch.sum`` of a 1-D contiguous CUDA tensor, returned in ``x``'s dtype.

    ``config=None`` uses ``cuda_config_for(len(x), x.dtype)`` (an H100/H200 with 132 SMs).
    float16 and bfloat16 (``ml_dtypes.bfloat16``) accumulate in float32 and are rounded to
    nearest even once at the end.  A model, not yet checked against real hardware.
    """
    x = np.asarray(x)
    total = cuda_reduce_accumulated(x, config)
    with np.errstate(over="ignore"):
        return x.dtype.type(total)


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
