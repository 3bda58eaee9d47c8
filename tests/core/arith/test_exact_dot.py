"""core.arith.exact.exact_dot: exact against Fraction for every format pair, with IEEE specials."""

from __future__ import annotations

import math
from fractions import Fraction
from unittest import mock

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import core.arith.exact as exact_mod
from core.arith import buckets
from core.arith.exact import exact_dot, exact_dot_fraction, mpf_to_fraction
from core.arith.formats import FORMATS, from_bit_view, value_of_bits
from tests.strategies import bit_patterns, is_nan

NP = {name: fmt.numpy_dtype for name, fmt in FORMATS.items()}


def from_bits(bits: list[int], name: str) -> np.ndarray:
    return from_bit_view(np.array(bits, dtype=FORMATS[name].uint_dtype), FORMATS[name])


def ieee_dot(xs: list, ys: list):
    """The reference: Fraction products and sum; IEEE for non-finite inputs (inf * 0 = nan)."""
    specials, total = [], Fraction(0)
    for a, b in zip(xs, ys, strict=True):
        if isinstance(a, float) or isinstance(b, float):
            if (isinstance(a, float) and math.isnan(a)) or (isinstance(b, float) and math.isnan(b)) or a == 0 or b == 0:
                specials.append(math.nan)
            else:
                specials.append(math.copysign(math.inf, (1 if a > 0 else -1) * (1 if b > 0 else -1)))
        else:
            total += a * b
    if specials:
        if any(math.isnan(s) for s in specials) or (math.inf in specials and -math.inf in specials):
            return math.nan
        return specials[0]
    return total


@settings(max_examples=200, deadline=None)
@given(data=st.data(), fx=st.sampled_from(list(FORMATS)), fy=st.sampled_from(list(FORMATS)))
def test_exact_dot_equals_fraction_reference(data, fx, fy):
    n = data.draw(st.integers(0, 30))
    bx = data.draw(st.lists(bit_patterns(FORMATS[fx]), min_size=n, max_size=n))
    by = data.draw(st.lists(bit_patterns(FORMATS[fy]), min_size=n, max_size=n))
    got = exact_dot_fraction(from_bits(bx, fx), from_bits(by, fy))
    ref = ieee_dot([value_of_bits(b, FORMATS[fx]) for b in bx], [value_of_bits(b, FORMATS[fy]) for b in by])
    if is_nan(ref):
        assert is_nan(got)
    else:
        assert got == ref and type(got) is type(ref)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(FORMATS)))
def test_finite_values_against_fraction_and_mpmath(data, name):
    fmt = FORMATS[name]
    n = data.draw(st.integers(1, 40))
    bx = data.draw(st.lists(bit_patterns(fmt), min_size=n, max_size=n))
    by = data.draw(st.lists(bit_patterns(fmt), min_size=n, max_size=n))
    x, y = from_bits(bx, name), from_bits(by, name)
    finite = np.isfinite(x.astype(np.float64)) & np.isfinite(y.astype(np.float64))
    x, y = x[finite], y[finite]
    ref = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y, strict=True)), Fraction(0))
    assert mpf_to_fraction(exact_dot(x, y)) == ref
    with mpmath.workprec(4400):  # enough bits for any float64 dot product of this length
        assert mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(x, y, strict=True)) == \
            exact_dot(x, y)


def test_products_that_overflow_or_underflow_float64_are_exact():
    big, tiny = 2.0**1000, 5e-324  # 2^2000 and 2^-2148 are far outside float64
    x = np.array([big, -big, 1.0, tiny, tiny])
    y = np.array([big, big, 1.0, tiny, -tiny])
    assert exact_dot_fraction(x, y) == 1
    assert exact_dot_fraction(x[:1], y[:1]) == Fraction(2) ** 2000
    assert exact_dot_fraction(x[3:4], y[3:4]) == Fraction(1, 2**2148)
    assert exact_dot(x[:1], y[:1]) == mpmath.mpf(2) ** 2000  # mpf carries it without rounding


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_narrow_extremes(name):
    fmt = FORMATS[name]
    mx, ms = float(fmt.max_finite), float(fmt.min_subnormal)
    x = np.array([mx, ms, -mx, ms], dtype=NP[name])
    y = np.array([mx, ms, mx, -ms], dtype=NP[name])
    assert exact_dot_fraction(x, y) == 0
    assert exact_dot_fraction(x[:2], y[:2]) == fmt.max_finite**2 + fmt.min_subnormal**2


def test_signed_zeros_and_specials():
    z = np.array([-0.0, 0.0, -0.0], dtype=np.float32)
    assert exact_dot_fraction(z, z) == 0
    inf, nan = math.inf, math.nan
    f = np.float32
    assert is_nan(exact_dot_fraction(np.array([inf], f), np.array([0.0], f)))  # inf * 0
    assert is_nan(exact_dot_fraction(np.array([inf, inf], f), np.array([1.0, -1.0], f)))  # +inf + -inf
    assert is_nan(exact_dot_fraction(np.array([nan, 1.0], f), np.array([1.0, 1.0], f)))
    assert exact_dot_fraction(np.array([inf, 3.0], f), np.array([-2.0, 5.0], f)) == -inf
    assert exact_dot_fraction(np.array([inf], np.float64), np.array([5e-324])) == inf  # inf * tiny is inf
    assert math.isinf(exact_dot(np.array([inf], f), np.array([1.0], f)))


