"""core.kernels.collectives: the all-reduce order models against independent slow references, exact sums
against Fractions, and the gloo ring model against torch's real gloo all-reduce.

The references here do not reuse the models' shortcuts: the rings are simulated message by
message the way the cited source code schedules its sends and receives, trees and halving-
doubling recurse in plain Python over float32 scalars, and exact sums are Fraction sums.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import FLOAT32, round_to_format
from core.arith.ulps import error_in_ulps, ulp_distance_array
from core.arith.ulps import ulp_distance as exact_ulp_distance
from core.kernels import collectives as C
from core.training.emulate import rank_gradients
from core.training.gloo import gloo_allreduce

F32 = np.float32


def hard_vectors(k: int, n: int, seed: int) -> np.ndarray:
    """Values whose sum depends on the order: mixed signs, a spread of 2^-12 .. 2^12, cancellations."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((k, n)) * np.exp2(rng.integers(-12, 13, (k, n)))
    x[rng.integers(0, k, n), np.arange(n)] *= -1
    return x.astype(F32)


def cancelling_vectors(k: int, n: int, seed: int) -> np.ndarray:
    """Per element, +2^24 and -2^24 on two random ranks and small values elsewhere: a small value added
    next to a big one is rounded away, so nearly every grouping gives another result."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 8, (k, n)) * np.exp2(-rng.integers(0, 3, (k, n))) * rng.choice([-1, 1], (k, n))
    for e in range(n):
        i, j = rng.choice(k, 2, replace=False)
        x[i, e], x[j, e] = 2.0**24, -(2.0**24)
    return x.astype(F32)


# ------------------------------------------------------------------ slow references


def gloo_ring_simulated(x: np.ndarray, max_segment_bytes: int = C.SEGMENT_BYTES) -> np.ndarray:
    """gloo/allreduce.cc ring(): every rank's buffer, the reduce-scatter loop's sends and receives.

    Iteration i: rank r sends segment ((r+1)·spr + i) mod S of its buffer to rank r-1 and rank
    r-1 adds it into the same segment of its own buffer (after the send of iteration i-spr
    that carried the partial sum there). Then the all-gather copies the owners' segments.
    """
    k, n = x.shape
    es = 4
    total = n * es
    seg_max = es * max(1, max_segment_bytes // es)
    num_segments = max((total + seg_max - 1) // seg_max, 2 * k)
    num_segments = (num_segments + k - 1) // k * k
    spr = num_segments // k
    seg_bytes = ((total + num_segments - 1) // num_segments + es - 1) // es * es
    seg = seg_bytes // es
    bufs = [[F32(v) for v in x[r]] for r in range(k)]
    for i in range(num_segments - spr):
        sent = []
        for r in range(k):
            s = ((r + 1) * spr + i) % num_segments
            lo, hi = s * seg, min((s + 1) * seg, n)
            sent.append((r, s, bufs[r][lo:hi] if lo < n else []))
        for r, s, data in sent:  # rank r-1 reduces what rank r sent
            dst = (r - 1) % k
            lo = s * seg
            for j, v in enumerate(data):
                bufs[dst][lo + j] = F32(bufs[dst][lo + j] + v)
    out = [F32(0)] * n
    for r in range(k):  # rank r owns chunk r: segments r·spr .. (r+1)·spr - 1
        for s in range(r * spr, (r + 1) * spr):
            for e in range(s * seg, min((s + 1) * seg, n)):
                out[e] = bufs[r][e]
    return np.array(out, dtype=F32)


def nccl_ring_simulated(x: np.ndarray) -> np.ndarray:
    """NVIDIA/nccl runRing, one channel: step 0 sends chunk ringIx-1, steps j = 2..k-1 receive,
    reduce and send chunk ringIx-j, the last step reduces chunk ringIx; k equal chunks."""
    k, n = x.shape
    if k == 1:
        return x[0].copy()
    size = -(-n // k)
    chunk_cols = [list(range(c * size, min((c + 1) * size, n))) for c in range(k)]
    inbox = {}  # (rank, chunk) -> values in flight to that rank
    for r in range(k):
        c = (r - 1) % k
        inbox[((r + 1) % k, c)] = [F32(x[r, e]) for e in chunk_cols[c]]
    final = {}
    for j in range(2, k + 1):
        nxt = {}
        for r in range(k):
            c = (r - j) % k
            acc = [F32(a + x[r, e]) for a, e in zip(inbox[(r, c)], chunk_cols[c], strict=True)]
            if j < k:
                nxt[((r + 1) % k, c)] = acc
            else:
                final[c] = acc
        inbox = nxt
    out = np.empty(n, F32)
    for c in range(k):
        for v, e in zip(final.get(c, []), chunk_cols[c], strict=True):
            out[e] = v
    return out


def tree_recursive(x: np.ndarray, tree: int) -> list[np.float32]:
    """Subtree sums by recursion over the ranks' (parent, child, child) links, float32 scalars."""
    k, n = x.shape
    links = [C.nccl_dtree(k, r, tree) for r in range(k)]
    root = next(r for r in range(k) if links[r][0] == -1)

    def subtree(r: int, e: int) -> np.float32:
        acc = F32(x[r, e])
        for c in links[r][1:]:
            if c != -1:
                acc = F32(acc + subtree(c, e))
        return acc

    return [subtree(root, e) for e in range(n)]


