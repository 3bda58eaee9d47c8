"""core.traces.reductions: K, sum|t| and sqrt(sum t^2) at the sampled elements, and the total of sum|t| over
all output elements, against a brute-force computation in exact rationals (each term t_k as a Fraction)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.traces.record import OpRecord, run_traced

REL = 1e-12  # the module sums in float64: a few roundings of 2^-53 each


def _rand(g: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=g)


def _one(fn, op: str) -> OpRecord:
    ops = [o for o in run_traced(fn, None) if o.op == op]
    assert len(ops) == 1, [o.op for o in run_traced(fn, None)]
    return ops[0]


def _check(rec: OpRecord, k: int, terms_of) -> None:
    """``terms_of(flat index)`` -> the exact terms of that output element."""
    assert rec.k == k and rec.terms_kind == "exact"
    numel = math.prod(rec.out_shape)
    assert len(rec.sum_abs) == len(rec.scale) == len(rec.sample_index)
    for pos, i in enumerate(rec.sample_index):
        t = terms_of(i)
        assert len(t) == k
        assert rec.sum_abs[pos] == pytest.approx(float(sum(abs(x) for x in t)), rel=REL, abs=1e-300)
        assert rec.scale[pos] == pytest.approx(math.sqrt(sum(x * x for x in t)), rel=REL, abs=1e-300)
    total = sum(abs(x) for i in range(numel) for x in terms_of(i))
    # the total is an upper bound: exact for sums (float64), and for matrix products the row and column sums
    # of |a| and |b| run in float32 and are raised by their worst rounding (1 / (1 - gamma_n))
    assert float(total) * (1 - REL) <= rec.total_abs <= float(total) * (1 + 1e-5) + 1e-300


def _F(t: torch.Tensor):
    """The tensor's exact values as nested lists of Fractions."""
    if t.dim() == 0:
        return Fraction(float(t))
    return [_F(s) for s in t]


def _unravel(i: int, shape) -> tuple[int, ...]:
    out = []
    for n in reversed(shape):
        out.append(i % n)
        i //= n
    return tuple(reversed(out))


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 5, 4), (7, 33, 6)])
def test_mm(m, k, n):
    g = torch.Generator().manual_seed(m * 100 + k)
    a, b = _rand(g, m, k), _rand(g, k, n)
    rec = _one(lambda: torch.mm(a, b), "aten.mm.default")
    fa, fb = _F(a), _F(b)
    _check(rec, k, lambda i: [fa[i // n][q] * fb[q][i % n] for q in range(k)])


@pytest.mark.parametrize("beta,alpha,bias_shape", [(1.0, 1.0, "row"), (0.5, -2.0, "row"), (-3.0, 0.25, "full"),
                                                   (1.0, 1.0, "full")])
def test_addmm(beta, alpha, bias_shape):
    g = torch.Generator().manual_seed(5)
    m, k, n = 4, 9, 6
    a, b = _rand(g, m, k), _rand(g, k, n)
    bias = _rand(g, n) if bias_shape == "row" else _rand(g, m, n)
    rec = _one(lambda: torch.addmm(bias, a, b, beta=beta, alpha=alpha), "aten.addmm.default")
    fa, fb, fc = _F(a), _F(b), _F(bias)
    fal, fbe = Fraction(alpha), Fraction(beta)

    def terms(i):
        r, c = divmod(i, n)
        bias_v = fc[c] if bias_shape == "row" else fc[r][c]
        return [fal * fa[r][q] * fb[q][c] for q in range(k)] + [fbe * bias_v]

    _check(rec, k + 1, terms)


def test_addmm_with_beta_zero_has_no_bias_term():
    g = torch.Generator().manual_seed(6)
    a, b, bias = _rand(g, 3, 4), _rand(g, 4, 2), _rand(g, 2)
    rec = _one(lambda: torch.addmm(bias, a, b, beta=0.0, alpha=3.0), "aten.addmm.default")
    fa, fb = _F(a), _F(b)
    _check(rec, 4, lambda i: [3 * fa[i // 2][q] * fb[q][i % 2] for q in range(4)])


@pytest.mark.parametrize("bsz,m,k,n", [(1, 2, 3, 4), (3, 4, 17, 5)])
def test_bmm(bsz, m, k, n):
    g = torch.Generator().manual_seed(7 + k)
    a, b = _rand(g, bsz, m, k), _rand(g, bsz, k, n)
    rec = _one(lambda: torch.bmm(a, b), "aten.bmm.default")
    fa, fb = _F(a), _F(b)

    def terms(i):
        z, r, c = _unravel(i, (bsz, m, n))
        return [fa[z][r][q] * fb[z][q][c] for q in range(k)]

    _check(rec, k, terms)


def _reduce_terms(x: torch.Tensor, dims: list[int], mean: bool):
    """Terms of each output element of a sum (or mean) of x over dims (keepdim or not: same flat order)."""
    shape = list(x.shape)
    dims = sorted(d % len(shape) for d in dims)
    keep = [d for d in range(len(shape)) if d not in dims]
    fx = _F(x)
    k = math.prod(shape[d] for d in dims)

    def at(index):
        v = fx
        for j in index:
            v = v[j]
        return v

    def terms(i):
        kept = _unravel(i, [shape[d] for d in keep]) if keep else ()
        out = []
        for red in itertools.product(*(range(shape[d]) for d in dims)):
            full = [0] * len(shape)
            for d, j in zip(keep, kept, strict=True):
                full[d] = j
            for d, j in zip(dims, red, strict=True):
                full[d] = j
            out.append(at(full) / k if mean else at(full))
        return out

    return k, terms


@pytest.mark.parametrize("dims,keepdim", [([1], False), ([0, 2], True), ([-1], False), ([0, 1, 2], False)])
def test_sum_dim(dims, keepdim):
    g = torch.Generator().manual_seed(11)
    x = _rand(g, 3, 5, 4)
    rec = _one(lambda: torch.sum(x, dim=dims, keepdim=keepdim), "aten.sum.dim_IntList")
    k, terms = _reduce_terms(x, dims, mean=False)
    _check(rec, k, terms)


@pytest.mark.parametrize("dims", [[0], [1, 2], [-2]])
def test_mean_dim(dims):
    g = torch.Generator().manual_seed(12)
    x = _rand(g, 4, 3, 6)
    rec = _one(lambda: torch.mean(x, dim=dims), "aten.mean.dim")
    k, terms = _reduce_terms(x, dims, mean=True)
    _check(rec, k, terms)


def test_sum_default():
    g = torch.Generator().manual_seed(13)
    x = _rand(g, 6, 7)
    rec = _one(lambda: torch.sum(x), "aten.sum.default")
    fx = [v for row in _F(x) for v in row]
    _check(rec, 42, lambda i: fx)
    assert rec.sample_index == [0]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40), st.integers(1, 9), st.integers(0, 2**31))
def test_mm_any_shape(m, k, n, seed):
    """Also outputs with more than SAMPLE elements, where the sampled positions are spread."""
    g = torch.Generator().manual_seed(seed)
    a, b = _rand(g, m, k) * 2.0 ** (seed % 40 - 20), _rand(g, k, n)
    rec = _one(lambda: torch.mm(a, b), "aten.mm.default")
    fa, fb = _F(a), _F(b)
    _check(rec, k, lambda i: [fa[i // n][q] * fb[q][i % n] for q in range(k)])


def test_elementwise_ops_have_no_k():
    x = torch.ones(3)
    ops = run_traced(lambda: (x * 2).tanh(), None)
    assert [(o.k, o.terms_kind, o.sum_abs) for o in ops] == [(None, None, None)] * 2
