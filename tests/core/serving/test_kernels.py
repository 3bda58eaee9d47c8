"""Batch-invariant kernels: a row's result, bit for bit, does not depend on the batch around it.

Each property draws a target row and a batch of other rows, puts the target at every kind of
position in batches of 1 to 64 rows, and compares the target's output bits with its output
alone. tree_sum is checked against exact rational sums."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import FORMATS
from core.serving import kernels as K

DTYPES = [torch.float32, torch.bfloat16]


def rows(seed: int, shape: tuple[int, ...], dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g) * scale
    # a sprinkling of the awkward values: signed zeros and tiny (subnormal in float32) entries
    flat = x.view(-1)
    n = flat.numel()
    idx = torch.randint(0, n, (max(1, n // 50),), generator=g)
    flat[idx[: len(idx) // 2]] = -0.0
    flat[idx[len(idx) // 2:]] = 1e-40
    return x.to(dtype)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    view = torch.int16 if a.dtype == torch.bfloat16 else torch.int32
    return a.shape == b.shape and torch.equal(a.contiguous().view(view), b.contiguous().view(view))


batch_and_position = st.integers(1, 64).flatmap(lambda b: st.tuples(st.just(b), st.integers(0, b - 1)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), bp=batch_and_position, dtype=st.sampled_from(DTYPES),
       shape=st.one_of(st.sampled_from([(96, 288), (96, 96), (96, 256), (256, 96), (96, 30), (17, 5)]),
                                   st.tuples(st.integers(1, 300), st.integers(1, 300))))
def test_linear_is_batch_invariant(seed, bp, dtype, shape):
    b, p = bp
    k, n = shape
    w = rows(seed + 1, (n, k), dtype, 0.1)
    target = rows(seed + 2, (1, k), dtype)
    batch = rows(seed + 3, (b, k), dtype)
    batch[p] = target[0]
    alone = K.linear_invariant(target, w)
    assert same_bits(K.linear_invariant(batch, w)[p:p + 1], alone)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), bp=batch_and_position, dtype=st.sampled_from(DTYPES),
       d=st.sampled_from([1, 7, 96, 128, 257]))
def test_rmsnorm_and_softmax_are_batch_invariant(seed, bp, dtype, d):
    b, p = bp
    w = rows(seed + 1, (d,), dtype)
    target = rows(seed + 2, (1, d), dtype, 3.0)
    batch = rows(seed + 3, (b, d), dtype, 3.0)
    batch[p] = target[0]
    assert same_bits(K.rmsnorm_invariant(batch, w, 1e-5)[p:p + 1], K.rmsnorm_invariant(target, w, 1e-5))
    assert same_bits(K.softmax_invariant(batch)[p:p + 1], K.softmax_invariant(target))


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**31), bp=batch_and_position, dtype=st.sampled_from(DTYPES),
       own=st.integers(1, 80), extra=st.integers(0, 80), t=st.integers(1, 4))
def test_attention_is_batch_invariant(seed, bp, dtype, own, extra, t):
    """The target request's attention over its own keys, alone and padded into a batch whose longest
    request has ``extra`` more keys; queries at the last ``t`` positions (prefill when t > 1)."""
    b, p = bp
    b = min(b, 16)  # attention's intermediates grow with batch x length; 16 covers every split pattern
    p = min(p, b - 1)
    h, d = 3, 32
    t = min(t, own)
    length = own + extra
    q = rows(seed + 1, (b, t, h, d), dtype)
    k = rows(seed + 2, (b, length, h, d), dtype)
    v = rows(seed + 3, (b, length, h, d), dtype)
    q_pos = torch.randint(0, length, (b, t), generator=torch.Generator().manual_seed(seed))
    q_pos[p] = torch.arange(own - t, own)
    alone = K.attention_invariant(q[p:p + 1], k[p:p + 1, :own], v[p:p + 1, :own], q_pos[p:p + 1])
    assert same_bits(K.attention_invariant(q, k, v, q_pos)[p:p + 1], alone)


@pytest.mark.parametrize("dtype", DTYPES)
def test_invariant_kernels_compute_the_same_functions(dtype):
    """Not just invariant: close to torch's kernels (a few ULPs of the format, relative to the scale)."""
    tol = 2e-2 if dtype == torch.bfloat16 else 1e-5
    x, w = rows(1, (5, 96), dtype), rows(2, (40, 96), dtype, 0.1)
    assert torch.allclose(K.linear_invariant(x, w).float(), K.linear_default(x, w).float(), atol=tol, rtol=tol)
    g = rows(3, (96,), dtype)
    assert torch.allclose(K.rmsnorm_invariant(x, g, 1e-5).float(), K.rmsnorm_default(x, g, 1e-5).float(),
                          atol=tol, rtol=tol)
    assert torch.allclose(K.softmax_invariant(x).float(), K.softmax_default(x).float(), atol=tol, rtol=tol)
    q, k, v = rows(4, (3, 2, 3, 32), dtype), rows(5, (3, 40, 3, 32), dtype), rows(6, (3, 40, 3, 32), dtype)
    q_pos = torch.tensor([[10, 11], [38, 39], [0, 1]])
    for other in (K.attention_default, K.attention_gpu_model):
        assert torch.allclose(K.attention_invariant(q, k, v, q_pos).float(), other(q, k, v, q_pos).float(),
                              atol=5 * tol, rtol=5 * tol)
    assert torch.allclose(K.linear_gpu_model(x, w).float(), K.linear_default(x, w).float(), atol=tol, rtol=tol)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**20), 2**20), min_size=1, max_size=300))