def test_torch_tensors_and_mixed_formats():
    x = torch.tensor([1.5, -2.25, 3.0], dtype=torch.bfloat16)
    y = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    ref = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x.float(), y, strict=True))
    assert exact_dot_fraction(x, y) == ref
    assert exact_dot_fraction(x, x.to(torch.float16)) == sum(Fraction(float(a)) ** 2 for a in x.float())


def test_bad_input():
    with pytest.raises(ValueError, match="one length"):
        exact_dot_fraction(np.ones(3, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError):
        exact_dot_fraction(np.ones(3, np.int32), np.ones(3, np.float32))
    assert exact_dot_fraction(np.zeros(0, np.float32), np.zeros(0, np.float32)) == 0


@pytest.mark.parametrize("name", ["float32", "float64", "bfloat16"])
def test_many_parts_and_chunks_are_combined_exactly(monkeypatch, name):
    monkeypatch.setattr(exact_mod, "_DOT_LIMIT", 37)
    monkeypatch.setattr(exact_mod, "_DOT_CHUNK", 11)
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(500) * np.exp2(rng.integers(-30, 30, 500))).astype(NP[name])
    y = (rng.standard_normal(500) * np.exp2(rng.integers(-30, 30, 500))).astype(NP[name])
    ref = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x, y, strict=True)), Fraction(0))
    assert exact_dot_fraction(x, y) == ref


@pytest.mark.parametrize("name", ["float32", "float64"])
def test_ten_million_terms(name):
    """Length 10^7 with every product 1 - 2^-46 (float32) or 1 - 2^-104 (float64): the low bits of each
    product must survive ten million additions."""
    n = 10_000_000
    eps = 2.0**-23 if name == "float32" else 2.0**-52
    x = np.full(n, 1 + eps, dtype=NP[name])
    y = np.full(n, 1 - eps, dtype=NP[name])
    assert exact_dot_fraction(x, y) == n * (1 - Fraction(eps) ** 2)


NEEDS_NUMBA = pytest.mark.skipif(not buckets.available(), reason="numba is missing: the NumPy path serves")


@NEEDS_NUMBA
@settings(max_examples=200, deadline=None)
@given(data=st.data(), fx=st.sampled_from(["float16", "bfloat16", "float32"]),
       fy=st.sampled_from(["float16", "bfloat16", "float32"]))
def test_the_compiled_pass_is_exact_with_every_special(data, fx, fy):
    """The compiled pass (core.arith.buckets) for every size, in pieces of 13, split between threads
    from 8 values on; it finds inf and nan inputs in its own buckets."""
    n = data.draw(st.integers(0, 40))
    xb = data.draw(st.lists(bit_patterns(FORMATS[fx]), min_size=n, max_size=n))
    yb = data.draw(st.lists(bit_patterns(FORMATS[fy]), min_size=n, max_size=n))
    with mock.patch.multiple(exact_mod, _COMPILED_MIN=1, _COMPILED_CHUNK=13), \
            mock.patch.object(buckets, "PER_THREAD", 4):
        got = exact_dot_fraction(from_bits(xb, fx), from_bits(yb, fy))
    ref = ieee_dot([value_of_bits(b, FORMATS[fx]) for b in xb], [value_of_bits(b, FORMATS[fy]) for b in yb])
    assert is_nan(got) if is_nan(ref) else got == ref


@NEEDS_NUMBA
def test_the_compiled_pass_on_a_large_vector_with_extremes():
    rng = np.random.default_rng(4)
    n = 200_003
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-149, 127, n))).astype(np.float32)
    y = (rng.standard_normal(n) * np.exp2(rng.integers(-149, 127, n))).astype(np.float32)
    x[::5000], y[1::4999] = np.float32(3.4028235e38), np.float32(-1e-45)
    ref = sum((Fraction(a) * Fraction(b) for a, b in zip(x.tolist(), y.tolist(), strict=True)), Fraction(0))
    assert exact_dot_fraction(x, y) == ref
    x[17] = np.inf
    assert exact_dot_fraction(x, y) == (math.inf if y[17] > 0 else -math.inf)
    y[17] = 0
    assert math.isnan(exact_dot_fraction(x, y))


@NEEDS_NUMBA
@pytest.mark.parametrize("sign", [1, -1])
def test_the_compiled_pass_has_headroom_for_the_largest_significands(sign):
    """Every product's significand at its largest, (2^24 - 1)^2, in one exponent bucket, over several
    flushes of the int64 tables (and across threads): no total may wrap."""
    n = 5 * buckets.DOT_FLUSH + buckets.DOT_TILE + 3
    big = np.float32(2 - 2.0**-23)  # significand 2^24 - 1
    x = np.full(n, big, dtype=np.float32)
    y = np.full(n, sign * big, dtype=np.float32)
    with mock.patch.object(buckets, "PER_THREAD", n // 3):
        assert exact_dot_fraction(x, y) == sign * n * Fraction(float(big)) ** 2
