"""core.kernels.widesum: float64 block sums of float32 values in one compiled pass, and the fast path
of the order-independent sum that reads them."""

from __future__ import annotations

import itertools
import math
import sys
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith import shares
from core.arith.exact import correctly_rounded_sum, exact_sum_fraction
from core.arith.formats import FORMATS, bits_of, value_of_bits
from core.kernels import reprosum, widesum
from core.kernels.reprosum import _KERNEL_MIN, _decided_sum, _kernel_applies, reproducible_sum
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from tests.strategies import bit_patterns

F32 = FORMATS["float32"]
U = Fraction(1, 2**53)
GAMMA = widesum.DEPTH * U / (1 - widesum.DEPTH * U)
ABS_SHRINK = 1 - (widesum.ROW - 1) * Fraction(1, 2**24) - (widesum.GROUP - 1) * U  # float32 rows, float64 blocks


def test_the_absolute_sums_slack_covers_their_rounding():
    assert Fraction(widesum.ABS_SLACK) * ABS_SHRINK >= 1


def _raw_float32(rng: np.random.Generator, n: int, finite: bool = True) -> np.ndarray:
    """n raw float32 bit patterns: every exponent, subnormals and ±0 included; with
    ``finite``, the all-ones exponent (inf, nan) is moved one binade down, to the largest."""
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    if finite:
        special = (bits & 0x7F800000) == 0x7F800000
        bits[special] ^= np.uint32(1 << 23)
    return bits.view(np.float32)


