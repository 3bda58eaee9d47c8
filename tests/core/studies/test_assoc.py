"""core.studies.assoc: both groupings, checked against independent arithmetic and Fractions."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, FORMATS, bits_of_value, value_of_bits
from core.arith.parse import ParsedNumber, parse_number
from core.machines.devices import available_devices, cpu_device
from core.machines.globalstate import GlobalState
from core.studies.assoc import (
    MAX_TRIPLES,
    SearchSettings,
    add_exact,
    evaluate_triple,
    random_triples,
    search_counterexamples,
)
from tests.strategies import finite_values


def triple(fmt, *texts):
    return tuple(parse_number(t, fmt) for t in texts)


def stored(fmt, values):
    return tuple(ParsedNumber(text=str(v), exact=v, stored=v, fmt=fmt) for v in values)


def _bf16_round_float32(x: np.float32) -> Fraction:
    u = struct.unpack("<I", struct.pack("<f", float(x)))[0]
    return value_of_bits(((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF, BFLOAT16)


def reference_groupings(fmt, a: Fraction, b: Fraction, c: Fraction):
    """Both groupings by arithmetic independent of torch and of core.arith.formats rounding."""
    if fmt is FLOAT64:
        fa, fb, fc = float(a), float(b), float(c)
        return (fa + fb) + fc, fa + (fb + fc)
    if fmt in (FLOAT32, FLOAT16):
        t = np.float32 if fmt is FLOAT32 else np.float16
        fa, fb, fc = t(float(a)), t(float(b)), t(float(c))
        with np.errstate(over="ignore"):
            return float((fa + fb) + fc), float(fa + (fb + fc))
    if not fmt.arithmetic:  # eight bits: ml_dtypes' cast of the float64 sum, saturated as torch saturates
        def add8(x, y):
            total = float(x) + float(y)
            with np.errstate(over="ignore", invalid="ignore"):
                r = float(np.float64(total).astype(fmt.numpy_dtype))
            if math.isnan(r) and not math.isnan(total) and fmt.overflow == "saturate":
                r = math.copysign(float(fmt.max_finite), total)
            return r
        return add8(add8(a, b), c), add8(a, add8(b, c))
    # bfloat16: float32 addition is exact-enough (24 >= 2*8+2 bits), then RNE to bfloat16
    def add(x, y):
        with np.errstate(over="ignore"):
            return _bf16_round_float32(np.float32(float(x)) + np.float32(float(y)))
    return float(add(add(a, b), c)), float(add(a, add(b, c)))


@settings(max_examples=200, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(FORMATS)))
def test_groupings_match_independent_arithmetic(data, name):
    fmt = FORMATS[name]
    vals = [data.draw(finite_values(fmt)) for _ in range(3)]
    r = evaluate_triple(stored(fmt, vals), devices=[cpu_device()])
    left_ref, right_ref = reference_groupings(fmt, *vals)
    for got, ref in ((r.left.result, left_ref), (r.right.result, right_ref)):
        if math.isinf(ref):
            assert got == ref
        else:
            assert got == Fraction(ref)
    assert r.exact_sum == sum(vals, Fraction(0))
    for g in (r.left, r.right):
        for step in (g.inner, g.outer):
            assert step.matches_model  # torch rounds exactly like IEEE round-to-nearest-even


def test_classic_float64_example_exact_values():
    r = evaluate_triple(triple(FLOAT64, "0.1", "0.2", "0.3"), devices=[cpu_device()])
    assert r.left.result == Fraction((0.1 + 0.2) + 0.3)
    assert r.right.result == Fraction(0.1 + (0.2 + 0.3))
    assert r.differ and r.ulps_apart == 1
    assert r.exact_sum == Fraction(0.1) + Fraction(0.2) + Fraction(0.3)
    assert r.left.inner.exact == Fraction(0.1) + Fraction(0.2)
    assert r.right.inner.was_exact  # 0.2 + 0.3 = 0.5 exactly, no rounding
    assert r.correctly_rounded == Fraction(0.6)
    assert r.right.bits == r.correctly_rounded_bits
    # error in ULPs of the exact sum, computed independently
    u = Fraction(2) ** -53  # exact sum lies in [0.5, 1)
    assert r.left.error_ulps == float((Fraction(0.1 + 0.2 + 0.3) - r.exact_sum) / u)


@pytest.mark.parametrize(
    ("fmt", "texts", "left", "right"),
    [
        (FLOAT64, ("1e16", "-1e16", "1"), 1, 0),
        (FLOAT64, ("1e16", "1", "-1e16"), 0, 0),
        (FLOAT32, ("1e8", "-1e8", "1"), 1, 0),
        (FLOAT32, ("1e8", "1", "-1e8"), 0, 0),
        (FLOAT16, ("2048", "1", "1"), 2048, 2050),
        (BFLOAT16, ("256", "1", "1"), 256, 258),
    ],
)
def test_swamping_presets(fmt, texts, left, right):
    r = evaluate_triple(triple(fmt, *texts), devices=[cpu_device()])
    assert (r.left.result, r.right.result) == (left, right)


def test_float32_1e8_preset_differs_from_exact_but_not_between_groupings():
    r = evaluate_triple(triple(FLOAT32, "1e8", "1", "-1e8"), devices=[cpu_device()])
    assert r.exact_sum == 1 and not r.differ  # both lose the 1: 1e8 + 1 and 1 - 1e8 round


def test_overflow_in_one_grouping_only():
    r = evaluate_triple(triple(FLOAT16, "60000", "10000", "-10000"), devices=[cpu_device()])
    assert r.left.inner.rounded == math.inf and r.left.result == math.inf
    assert r.right.result == 60000 and r.exact_sum == 60000
    assert r.left.error_ulps == math.inf and r.differ and r.ulps_apart is None


def test_add_exact_follows_ieee_for_specials():
    assert add_exact(math.inf, Fraction(1)) == math.inf
    assert math.isnan(add_exact(math.inf, -math.inf))
    assert add_exact(Fraction(1, 2), Fraction(1, 4)) == Fraction(3, 4)


def test_all_devices_run_and_cpu_is_first():
    r = evaluate_triple(triple(FLOAT32, "0.1", "0.2", "0.3"))
    assert r.devices[0].device.kind == "cpu"
    assert [o.device for o in r.devices] == available_devices()
    for o in r.devices:  # any present GPU adds single numbers exactly like the CPU
        assert o.message or (o.left_bits, o.right_bits) == (r.left.bits, r.right.bits)


def test_formats_must_match():
    with pytest.raises(ValueError):
        evaluate_triple((*triple(FLOAT32, "1", "2"), parse_number("3", FLOAT64)))


# ------------------------------------------------------------------------------- search


def test_search_is_deterministic_and_its_example_really_differs():
    s = SearchSettings(fmt_name="float32", n_triples=20_000, seed=7, distribution="normal")
    a, b = search_counterexamples(s), search_counterexamples(s)
    assert a == b
    assert 0.05 < a.fraction < 0.6
    lo, hi = a.ci95
    assert lo <= a.fraction <= hi and hi - lo < 0.02
    r = evaluate_triple(triple(FLOAT32, *a.example), devices=[cpu_device()])
    assert r.differ


def test_search_counts_match_a_slow_reference():
    s = SearchSettings(fmt_name="bfloat16", n_triples=500, seed=3, distribution="wide")
    t = random_triples(s)
    slow = 0
    for row in t:
        vals = [value_of_bits(bits_of_value(Fraction(float(v)), BFLOAT16), BFLOAT16) for v in row]
        left, right = reference_groupings(BFLOAT16, *vals)
        slow += left != right
    assert search_counterexamples(s).n_differ == slow


@pytest.mark.parametrize("dist", ["normal", "uniform", "wide"])
@pytest.mark.parametrize("name", list(FORMATS))
def test_random_triples_are_finite_values_of_the_format(dist, name):
    t = random_triples(SearchSettings(fmt_name=name, n_triples=1000, seed=1, distribution=dist))
    assert t.dtype == FORMATS[name].torch_dtype and t.shape == (1000, 3)
    assert torch.isfinite(t.double()).all()


def test_search_leaves_global_rng_alone():
    before = GlobalState.capture()
    search_counterexamples(SearchSettings(fmt_name="float16", n_triples=1000, seed=5, distribution="uniform"))
    assert GlobalState.capture() == before


@pytest.mark.parametrize(
    "bad",
    [
        SearchSettings(n_triples=0),
        SearchSettings(n_triples=MAX_TRIPLES + 1),
        SearchSettings(distribution="cauchy"),
        SearchSettings(fmt_name="float8"),
        SearchSettings(seed=-1),
    ],
)
def test_search_rejects_bad_settings(bad):
    with pytest.raises(ValueError):
        search_counterexamples(bad)


def test_no_difference_found_gives_no_example():
    # a single triple of exact small integers never differs
    s = SearchSettings(fmt_name="float64", n_triples=1, seed=0, distribution="normal")
    res = search_counterexamples(s)
    assert res.n_differ in (0, 1) and (res.example is None) == (res.n_differ == 0)
