"""core.kernels.torch_cpu_model: the NumPy model of torch's CPU sum order, compared bit for bit with the real torch.sum.

Run with ``-s`` to see the measured match-rate table.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from core.kernels.torch_cpu_model import (
    GRAIN_SIZE,
    MEASURED_MATCH,
    default_lanes,
    real_torch_sum,
    thread_chunks,
    torch_cpu_sum_model,
)
from core.machines.globalstate import GlobalState
from tests.machine import X86_SUM_KERNEL, X86_SUM_REASON

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16), BF16]
FIXED_SIZES = [
    1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
    1000, 4095, 4096, 4097, 32767, 32768, 32769, 65536 + 1, 10**5, 10**6,
]
RANDOM_SIZES = [int(n) for n in np.random.default_rng(20240613).integers(1, 300_000, size=8)]
SIZES = FIXED_SIZES + RANDOM_SIZES
DISTRIBUTIONS = ["randn", "wide", "cancel", "uniform"]

_REPORT: dict[tuple[str, int, str], list[int]] = {}


def bits(v) -> int:
    a = np.asarray(v)
    return int(a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]))


def make_input(dist: str, n: int, dtype: np.dtype, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dist == "randn":
        x = rng.standard_normal(n)
    elif dist == "wide":  # a wide spread of exponents
        span = 10 if dtype == np.float16 else 40
        x = rng.standard_normal(n) * np.exp2(rng.integers(-span, span, n))
    elif dist == "cancel":  # large terms that cancel, plus small ones
        half = rng.standard_normal((n + 1) // 2) * 1e3
        x = rng.permutation(np.concatenate([half, -half])[:n]) + rng.standard_normal(n) * 1e-3
    elif dist == "uniform":  # all positive: rounding errors accumulate, order shows
        x = rng.random(n)
    else:  # pragma: no cover
        raise ValueError(dist)
    if dtype == np.float16:  # keep every partial sum finite in float16
        total = np.abs(x).sum()
        if total > 3e4:
            x = x * (3e4 / total)
    return x.astype(np.float32).astype(dtype) if dtype == BF16 else x.astype(dtype)


def size_class(n: int) -> str:
    if n < 16:
        return "n<16"
    if n < 1000:
        return "16<=n<1000"
    if n <= GRAIN_SIZE:
        return "1000<=n<=32768"
    if n <= 10**5:
        return "32768<n<=1e5"
    return "1e5<n<=1e6"


def compare(dtype: np.dtype, threads: int, sizes, dists, seed0: int = 0) -> list[tuple]:
    mismatches = []
    for i, n in enumerate(sizes):
        for j, dist in enumerate(dists):
            x = make_input(dist, n, dtype, seed=seed0 + 1000 * i + j)
            model, real = torch_cpu_sum_model(x, threads), real_torch_sum(x, threads)
            assert model.dtype == dtype and real.dtype == dtype
            ok = bits(model) == bits(real)
            counts = _REPORT.setdefault((dtype.name, threads, size_class(n)), [0, 0])
            counts[0] += ok
            counts[1] += 1
            if not ok:
                mismatches.append((n, dist, model, real))
    return mismatches


@pytest.mark.skipif(not X86_SUM_KERNEL, reason=X86_SUM_REASON)
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_model_matches_real_torch_sum_bit_for_bit(dtype, threads):
    mismatches = compare(dtype, threads, SIZES, DISTRIBUTIONS)
    assert not mismatches, mismatches[:10]


@pytest.mark.skipif(not X86_SUM_KERNEL, reason=X86_SUM_REASON)
@pytest.mark.parametrize("threads", [3, 4, 8])
def test_more_threads_than_cores(threads):
    sizes = [GRAIN_SIZE + 1, 3 * GRAIN_SIZE + 5, 200_003]
    for dtype in DTYPES:
        mismatches = compare(dtype, threads, sizes, ["randn", "wide"], seed0=7)
        assert not mismatches, (dtype, mismatches)


@pytest.mark.skipif(not X86_SUM_KERNEL, reason=X86_SUM_REASON)
def test_ten_million_float32_matches_and_depends_on_thread_count():
    x = make_input("uniform", 10**7, np.dtype(np.float32), seed=99)
    results = {}
    for threads in (1, 2):
        model = torch_cpu_sum_model(x, threads)  # its speed: benchmarks/bench_models.py
        assert bits(model) == bits(real_torch_sum(x, threads))
        results[threads] = bits(model)
    assert results[1] != results[2]  # one vs two threads: different chunks, different roundings


def test_thread_count_changes_the_result_only_above_the_grain_size():
    for n in (10**3, 10**5 // 4, GRAIN_SIZE):
        x = make_input("randn", n, np.dtype(np.float32), seed=n)
        assert bits(torch_cpu_sum_model(x, 1)) == bits(torch_cpu_sum_model(x, 2))
    differs = 0
    for seed in range(5):
        x = make_input("randn", 10**6, np.dtype(np.float32), seed=seed)
        differs += bits(torch_cpu_sum_model(x, 1)) != bits(torch_cpu_sum_model(x, 2))
    assert differs >= 1


@pytest.mark.skipif(not X86_SUM_KERNEL, reason=X86_SUM_REASON)
def test_lane_count_matters_and_the_default_is_the_avx2_width():
    assert default_lanes(np.float32) == 8
    assert default_lanes(np.float64) == 4
    assert default_lanes(np.float16) == default_lanes(BF16) == 8
    wrong = {4: 0, 16: 0}
    for seed, n in enumerate([100, 4097, 10**5, 12345]):
        x = make_input("uniform", n, np.dtype(np.float32), seed=seed)
        real = bits(real_torch_sum(x, 1))
        assert bits(torch_cpu_sum_model(x, 1, lanes=8)) == real
        for lanes in wrong:
            wrong[lanes] += bits(torch_cpu_sum_model(x, 1, lanes=lanes)) != real
    assert all(count > 0 for count in wrong.values()), wrong  # the comparison can tell the widths apart


def test_thread_chunks():
    assert thread_chunks(10, 2) == [(0, 10)]
    assert thread_chunks(GRAIN_SIZE, 2) == [(0, GRAIN_SIZE)]
    assert thread_chunks(GRAIN_SIZE + 1, 2) == [(0, 16385), (16385, GRAIN_SIZE + 1)]
    assert thread_chunks(10**6, 1) == [(0, 10**6)]
    assert thread_chunks(10**6, 2) == [(0, 500_000), (500_000, 10**6)]
    assert thread_chunks(40_000, 4) == [(0, 20_000), (20_000, 40_000)]  # only ceil(n / grain) tasks
    assert thread_chunks(100_001, 3) == [(0, 33_334), (33_334, 66_668), (66_668, 100_001)]
    assert thread_chunks(0, 2) == []
    with pytest.raises(ValueError):
        thread_chunks(10, 0)
    for n, t in [(GRAIN_SIZE + 1, 2), (10**6 + 3, 3), (98_305, 7), (5 * 10**6, 16)]:
        chunks = thread_chunks(n, t)
        assert chunks[0][0] == 0 and chunks[-1][1] == n
        assert all(a[1] == b[0] for a, b in itertools.pairwise(chunks))
        assert len(chunks) <= t


def test_edge_values():
    for dtype in (np.float32, np.float64):
        for n in (1, 5, 20, 40_000):
            x = np.full(n, -0.0, dtype)
            for threads in (1, 2):
                assert bits(torch_cpu_sum_model(x, threads)) == bits(real_torch_sum(x, threads)) == 0  # +0.0
        assert torch_cpu_sum_model(np.zeros(0, dtype)) == 0
    with pytest.raises(TypeError):
        torch_cpu_sum_model(np.arange(5))
    with pytest.raises(ValueError):
        torch_cpu_sum_model(np.zeros((2, 2), np.float32))


def test_real_torch_sum_leaves_global_state_alone():
    before = GlobalState.capture()
    x = make_input("randn", 50_000, np.dtype(np.float32), seed=3)
    real_torch_sum(x, 2)
    real_torch_sum(x, 1)
    assert GlobalState.capture() == before


def test_measured_match_is_documented():
    assert isinstance(MEASURED_MATCH, dict)
    for key in ("float32", "float64", "float16", "bfloat16"):
        assert "bit-exact" in MEASURED_MATCH[key]


def test_zz_report_match_rates():
    """Prints the match-rate table gathered by the comparisons above (visible with ``pytest -s``)."""
    if not _REPORT:
        pytest.skip("no comparisons ran")
    lines = [f"{'dtype':9} {'threads':>7} {'size class':16} match"]
    for (dtype, threads, cls), (ok, total) in sorted(_REPORT.items()):
        lines.append(f"{dtype:9} {threads:>7} {cls:16} {ok}/{total}")
    print("\n" + "\n".join(lines))
    assert all(ok == total for ok, total in _REPORT.values())
