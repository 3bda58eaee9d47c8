"""The launch rules of PyTorch's CUDA reduction kernel for a 1-D contiguous ``x.sum()`` / ``x.mean()``.

Which kernel version runs (``KERNELS``), and how ``setReduceConfig`` of that version resolves ``n``
elements into a block width, a block count and vectorised or scalar loads (``cuda_launch``,
``cuda_config_for``): stage 1 of the kernel that core.kernels.cuda_model describes and adds up.

Kernel versions (``KERNELS``) and what differs from the pinned one
------------------------------------------------------------------
* ``"torch-2.13"`` (pinned): as core.kernels.cuda_model describes it, stage by stage, with its sources.
* ``"fork-2025"``: Reduce.cuh of cyyever/pytorch@0660972b2e907c38dff07fb1dbbb4c3310791427 (a fork that
  tracks upstream; the text this app's model followed before it was pinned) with the ``sum_functor`` of
  cyyever/pytorch@ca0147539527. Differences: the warp shuffle runs with **increasing** offsets ``1, 2,
  ..., 16`` (lane 0 then sums adjacent pairs first: ``((v0 + v1) + (v2 + v3)) + ...``); input is
  vectorised only when ``dim0 > 128`` **and** ``vt0 >= input_vec_size``, so 16-bit sums (vt0 4, vector
  8) take the scalar path with 4 accumulators, and n = 128 is not vectorised.
* ``"torch-1.0"``: Reduce.cuh of pytorch/pytorch@6f75eba8e6b15eff01905d8fdff5cff65fb82a52 (2019; the
  launch code sits inside ``gpu_reduce_kernel``), ReduceOpsKernel.cu of pytorch/pytorch@026840f525cc
  (``mean_kernel_impl``: ``float factor = float(iter.num_output_elements()) / iter.numel()`` for every
  dtype) and SharedReduceOps.h of pytorch/pytorch@038e2d9f1701 (``MeanOps::project`` returns ``a *
  factor``). The published results behind it are from torch 1.0.1 and 1.1.0 (core/kernels/cuda_published.py).
  Differences: **no input vectorisation** (``thread_reduce`` with ``vt0 = 4`` strided accumulators for
  every n); ``ctas_per_output = min(ceil(values_per_thread / 16), 65535)`` whenever
  ``values_per_thread >= 256`` and there are at most 4096 outputs, **independent of the SM count**;
  warp shuffle with **increasing** offsets; ``block_y_reduce`` before ``block_x_reduce`` (no effect with
  one row); a double mean multiplies by the **float** factor ``fl32(1/n)``. No CUDA bfloat16.
Between these three, upstream also had a generation (2022, e.g. Creativity-Spot/pytorch@bee00bab5ab2)
that vectorised without dividing ``dim0`` by the vector width (so the block width followed ``n``); no
published result we found needs it, and it is not modelled.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.arith.formats import BFLOAT16

MAX_NUM_THREADS = 512  # mnt_wrapper<T>::MAX_NUM_THREADS
MIN_VALUES_PER_THREAD = 16
MAX_VALUES_PER_THREAD = 256
VECTORIZE_MIN_DIM0 = 128
MAX_CTAS_TORCH_1_0 = 65535

_BFLOAT16 = BFLOAT16.numpy_dtype
ACCUMULATION_DTYPES = {  # input dtype -> the dtype the kernel adds it up in
    np.dtype(np.float16): np.dtype(np.float32),
    _BFLOAT16: np.dtype(np.float32),
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


@dataclass(frozen=True, kw_only=True)
class CudaKernel:
    """One version of the reduction kernel's rules, with the source it was read from."""

    key: str
    title: str
    torch_versions: str
    source: str
    vectorize: str  # "ge128": dim0 >= 128; "gt128_vt0": dim0 > 128 and vt0 >= vec; "never"
    ctas: str  # "sm_target": SM-count based; "div16": ceil(vpt / 16) capped at 65535
    shuffle: str  # "decreasing" (dim_x/2 .. 1) or "increasing" (1 .. dim_x/2)
    vec_16bit: int  # input_vec_size for float16/bfloat16
    vec_other: int  # input_vec_size for float32/float64
    vt0: int  # scalar-path accumulators
    double_mean_factor: str  # "double" or "float": the type of the mean's factor for a float64 input
    bfloat16: bool  # whether the release has a CUDA bfloat16 sum