def test_tree_sum_of_small_integers_is_exact(values):
    x = torch.tensor(values, dtype=torch.float32)  # every partial sum below 2^24 is exact
    assert float(K.tree_sum(x)) == sum(values)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 300), scale=st.sampled_from([1e-42, 1e-3, 1.0, 1e30]))
def test_tree_sum_error_within_the_bound_in_ulps(seed, n, scale):
    """|tree sum - exact| <= ceil(log2 n) u sum|x| (each value passes through ceil(log2 n) additions)."""
    x = rows(seed, (n,), torch.float32, scale)
    got = Fraction(float(K.tree_sum(x)))
    vals = [Fraction(float(v)) for v in x]
    exact = sum(vals, Fraction(0))
    depth = max(1, (n - 1).bit_length())
    u = FORMATS["float32"].unit_roundoff
    # plus one smallest subnormal per addition: sums below the normal range round absolutely
    bound = depth * u * sum(abs(v) for v in vals) + n * FORMATS["float32"].min_subnormal
    assert abs(got - exact) <= bound


def test_tree_sum_specials():
    inf, nan = float("inf"), float("nan")
    assert float(K.tree_sum(torch.tensor([1.0, inf, 2.0]))) == inf
    assert np.isnan(float(K.tree_sum(torch.tensor([inf, -inf]))))
    assert np.isnan(float(K.tree_sum(torch.tensor([1.0, nan]))))
    big = float(np.finfo(np.float32).max)
    assert float(K.tree_sum(torch.tensor([big, big]))) == inf  # overflow rounds to infinity
    z = K.tree_sum(torch.tensor([-0.0, -0.0]))
    assert float(z) == 0.0 and not torch.signbit(z)  # zeros come out +0 (normalised)


def test_the_models_of_gpu_kernels_depend_on_the_batch():
    """The labelled MODEL does what it models: other split counts for other batch sizes."""
    assert K.split_k_for(1) > K.split_k_for(16)
    assert K.kv_splits_for(1, 3, 160) > K.kv_splits_for(16, 3, 160) == 1
    assert K.kv_splits_for(1, 3, 5) == 1  # at least SPLIT_SIZE keys per split



def test_the_kept_weight_follows_in_place_changes_and_dies_with_the_weight():
    import gc

    from core.serving import kernels as K

    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 17, generator=g).to(torch.bfloat16)
    w = torch.randn(7, 17, generator=g).to(torch.bfloat16)
    first = K.linear_invariant(x, w)
    assert torch.equal(first, K.linear_invariant(x, w))  # from the kept copy
    with torch.no_grad():
        w.mul_(2)  # exact in bfloat16: every product doubles
    assert torch.equal(K.linear_invariant(x, w).float(), first.float() * 2)
    gc.collect()
    kept = len(K._PREPARED)
    assert w in K._PREPARED
    del w
    gc.collect()
    assert len(K._PREPARED) == kept - 1


def test_the_bfloat16_linear_accumulates_in_float32_and_rounds_once():
    """256 then 1023 ones: every partial sum is exact in float32, while a bfloat16 accumulator would stick
    at 256 (256 + 1 rounds back to 256 there). One rounding of the exact 1279 gives 1280."""
    k = 1024
    w = torch.ones(3, k, dtype=torch.bfloat16)
    w[1, 0] = 256
    w[2, -1] = 256  # the large term last, too
    x = torch.ones(5, k, dtype=torch.bfloat16)
    out = K.linear_invariant(x, w)
    assert out.dtype == torch.bfloat16
    assert out.float().tolist() == [[1024.0, 1280.0, 1280.0]] * 5


@pytest.mark.parametrize("k", [96, 2048])
def test_the_bfloat16_linear_is_within_float32_accumulation_of_the_exact_product(k):
    """|result - exact| <= gamma_K(float32) sum|x w| plus the one rounding to bfloat16 (u = 2^-8 of the
    result, and half the smallest subnormal), against the exact rational dot products."""
    from core.arith.exact import exact_dot_fraction

    x, w = rows(7, (6, k), torch.bfloat16), rows(8, (5, k), torch.bfloat16, 0.1)
    out = K.linear_invariant(x, w)
    u32, u16 = Fraction(1, 2**24), Fraction(1, 2**8)
    gamma = k * u32 / (1 - k * u32)
    for i in range(x.shape[0]):
        for j in range(w.shape[0]):
            exact = exact_dot_fraction(x[i], w[j])
            total_abs = exact_dot_fraction(x[i].abs(), w[j].abs())
            got = Fraction(float(out[i, j]))
            bound = gamma * total_abs + u16 / (1 - u16) * abs(got) + Fraction(1, 2**134)
            assert abs(got - exact) <= bound, (i, j)
