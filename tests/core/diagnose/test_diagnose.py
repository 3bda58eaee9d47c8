"""core.diagnose (verdict, envelopes, tolerances, simulate, rounding, inputs): verdicts, envelopes, tolerances and
the simulation, against independent references.

References: Fraction arithmetic (core.arith.formats.round_to_format) for every rounding, torch's and
NumPy's own casts, exact sums (core.arith.exact.exact_sum_fraction). Reorderings are real: NumPy and
torch sums and products in other orders, blocked and split sums, the correctly rounded
result. Reduced precision is emulated by rounding the inputs. Nothing here depends on a
number measured on one machine: every assertion is a verdict, a bound or an invariant.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FLOAT32, FLOAT64, FORMATS, TF32, round_precision, round_to_format, value_of_bits
from core.arith.metrics import gamma
from core.diagnose.envelopes import ENVELOPE_FACTOR, MIN_MEDIAN
from core.diagnose.inputs import prepare_inputs
from core.diagnose.measure import ASSUMED_K, MAX_ELEMENTS
from core.diagnose.results import BULK_SHARE
from core.diagnose.rounding import REDUCED_FORMATS, as_float_array, round_to
from core.diagnose.simulate import _sum_orders, fma_sequential, sim_orders
from core.diagnose.tolerances import MARGIN, TWO_DIGITS, format_two_digits, nice_up
from core.diagnose.verdict import VERDICTS, diagnose
from tests.strategies import bit_patterns

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_recommendation(d, actual, expected) -> None:
    """The recommended tolerances pass assert_close, and pass with MARGIN times less too."""
    a = torch.as_tensor(np.asarray(actual)) if not isinstance(actual, torch.Tensor) else actual
    e = torch.as_tensor(np.asarray(expected)) if not isinstance(expected, torch.Tensor) else expected
    kw = dict(equal_nan=d.equal_nan, check_dtype=d.check_dtype)
    torch.testing.assert_close(a, e, rtol=d.rtol, atol=d.atol, **kw)
    torch.testing.assert_close(a, e, rtol=d.rtol / MARGIN, atol=d.atol / MARGIN, **kw)
    assert d.margin >= MARGIN
    assert d.assert_line.startswith("torch.testing.assert_close(result_a, result_b, rtol=")


# --------------------------------------------------------------------- rounding helpers


@settings(max_examples=300, deadline=None)
@given(bit_patterns(FLOAT32))
def test_round_precision_matches_exact_rounding_tf32_bf16_f16(bits):
    x = value_of_bits(bits, FLOAT32)
    x64 = np.array([float(x)])
    for name, fmt in (("tf32", TF32), ("bfloat16", FORMATS["bfloat16"]), ("float16", FORMATS["float16"])):
        got = float(round_to(x64, name)[0])
        want = round_to_format(x, fmt)
        if isinstance(want, float) and math.isnan(want):
            assert math.isnan(got)
        else:
            assert got == float(want), (name, x)
    # and torch's own bfloat16 cast (round to nearest even) agrees
    if not (isinstance(x, float) and math.isnan(x)):
        t = torch.tensor([float(x)], dtype=torch.float32).to(torch.bfloat16).double().item()
        assert float(round_to(x64, "bfloat16")[0]) == t


@settings(max_examples=300, deadline=None)
@given(bit_patterns(FLOAT64))
def test_round_precision_from_float64_matches_numpy_casts(bits):
    x = np.array([float(value_of_bits(bits, FLOAT64))])
    with np.errstate(over="ignore", invalid="ignore"):
        for name, dt in (("float32", np.float32), ("float16", np.float16)):
            want = x.astype(dt).astype(np.float64)
            got = round_to(x, name)
            assert np.array_equal(got, want, equal_nan=True), (name, x)
    assert np.signbit(round_precision(np.array([-0.0]), 24, -126, 1e38))[0]




def test_nice_up_is_the_next_one_two_five():
    assert [nice_up(v) for v in (0.0, 1e-5, 1.1e-5, 2e-5, 2.01e-5, 4.9e-5, 5e-5, 5.1e-5, 9.99e-5)] == \
        [0.0, 1e-5, 2e-5, 2e-5, 5e-5, 5e-5, 5e-5, 1e-4, 1e-4]


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_nice_up_property(x):
    v = nice_up(x)
    assert x <= v <= 5 * x * (1 + 1e-12)
    assert f"{v:.0e}"[0] in "125"


def test_nice_up_to_two_significant_digits():
    got = [nice_up(v, TWO_DIGITS) for v in (0.0, 1e-5, 1.01e-5, 3.14e-5, 3.2e-5, 9.9e-5, 9.91e-5, math.inf)]
    assert got == [0.0, 1e-5, 1.1e-5, 3.2e-5, 3.2e-5, 9.9e-5, 1e-4, math.inf]  # a two-digit value stays itself
    assert format_two_digits(nice_up(3.14e-5, TWO_DIGITS)) == "3.2e-05"


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_nice_up_to_two_digits_property(x):
    v = nice_up(x, TWO_DIGITS)
    assert x <= v <= 1.1 * x * (1 + 1e-12)
    assert float(format_two_digits(v)) == v  # it prints as written


def test_gamma():
    assert gamma(10, 2.0**-24) == pytest.approx(10 * 2.0**-24 / (1 - 10 * 2.0**-24))
    assert gamma(2**24, 2.0**-24) is None and gamma(2**24, 2.0**-24, math.inf) == math.inf
    assert gamma(10, Fraction(1, 2**24)) == Fraction(10, 2**24 - 10)  # exact for a Fraction


# -------------------------------------------------------------------- fused multiply-add


finite32 = bit_patterns(FLOAT32).map(lambda b: value_of_bits(b, FLOAT32)).filter(
    lambda v: not isinstance(v, float) and (v == 0 or Fraction(2) ** -60 < abs(v) < Fraction(2) ** 60))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(finite32, finite32), min_size=1, max_size=12))
def test_fma_sequential_is_one_rounding_per_step(pairs):
    terms = np.array([[float(a) * float(b) for a, b in pairs]])  # exact: 24 x 24 bits fit in 53
    acc = Fraction(0)
    for a, b in pairs:
        acc = round_to_format(acc + a * b, FLOAT32)
    assert fma_sequential(terms)[0] == float(acc)


def test_the_simulated_orders_are_the_registrys_row_shapes():
    """The columns the page names: the fused sum, every ORDERS entry with a RowShape, six seeded shuffles."""
    assert sim_orders() == ("sequential, fused multiply-add", "sequential", "reverse", "pairwise",
                            "8 lanes, then pairwise (CPU SIMD-like)", "32 lanes, then pairwise (GPU warp-like)",
                            "split-K: 4 chunks", *(f"random order #{i}" for i in range(1, 7)))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.sampled_from(["normal", "positive", "wide"]))
def test_every_simulated_order_is_within_the_a_priori_bound(seed, k, kind):
    rng = np.random.default_rng(seed)
    x = {"normal": rng.standard_normal, "positive": rng.random,
         "wide": lambda n: rng.lognormal(0, 4, n) * rng.choice([-1, 1], n)}[kind](k)
    y = rng.standard_normal(k)
    a, b = x.astype(np.float32).astype(np.float64), y.astype(np.float32).astype(np.float64)
    terms = (a * b)[None, :]
    results = _sum_orders(terms, "float32", fused=True)
    assert results.shape == (1, len(sim_orders()))
    exact = exact_sum_fraction(terms[0])
    bound = gamma(k, 2.0**-24, math.inf) * exact_sum_fraction(np.abs(terms[0])) + k * Fraction(2) ** -149
    for r in results[0]:
        assert abs(Fraction(float(r)) - exact) <= bound
        assert float(np.float32(r)) == r  # a float32 value


# ------------------------------------------------------------------------------- inputs


def test_as_float_array_accepts_every_format_exactly():
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        t = torch.tensor([1.5, -0.0, 3.140625], dtype=dt)
        arr, name = as_float_array(t)
        assert name == str(dt).split(".")[1] and arr.dtype == np.float64
        assert np.array_equal(arr, t.double().numpy())
    arr, name = as_float_array(np.array([1, 2], dtype=ml_dtypes.bfloat16))
    assert name == "bfloat16"
    with pytest.raises(TypeError):
        as_float_array(np.array([1, 2]))
    with pytest.raises(TypeError):
        as_float_array(torch.tensor([1 + 2j]))


def test_refuses_what_it_cannot_diagnose():
    a = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match="shape"):
        diagnose(a, np.ones((3, 2), np.float32))
    with pytest.raises(ValueError, match="empty"):
        diagnose(np.ones(0, np.float32), np.ones(0, np.float32))
    with pytest.raises(ValueError, match="at most"):
        diagnose(np.ones(MAX_ELEMENTS + 1, np.float16), np.ones(MAX_ELEMENTS + 1, np.float16))
    with pytest.raises(ValueError, match="reduction_length"):
        diagnose(a, a, reduction_length=0)
    with pytest.raises(ValueError, match="reduced_precision"):
        diagnose(a, a, reduced_precision="fp8")
    with pytest.raises(ValueError, match="unknown format"):
        diagnose(a, a, dtype="float8")
    x, y = np.ones((2, 4), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(ValueError, match="do not multiply"):
        diagnose(a, a, inputs=(x, x))
    with pytest.raises(ValueError, match="has shape"):
        diagnose(a, a, inputs=(x, y))
    with pytest.raises(ValueError, match="inputs sum 4 terms"):
        diagnose(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32), inputs=(x, np.ones((4, 3), np.float32)),
                 reduction_length=5)
    with pytest.raises(ValueError, match="summing the last axis"):
        diagnose(a, a, inputs=np.ones((3, 5), np.float32))


def test_prepare_inputs_shapes():
    assert prepare_inputs((np.ones(4), np.ones((4, 3))), (3,)).k == 4
    assert prepare_inputs((np.ones((2, 4)), np.ones(4)), (2,)).kind == "matmul"
    assert prepare_inputs(np.ones(7, np.float32), ()).kind == "sum"
    assert prepare_inputs(np.ones(7, np.float32), (1,)).k == 7
    assert prepare_inputs(np.ones((2, 3, 7), np.float32), (2, 3)).a.shape == (6, 7)


# ----------------------------------------------------------------------------- identical


@SETTINGS
@given(st.lists(bit_patterns(FLOAT32), min_size=1, max_size=40))
def test_identical_arrays_incl_nan_inf_zero_subnormal(bits):
    t = torch.tensor([b - (1 << 32) if b >> 31 else b for b in bits], dtype=torch.int32).view(torch.float32)
    d = diagnose(t, t.clone())
    assert d.verdict == "identical" and d.rtol == 0 and d.atol == 0 and d.n_differ == 0
    assert d.equal_nan == bool(torch.isnan(t).any())
    torch.testing.assert_close(t, t.clone(), rtol=d.rtol, atol=d.atol, equal_nan=d.equal_nan)
    assert d.assert_line.endswith(")")


def test_signed_zeros_are_equal_and_counted():
    z = np.zeros(6, np.float32)
    d = diagnose(z, -z)
    assert d.verdict == "identical" and d.n_signed_zero == 6 and any("sign bit" in r for r in d.reasons)


def test_sums_of_subnormals_are_exact_in_every_order():
    rng = np.random.default_rng(3)
    x = (rng.integers(-(2**20), 2**20, (50, 64)) * 2.0**-149).astype(np.float32)  # subnormal multiples
    assert np.all(np.abs(x) < 2.0**-126)
    seq, pw = np.add.accumulate(x, axis=1)[:, -1], x.sum(axis=1)
    assert np.array_equal(seq, pw)
    assert diagnose(seq, pw, inputs=x).verdict == "identical"


def test_one_subnormal_ulp_is_rounding_and_measured_in_ulps():
    rng = np.random.default_rng(4)
    e = (rng.integers(1, 2**22, 200) * 2.0**-149).astype(np.float32)
    a = e.copy()
    a[::3] = np.nextafter(a[::3], np.float32(1))
    d = diagnose(a, e, reduction_length=16)
    assert d.verdict == "reordering"
    assert np.all(d.ulp_diff[::3] == 1) and d.n_differ == len(a[::3])
    check_recommendation(d, a, e)


# ------------------------------------------------------------------------- reorderings


def _vector_orders(x: np.ndarray):
    """Several real orders of one float32 sum."""
    yield np.add.accumulate(x)[-1]  # left to right
    yield np.add.accumulate(x[::-1])[-1]
    yield x.sum()  # NumPy pairwise
    yield np.float32(torch.from_numpy(x).sum().item())
    yield np.add.accumulate(x[np.argsort(np.abs(x))])[-1]
    yield np.float32(x.astype(np.float64).sum())  # float64 accumulation, rounded once


def _data(rng, kind: str, shape):
    if kind == "normal":
        return rng.standard_normal(shape)
    if kind == "positive":
        return rng.random(shape)
    if kind == "wide":
        return rng.lognormal(0, 2, shape) * rng.choice([-1.0, 1.0], shape)
    if kind == "rows":  # row scales spread over six decades
        return rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, (shape[0],) + (1,) * (len(shape) - 1))
    raise ValueError(kind)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from(["normal", "positive", "wide", "rows"]), st.integers(2, 4000),
       st.booleans())
def test_reordered_row_sums_are_reordering(seed, kind, k, give_inputs):
    """Without the inputs, a 1-D result's scale floor is its median magnitude: rows of widely
    different scales that cancel are outside that heuristic, so they are tested with the inputs."""
    give_inputs = give_inputs or kind == "rows"
    rng = np.random.default_rng(seed)
    x = _data(rng, kind, (64, k)).astype(np.float32)
    actual = np.add.accumulate(x, axis=1)[:, -1]
    expected = torch.from_numpy(x).sum(dim=1).numpy()
    d = diagnose(actual, expected, reduction_length=k, inputs=x if give_inputs else None)
    assert d.verdict in ("reordering", "identical"), d.reasons
    check_recommendation(d, actual, expected)
    if give_inputs:  # the a-priori bound is rigorous: it holds element by element
        assert np.all(d.abs_diff <= d.envelope("reordering").bound)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from(["normal", "positive", "wide"]), st.integers(1, 20000))
def test_every_order_of_one_vector_is_reordering(seed, kind, k):
    rng = np.random.default_rng(seed)
    x = _data(rng, kind, (k,)).astype(np.float32)
    results = list(_vector_orders(x))
    for r in results[1:]:
        d = diagnose(np.float32(r), np.float32(results[0]), inputs=x)
        assert d.verdict in ("reordering", "identical"), d.reasons
        assert np.all(d.abs_diff <= d.envelope("reordering").bound)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 1500), st.integers(1, 60),
       st.sampled_from(["rows", "transpose", "split", "float64", "flip"]),
       st.sampled_from(["normal", "positive", "rows"]))
def test_matrix_products_in_other_orders_are_reordering(seed, m, k, n, how, kind):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(_data(rng, kind, (m, k)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((k, n)).astype(np.float32))
    expected = a @ b
    if how == "rows":
        actual = torch.cat([torch.mm(a[i:i + 1], b) for i in range(m)])
    elif how == "transpose":
        actual = (b.T @ a.T).T.contiguous()
    elif how == "split":
        h = max(1, k // 3)
        actual = (a[:, :h] @ b[:h]) + (a[:, h:] @ b[h:])
    elif how == "float64":  # products and sums in float64, rounded once: nearly the exact result
        actual = (a.double() @ b.double()).float()
    else:
        actual = a.flip(1) @ b.flip(0)
    # without the inputs, a result with few columns whose rows differ in scale by decades has no
    # scale model to learn from (core.diagnose.envelopes' docstring): those are judged with the inputs only
    with_and_without = ((a, b),) if kind == "rows" and n < MIN_MEDIAN else ((a, b), None)
    for inputs in with_and_without:
        d = diagnose(actual, expected, inputs=inputs, reduction_length=k)
        assert d.verdict in ("reordering", "identical"), (how, d.reasons)
        check_recommendation(d, actual, expected)
    assert np.all(d.abs_diff <= diagnose(actual, expected, inputs=(a, b)).envelope("reordering").bound)


def test_float16_and_bfloat16_results_reordered():
    rng = np.random.default_rng(5)
    x16 = rng.standard_normal((200, 300)).astype(np.float16)
    seq = np.add.accumulate(x16.astype(np.float32), axis=1)[:, -1].astype(np.float16)
    pw = x16.astype(np.float32).sum(axis=1).astype(np.float16)
    d = diagnose(seq, pw, inputs=x16)
    assert d.fmt == "float16" and d.acc_fmt == "float32" and d.verdict in ("reordering", "identical")
    a = torch.from_numpy(rng.standard_normal((64, 256)).astype(np.float32)).bfloat16()
    b = torch.from_numpy(rng.standard_normal((256, 64)).astype(np.float32)).bfloat16()
    d = diagnose(a.flip(1) @ b.flip(0), a @ b, inputs=(a, b))
    assert d.fmt == "bfloat16" and d.verdict in ("reordering", "identical")
    assert d.envelope("reordering").factor == ENVELOPE_FACTOR  # one-ULP output flips need no widening


def test_float64_reorderings_and_float32_against_float64():
    rng = np.random.default_rng(6)
    a = torch.from_numpy(rng.standard_normal((80, 300)))
    b = torch.from_numpy(rng.standard_normal((300, 40)))
    assert diagnose(a.flip(1) @ b.flip(0), a @ b, inputs=(a, b)).verdict == "reordering"
    d = diagnose((a.float() @ b.float()).double(), a @ b, inputs=(a, b))
    assert d.verdict == "reduced_precision" and d.explanation == "float32"


def test_systematic_rounding_is_covered_with_the_inputs():
    """0.1 added 10^5 times: the sequential error grows like K u, not sqrt(K) u. Given the
    inputs, the simulation sees the orders spread that far and widens the envelope."""
    v = np.full((4, 100_000), 0.1, dtype=np.float32)
    seq, pw = np.add.accumulate(v, axis=1)[:, -1], v.sum(axis=1)
    d = diagnose(seq, pw, inputs=v)
    assert d.verdict == "reordering"
    assert d.envelope("reordering").factor > ENVELOPE_FACTOR
    assert np.all(d.abs_diff <= d.envelope("reordering").bound)


def test_unknown_k_is_assumed_and_said():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 1000)).astype(np.float32)
    d = diagnose(np.add.accumulate(x, axis=1)[:, -1], x.sum(axis=1))
    assert d.k == ASSUMED_K and d.k_source == "assumed" and any("unknown" in n for n in d.notes)


# ---------------------------------------------------------------- reduced precision


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from(["tf32", "bfloat16"]), st.integers(16, 1024),
       st.sampled_from(["normal", "positive", "rows"]), st.booleans())
@example(922, "bfloat16", 920, "rows", True)  # bfloat16 inputs whose differences float16's envelope covers too
def test_reduced_precision_inputs_are_recognised(seed, fmt, k, kind, give_inputs):
    rng = np.random.default_rng(seed)
    a = _data(rng, kind, (32, k)).astype(np.float32).astype(np.float64)
    b = rng.standard_normal((k, 24)).astype(np.float32).astype(np.float64)
    expected = torch.from_numpy(a).float() @ torch.from_numpy(b).float()
    actual = torch.from_numpy(round_to(a, fmt)).float() @ torch.from_numpy(round_to(b, fmt)).float()
    inputs = (torch.from_numpy(a).float(), torch.from_numpy(b).float()) if give_inputs else None
    d = diagnose(actual, expected, reduction_length=k, inputs=inputs)
    assert d.verdict == "reduced_precision", d.reasons
    # the finest format that covers it, TF32 before float16 before bfloat16: the format that ran, or a finer
    # one whose envelope covers these differences too (found by hypothesis: bfloat16 inputs, seed 922, K = 920)
    finest = ("tf32", "float16", "bfloat16")
    assert finest.index(d.explanation) <= finest.index(fmt) and d.envelope(d.explanation).fits
    assert d.envelope(fmt).fits and all(not d.envelope(f).fits for f in finest[:finest.index(d.explanation)])
    assert not d.envelope("reordering").fits and d.envelope(fmt).bulk_ratio >= BULK_SHARE
    check_recommendation(d, actual, expected)
    if give_inputs:
        assert np.all(d.abs_diff <= d.envelope(fmt).bound)
    ruled_out = diagnose(actual, expected, reduction_length=k, inputs=inputs, reduced_precision="none")
    assert ruled_out.verdict == "too_large" and ruled_out.rtol is None


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(16, 1024))
@example(13303966, 73)  # found by hypothesis: a truncation bias of 2 u |S| beyond 8 typical sizes
def test_tf32_by_truncation_is_reduced_precision_too(seed, k):
    """Some TF32 conversions truncate (twice the error, biased): still inside the 11-bit envelopes."""
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.standard_normal((32, k)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((k, 24)).astype(np.float32))

    def truncate(t):
        return (t.view(torch.int32) & ~0x1FFF).view(torch.float32)

    actual, expected = truncate(a) @ truncate(b), a @ b
    for inputs in ((a, b), None):
        d = diagnose(actual, expected, reduction_length=k, inputs=inputs)
        assert d.verdict == "reduced_precision" and d.explanation in ("tf32", "float16"), d.reasons


def test_bfloat16_autocast_product_and_what_tf32_cannot_explain():
    rng = np.random.default_rng(8)
    a = torch.from_numpy(rng.standard_normal((64, 512)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((512, 64)).astype(np.float32))
    actual = torch.mm(a.bfloat16(), b.bfloat16()).float()  # bfloat16 result too
    d = diagnose(actual, a @ b, inputs=(a, b))
    assert (d.verdict, d.explanation) == ("reduced_precision", "bfloat16")
    assert diagnose(actual, a @ b, inputs=(a, b), reduced_precision="tf32").verdict == "too_large"
    sim = d.simulation
    assert set(sim.reduced) == {"tf32", "float16", "bfloat16"}


def test_float16_inputs_out_of_range_are_not_simulated():
    a = torch.full((4, 8), 1e5)
    b = torch.ones(8, 4)
    d = diagnose(a @ b, a @ b, inputs=(a, b))
    assert "float16" not in d.simulation.reduced and "tf32" in d.simulation.reduced


# ------------------------------------------------------------------------ planted bugs


def _pair(seed: int, reorder: bool):
    rng = np.random.default_rng(seed)
    a = torch.from_numpy(rng.standard_normal((100, 256)).astype(np.float32))
    b = torch.from_numpy(rng.standard_normal((256, 100)).astype(np.float32))
    expected = a @ b
    actual = torch.cat([torch.mm(a[i:i + 1], b) for i in range(100)]) if reorder else expected.clone()
    return a, b, actual, expected


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(["one", "row", "column", "block", "zero", "sign"]),
       st.floats(-3, 2), st.booleans(), st.integers(0, 99), st.integers(0, 99))
def test_planted_bugs_of_many_sizes_and_patterns_are_too_large(seed, reorder, pattern, log_size, negative, i, j):
    a, b, actual, expected = _pair(seed, reorder)
    scale = float(expected.abs().median())
    delta = (-1 if negative else 1) * 10.0**log_size * scale
    bugged = actual.clone()
    if pattern == "one":
        bugged[i, j] += delta
    elif pattern == "row":
        bugged[i, :] += delta
    elif pattern == "column":
        bugged[:, j] += delta
    elif pattern == "block":
        bugged[i:i + 3, j:j + 3] += delta
    elif pattern == "zero":
        assume(abs(float(expected[i, j])) > 1e-2 * scale)
        bugged[i, j] = 0.0
    else:
        assume(abs(float(expected[i, j])) > 1e-2 * scale)
        bugged[i, j] = -bugged[i, j]
    for inputs in ((a, b), None):
        d = diagnose(bugged, expected, inputs=inputs)
        assert d.verdict == "too_large", (pattern, log_size, d.reasons)
        assert d.rtol is None and d.atol is None and d.assert_line is None and d.next_checks


def test_bugs_on_a_few_percent_of_elements_are_not_reduced_precision():
    """Inside the bfloat16 envelope, but only 3 % of the elements moved: not reduced precision."""
    a, b, actual, expected = _pair(9, True)
    bugged = actual.clone()
    bugged[:3, :] *= 1.002
    d = diagnose(bugged, expected, inputs=(a, b))
    assert d.verdict == "too_large"
    env = d.envelope("bfloat16")
    assert env.exceed == 0 and env.bulk_ratio < BULK_SHARE


def test_a_single_outlier_is_named_and_the_simulation_says_which_side():
    a, b, actual, expected = _pair(10, True)
    bugged = actual.clone()
    bugged[17, 42] *= 1.01
    d = diagnose(bugged, expected, inputs=(a, b))
    assert d.verdict == "too_large" and d.pattern.localized
    assert (17 * 100 + 42) in d.pattern.outliers
    assert d.worst[0].index == (17, 42)
    assert any("Result B is within reordering distance" in r for r in d.reasons)


# --------------------------------------------------------------------------- NaN / Inf


def test_nan_and_inf_mismatches_are_too_large():
    e = np.linspace(-1, 1, 50, dtype=np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        a = e.copy()
        a[7] = bad
        d = diagnose(a, e)
        assert d.verdict == "too_large" and d.nonfinite_index.tolist() == [7]
        assert (d.nan_mismatch, d.inf_mismatch) == ((1, 0) if np.isnan(bad) else (0, 1))
    a, b = e.copy(), e.copy()
    a[3], b[3] = np.inf, -np.inf
    assert diagnose(a, b).verdict == "too_large"


def test_nan_in_the_same_places_needs_equal_nan():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((30, 500)).astype(np.float32)
    actual, expected = np.add.accumulate(x, axis=1)[:, -1], x.sum(axis=1)
    actual[4] = expected[4] = np.nan
    expected[5] = actual[5] = np.inf
    d = diagnose(actual, expected, reduction_length=500)
    assert d.verdict in ("reordering", "identical") and d.equal_nan and "equal_nan=True" in d.assert_line
    check_recommendation(d, actual, expected)
    assert d.allclose.failing >= 1  # torch.allclose's default equal_nan=False fails on NaN


def test_overflow_near_the_largest_value_is_explained():
    e = np.full(8, 3.0e38, np.float32)
    a = e.copy()
    a[0] = np.inf
    d = diagnose(a, e)
    assert d.verdict == "too_large" and any("overflowed" in r for r in d.reasons)


# ------------------------------------------------------------------ evidence and advice


def test_default_allclose_report_and_dtype_mismatch():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((200, 3000)).astype(np.float32)
    x[:, 1] = -x[:, 0]  # a few sums near zero
    actual, expected = np.add.accumulate(x, axis=1)[:, -1], x.sum(axis=1)
    d = diagnose(actual, expected, inputs=x)
    lim = 1e-8 + 1e-5 * np.abs(expected.astype(np.float64))
    assert d.allclose.failing == int(np.sum(np.abs(actual.astype(np.float64) - expected) > lim))
    assert d.allclose.failing == 0 or d.allclose.worst_index is not None
    d2 = diagnose(actual.astype(np.float64), expected)
    assert d2.fmt == "float32" and not d2.check_dtype and "check_dtype=False" in (d2.assert_line or "")


def test_distributions_and_worst_elements_are_consistent():
    a, b, actual, expected = _pair(13, True)
    d = diagnose(actual, expected, inputs=(a, b))
    fin = ~np.isnan(d.abs_diff)
    assert d.abs_stats.max == float(np.max(d.abs_diff[fin]))
    assert d.abs_stats.p50 <= d.abs_stats.p90 <= d.abs_stats.p99 <= d.abs_stats.p999 <= d.abs_stats.max
    assert d.n_differ == int(np.sum(d.abs_diff > 0))
    ratios = [w.ratio_typical for w in d.worst]
    assert ratios == sorted(ratios, reverse=True)
    assert d.verdict in VERDICTS and d.sentence and d.reasons


def test_simulation_reference_is_the_exact_sum_rounded_once():
    a, b, actual, expected = _pair(14, True)
    d = diagnose(actual, expected, inputs=(a, b))
    sim = d.simulation
    an, bn = a.double().numpy(), b.double().numpy()
    for r, flat in enumerate(sim.elements[:5]):
        i, j = divmod(int(flat), 100)
        exact = exact_sum_fraction(an[i] * bn[:, j])
        assert sim.reference[r] == float(round_to_format(exact, FLOAT64))
    assert sim.results.shape == (sim.elements.size, len(sim_orders()))
    assert 0 <= sim.within <= sim.elements.size
    assert sim.pair_diffs_ulps.size == sim.elements.size * len(sim_orders()) * (len(sim_orders()) - 1) // 2
    # the sampled elements include the worst difference
    assert int(np.nanargmax(d.abs_diff / d.scale)) in set(sim.elements.tolist())


def test_reduced_formats_table():
    """Each reduced format is the FloatFormat itself (one type of a format), with the values IEEE and NVIDIA give."""
    tf32, bf16, f16 = (REDUCED_FORMATS[k].fmt for k in ("tf32", "bfloat16", "float16"))
    assert tf32 is TF32 and bf16 is FORMATS["bfloat16"] and f16 is FORMATS["float16"]
    assert REDUCED_FORMATS["float32"].fmt is FLOAT32
    assert set(REDUCED_FORMATS) == {"float32", "tf32", "float16", "bfloat16"}
    assert tf32.precision == 11 and tf32.emin == -126 and float(tf32.max_finite) == (2 - 2.0**-10) * 2.0**127
    assert float(bf16.unit_roundoff) == 2.0**-8 and float(f16.max_finite) == 65504.0 and f16.emin == -14
    assert [k for k, p in REDUCED_FORMATS.items() if p.rounds_output] == ["float16", "bfloat16"]
    assert [k for k, p in REDUCED_FORMATS.items() if p.may_truncate] == ["tf32"]
