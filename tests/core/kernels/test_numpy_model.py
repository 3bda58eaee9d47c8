"""core.kernels.numpy_model: NumPy's pairwise summation, reproduced bit for bit against the real np.sum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from core.arith.formats import bits_of
from core.kernels.numpy_model import PW_BLOCKSIZE, numpy_leaf_blocks, numpy_pairwise_model

DTYPES = [np.float16, np.float32, np.float64]
UINT = {np.dtype(np.float16): np.uint16, np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
DISTRIBUTIONS = ["normal", "uniform", "wide", "cancel", "integers"]


def sample(rng: np.random.Generator, dist: str, n: int, dtype) -> np.ndarray:
    """n values of one distribution, scaled so that float16 sums stay finite for these sizes."""
    if dist == "normal":
        x = rng.standard_normal(n)
    elif dist == "uniform":
        x = rng.uniform(0.0, 1.0, n)
    elif dist == "wide":  # many binades: lots of absorption
        x = rng.standard_normal(n) * np.exp2(rng.integers(-12, 12, n))
    elif dist == "cancel":  # +v and -v shuffled, plus a few small values: heavy cancellation
        half = rng.standard_normal(n // 2)
        x = np.concatenate([half, -half, rng.standard_normal(n - 2 * (n // 2)) * 1e-3])
        x[rng.integers(0, n, max(1, n // 50))] *= 1e-4
        rng.shuffle(x)
    elif dist == "integers":
        x = rng.integers(-3, 4, n).astype(np.float64)
    else:  # pragma: no cover
        raise ValueError(dist)
    if np.dtype(dtype) == np.float16 and n > 1000:
        x = x * (1000.0 / n)
    return x.astype(dtype)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.view(UINT[a.dtype]) == b.view(UINT[b.dtype])


def np_sum(x: np.ndarray) -> np.generic:
    with np.errstate(all="ignore"):
        return np.sum(x)


def check(x: np.ndarray) -> None:
    expected, got = np_sum(x), numpy_pairwise_model(x)
    assert same_bits(expected, got), (x.dtype, x.size, expected, got)


# --------------------------------------------------------------------------- bit-for-bit vs np.sum


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_size_from_1_to_300(dtype):
    rng = np.random.default_rng(20240601)
    for n in range(1, 301):
        for dist in DISTRIBUTIONS:
            check(sample(rng, dist, n, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1000, 4095, 4096, 4097, 8191, 8192, 8193, 16383, 16384, 16385, 10**5, 10**6])
def test_sizes_around_buffer_and_power_of_two_boundaries(dtype, n):
    rng = np.random.default_rng(n)
    for dist in ("normal", "wide", "cancel"):
        check(sample(rng, dist, n, dtype))


def test_ten_million_float32_once():
    x = np.random.default_rng(7).standard_normal(10**7).astype(np.float32)
    check(x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_random_sizes(dtype):
    rng = np.random.default_rng(99)
    for n in rng.integers(301, 300_000, 25):
        check(sample(rng, DISTRIBUTIONS[int(n) % len(DISTRIBUTIONS)], int(n), dtype))


def test_no_chunking_into_8192_element_buffers():
    """A model that restarts pairwise summation every 8192 elements disagrees with np.sum."""

    def chunked(x, size=8192):
        total = np.zeros((), dtype=x.dtype)
        for s in range(0, x.size, size):
            total = total + numpy_pairwise_model(x[s : s + size])
        return x.dtype.type(total)

    rng = np.random.default_rng(3)
    differs = 0
    for _ in range(10):
        x = rng.standard_normal(50_000).astype(np.float32)
        check(x)
        differs += not same_bits(np_sum(x), chunked(x))
    assert differs > 0


def test_strided_views_also_match():
    x = np.random.default_rng(5).standard_normal(30_001).astype(np.float32)
    for view in (x[::2], x[::-1], x[3::7]):
        check(view)


def test_special_values():
    cases = [
        [-0.0], [-0.0] * 9, [-0.0] * 300, [0.0, -0.0], [np.inf, 1.0], [np.inf, -np.inf], [np.nan] + [1.0] * 20,
        [np.inf] * 9 + [-np.inf], [1e308, 1e308] * 10, [-1e308] * 150,
    ]
    for values in cases:
        for dtype in DTYPES:
            with np.errstate(all="ignore"):
                x = np.array(values, dtype=dtype)
            check(x)


def test_empty_and_result_type():
    for dtype in DTYPES:
        empty = np.zeros(0, dtype=dtype)
        assert same_bits(numpy_pairwise_model(empty), np.sum(empty))
        assert type(numpy_pairwise_model(np.ones(3, dtype=dtype))) is np.dtype(dtype).type


def test_rejects_other_dtypes_and_shapes():
    with pytest.raises(TypeError):
        numpy_pairwise_model(np.arange(10))
    with pytest.raises(ValueError):
        numpy_pairwise_model(np.ones((3, 3), dtype=np.float32))


def test_float16_accumulates_in_float32():
    """2048 + 1 + 1 + ... : float16 steps would stall at 2048; NumPy's float32 accumulator does not."""
    x = np.array([2048.0] + [1.0] * 7, dtype=np.float16)
    assert numpy_pairwise_model(x) == np.float16(2055.0) == np.sum(x)  # 2055 rounds to 2056 in float16
    half_steps = np.float16(-0.0)
    for v in x:
        half_steps = np.float16(half_steps + v)
    assert half_steps == 2048


