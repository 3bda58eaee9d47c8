"""Batch-invariant kernels: a row's result, bit for bit, does not depend on the batch around it.

Each property draws a target row and a batch of other rows, puts the target at every kind of
position in batches of 1 to 64 rows, and compares the target's output bits with its output
alone. The compiled loops are checked against the same loop written out in NumPy float32 scalars,
and attention against a float64 computation."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _f32(v) -> np.float32:
    return np.float32(v)


def _rmsnorm_by_hand(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm as the kernel's loop is written, one IEEE float32 operation at a time in NumPy scalars
    (products, sums, the division and the square root are each correctly rounded in both)."""
    out = np.empty_like(x)
    for r, row in enumerate(x):
        s = _f32(0.0)
        for v in row:
            s = _f32(s + _f32(v * v))
        scale = _f32(_f32(1.0) / np.sqrt(_f32(s / _f32(len(row))) + _f32(eps)))
        out[r] = [_f32(_f32(v * scale) * wj) for v, wj in zip(row, w, strict=True)]
    return out


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 130), rows_=st.integers(1, 5),
       scale=st.sampled_from([1e-20, 1.0, 1e15]))
def test_rmsnorm_sums_left_to_right_in_float32(seed, n, rows_, scale):
    """The compiled loop is the order written, bit for bit: no reassociation, no fused multiply-add."""
    x, w = rows(seed, (rows_, n), torch.float32, scale), rows(seed + 1, (n,), torch.float32)
    got = K.rmsnorm_invariant(x, w, 1e-5).numpy()
    want = _rmsnorm_by_hand(x.numpy(), w.numpy(), 1e-5)
    assert got.view(np.int32).tolist() == want.view(np.int32).tolist()


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), own=st.integers(1, 60), extra=st.integers(0, 20), t=st.integers(1, 3))
def test_attention_is_within_float32_rounding_of_the_float64_attention(seed, own, extra, t):
    """Against attention computed in float64 over the request's own visible keys: each score, sum and
    weighted sum is a left-to-right float32 sum of at most 60 terms, so a few hundred float32 roundings
    bound the error relative to the values' scale."""
    b, h, d = 2, 3, 32
    t = min(t, own)
    q, k, v = (rows(seed + i, (b, own + extra, h, d), torch.float32) for i in range(3))
    q = q[:, :t]
    q_pos = torch.tensor([list(range(own - t, own)), [own + extra - 1] * t])
    got = K.attention_invariant(q, k, v, q_pos).double()
    for i in range(b):
        for j in range(t):
            keys = int(q_pos[i, j]) + 1
            scores = torch.einsum("hd,lhd->hl", q[i, j].double(), k[i, :keys].double()) / d**0.5
            want = torch.einsum("hl,lhd->hd", torch.softmax(scores, -1), v[i, :keys].double())
            assert torch.allclose(got[i, j], want, rtol=0, atol=2e-5 * float(v[i, :keys].abs().max()))


def test_the_compiled_kernels_with_specials():
    inf, nan = float("inf"), float("nan")
    s = K.softmax_invariant(torch.tensor([[0.0, -inf, 1.0], [1.0, nan, 2.0], [3.0, 3.0, 3.0]]))
    assert s[0, 1] == 0 and torch.allclose(s[0], torch.softmax(torch.tensor([0.0, -inf, 1.0]), -1))
    assert torch.isnan(s[1]).all()  # a NaN makes its row NaN, as torch's softmax does
    assert s[2].tolist() == [np.float32(1 / 3)] * 3
    big = float(np.finfo(np.float32).max)
    r = K.rmsnorm_invariant(torch.tensor([[big, big], [0.0, -0.0]]), torch.ones(2), 1e-5)
    assert (r[0] == 0).all()  # the squares overflow: the scale is 1 / inf = 0
    assert r[1].tolist() == [0.0, 0.0]
    q = torch.zeros(1, 1, 1, 4)
    v = -torch.zeros(1, 3, 1, 4)  # -0 values: the weighted sum comes out +0
    out = K.attention_invariant(q, torch.zeros(1, 3, 1, 4), v, torch.tensor([[2]]))
    assert out.tolist() == [[[[0.0] * 4]]] and not torch.signbit(out).any()


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
