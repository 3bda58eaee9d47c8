"""core.arith.exact.exact_sum: exact against Fraction and mpmath at ample precision, every format."""

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
from core.arith.exact import correctly_rounded_sum, exact_sum, exact_sum_fraction, mpf_to_fraction
from core.arith.formats import FORMATS, bits_of_value, from_bit_view, round_to_format
from tests.strategies import any_values, finite_values, is_nan

NP = {name: fmt.numpy_dtype for name, fmt in FORMATS.items()}


def as_array(vals, name):
    fmt = FORMATS[name]
    return from_bit_view(np.array([bits_of_value(v, fmt) for v in vals], dtype=fmt.uint_dtype), fmt)


def ieee_reference(vals):
    specials = [v for v in vals if isinstance(v, float)]
    if specials:
        if any(math.isnan(v) for v in specials) or (math.inf in specials and -math.inf in specials):
            return math.nan
        return specials[0]
    return sum(vals, Fraction(0))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(FORMATS)))
def test_exact_sum_equals_fraction_sum(data, name):
    vals = data.draw(st.lists(any_values(FORMATS[name]), min_size=0, max_size=40))
    got = exact_sum_fraction(as_array(vals, name))
    ref = ieee_reference(vals)
    if is_nan(ref):
        assert is_nan(got)
    else:
        assert got == ref


@settings(max_examples=60, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(FORMATS)))
def test_exact_sum_matches_mpmath_fsum_at_ample_precision(data, name):
    vals = data.draw(st.lists(finite_values(FORMATS[name]), min_size=1, max_size=30))
    ctx = mpmath.MPContext()
    ctx.prec = 2400  # more than the 2^1024 .. 2^-1074 span of float64
    ref = ctx.fsum(ctx.mpf(float(v)) for v in vals)
    got = exact_sum(as_array(vals, name))
    assert mpf_to_fraction(got) == mpf_to_fraction(ref)
    assert mpmath.mp.prec == 53  # the global precision is untouched


@pytest.mark.parametrize("name", list(FORMATS))
def test_torch_tensors_and_numpy_arrays_agree(name):
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.standard_normal(5000) * 100).to(FORMATS[name].torch_dtype)
    from core.arith.exact import as_numpy

    assert exact_sum_fraction(x) == exact_sum_fraction(as_numpy(x))
    assert exact_sum_fraction(x) == sum(map(Fraction, x.to(torch.float64).tolist()), Fraction(0))


def test_extremes_do_not_overflow_the_exact_sum():
    for name in FORMATS:
        fmt = FORMATS[name]
        vals = [fmt.max_finite] * 5 + [-fmt.min_subnormal] * 3 + [fmt.min_normal]
        assert exact_sum_fraction(as_array(vals, name)) == sum(vals, Fraction(0))
        rounded = correctly_rounded_sum(as_array(vals, name), fmt)  # past the largest value: the format's rule
        assert rounded == fmt.overflowed(False) or (math.isnan(rounded) and math.isnan(fmt.overflowed(False)))


def test_signed_zeros_and_empty():
    assert exact_sum_fraction(np.array([-0.0, -0.0])) == 0
    assert exact_sum_fraction(np.array([], dtype=np.float32)) == 0


def test_ieee_specials():
    assert exact_sum_fraction(np.array([1.0, np.inf, 5.0], dtype=np.float32)) == math.inf
    assert exact_sum_fraction(np.array([-np.inf, 1.0])) == -math.inf
    assert math.isnan(exact_sum_fraction(np.array([np.inf, -np.inf], dtype=np.float16)))
    assert math.isnan(exact_sum_fraction(np.array([np.nan, 1.0])))


def test_large_vectors_are_split_exactly(monkeypatch):
    monkeypatch.setattr(exact_mod, "_MAX_ELEMENTS", 1000)
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(4321) * np.exp2(rng.integers(-60, 60, 4321))).astype(np.float64)
    assert exact_sum_fraction(x) == sum(map(Fraction, x.tolist()), Fraction(0))


def test_ten_million_float32_is_exact():
    x = np.random.default_rng(0).standard_normal(10_000_000).astype(np.float32)
    got = exact_sum_fraction(x)
    # independent: every float32 is an integer multiple of 2^-149; scaling by 2^149 is exact in
    # float64, and Python integers add without rounding
    scaled = sum(map(int, (x.astype(np.float64) * 2.0**149).tolist()))
    assert got == Fraction(scaled, 2**149)


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))
def test_correctly_rounded_sum_in_float64_matches_math_fsum(vals):
    arr = np.array(vals, dtype=np.float64)
    try:
        ref = math.fsum(vals)
    except OverflowError:
        return
    assert correctly_rounded_sum(arr, FORMATS["float64"]) == round_to_format(Fraction(ref), FORMATS["float64"])



def _compiled_everywhere():
    """The compiled pass (core.arith.buckets) for every size, in pieces of 13 values, split between
    threads from 8 values on."""
    return (mock.patch.multiple(exact_mod, _COMPILED_MIN=1, _COMPILED_CHUNK=13),
            mock.patch.object(buckets, "PER_THREAD", 4))


NEEDS_NUMBA = pytest.mark.skipif(not buckets.available(), reason="numba is missing: the NumPy path serves")


@NEEDS_NUMBA
@settings(max_examples=150, deadline=None)
@given(data=st.data(), name=st.sampled_from(["float16", "bfloat16", "float32"]))
def test_the_compiled_pass_is_exact_on_every_bit_pattern(data, name):
    vals = data.draw(st.lists(any_values(FORMATS[name]), min_size=0, max_size=40))
    chunks, threads = _compiled_everywhere()
    with chunks, threads:
        got = exact_sum_fraction(as_array(vals, name))
    ref = ieee_reference(vals)
    assert is_nan(got) if is_nan(ref) else got == ref


@NEEDS_NUMBA
def test_the_compiled_pass_gives_numpys_bucket_totals_on_a_large_vector():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(300_001) * np.exp2(rng.integers(-140, 120, 300_001))).astype(np.float32)
    x[::1000] = np.float32(3.4028235e38) * np.sign(rng.standard_normal(301)).astype(np.float32)
    x[7::997] = np.float32(1e-45)  # the smallest subnormal
    want = np.zeros(512)
    for s in range(0, x.size, 1 << 14):
        part = x[s : s + (1 << 14)]
        want += np.bincount(part.view(np.uint32) >> 23, weights=part.astype(np.float64), minlength=512)
    assert np.array_equal(buckets.sum_buckets32(x), want)
    assert exact_sum_fraction(x) == sum((Fraction(float(v)) for v in x.tolist()), Fraction(0))