def tree_nccl_slow(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    half = -(-n // 2)
    first = tree_recursive(x[:, :half], 0)
    second = tree_recursive(x[:, half:], 1) if n > half else []
    return np.array(first + second, dtype=F32)


def halving_doubling_simulated(x: np.ndarray) -> np.ndarray:
    """Recursive halving inside each binary block (rank r exchanges half its range with r ^ 2^i),
    then the smallest block's totals travel up: block b adds what the smaller blocks sent."""
    k, n = x.shape
    blocks, offset = [], 0
    for b in range(k.bit_length() - 1, -1, -1):
        if k >> b & 1:
            blocks.append((offset, 1 << b))
            offset += 1 << b
    totals = []
    for first, size in blocks:
        vals = {r: [F32(v) for v in x[r]] for r in range(first, first + size)}
        lo_hi = {r: (0, n) for r in vals}
        mask = 1
        while mask < size:
            new = {}
            for r in vals:
                p = first + ((r - first) ^ mask)
                lo, hi = lo_hi[r]
                mid = (lo + hi) // 2
                keep = (lo, mid) if (r - first) & mask == 0 else (mid, hi)
                row = list(vals[r])
                for e in range(*keep):
                    row[e] = F32(vals[r][e] + vals[p][e])
                new[r] = (row, keep)
            vals = {r: row for r, (row, _) in new.items()}
            lo_hi = {r: keep for r, (_, keep) in new.items()}
            mask <<= 1
        block_total = [F32(0)] * n
        for r in vals:
            for e in range(*lo_hi[r]):
                block_total[e] = vals[r][e]
        totals.append(block_total)
    acc = totals[-1]
    for t in reversed(totals[:-1]):
        acc = [F32(a + b) for a, b in zip(t, acc, strict=True)]
    return np.array(acc, dtype=F32)


SLOW = {"ring_gloo": gloo_ring_simulated, "ring_nccl": nccl_ring_simulated, "tree_nccl": tree_nccl_slow,
        "halving_doubling": halving_doubling_simulated}


def same_bits(a, b) -> bool:
    return np.array_equal(np.asarray(a, F32).view(np.uint32), np.asarray(b, F32).view(np.uint32))


# ----------------------------------------------------------- models vs slow references


@pytest.mark.parametrize("model", list(C.COLLECTIVE_MODELS))
@pytest.mark.parametrize(("k", "n"), [(1, 5), (2, 9), (3, 7), (4, 13), (5, 16), (6, 31), (7, 8), (8, 40), (12, 25),
                                      (13, 17), (16, 33)])
def test_models_match_slow_references(model, k, n):
    x = hard_vectors(k, n, seed=k * 100 + n)
    assert same_bits(C.allreduce(x, model), SLOW[model](x))


def test_gloo_ring_with_several_segments_per_chunk():
    """A small segment size gives several segments per chunk, as megabyte vectors do in gloo."""
    x = hard_vectors(3, 50, seed=7)
    # 200 bytes, at most 16 per segment: 13 segments, rounded up to 15 (5 per rank) of 16 bytes (4 elements)
    chunks = C.gloo_ring_chunks(50, 3, max_segment_bytes=16)
    assert np.bincount(chunks).tolist() == [20, 20, 10]  # the last rank's chunk only partly filled
    assert same_bits(C.ring_sum(x, chunks, -1), gloo_ring_simulated(x, max_segment_bytes=16))
    # not the same as three equal chunks, so the segment arithmetic is what is being checked
    assert C.gloo_ring_chunks(7, 3).tolist() != C.equal_chunks(7, 3).tolist()


def test_nccl_trees_are_the_ones_drawn_in_nccl_source():
    """The figures in NVIDIA/nccl src/graph/trees.cc: a 14-rank btree, a mirrored 12-rank and a shifted 13-rank tree."""
    root, ch = C.tree_links(14, 0)
    assert root == 0
    assert {r: c for r, c in enumerate(ch) if c} == {0: [8], 8: [4, 12], 4: [2, 6], 12: [10, 13], 2: [1, 3],
                                                     6: [5, 7], 10: [9, 11]}
    root, ch = C.tree_links(12, 1)
    assert root == 11
    assert {r: sorted(c) for r, c in enumerate(ch) if c} == {11: [3], 3: [1, 7], 1: [0, 2], 7: [5, 9], 5: [4, 6],
                                                             9: [8, 10]}
    root, ch = C.tree_links(13, 1)
    assert root == 1
    assert {r: sorted(c) for r, c in enumerate(ch) if c} == {1: [9], 9: [0, 5], 5: [3, 7], 0: [11], 3: [2, 4],
                                                             7: [6, 8], 11: [10, 12]}


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 63, 64, 100, 1000, 1024])
def test_every_tree_spans_all_ranks_once(k):
    for tree in (0, 1):
        root, ch = C.tree_links(k, tree)
        seen, stack = [], [root]
        while stack:
            r = stack.pop()
            seen.append(r)
            stack.extend(ch[r])
        assert sorted(seen) == list(range(k))


