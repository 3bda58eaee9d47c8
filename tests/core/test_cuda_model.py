"""core.cuda_model: the vectorised model against a slow loop-by-loop reference, error bounds and properties.

No GPU is involved: these tests check that the model computes the algorithm it describes,
not that the algorithm is what a GPU does.
"""

from __future__ import annotations

import itertools
import math
import time
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

from core.cuda_model import (
    CudaReduceConfig,
    cuda_config_for,
    cuda_launch,
    cuda_reduce_accumulated,
    cuda_sum_model,
    tree_depth,
)
from core.exact import exact_sum_fraction

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.view(UINT[a.dtype.itemsize]) == b.view(UINT[b.dtype.itemsize])


def acc_type(dtype):
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


# --------------------------------------------------------------------------- slow reference, written as the kernel is


def block_x_reduce_reference(values: list, add) -> object:
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
    offset = 1
    while offset < dim_x:  # for (offset = 1; offset < dim_x; offset <<= 1): shfl_down
        other = [value[t + offset] if t + offset < dim_x else value[t] for t in range(dim_x)]
        value = [add(value[t], other[t]) for t in range(dim_x)]
        offset *= 2
    return value[0]


def cuda_sum_reference(x: np.ndarray, threads: int, blocks: int, vec: int, accs: int, vectorized: bool, acc):
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
        partials.append(block_x_reduce_reference(thread_values, add))
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
    return block_x_reduce_reference(last_block, add)


def reference_for(x: np.ndarray, config: CudaReduceConfig | None, acc=None):
    launch = cuda_launch(x.size, config or cuda_config_for(x.size, x.dtype))
    acc = acc or acc_type(x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return cuda_sum_reference(
            x, launch.threads_per_block, launch.blocks, launch.vec, launch.accumulators, launch.vectorized, acc
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
    CudaReduceConfig(threads_per_block=16, blocks=5, vec=8, accumulators=4),  # 16-bit style: scalar path
    CudaReduceConfig(threads_per_block=128, blocks=7, vec=8, accumulators=8),
    CudaReduceConfig(threads_per_block=8, blocks=1, vec=1, accumulators=3),
    CudaReduceConfig(threads_per_block=32, blocks=70),  # more partials than threads: 3 rows in global_reduce
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
    f32 = cuda_config_for(100, np.float32)
    assert not cuda_launch(100, f32).vectorized and f32.threads_per_block == 64 and f32.blocks == 1
    one_k = cuda_launch(1000, cuda_config_for(1000, np.float32))
    assert one_k.vectorized and one_k.threads_per_block == 128 and one_k.blocks == 1  # last_pow2(1000 // 4)
    big = cuda_config_for(10**7, np.float32)
    assert (big.threads_per_block, big.blocks) == (512, 528)  # 132 SMs x (2048 // 512)
    assert cuda_config_for(10**7, np.float32, sm_count=108).blocks == 432
    assert cuda_config_for(10**8, np.float32).blocks == 763  # ceil(ceil(1e8 / 512) / 256) > 528
    half = cuda_config_for(10**6, np.float16)
    assert (half.vec, half.accumulators) == (8, 4) and not cuda_launch(10**6, half).vectorized
    assert cuda_config_for(5000, torch.bfloat16) == cuda_config_for(5000, BF16)
    assert cuda_config_for(5000, torch.float64).vec == 4


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
    """[2048, 1, 1, 1]: 4 threads, tree (2048 + 1) + (1 + 1). In float32 that is 2051 -> 2052 in float16;
    with float16 additions 2048 + 1 rounds back to 2048 and the result is 2050."""
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


def test_ten_million_is_fast():
    x = np.random.default_rng(0).standard_normal(10**7).astype(np.float32)
    start = time.perf_counter()
    cuda_sum_model(x)
    assert time.perf_counter() - start < 1.0