KERNELS: dict[str, CudaKernel] = {
    k.key: k
    for k in (
        CudaKernel(
            key="torch-2.13",
            title="torch 2.13 (pinned)",
            torch_versions="2.13.0 (requirements.txt)",
            source="pytorch/pytorch@cf30153c4c131c8164ee7798e5022d810682e2cb Reduce.cuh and SharedReduceOps.h "
                   "(as shipped in the torch 2.13.0 wheel); sum_functor/mean_kernel_impl as in "
                   "cyyever/pytorch@ca0147539527 (PR #165055 generation)",
            vectorize="ge128", ctas="sm_target", shuffle="decreasing", vec_16bit=8, vec_other=4, vt0=4,
            double_mean_factor="double", bfloat16=True,
        ),
        CudaKernel(
            key="fork-2025",
            title="pre-2.13 upstream as stored in a fork (the app's earlier model)",
            torch_versions="between the SM-count launch rules and PR #165055; exact releases not established",
            source="cyyever/pytorch@0660972b2e907c38dff07fb1dbbb4c3310791427 Reduce.cuh; "
                   "cyyever/pytorch@ca0147539527ba140c53a3f3fac017595692388a ReduceSumProdKernel.cu",
            vectorize="gt128_vt0", ctas="sm_target", shuffle="increasing", vec_16bit=8, vec_other=4, vt0=4,
            double_mean_factor="double", bfloat16=True,
        ),
        CudaKernel(
            key="torch-1.0",
            title="torch 1.0/1.1 (2019)",
            torch_versions="1.0.1, 1.1.0 (the published results in core/kernels/cuda_published.py)",
            source="pytorch/pytorch@6f75eba8e6b15eff01905d8fdff5cff65fb82a52 Reduce.cuh; "
                   "pytorch/pytorch@026840f525ccff80e08f199217f39f4ea639906d ReduceOpsKernel.cu; "
                   "pytorch/pytorch@038e2d9f1701b316bfb919e70fbb7df4e7f74b3e SharedReduceOps.h",
            vectorize="never", ctas="div16", shuffle="increasing", vec_16bit=4, vec_other=4, vt0=4,
            double_mean_factor="float", bfloat16=False,
        ),
    )
}
PINNED_KERNEL = "torch-2.13"

_DIFFERENCE_TEXT = {
    "vectorize": {
        "ge128": "vectorised loads when n >= 128 (block width from n / vector width)",
        "gt128_vt0": "vectorised loads only when n > 128 and vt0 >= vector width (16-bit: scalar path)",
        "never": "no vectorised loads: vt0 = 4 strided accumulators for every n",
    },
    "ctas": {
        "sm_target": "blocks per output from the SM count: max(min(SMs x blocks/SM, ceil(vpt/16)), ceil(vpt/256))",
        "div16": "blocks per output = min(ceil(vpt/16), 65535), independent of the SM count",
    },
    "shuffle": {
        "decreasing": "warp shuffle with decreasing offsets 16, 8, 4, 2, 1 (one halving tree per block)",
        "increasing": "warp shuffle with increasing offsets 1, 2, 4, 8, 16 (adjacent pairs first)",
    },
}


def kernel_differences(key: str, reference: str = PINNED_KERNEL) -> list[str]:
    """How kernel ``key`` differs from ``reference`` (default: the pinned one), one line per rule."""
    a, b = KERNELS[key], KERNELS[reference]
    out = []
    for name in ("vectorize", "ctas", "shuffle"):
        if getattr(a, name) != getattr(b, name):
            mine, theirs = _DIFFERENCE_TEXT[name][getattr(a, name)], _DIFFERENCE_TEXT[name][getattr(b, name)]
            out.append(f"{mine} (pinned: {theirs})")
    if a.vec_16bit != b.vec_16bit:
        out.append(f"16-bit vector width {a.vec_16bit} (pinned: {b.vec_16bit})")
    if a.double_mean_factor != b.double_mean_factor:
        out.append(f"float64 mean multiplies by a {a.double_mean_factor} factor (pinned: {b.double_mean_factor})")
    if a.bfloat16 != b.bfloat16:
        out.append("no CUDA bfloat16" if not a.bfloat16 else "CUDA bfloat16")
    return out


@dataclass(frozen=True, kw_only=True)
class CudaReduceConfig:
    """Launch parameters of the reduction kernel.

    ``threads_per_block``: with ``blocks=None`` the cap (512 in PyTorch) from which the block width is
    chosen by the kernel's rules; with ``blocks`` given, the exact block width (a power of two).
    ``vec`` is ``input_vec_size`` and ``accumulators`` is ``vt0``; whether the input is read in vectors
    follows ``kernel``'s rule (``KERNELS``) for the ``n`` it is applied to.
    """

    threads_per_block: int = 512
    blocks: int | None = None  # None: choose like setReduceConfig does for this n and sm_count
    sm_count: int = 132  # H100/H200 SXM
    vec: int = 4  # elements per vector load (input_vec_size)
    accumulators: int = 4  # vt0
    max_threads_per_sm: int = 2048  # maxThreadsPerMultiProcessor (sm_80, sm_90)
    kernel: str = PINNED_KERNEL

    def __post_init__(self) -> None:
        t = self.threads_per_block
        if t < 1 or t & (t - 1):
            raise ValueError(f"threads_per_block must be a power of two, got {t}")
        if self.blocks is not None and self.blocks < 1:
            raise ValueError("blocks must be at least 1")
        if self.vec < 1 or self.accumulators < 1 or self.sm_count < 1 or self.max_threads_per_sm < 1:
            raise ValueError("vec, accumulators, sm_count and max_threads_per_sm must be positive")
        if self.kernel not in KERNELS:
            raise ValueError(f"unknown kernel {self.kernel!r}; known: {', '.join(KERNELS)}")


