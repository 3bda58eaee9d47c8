"""The FP8 tensor-core models: a limited accumulator, promoted to float32 at an interval (core.kernels.dot_fp8).

Checked bit for bit against a chain written separately in float64 with core.arith.formats.round_precision
(each partial sum rounded to the accumulator's bits, then added into float32 at the interval), their bound
against the exact dot product in Fractions, and the report's point: promotion keeps the error smaller.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.exact import exact_dot_fraction
from core.arith.formats import FLOAT32, FORMATS, from_bit_view, round_precision, value_of_bits
from core.arith.ulps import error_in_ulps
from core.kernels import dot_fp8
from core.kernels.dot import DOT_MODELS, ModelNotApplicable, run_model
from core.kernels.dot_engine import exact_products
from core.studies.gpu_arithmetic import DotSpec, make_pair, run_lab

FP8 = [name for name, f in FORMATS.items() if not f.arithmetic]


def _reference(x: np.ndarray, y: np.ndarray, bits: int, every: int) -> float:
    """The same arithmetic in float64: products exact, a chain rounded to ``bits`` bits (float32's exponent
    range), added into a float32 chain every ``every`` products."""
    products = x.astype(np.float64) * y.astype(np.float64)  # at most 8 significant bits: exact
    span = every or len(products)
    total = np.float32(0)
    for start in range(0, len(products), span):
        part = 0.0
        for p in products[start : start + span]:
            part = float(round_precision(np.array([part + p]), bits, FLOAT32.emin, float(FLOAT32.max_finite))[0])
        total = np.float32(np.float64(total) + part)  # part has <= 24 bits: the float32 add rounds once
    return float(total)


def _finite(name: str, bits: list[int]) -> np.ndarray:
    fmt = FORMATS[name]
    keep = [b for b in bits if isinstance(value_of_bits(b, fmt), Fraction)]
    return from_bit_view(np.array(keep or [0], dtype=np.uint8), fmt)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(FP8), xs=st.lists(st.integers(0, 255), min_size=1, max_size=300),
       ys=st.lists(st.integers(0, 255), min_size=1, max_size=300), bits=st.sampled_from([8, 14, 20]),
       every=st.sampled_from([0, 1, 7, 128]))
def test_the_promoted_chain_matches_a_float64_reference_bit_for_bit(name, xs, ys, bits, every):
    x, y = _finite(name, xs), _finite(name, ys)
    k = min(x.size, y.size)
    x, y = x[:k], y[:k]
    model = DOT_MODELS["fp8_promoted"]
    products, negatives, scale = exact_products(x, y)
    state = dot_fp8.promoted_chain(products, negatives, scale, bits, every)
    got = Fraction(state[0], 1 << scale) if isinstance(state[0], int) else state[0]
    assert float(got) == _reference(x, y, bits, every)
    bound = dot_fp8.promoted_bound(k, exact_dot_fraction(np.abs(x), np.abs(y)), bits, every)
    assert bound is None or abs(got - exact_dot_fraction(x, y)) <= bound
    assert model.structure == "promoted" and model.promote_every == dot_fp8.PROMOTE_EVERY


def test_the_registry_models_are_the_reports_two_settings():
    limited, promoted = DOT_MODELS["fp8_limited"], DOT_MODELS["fp8_promoted"]
    assert (limited.limited_bits, limited.promote_every) == (dot_fp8.LIMITED_BITS, 0) == (14, 0)
    assert (promoted.limited_bits, promoted.promote_every) == (14, 128)
    assert "arxiv.org/abs/2412.19437" in dot_fp8.SOURCE


def test_promotion_keeps_the_error_smaller_over_twenty_seeds():
    """K = 4096 float8_e4m3fn products, per-tensor scaled: the median error of the limited accumulator and of the
    promoted one, in float32 ULPs of the exact dot product (measured here: about 8,900 against 1,200)."""
    limited, promoted = [], []
    for seed in range(20):
        p = make_pair(DotSpec(storage="float8_e4m3fn", seed=seed, k=4096))
        exact = exact_dot_fraction(p.x, p.y)
        for key, out in (("fp8_limited", limited), ("fp8_promoted", promoted)):
            v, _ = run_model(DOT_MODELS[key], p.x, p.y, "float32")
            out.append(abs(error_in_ulps(v.value, exact, FLOAT32)))
    assert np.median(promoted) * 4 < np.median(limited)
    assert sum(p < q for p, q in zip(promoted, limited, strict=True)) >= 15


@pytest.mark.parametrize("name", FP8)
def test_fp8_inputs_are_scaled_by_powers_of_two_into_the_formats_range(name):
    fmt = FORMATS[name]
    p = make_pair(DotSpec(storage=name, k=1000, seed=3))
    top = max(float(np.max(np.abs(p.x.astype(np.float64)))), float(np.max(np.abs(p.y.astype(np.float64)))))
    assert p.x.dtype == fmt.numpy_dtype and top <= float(fmt.max_finite) and top > float(fmt.max_finite) / 4
    assert "per-tensor scales, powers of two" in p.source


def test_the_fp8_models_refuse_other_inputs_and_the_lab_shows_them_for_fp8_only():
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(ModelNotApplicable, match="FP8 inputs"):
        run_model(DOT_MODELS["fp8_limited"], x, x, "float32")
    models = ("fma", "fp8_limited", "fp8_promoted")
    f32 = run_lab(make_pair(DotSpec(k=64)), "float32", models, live=False)
    assert [r.key for r in f32.rows] == ["fma", "correct"]
    f8 = run_lab(make_pair(DotSpec(k=64, storage="float8_e5m2")), "float32", models)
    keys = [r.key for r in f8.rows]
    assert keys[:3] == ["fma", "fp8_limited", "fp8_promoted"] and "torch_mm1" in keys  # torch._scaled_mm, live
    assert all(r.metrics is not None and r.metrics.within_bound is not False for r in f8.rows)