def test_binary_blocks_follow_the_bits_of_k():
    assert C.binary_blocks(12) == [(0, 8), (8, 4)]
    assert C.binary_blocks(1000) == [(0, 512), (512, 256), (768, 128), (896, 64), (960, 32), (992, 8)]
    assert sum(s for _, s in C.binary_blocks(1023)) == 1023


def test_two_ranks_are_one_rounding_for_every_model():
    """a + b is commutative and rounded once: all orders agree and are correctly rounded."""
    x = hard_vectors(2, 300, seed=3)
    cmp = C.compare(x)
    assert all(p.differing == 0 for p in cmp.pairs)
    assert all(o.correctly_rounded == 1.0 and o.max_abs_ulps <= 0.5 for o in cmp.outcomes)


def test_orders_really_differ_at_scale():
    x = hard_vectors(64, 500, seed=11)
    cmp = C.compare(x)
    assert all(p.differing > 0 for p in cmp.pairs), cmp.pairs


def test_unknown_model_and_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="unknown collective model"):
        C.allreduce(np.ones((2, 2), F32), "butterfly")
    with pytest.raises(ValueError, match="float32"):
        C.allreduce(np.ones((2, 2)), "ring_gloo")
    with pytest.raises(ValueError, match="shape"):
        C.allreduce(np.ones(3, F32), "ring_gloo")


# ------------------------------------------------------------------ exactness


finite_f32 = st.integers(0, 2**32 - 1).map(lambda b: np.array([b], np.uint32).view(F32)[0]).filter(np.isfinite)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(finite_f32, min_size=3, max_size=3), min_size=1, max_size=9))
def test_exact_column_sums_equal_fraction_sums(rows):
    x = np.array(rows, dtype=F32)  # (ranks, 3 elements), any finite bit patterns incl. subnormals and ±0
    got = C.exact_column_sums(x)
    for e in range(x.shape[1]):
        want = sum((Fraction(float(v)) for v in x[:, e]), Fraction(0))
        assert Fraction(got[e], 2**149) == want


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(finite_f32, min_size=4, max_size=4), min_size=2, max_size=6),
       st.sampled_from(list(C.COLLECTIVE_MODELS)))