@dataclass(frozen=True, kw_only=True)
class CudaLaunch:
    """What the kernel actually does for one ``n``: the resolved configuration."""

    n: int
    threads_per_block: int
    blocks: int
    vectorized: bool
    vec: int  # elements per load: config.vec when vectorized, else 1
    accumulators: int  # per thread: config.vec when vectorized, else config.accumulators
    kernel: str = PINNED_KERNEL
    shuffle: str = "decreasing"

    @property
    def threads(self) -> int:
        return self.threads_per_block * self.blocks


def _last_pow2(n: int) -> int:
    """Reduce.cuh ``last_pow2``: the largest power of two <= n, at least 1."""
    return max(1, 1 << (n.bit_length() - 1)) if n > 0 else 1


def _vectorizes(n: int, config: CudaReduceConfig) -> bool:
    rule = KERNELS[config.kernel].vectorize
    if rule == "never" or config.vec < 2:
        return False
    if rule == "ge128":
        return n >= VECTORIZE_MIN_DIM0
    return n > VECTORIZE_MIN_DIM0 and config.accumulators >= config.vec  # "gt128_vt0"


def cuda_launch(n: int, config: CudaReduceConfig | None = None) -> CudaLaunch:
    """Resolve ``config`` for ``n`` elements the way ``setReduceConfig`` of ``config.kernel`` does."""
    if n < 1:
        raise ValueError("n must be at least 1")
    config = config or CudaReduceConfig()
    kernel = KERNELS[config.kernel]
    vectorized = _vectorizes(n, config)
    if config.blocks is not None:
        width, blocks = config.threads_per_block, config.blocks
    else:
        dim0 = n // config.vec if vectorized else n
        cap = config.threads_per_block
        width = _last_pow2(dim0) if dim0 < cap else cap  # set_block_dimension with block_height = 1
        values_per_thread = -(-n // width)  # div_up(num_inputs, step_input): elements, also when vectorized
        split_across_warps = values_per_thread >= min(MIN_VALUES_PER_THREAD, MAX_VALUES_PER_THREAD)
        blocks = 1
        if split_across_warps and values_per_thread >= MAX_VALUES_PER_THREAD:
            if kernel.ctas == "div16":  # torch 1.0: num_outputs (1) <= 4096 always holds here
                blocks = min(-(-values_per_thread // MIN_VALUES_PER_THREAD), MAX_CTAS_TORCH_1_0)
            else:
                target = config.sm_count * (config.max_threads_per_sm // width)
                grid_x = 1  # div_up(num_outputs / output_vec_size, step_output)
                if grid_x <= target:
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
        kernel=config.kernel,
        shuffle=kernel.shuffle,
    )


def numpy_dtype(dtype) -> np.dtype:
    """A NumPy dtype (``ml_dtypes.bfloat16`` for bfloat16) or a torch dtype, as a NumPy dtype."""
    text = str(dtype)
    if text.startswith("torch."):
        text = text.removeprefix("torch.")
        return _BFLOAT16 if text == "bfloat16" else np.dtype(text)
    return np.dtype(dtype)


def cuda_config_for(n: int, dtype, sm_count: int = 132, max_threads_per_sm: int = 2048,
                    kernel: str = PINNED_KERNEL) -> CudaReduceConfig:
    """The configuration ``kernel`` uses for ``x.sum()`` / ``x.mean()`` of ``n`` contiguous elements.

    ``dtype``: a NumPy dtype (``ml_dtypes.bfloat16`` for bfloat16), or a torch dtype. The pinned kernel
    reads 16-bit inputs in vectors of 8 (8 accumulators) and wider ones in vectors of 4.
    """
    dt = numpy_dtype(dtype)
    if dt not in ACCUMULATION_DTYPES:
        raise TypeError(f"unsupported dtype {dt}")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}; known: {', '.join(KERNELS)}")
    k = KERNELS[kernel]
    if dt == _BFLOAT16 and not k.bfloat16:
        raise ValueError(f"kernel {kernel!r} ({k.torch_versions}) has no CUDA bfloat16 reduction")
    vec = k.vec_16bit if dt.itemsize == 2 else k.vec_other
    base = CudaReduceConfig(sm_count=sm_count, vec=vec, accumulators=k.vt0, max_threads_per_sm=max_threads_per_sm,
                            kernel=kernel)
    launch = cuda_launch(max(n, 1), base)
    return replace(base, threads_per_block=launch.threads_per_block, blocks=launch.blocks)
