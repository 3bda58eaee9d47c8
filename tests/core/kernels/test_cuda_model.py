"""core.kernels.cuda_model and cuda_launch: the vectorised model against a slow loop-by-loop reference, error
bounds and properties.

No GPU is involved: these tests check that the model computes the algorithm it describes (the
kernel of torch 2.13 and the older kernel versions in ``KERNELS``). Whether that algorithm is
what a GPU does is checked against published GPU results in test_cuda_model_published.py.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

from core.arith.exact import exact_sum_fraction
from core.arith.formats import bits_of
from core.kernels.cuda_launch import (
    KERNELS,
    PINNED_KERNEL,
    CudaReduceConfig,
    cuda_config_for,
    cuda_launch,
    kernel_differences,
)
from core.kernels.cuda_model import (
    cuda_mean_factor,
    cuda_mean_model,
    cuda_reduce_accumulated,
    cuda_sum_model,
    tree_depth,
)

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.view(UINT[a.dtype.itemsize]) == b.view(UINT[b.dtype.itemsize])


def acc_type(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


# --------------------------------------------------------------------------- slow reference, written as the kernel is


def block_x_reduce_reference(values: list, add, shuffle: str = "decreasing") -> object:
    """Reduce.cuh block_x_reduce for one block, thread by thread; returns lane 0's value."""
    value = list(values)
    dim_x = len(value)
    if dim_x > 32:
        shared = list(value)
        offset = dim_x // 2
        while offset >= 32:  # for (offset = dim_x/2; offset >= warpSize; offset >>= 1)
            for t in range(dim_x):
                if t < offset and t + offset < dim_x:
                    value[t] = add(value[t], shared[t + offset])
                    shared[t] = value[t]
            offset //= 2
        dim_x = 32
    if shuffle == "decreasing":  # torch 2.13: for (offset = dim_x >> 1; offset > 0; offset >>= 1)
        offsets = []
        offset = dim_x // 2
        while offset > 0:
            offsets.append(offset)
            offset //= 2
    else:  # older kernels: for (offset = 1; offset < dim_x; offset <<= 1)
        offsets = []
        offset = 1
        while offset < dim_x:
            offsets.append(offset)
            offset *= 2
    for offset in offsets:  # shfl_down: lanes past the block keep their own value (never read by lane 0)
        other = [value[t + offset] if t + offset < dim_x else value[t] for t in range(dim_x)]
        value = [add(value[t], other[t]) for t in range(dim_x)]
    return value[0]


def cuda_sum_reference(x: np.ndarray, threads: int, blocks: int, vec: int, accs: int, vectorized: bool, acc,
                       shuffle: str = "decreasing"):
    """The whole kernel with explicit loops over blocks, threads, accumulators and elements."""

    def add(a, b):
        return acc(acc(a) + acc(b))

    n = x.size
    total_threads = threads * blocks
    partials = []
    for b in range(blocks):
        thread_values = []
        for lane in range(threads):
            g = b * threads + lane
            if vectorized:  # input_vectorized_thread_reduce_impl
                value_list = [acc(0.0)] * vec
                idx = g
                while idx * vec + vec - 1 < n:
                    for i in range(vec):
                        value_list[i] = add(value_list[i], x[idx * vec + i])
                    idx += total_threads
                tail = n - n % vec + lane
                if b == 0 and tail < n:
                    value_list[0] = add(value_list[0], x[tail])
            else:  # thread_reduce_impl
                value_list = [acc(0.0)] * accs
                idx = g
                while idx + (accs - 1) * total_threads < n:
                    for i in range(accs):
                        value_list[i] = add(value_list[i], x[idx + i * total_threads])
                    idx += total_threads * accs
                for i in range(accs):
                    if idx >= n:
                        break
                    value_list[i] = add(value_list[i], x[idx])
                    idx += total_threads
            value = value_list[0]
            for i in range(1, len(value_list)):
                value = add(value, value_list[i])
            thread_values.append(value)
        partials.append(block_x_reduce_reference(thread_values, add, shuffle))
    if blocks == 1:
        return partials[0]
    last_block = []
    for lane in range(threads):  # global_reduce in the last block
        value = acc(0.0)
        offset = lane
        while offset < blocks:
            value = add(value, partials[offset])
            offset += threads
        last_block.append(value)
    return block_x_reduce_reference(last_block, add, shuffle)