def test_ten_million_float32_is_np_sum_twice():
    # its speed is measured against np.sum by benchmarks/bench_models.py, not asserted here
    x = np.random.default_rng(1).standard_normal(10**7).astype(np.float32)
    first = numpy_pairwise_model(x)  # builds the cached tree for this n
    assert bits_of(first) == bits_of(numpy_pairwise_model(x)) == bits_of(np.sum(x))


# --------------------------------------------------------------------------- an independent transcription of the C


def c_pairwise(x: np.ndarray, acc) -> np.generic:
    """@TYPE@_pairwise_sum from loops_utils.h.src, line by line (slow)."""
    n = x.size
    if n < 8:
        res = acc(-0.0)
        for i in range(n):
            res = acc(res + acc(x[i]))
        return res
    if n <= PW_BLOCKSIZE:
        r = [acc(x[j]) for j in range(8)]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] = acc(r[j] + acc(x[i + j]))
            i += 8
        res = acc(acc(acc(r[0] + r[1]) + acc(r[2] + r[3])) + acc(acc(r[4] + r[5]) + acc(r[6] + r[7])))
        while i < n:
            res = acc(res + acc(x[i]))
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return acc(c_pairwise(x[:n2], acc) + c_pairwise(x[n2:], acc))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_a_direct_transcription_of_the_c_source(dtype):
    acc = np.float32 if np.dtype(dtype) == np.float16 else np.dtype(dtype).type
    rng = np.random.default_rng(11)
    for n in [1, 7, 8, 9, 127, 128, 129, 255, 256, 257, 1000, 2049]:
        x = sample(rng, "wide", n, dtype)
        with np.errstate(all="ignore"):
            expected = np.dtype(dtype).type(acc(acc(0.0) + c_pairwise(x, acc)))
        assert same_bits(expected, numpy_pairwise_model(x))


# --------------------------------------------------------------------------- leaf blocks


def leaves_reference(start: int, n: int) -> list[tuple[int, int]]:
    if n <= PW_BLOCKSIZE:
        return [(start, start + n)]
    n2 = n // 2 - (n // 2) % 8
    return leaves_reference(start, n2) + leaves_reference(start + n2, n - n2)


@pytest.mark.parametrize("n", [*range(0, 300), 1000, 8193, 12345, 10**5, 999_999])
def test_leaf_blocks(n):
    blocks = numpy_leaf_blocks(n)
    assert blocks == (leaves_reference(0, n) if n else [])
    if n:
        assert blocks[0][0] == 0 and blocks[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    if n > PW_BLOCKSIZE:
        assert all(64 <= stop - start <= PW_BLOCKSIZE for start, stop in blocks)
        assert all((stop - start) % 8 == 0 for start, stop in blocks[:-1])  # only the last may have a rest


def test_leaf_blocks_rejects_negative():
    with pytest.raises(ValueError):
        numpy_leaf_blocks(-1)