def _vector(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "raw":
        return _raw_float32(rng, n)
    if kind == "wide":  # magnitudes from 2^-149 to the largest finite float32, signs mixed
        wide = rng.standard_normal(n) * np.exp2(rng.integers(-149, 127, n))
        # a normal draw past 2 at 2^126 would round to infinity, which the block bounds do not cover
        return np.clip(wide, -F32.max_finite, F32.max_finite).astype(np.float32)
    v = rng.standard_normal(n).astype(np.float32)
    return np.concatenate([v[: n // 2], -v[: n // 2], v[n // 2 * 2 :]])[rng.permutation(n)]  # "cancel"


def _check_blocks(x: np.ndarray, sums: np.ndarray, abs_sums: np.ndarray) -> None:
    """Every block's float64 sum within gamma_DEPTH * sum|x| of its exact sum, and its
    absolute sum no smaller than (1 - (ROW-1) u32 - (GROUP-1) u) times the exact one, which
    ABS_SLACK covers (the bounds the fast path uses), checked exactly."""
    assert sums.size == abs_sums.size == -(-x.size // widesum.BLOCK)
    for b in range(sums.size):
        block = x[b * widesum.BLOCK : (b + 1) * widesum.BLOCK]
        exact = exact_sum_fraction(block)
        exact_abs = exact_sum_fraction(np.abs(block))
        assert abs(Fraction(float(sums[b])) - exact) <= GAMMA * exact_abs
        assert exact_abs * ABS_SHRINK <= Fraction(float(abs_sums[b]))


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["raw", "wide", "cancel"]),
       n=st.one_of(st.integers(1, 3 * widesum.ROW), st.integers(1, 3 * widesum.BLOCK + 7)),
       seed=st.integers(0, 2**32 - 1))
def test_block_sums_are_within_the_bound_for_any_tree_and_every_thread_count(kind, n, seed):
    x = _vector(kind, n, seed)
    sums, abs_sums = widesum.block_sums(x, 1, 1)
    _check_blocks(x, sums, abs_sums)
    for threads in (2, 3, 5):  # whole blocks per thread: the same bits
        s, a = widesum.block_sums(x, threads, threads, per_thread=1)
        assert s.tobytes() == sums.tobytes() and a.tobytes() == abs_sums.tobytes()
    for keep in (False, True):  # how the pass prefetches: the same bits
        s, a = widesum.block_sums(x, 2, 2, per_thread=1, keep=keep)
        assert s.tobytes() == sums.tobytes() and a.tobytes() == abs_sums.tobytes()


def test_the_pass_keeps_what_fits_in_half_the_last_level_cache_and_streams_the_rest():
    mb = 1 << 20
    assert widesum.keeps_in_cache(40 * mb, 480 * mb)  # a vector that stays cached between passes
    assert widesum.keeps_in_cache(16 * mb, 32 * mb)
    assert not widesum.keeps_in_cache(16 * mb + 4, 32 * mb)  # would take the rest of the process's place
    assert not widesum.keeps_in_cache(40 * mb, 32 * mb)  # cannot stay: stream it past the caches
    assert widesum.keeps_in_cache(10**12, None)  # no size reported: never the 4x of streaming cached data
    assert widesum.CACHE_BYTES is None or widesum.CACHE_BYTES >= 1 << 16  # read from this processor


def _cache_tree(root, entries):
    for i, (level, kind, size) in enumerate(entries):
        d = root / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    return root


def test_the_last_level_cache_is_the_deepest_data_cache_linux_lists(tmp_path):
    from core.machines.devices import last_level_cache_bytes
    intel = [(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K"), (3, "Unified", "491520K")]
    assert last_level_cache_bytes(_cache_tree(tmp_path / "a", intel)) == 491520 << 10
    arm = [(1, "Data", "64K"), (2, "Unified", "1M"), (4, "Instruction", "8M")]  # no data cache past L2
    assert last_level_cache_bytes(_cache_tree(tmp_path / "b", arm)) == 1 << 20
    assert last_level_cache_bytes(_cache_tree(tmp_path / "c", [(3, "Unified", "??"), (2, "Data", "0K")])) is None
    assert last_level_cache_bytes(tmp_path / "missing") is None


def test_block_sums_at_the_edges_of_float32():
    big, tiny = np.float32(F32.max_finite), np.float32(2.0**-149)
    row = widesum.ROW  # one row of the largest values, one of their negatives, then the smallest:
    x = np.array([big] * row + [-big] * row + [tiny] * 5 + [0.0, -0.0], dtype=np.float32)
    sums, abs_sums = widesum.block_sums(x)  # every partial sum is exact in float64, in any order
    assert float(sums[0]) == 5 * 2.0**-149  # no overflow: float64 has room for n * 2^128
    assert float(abs_sums[0]) == 2 * row * float(big) + 5 * 2.0**-149
    sub = np.full(widesum.BLOCK + 3, tiny, dtype=np.float32)  # subnormals are not flushed
    assert [float(v) for v in widesum.block_sums(sub)[0]] == [widesum.BLOCK * 2.0**-149, 3 * 2.0**-149]


def test_block_sums_carry_infinities_and_nan_into_their_block():
    x = np.ones(3 * widesum.BLOCK, dtype=np.float32)
    x[5], x[widesum.BLOCK + 9], x[2 * widesum.BLOCK] = np.inf, -np.inf, np.nan
    sums, abs_sums = widesum.block_sums(x, 2, 2, per_thread=1)
    assert sums[0] == math.inf and sums[1] == -math.inf and math.isnan(sums[2])
    assert abs_sums[0] == abs_sums[1] == math.inf and math.isnan(abs_sums[2])
    both = np.array([np.inf, 1.0, -np.inf], dtype=np.float32)
    assert math.isnan(widesum.block_sums(both)[0][0])


def test_block_sums_wake_helper_threads_only_for_enough_values(monkeypatch):
    workers, claims = [], []
    real_workers, real_claimed = shares.run_workers, widesum._claimed_blocks
    monkeypatch.setattr(shares, "run_workers", lambda work, threads: workers.append(threads) or real_workers(
        work, threads))
    monkeypatch.setattr(widesum, "_claimed_blocks", lambda x, bounds, s, a, next_piece, keep: claims.append(
        (bounds, next_piece)) or real_claimed(x, bounds, s, a, next_piece, keep))
    x = np.ones(4 * widesum.BLOCK, dtype=np.float32)
    widesum.block_sums(x, 2, 2, per_thread=x.size)
    assert workers == [1] and claims[0][0].tolist() == [0, 4]
    workers.clear()
    claims.clear()
    widesum.block_sums(x, 3, 3, per_thread=widesum.BLOCK)
    assert workers == [3] and len(claims) == 3
    bounds, next_piece = claims[0]
    assert bounds.tolist() == [0, 1, 2, 3, 4]  # whole blocks, in order
    # every worker claims until it draws a number past the last piece: each piece was claimed once
    assert next_piece.tolist() == [bounds.size - 1 + 3]


def test_the_claims_are_atomic_under_contention():
    """Threads drawing numbers in a tight compiled loop: no draw is lost (a plain load and store would
    lose many on two cores). Then many small pieces, more threads than cores: every block is summed
    once, as on one thread."""
    import numba  # deferred: the compiler loads only for the kernels' tests

    @numba.njit(nogil=True)
    def draw(counter, out):
        for j in range(out.size):
            out[j] = widesum._claim(counter)

    counter, n = np.zeros(1, dtype=np.int64), 200_000
    drawn, slots = np.empty((4, n), dtype=np.int64), itertools.count()
    shares.run_workers(lambda: draw(counter, drawn[next(slots)]), 4)  # a row per thread
    assert counter[0] == 4 * n and np.array_equal(np.sort(drawn, axis=None), np.arange(4 * n))
    x = np.arange(500 * widesum.BLOCK, dtype=np.float32) % 7
    expected = widesum.block_sums(x, 1, 1)
    for _ in range(3):
        sums, abs_sums = widesum.block_sums(x, 6, 6, per_thread=1)
        assert sums.tobytes() == expected[0].tobytes() and abs_sums.tobytes() == expected[1].tobytes()


def test_block_sums_refuse_what_they_were_not_written_for():
    with pytest.raises(TypeError):
        widesum.block_sums(np.ones(10, dtype=np.float64))
    with pytest.raises(TypeError):
        widesum.block_sums(np.ones((2, 2), dtype=np.float32))
    assert widesum.block_sums(np.ones(0, dtype=np.float32))[0].size == 0


def test_the_kernel_serves_large_float32_on_a_cpu_only():
    big = torch.ones(_KERNEL_MIN)
    assert _kernel_applies(big, None)
    assert not _kernel_applies(torch.ones(_KERNEL_MIN - 1), None)
    assert _kernel_applies(torch.ones(3), True)  # forced (tests)
    assert not _kernel_applies(big, False)
    assert _kernel_applies(torch.ones(2 * _KERNEL_MIN)[::2], None)  # strided: through contiguous copies
    assert not _kernel_applies(big.to(torch.float16), None)
    assert not _kernel_applies(big.to(torch.float64), None)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_kernel_fast_path_over_raw_bit_patterns_with_specials(data):
    """The kernel's fast path gives the IEEE special, or the correctly rounded sum, or defers;
    never a wrong value, and the same answer as the torch reductions where both decide."""
    bits = data.draw(st.lists(bit_patterns(F32), min_size=1, max_size=60))
    x = torch.tensor(np.array(bits, dtype=np.uint32).view(np.int32)).view(torch.float32)
    decided, special = _decided_sum(x, F32, kernel=True)
    by_torch, special_torch = _decided_sum(x, F32, kernel=False)
    expected = correctly_rounded_sum(x, F32)
    if not bool(torch.isfinite(x).all()):  # a nan or an infinity among the values
        assert decided is None and special is not None
        assert (math.isnan(special) and math.isnan(expected)) or special == expected
        assert (math.isnan(special) and math.isnan(special_torch)) or special == special_torch
        return
    assert special is None  # finite values; their rounded sum may still overflow to inf
    assert decided is None or decided == expected
    if decided is not None and by_torch is not None:
        assert decided == by_torch


@pytest.mark.parametrize("kind", ["raw", "wide", "cancel"])
def test_reproducible_sum_through_the_kernel_matches_the_torch_path(kind, monkeypatch):
    """Large vectors (the kernel's path by default): the correctly rounded sum, the same bits
    in every permutation and thread count, and the same bits as without numba."""
    x = torch.from_numpy(_vector(kind, 200_003, 11))
    expected = correctly_rounded_sum(x, F32)
    bits = bits_of(reproducible_sum(x))
    assert value_of_bits(bits, F32) == expected
    shuffled = x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(1))]
    for threads in sorted({1, 2, PROCESS_THREADS}):
        with torch_threads(threads):
            assert bits_of(reproducible_sum(x)) == bits_of(reproducible_sum(shuffled)) == bits
    monkeypatch.setattr(reprosum, "_widesum", lambda: None)  # as where numba is not installed
    assert not _kernel_applies(x, None)
    assert bits_of(reproducible_sum(x)) == bits


def test_a_strided_vector_gets_its_contiguous_copys_block_sums(monkeypatch):
    """A strided float32 vector (a slice with a step, a zero-stride view) goes through the kernel in
    cache-sized contiguous copies of whole blocks: the kernel sees the same blocks, and gives the same
    block sums, as for the contiguous copy of the whole vector; over several copies and thread counts."""
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    real = widesum.block_sums
    monkeypatch.setattr(widesum, "block_sums", lambda x, *a, **k: seen.append(real(x, *a, **k)) or seen[-1])
    base = torch.from_numpy(_vector("raw", 3 * (2 * reprosum._FAST_CPU + 12_345), 3))
    for strided in (base[1::3], torch.tensor(1.5 - 2.0**-20).expand(2 * reprosum._FAST_CPU + 7)):
        assert not strided.is_contiguous()
        for threads in sorted({1, 2, PROCESS_THREADS}):
            with torch_threads(threads):
                seen.clear()
                got = _decided_sum(strided, F32)
                assert len(seen) > 1  # more than one copy
                pieces = [np.concatenate([part[i] for part in seen]) for i in (0, 1)]
                seen.clear()
                assert _decided_sum(strided.contiguous(), F32) == got
                assert len(seen) == 1
                for piece, whole in zip(pieces, seen[0], strict=True):
                    assert np.array_equal(piece, whole)
        assert got == (correctly_rounded_sum(strided, F32), None)


def test_the_kernel_decides_ordinary_data_and_defers_at_a_tie():
    plain = torch.from_numpy(np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32))
    assert _decided_sum(plain, F32) == (correctly_rounded_sum(plain, F32), None)
    tie = torch.zeros(_KERNEL_MIN)
    tie[0], tie[-1] = 1.0, 2.0**-24  # exactly halfway between 1 and 1 + 2^-23
    assert _decided_sum(tie, F32) == (None, None)
    assert float(reproducible_sum(tie)) == 1.0  # ties to even, by the exact folds


def test_devices_list_says_when_the_pass_did_not_split_between_threads():
    small = torch.ones(widesum.PER_THREAD + 1)  # one thread's worth: never split
    large = torch.ones(2 * widesum.PER_THREAD)  # enough for two
    rows_small, rows_large = reprosum.reproducible_sum_devices(small), reprosum.reproducible_sum_devices(large)
    assert {b for _, b in rows_small} == {bits_of(torch.tensor(float(small.numel())))}
    assert rows_small[0][0] == rows_large[0][0] == "CPU, 1 thread"
    if PROCESS_THREADS > 1:  # the all-threads row: said when the pass split the work fewer ways
        assert rows_small[1][0].endswith("(its one pass used 1: too few values to share)")
        expected = "" if PROCESS_THREADS == 2 else " (its one pass used 2: too few values to share)"
        assert rows_large[1][0] == f"CPU, {PROCESS_THREADS} threads{expected}"
    assert widesum.threads_for(large.numel(), 2, 2) == 2 and widesum.threads_for(small.numel(), 2, 2) == 1


def test_block_sums_at_the_largest_size_a_call_takes():
    """2^29 - 1 values (reproducible_sum's limit), all 2 - 2^-23, as a zero-stride view (no
    memory): 32,768 blocks, every block sum and their fsum exact, split between two threads, and
    the absolute sums within their slack."""
    n = (1 << 29) - 1
    v = np.float32(2 - 2.0**-23)
    sums, abs_sums = widesum.block_sums(np.broadcast_to(v, (n,)), 2, 2)
    assert sums.size == 32_768 and (sums[:-1] == float(v) * widesum.BLOCK).all()
    assert float(sums[-1]) == float(v) * (n % widesum.BLOCK)
    assert math.fsum(sums.tolist()) == float(v) * n  # 24 + 29 bits: exact
    # the float32 absolute row sums round (1,024 values of 24 bits), within what ABS_SLACK covers
    assert Fraction(float(v)) * n * ABS_SHRINK <= Fraction(math.fsum(abs_sums.tolist())) <= Fraction(float(v)) * n


def test_a_failed_numba_import_falls_back_to_torch_reductions(monkeypatch):
    x = torch.from_numpy(_vector("cancel", 100_000, 5))
    bits = bits_of(reproducible_sum(x))
    monkeypatch.setitem(sys.modules, "numba", None)  # "import numba" now raises ImportError
    monkeypatch.delitem(sys.modules, "core.kernels.widesum")
    reprosum._widesum.cache_clear()
    try:
        assert reprosum._widesum() is None and not _kernel_applies(x, None)
        assert bits_of(reproducible_sum(x)) == bits
    finally:
        reprosum._widesum.cache_clear()


def test_combine_adds_the_blocks_in_order_and_counts_the_additions():
    sums = np.array([1.0, 2.0**53, 1.0, -(2.0**53)])  # in order: 1 is lost twice; fsum would keep 2
    abs_sums = np.abs(sums)
    total, abs_total, depth = widesum.combine(sums, abs_sums)
    assert total == ((1.0 + 2.0**53) + 1.0) - 2.0**53 == 0.0
    assert abs_total == ((1.0 + 2.0**53) + 1.0) + 2.0**53
    assert depth == widesum.DEPTH + 3 and widesum.combine(sums[:1], abs_sums[:1])[2] == widesum.DEPTH
    assert widesum.combine(np.empty(0), np.empty(0)) == (0.0, 0.0, widesum.DEPTH)
    assert Fraction(widesum.ABS_SLACK) * (ABS_SHRINK - (1 << 24) * U) >= 1  # the slack covers 2^24 blocks
    many = np.broadcast_to(np.float64(1.0), (1 << 24,))
    with pytest.raises(ValueError, match="2\\^24"):
        widesum.combine(many, many)