def reference_for(x: np.ndarray, config: CudaReduceConfig | None, acc=None):
    launch = cuda_launch(x.size, config or cuda_config_for(x.size, x.dtype))
    acc = acc or acc_type(x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return cuda_sum_reference(
            x, launch.threads_per_block, launch.blocks, launch.vec, launch.accumulators, launch.vectorized, acc,
            launch.shuffle,
        )


def data(rng: np.random.Generator, n: int, dtype, kind: int = 0) -> np.ndarray:
    if kind == 0:
        x = rng.standard_normal(n)
    elif kind == 1:
        x = rng.standard_normal(n) * np.exp2(rng.integers(-10, 10, n))
    else:
        x = rng.uniform(0.0, 1.0, n)
    return x.astype(dtype)


SMALL_CONFIGS = [
    None,
    CudaReduceConfig(threads_per_block=32, blocks=3),
    CudaReduceConfig(threads_per_block=64, blocks=2, vec=2, accumulators=2),
    CudaReduceConfig(threads_per_block=16, blocks=5, vec=8, accumulators=4),  # 16-bit in 2.13: 8-wide vectors
    CudaReduceConfig(threads_per_block=16, blocks=5, vec=8, accumulators=4, kernel="fork-2025"),  # scalar path
    CudaReduceConfig(threads_per_block=128, blocks=7, vec=8, accumulators=8),
    CudaReduceConfig(threads_per_block=8, blocks=1, vec=1, accumulators=3),
    CudaReduceConfig(threads_per_block=32, blocks=70),  # more partials than threads: 3 rows in global_reduce
    CudaReduceConfig(threads_per_block=64, blocks=3, kernel="fork-2025"),  # increasing shuffle offsets
    CudaReduceConfig(threads_per_block=32, blocks=4, kernel="torch-1.0"),  # no vectorisation at any n
    CudaReduceConfig(threads_per_block=32, blocks=70, kernel="torch-1.0"),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_model_equals_loop_reference_on_small_sizes(dtype):
    rng = np.random.default_rng(17)
    for n in [1, 2, 3, 5, 8, 31, 32, 33, 127, 128, 129, 130, 131, 200, 511, 513, 1000, 2049, 4099]:
        x = data(rng, n, dtype, n % 3)
        for config in SMALL_CONFIGS:
            expected = reference_for(x, config)
            assert same_bits(expected, cuda_reduce_accumulated(x, config)), (n, config)
            with np.errstate(over="ignore"):
                assert same_bits(dtype.type(expected), cuda_sum_model(x, config))


@pytest.mark.parametrize(
    ("n", "config"),
    [
        (140_000, None),  # default launch: 512 threads x 18 blocks
        (20_000, CudaReduceConfig(threads_per_block=64)),  # chosen by the ReduceConfig rules: 64 x 20
        (40_001, CudaReduceConfig(threads_per_block=128, sm_count=2, max_threads_per_sm=256)),  # target grid: 4
    ],
)
def test_model_equals_loop_reference_with_several_blocks(n, config):
    x = data(np.random.default_rng(n), n, np.float32, 1)
    launch = cuda_launch(n, config or cuda_config_for(n, x.dtype))
    assert launch.blocks > 1
    assert same_bits(reference_for(x, config), cuda_sum_model(x, config))


def test_launch_choices_follow_the_source():
    """setReduceConfig of torch 2.13 (Reduce.cuh L1039-1186 of the wheel's copy)."""
    f32 = cuda_config_for(100, np.float32)
    assert not cuda_launch(100, f32).vectorized and f32.threads_per_block == 64 and f32.blocks == 1
    one_k = cuda_launch(1000, cuda_config_for(1000, np.float32))
    assert one_k.vectorized and one_k.threads_per_block == 128 and one_k.blocks == 1  # last_pow2(1000 // 4)
    big = cuda_config_for(10**7, np.float32)
    assert (big.threads_per_block, big.blocks) == (512, 528)  # 132 SMs x (2048 // 512)
    assert cuda_config_for(10**7, np.float32, sm_count=108).blocks == 432
    assert cuda_config_for(10**8, np.float32).blocks == 763  # ceil(ceil(1e8 / 512) / 256) > 528
    assert cuda_config_for(10**6, np.float32).blocks == 123  # ceil(ceil(1e6 / 512) / 16) < 528
    half = cuda_config_for(10**6, np.float16)
    half_launch = cuda_launch(10**6, half)
    assert (half.vec, half.accumulators) == (8, 4)
    assert half_launch.vectorized and half_launch.accumulators == 8 and half_launch.vec == 8  # 16-bit sums: 8 at a time
    assert cuda_config_for(5000, torch.bfloat16) == cuda_config_for(5000, BF16)
    assert cuda_config_for(5000, torch.float64).vec == 4
    assert cuda_launch(128, cuda_config_for(128, np.float32)).vectorized  # "dim0 >= 128" (L1106)
    assert not cuda_launch(127, cuda_config_for(127, np.float32)).vectorized
    assert cuda_launch(5000, half).shuffle == "decreasing"


def test_older_kernel_versions_launch_as_their_source_says():
    # fork-2025 (cyyever/pytorch@0660972b): "dim0 > 128 && ... && vt0 >= input_vec_size", increasing shuffle
    fork128 = cuda_launch(128, cuda_config_for(128, np.float32, kernel="fork-2025"))
    assert not fork128.vectorized and fork128.shuffle == "increasing"
    fork_half = cuda_launch(10**6, cuda_config_for(10**6, np.float16, kernel="fork-2025"))
    assert not fork_half.vectorized and fork_half.accumulators == 4  # vt0 4 < vector 8: scalar path
    assert cuda_config_for(10**7, np.float32, kernel="fork-2025").blocks == 528  # same SM-count rule as 2.13
    # torch-1.0 (pytorch/pytorch@6f75eba8): no vectorisation, ctas = min(ceil(vpt / 16), 65535) for any SM count
    old = cuda_config_for(10**6, np.float32, sm_count=28, kernel="torch-1.0")
    assert (old.threads_per_block, old.blocks) == (512, 123)
    assert cuda_config_for(10**6, np.float32, sm_count=132, kernel="torch-1.0").blocks == 123
    assert cuda_config_for(10**8, np.float32, kernel="torch-1.0").blocks == 12208  # ceil(195313 / 16), no SM cap
    assert cuda_config_for(10**10 // 8, np.float32, kernel="torch-1.0").blocks == 65535  # the cap
    assert not cuda_launch(10**6, old).vectorized and cuda_launch(10**6, old).accumulators == 4
    assert cuda_config_for(100_000, np.float32, kernel="torch-1.0").blocks == 1  # vpt 196 < 256
    with pytest.raises(ValueError):
        cuda_config_for(1000, BF16, kernel="torch-1.0")  # no CUDA bfloat16 in 2019
    with pytest.raises(ValueError):
        CudaReduceConfig(kernel="torch-0.4")
    with pytest.raises(ValueError):
        cuda_config_for(10, np.float32, kernel="nope")


def test_kernel_differences_name_every_changed_rule():
    assert kernel_differences(PINNED_KERNEL) == []
    fork = kernel_differences("fork-2025")
    assert len(fork) == 2 and "increasing" in fork[1] and "vt0" in fork[0]
    old = " ".join(kernel_differences("torch-1.0"))
    for word in ("no vectorised loads", "independent of the SM count", "increasing", "float factor", "bfloat16"):
        assert word in old
    for k in KERNELS.values():
        assert k.source and k.torch_versions


def test_decreasing_shuffle_is_one_halving_tree():
    """Within one warp, offsets 16, 8, 4, 2, 1 pair lane t with lane t + 16 first; offsets 1, 2, ... pair t, t + 1.

    v0 = 2**24, v1 = v17 = 1, the rest 0. Decreasing: lane 1 holds 1 + 1 = 2 before it meets lane 0, and
    2**24 + 2 is exact. Increasing: lane 0 first adds v1 (2**24 + 1 ties back to 2**24), then v17 alone: 2**24.
    """
    vals = [np.float32(0.0)] * 32
    vals[0], vals[1], vals[17] = np.float32(2.0**24), np.float32(1.0), np.float32(1.0)
    add = lambda a, b: np.float32(a + b)  # noqa: E731
    down = block_x_reduce_reference(vals, add, "decreasing")
    up = block_x_reduce_reference(vals, add, "increasing")
    assert (down, up) == (np.float32(2.0**24 + 2), np.float32(2.0**24))
    x = np.array(vals, dtype=np.float32)
    assert down == cuda_reduce_accumulated(x, CudaReduceConfig(threads_per_block=32, blocks=1, vec=1))
    assert up == cuda_reduce_accumulated(x, CudaReduceConfig(threads_per_block=32, blocks=1, vec=1, kernel="fork-2025"))


def test_the_shuffle_order_changes_float32_sums_of_a_few_thousand_values():
    """Changing only the warp stage (the fork-2025 kernel's increasing shuffle offsets against torch's
    decreasing ones, the same launch) changes the float32 sums of more than half of 40 random vectors of 3,000."""
    rng = np.random.default_rng(11)
    n = 3000
    pinned = cuda_config_for(n, np.float32)
    increasing_only = replace_kernel(pinned, "fork-2025")  # same launch (n > 128, vt0 4 >= 4), other shuffle
    assert cuda_launch(n, pinned).vectorized == cuda_launch(n, increasing_only).vectorized
    differ = sum(
        not same_bits(cuda_sum_model(x, pinned), cuda_sum_model(x, increasing_only))
        for x in (data(rng, n, np.float32, 0) for _ in range(40))
    )
    assert differ > 20


def replace_kernel(config: CudaReduceConfig, kernel: str) -> CudaReduceConfig:
    from dataclasses import replace

    return replace(config, kernel=kernel)


# --------------------------------------------------------------------------- mean


def mean_reference(x: np.ndarray, config: CudaReduceConfig, kernel: str):
    """MeanOps: the same reduction, then project = sum * factor in the accumulation type, then the output cast."""
    acc = acc_type(x.dtype)
    total = reference_for(x, config)
    if np.dtype(x.dtype) == np.float64 and KERNELS[kernel].double_mean_factor == "double":
        factor = np.float64(1.0) / np.float64(x.size)
    else:
        factor = np.float32(1.0) / np.float32(x.size)
    with np.errstate(over="ignore"):
        return x.dtype.type(acc(acc(total) * acc(factor)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("kernel", list(KERNELS))
def test_mean_is_the_sum_times_the_float_factor(dtype, kernel):
    if dtype == BF16 and not KERNELS[kernel].bfloat16:
        pytest.skip("no CUDA bfloat16 in this kernel version")
    rng = np.random.default_rng(3)
    for n in [1, 7, 129, 1000, 4099, 70_000]:
        x = data(rng, n, dtype, n % 3)
        config = cuda_config_for(n, dtype, kernel=kernel)
        assert same_bits(cuda_mean_model(x, config), mean_reference(x, config, kernel)), (n, kernel)


def test_mean_factor_types():
    assert cuda_mean_factor(3, np.float32) == np.float32(1) / np.float32(3)
    assert cuda_mean_factor(3, np.float32).dtype == np.float32
    assert cuda_mean_factor(3, np.float16).dtype == np.float32  # factor_t = float for 16-bit inputs
    assert cuda_mean_factor(3, np.float64).dtype == np.float64
    assert cuda_mean_factor(3, np.float64, "torch-1.0").dtype == np.float32  # float factor = float(..) / numel
    assert cuda_mean_factor(2**24 + 1, np.float32) == np.float32(1) / np.float32(2**24)  # n rounds to float first


def test_mean_multiplies_instead_of_dividing():
    """sum * fl32(1/n) is not sum / n: the mean of 41 ones is 0.99999994 on CUDA (41 * fl32(1/41) rounds down)."""
    x = np.ones(41, dtype=np.float32)
    config = cuda_config_for(x.size, x.dtype)
    total = cuda_reduce_accumulated(x, config)
    assert total == np.float32(41) and np.float32(total / np.float32(41)) == np.float32(1.0)
    assert cuda_mean_model(x, config) == np.nextafter(np.float32(1.0), np.float32(0))
    assert np.isnan(cuda_mean_model(np.zeros(0, dtype=np.float32)))
    half = np.ones(100_000, dtype=np.float16)
    assert cuda_mean_model(half) == np.float16(1.0)  # float32 accumulator: no overflow at 65504


# --------------------------------------------------------------------------- error bound


def depth_for(n: int, config: CudaReduceConfig) -> int:
    """Roundings on the longest path, counted from the description (additions to +0.0 are exact)."""
    launch = cuda_launch(n, config)
    threads = launch.threads
    if launch.vectorized:
        chain = math.ceil((n // launch.vec) / threads) + (n % launch.vec > 0)
    else:
        chain = math.ceil(n / (threads * launch.accumulators))
    depth = chain - 1 + launch.accumulators - 1 + round(math.log2(launch.threads_per_block))
    if launch.blocks > 1:
        depth += math.ceil(launch.blocks / launch.threads_per_block) - 1 + round(math.log2(launch.threads_per_block))
    return depth


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 10, 129, 1000, 4097, 65_536, 130_000, 300_000, 2_000_001])
def test_error_within_tree_bound(dtype, n):
    """|sum - exact| <= gamma_k * sum|x| (Higham, Accuracy and Stability, ch. 4) for a tree of height k.

    k is the longest chain of roundings.  It is not ceil(log2 n) + a constant: each thread
    adds up to 256 / vec vectors one after another, so at n = 130,000 (one block of 512
    threads, up to 64 vectors each) k = 75 while log2 n is 17.
    """
    rng = np.random.default_rng(n)
    x = data(rng, n, dtype, 1)
    config = cuda_config_for(n, dtype)
    k = depth_for(n, config)
    assert k == tree_depth(n, config)
    u = Fraction(1, 2**24) if acc_type(dtype) == np.float32 else Fraction(1, 2**53)
    gamma = k * u / (1 - k * u)
    abs_sum = exact_sum_fraction(np.abs(x.astype(acc_type(dtype))))
    err = abs(Fraction(float(cuda_reduce_accumulated(x, config))) - exact_sum_fraction(x))
    assert err <= gamma * abs_sum


def test_the_depth_is_not_logarithmic_for_mid_sizes():
    assert tree_depth(130_000, cuda_config_for(130_000, np.float32)) == 75  # 63 + 3 + 9
    assert math.ceil(math.log2(130_000)) == 17
    assert tree_depth(10**7, cuda_config_for(10**7, np.float32)) == 31


# --------------------------------------------------------------------------- properties


def test_changing_blocks_or_threads_changes_some_results():
    rng = np.random.default_rng(2024)
    n = 60_000
    configs = [
        cuda_config_for(n, np.float32),
        CudaReduceConfig(threads_per_block=256),
        CudaReduceConfig(threads_per_block=128),
        CudaReduceConfig(threads_per_block=512, blocks=1),
        CudaReduceConfig(threads_per_block=512, blocks=7),
        CudaReduceConfig(threads_per_block=64, blocks=100),
    ]
    for pair in itertools.pairwise(configs):
        assert any(
            not same_bits(cuda_sum_model(x, pair[0]), cuda_sum_model(x, pair[1]))
            for x in (data(rng, n, np.float32, 1) for _ in range(20))
        ), pair


def test_sm_count_changes_the_launch_and_some_results():
    n = 3_000_000
    a, b = cuda_config_for(n, np.float32, sm_count=132), cuda_config_for(n, np.float32, sm_count=60)
    assert (a.blocks, b.blocks) == (367, 240)  # ceil(ceil(3e6 / 512) / 16); 60 SMs x 4 blocks
    rng = np.random.default_rng(8)
    assert any(not same_bits(cuda_sum_model(x, a), cuda_sum_model(x, b)) for x in (data(rng, n, np.float32, 1)
                                                                                   for _ in range(10)))


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=str)
def test_16_bit_inputs_accumulate_in_float32(dtype):
    rng = np.random.default_rng(4)
    for n in [7, 300, 5000, 70_000]:
        x = data(rng, n, dtype, 0)
        config = cuda_config_for(n, dtype)
        wide = x.astype(np.float32)
        assert same_bits(cuda_reduce_accumulated(x, config), cuda_reduce_accumulated(wide, config))
        assert same_bits(cuda_sum_model(x, config), dtype.type(cuda_reduce_accumulated(wide, config)))


def test_float16_accumulation_would_differ():
    """[2048, 1, 1, 1]: 4 threads, one value each; the decreasing shuffle adds (2048 + 1) + (1 + 1). In float32
    that is 2051 -> 2052 in float16; with float16 additions 2048 + 1 rounds back to 2048 and the result is 2050."""
    x = np.array([2048, 1, 1, 1], dtype=np.float16)
    assert cuda_sum_model(x) == np.float16(2052)
    assert reference_for(x, None, acc=np.float16) == np.float16(2050)
    rng = np.random.default_rng(6)
    differs = 0
    for _ in range(20):
        y = data(rng, 3000, np.float16, 2)
        differs += not same_bits(cuda_sum_model(y), np.float16(reference_for(y, None, acc=np.float16)))
    assert differs > 0


def test_special_values_and_edge_cases():
    for dtype in DTYPES:
        assert same_bits(cuda_sum_model(np.zeros(0, dtype=dtype)), dtype.type(0))
        assert same_bits(cuda_sum_model(np.array([-0.0] * 5, dtype=dtype)), dtype.type(0.0))  # ident is +0.0
        with np.errstate(all="ignore"):
            assert np.isnan(cuda_sum_model(np.array([np.inf, -np.inf, 1.0], dtype=dtype)))
        assert cuda_sum_model(np.array([np.inf] + [1.0] * 300, dtype=dtype)) == np.inf
    assert cuda_sum_model(np.full(100, 60000, dtype=np.float16)) == np.inf  # float32 total, overflow only at the end
    with pytest.raises(TypeError):
        cuda_sum_model(np.arange(5))
    with pytest.raises(ValueError):
        cuda_sum_model(np.ones((2, 2), dtype=np.float32))
    with pytest.raises(ValueError):
        CudaReduceConfig(threads_per_block=48)
    with pytest.raises(ValueError):
        cuda_sum_model(np.ones(1000, dtype=np.float32), CudaReduceConfig(threads_per_block=2, blocks=1))


def test_ten_million_runs_and_is_deterministic():
    # its speed is measured against np.sum by benchmarks/bench_models.py, not asserted here
    x = np.random.default_rng(0).standard_normal(10**7).astype(np.float32)
    assert np.isfinite(cuda_sum_model(x)) and bits_of(cuda_sum_model(x)) == bits_of(cuda_sum_model(x))