def test_ulp_errors_match_core_formats(rows, model):
    x = np.array(rows, dtype=F32)
    with np.errstate(all="ignore"):
        r = C.allreduce(x, model)
    if not np.isfinite(r).all():
        return  # an overflow to inf is a result, but has no ULP error
    exact = C.exact_column_sums(x)
    err = C.ulp_errors(r, exact)
    cr = C.correctly_rounded(r, err)
    for e in range(x.shape[1]):
        s = Fraction(exact[e], 2**149)
        assert err[e] == pytest.approx(error_in_ulps(Fraction(float(r[e])), s, FLOAT32), rel=1e-12, abs=1e-300)
        assert bool(cr[e]) == (Fraction(float(r[e])) == round_to_format(s, FLOAT32))


def test_ulp_distance_matches_core_formats():
    rng = np.random.default_rng(5)
    a = (rng.standard_normal(200) * 1e-3).astype(F32)
    b = np.nextafter(a, F32(np.inf) * np.sign(rng.standard_normal(200)).astype(F32))
    b[::7] = -a[::7]
    got = ulp_distance_array(a, b)
    for i in range(200):
        want = exact_ulp_distance(int(a[i:i + 1].view(np.uint32)[0]), int(b[i:i + 1].view(np.uint32)[0]), FLOAT32)
        assert got[i] == want


def test_exact_sums_refuse_non_finite_values():
    with pytest.raises(ValueError, match="finite"):
        C.exact_column_sums(np.array([[1.0, np.inf]], F32))


# ------------------------------------------------------------- against the real gloo


def _gloo_results():
    inputs = {}
    for w in (3, 4):
        inputs[w] = [cancelling_vectors(w, {3: 7, 4: 10}[w], seed=w), hard_vectors(w, 4547, seed=10 + w),
                     hard_vectors(w, 1001, seed=20 + w), rank_gradients(w)]
    outputs = {w: gloo_allreduce(*inputs[w]) for w in inputs}
    return inputs, outputs


@pytest.fixture(scope="module")
def gloo_results(once_per_run):
    """torch's real gloo all-reduce with 3 and 4 processes, on several vectors each (one process group per world)."""
    return once_per_run("gloo-allreduce-3-and-4", _gloo_results)


@pytest.mark.parametrize("world", [3, 4])
def test_ring_model_is_gloos_all_reduce_bit_for_bit(gloo_results, world):
    inputs, outputs = gloo_results
    for x, out in zip(inputs[world], outputs[world], strict=True):
        for r in range(world):  # every rank ends with the same bits ...
            assert same_bits(out[r], out[0])
        assert same_bits(C.ring_gloo(x), out[0])  # ... which are the ring model's


@pytest.mark.parametrize("world", [3, 4])
def test_the_check_can_tell_orders_apart(gloo_results, world):
    """On the same inputs the other orders give other bits, so matching the ring is not a coincidence."""
    inputs, outputs = gloo_results
    x, out = inputs[world][1], outputs[world][1]
    for other in ("tree_nccl", "halving_doubling"):
        assert not same_bits(C.allreduce(x, other), out[0]), other
    assert not same_bits(np.add.accumulate(x, axis=0)[-1], out[0])  # rank 0, 1, 2, ... in turn
    if world == 4:
        assert not same_bits(C.ring_nccl(x), out[0])  # the other ring direction
    y, got = inputs[world][0], outputs[world][0]  # 7 and 10 elements: gloo's segments are not k equal chunks
    n = y.shape[1]
    assert C.gloo_ring_chunks(n, world).tolist() != C.equal_chunks(n, world).tolist()
    assert not same_bits(C.ring_sum(y, C.equal_chunks(n, world), -1), got[0])
