"""core.kernels.dot: every arithmetic model bit for bit against a slow pure-Fraction reference written here,
and against torch where torch exposes the same arithmetic; and core.studies.gpu_arithmetic's lab, error
curves and atomics built on them."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.exact import exact_dot_fraction, exact_sum_fraction
from core.arith.formats import FORMATS, TF32, bits_of_value, from_bit_view, round_to_format, value_of_bits
from core.arith.vectors import VectorError, ill_conditioned_dot
from core.kernels.dot import (
    DOT_MODELS,
    ModelNotApplicable,
    check_formats,
    exact_products,
    make_rounder,
    model_inputs,
    run_model,
    slice_bounds,
    to_tf32,
)
from core.kernels.dot_trace import trace
from core.studies.atomics import AtomicsSpec, atomic_inputs, simulate_atomics
from core.studies.gpu_arithmetic import (
    DotSpec,
    error_curves,
    k_grid,
    make_pair,
    run_lab,
    torch_results,
)
from tests.strategies import bit_patterns

NP = {name: fmt.numpy_dtype for name, fmt in FORMATS.items()}
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
PAIRS = [(s, a) for s in FORMATS for a in FORMATS if check_formats(s, a) is None]  # FP8 inputs included
# the models the Fraction reference below writes out; the FP8 tensor-core ones: tests/core/kernels/test_dot_fp8.py
REFERENCED = [k for k, m in DOT_MODELS.items() if m.structure != "promoted"]


def from_bits(bits, name):
    return from_bit_view(np.array(bits, dtype=FORMATS[name].uint_dtype), FORMATS[name])


# ------------------------------------------------------------------ the reference, in Fractions
# A value is (v, negative): v a Fraction (finite) or float (inf, nan); negative is the sign of a zero.


def ref_value(a) -> tuple:
    f = float(a)
    if not math.isfinite(f):
        return f, False
    return Fraction(f), math.copysign(1.0, f) < 0


def ref_round(v: tuple, fmt) -> tuple:
    value, negative = v
    if isinstance(value, float):
        return value, False
    r = round_to_format(value, fmt)
    if r == 0:
        return (r, value < 0) if value != 0 else (r, negative)  # an underflow keeps its sign
    return r, False


def ref_sum(terms: list[tuple]) -> tuple:
    """The exact sum of several values, IEEE for specials and for the sign of an exact zero."""
    specials = [v for v, _ in terms if isinstance(v, float)]
    if specials:
        if any(math.isnan(s) for s in specials) or (math.inf in specials and -math.inf in specials):
            return math.nan, False
        return specials[0], False
    total = sum((v for v, _ in terms), Fraction(0))
    if total == 0:
        return total, all(v == 0 and n for v, n in terms)
    return total, False


def ref_product(a: tuple, b: tuple) -> tuple:
    (va, na), (vb, nb) = a, b
    if isinstance(va, float) or isinstance(vb, float):
        if (isinstance(va, float) and math.isnan(va)) or (isinstance(vb, float) and math.isnan(vb)) or va == 0 \
                or vb == 0:
            return math.nan, False
        return math.copysign(math.inf, (1 if va > 0 else -1) * (1 if vb > 0 else -1)), False
    p = va * vb
    sign_a = na if va == 0 else va < 0
    sign_b = nb if vb == 0 else vb < 0
    return p, (sign_a != sign_b) if p == 0 else False


def ref_model(key, x, y, acc_name, tile=3, slices=2, tf32_mode="rna"):
    model = DOT_MODELS[key]
    fmt = FORMATS[model.accumulate or acc_name]
    xs, ys = ref_inputs(model, x, y, tf32_mode)
    prods = [ref_product(a, b) for a, b in zip(xs, ys, strict=True)]
    zero = (Fraction(0), False)

    def chain_tiles(ps, width):
        s = zero
        for j in range(0, len(ps), width):
            s = ref_round(ref_sum([s, *ps[j : j + width]]), fmt)
        return s

    if model.structure == "sequential" and not model.fused:
        s = zero
        for p in prods:
            s = ref_round(ref_sum([s, ref_round(p, fmt)]), fmt)
        return s, fmt
    if model.structure == "sequential":
        return chain_tiles(prods, 1), fmt
    if model.structure == "tiles":
        return chain_tiles(prods, tile), fmt
    length = -(-len(prods) // slices)
    parts = [chain_tiles(prods[j * length : (j + 1) * length], tile) for j in range(slices)]
    s = parts[0]
    for part in parts[1:]:
        s = ref_round(ref_sum([s, part]), fmt)
    return s, fmt


def ref_tf32(f: float, mode: str) -> float:
    """float32 value to TF32 with Fractions: nearest with ties away (rna), ties to even (rne), truncation (rz)."""
    if not math.isfinite(f) or f == 0:
        return f
    v = abs(Fraction(f))
    e = max(math.floor(math.log2(v)), TF32.emin)
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    while Fraction(2) ** e > v and e > TF32.emin:
        e -= 1
    q = Fraction(2) ** (e - TF32.precision + 1)
    n, r = divmod(v, q)
    if mode == "rna":
        n += r >= q / 2
    elif mode == "rne":
        n += r > q / 2 or (r == q / 2 and n % 2 == 1)
    out = n * q
    if out > TF32.max_finite:
        out = math.inf
    return math.copysign(float(out), f)


def ref_inputs(model, x, y, tf32_mode):
    if model.inputs == "stored":
        conv = ref_value
    elif model.inputs == "tf32":
        def conv(a):
            return ref_value(ref_tf32(float(a), tf32_mode))
    else:
        target = FORMATS[model.inputs]

        def conv(a):
            v, negative = ref_value(a)
            if isinstance(v, float):
                return v, False
            r = round_to_format(v, target)
            return r, (negative or v < 0) if r == 0 else False
    return [conv(a) for a in x], [conv(b) for b in y]


def ref_bits(v: tuple, fmt) -> int:
    value, negative = v
    return bits_of_value(value, fmt, negative_zero=negative and value == 0)


# ------------------------------------------------------------------ the tests


@settings(max_examples=250, deadline=None)
@given(data=st.data(), formats=st.sampled_from(PAIRS), key=st.sampled_from(REFERENCED),
       tile=st.integers(1, 5), slices=st.integers(1, 5), mode=st.sampled_from(["rna", "rne", "rz"]))
def test_every_model_matches_the_fraction_reference_bit_for_bit(data, formats, key, tile, slices, mode):
    storage, acc = formats
    n = data.draw(st.integers(1, 16))
    x = from_bits(data.draw(st.lists(bit_patterns(FORMATS[storage]), min_size=n, max_size=n)), storage)
    y = from_bits(data.draw(st.lists(bit_patterns(FORMATS[storage]), min_size=n, max_size=n)), storage)
    model = DOT_MODELS[key]
    if model.inputs == "tf32" and storage == "float64":
        with pytest.raises(ModelNotApplicable):
            run_model(model, x, y, acc, tile, slices, mode)
        return
    got, _ = run_model(model, x, y, acc, tile, slices, mode)
    ref, fmt = ref_model(key, list(x), list(y), acc, tile, slices, mode)
    assert got.fmt == fmt
    if isinstance(ref[0], float) and math.isnan(ref[0]):
        assert isinstance(got.value, float) and math.isnan(got.value)
    else:
        assert got.bits == ref_bits(ref, fmt), (got.value, ref)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), key=st.sampled_from(REFERENCED), tile=st.integers(1, 6), slices=st.integers(1, 6))
def test_models_on_wide_ranging_finite_values(data, key, tile, slices):
    """Values spread over many binades (cancellation, underflow of products, ties): finite only."""
    storage, acc = data.draw(st.sampled_from(PAIRS))
    n = data.draw(st.integers(1, 24))
    fmt = FORMATS[storage]
    e = st.integers(fmt.emin - fmt.precision, fmt.emax - 2)
    vals = st.tuples(st.integers(-(1 << fmt.precision) + 1, (1 << fmt.precision) - 1), e).map(
        lambda me: float(round_to_format(Fraction(me[0]) * Fraction(2) ** (me[1] - fmt.precision), fmt)))
    x = np.array(data.draw(st.lists(vals, min_size=n, max_size=n))).astype(NP[storage])
    y = np.array(data.draw(st.lists(vals, min_size=n, max_size=n))).astype(NP[storage])
    if DOT_MODELS[key].inputs == "tf32" and storage == "float64":
        return
    got, _ = run_model(DOT_MODELS[key], x, y, acc, tile, slices)
    ref, fmt_acc = ref_model(key, list(x), list(y), acc, tile, slices)
    if not (isinstance(ref[0], float) and math.isnan(ref[0])):
        assert got.bits == ref_bits(ref, fmt_acc)


@settings(max_examples=300, deadline=None)
@given(bits=bit_patterns(FORMATS["float32"]), mode=st.sampled_from(["rna", "rne", "rz"]))
def test_tf32_conversion_against_fractions(bits, mode):
    x = np.array([bits], dtype=np.uint32).view(np.float32)
    got = float(to_tf32(x, mode)[0])
    ref = ref_tf32(float(x[0]), mode)
    if math.isnan(ref):
        assert math.isnan(got)
    else:
        assert got == ref and math.copysign(1, got) == math.copysign(1, ref)
        if math.isfinite(got):
            assert int(to_tf32(x, mode).view(np.uint32)[0]) & 0x1FFF == 0  # 10 mantissa bits left


def test_tf32_1024_point_5_rounds_away_from_zero():
    """1024.5 lies halfway between the TF32 neighbours 1024 and 1025: CUTLASS's conversion (add half
    an ulp to the bits, drop the low 13) gives 1025, ties to even 1024, truncation 1024."""
    x = np.array([1024.5, -1024.5, 1.0 + 2.0**-11], dtype=np.float32)
    assert to_tf32(x, "rna").tolist() == [1025.0, -1025.0, 1.0 + 2.0**-10]
    assert to_tf32(x, "rne").tolist() == [1024.0, -1024.0, 1.0]
    assert to_tf32(x, "rz").tolist() == [1024.0, -1024.0, 1.0]
    largest = np.array([np.finfo(np.float32).max], dtype=np.float32)
    assert to_tf32(largest, "rna")[0] == np.inf and to_tf32(largest, "rz")[0] == float(TF32.max_finite)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), source=st.sampled_from(["float32", "float64"]), target=st.sampled_from(["float16", "bfloat16"]))
def test_tensor_core_conversions_match_torch(data, source, target):
    n = data.draw(st.integers(1, 20))
    x = from_bits(data.draw(st.lists(bit_patterns(FORMATS[source]), min_size=n, max_size=n)), source)
    a, _ = model_inputs(DOT_MODELS["fp16" if target == "float16" else "bf16"], x, x)
    t = torch.from_numpy(x.copy()).to(FORMATS[target].torch_dtype)
    got = a.view(np.uint16)
    ref = t.view(torch.int16).numpy().view(np.uint16)
    nan = np.isnan(a.astype(np.float32))
    assert np.array_equal(got[~nan], ref[~nan]) and np.array_equal(nan, torch.isnan(t).numpy())


@pytest.mark.parametrize("storage", ["float32", "float64", "float16", "bfloat16"])
def test_multiply_then_add_matches_torch_scalar_loop(storage):
    """torch's own float ops, one 0-d tensor at a time: round(s + round(x_i * y_i)) in the storage format."""
    pair = make_pair(DotSpec(kind="lognormal", k=300, seed=3, storage=storage))
    dtype = FORMATS[storage].torch_dtype
    tx, ty = (torch.from_numpy(v.view(UINT[FORMATS[storage].width]).astype(np.int64)).to(FORMATS[storage].int_dtype)
              .view(dtype) for v in (pair.x, pair.y))
    s = torch.zeros((), dtype=dtype)
    signs = torch.where(torch.arange(300) % 2 == 0, 1.0, -1.0).to(dtype)
    for a, b, sg in zip(tx, ty, signs, strict=True):
        s = s + (a * sg) * b
    x_signed = (pair.x.astype(np.float64) * np.where(np.arange(300) % 2 == 0, 1.0, -1.0)).astype(pair.x.dtype)
    got, _ = run_model(DOT_MODELS["separate"], x_signed, pair.y, storage)
    assert got.bits == int(s.view(FORMATS[storage].int_dtype).item()) & ((1 << FORMATS[storage].width) - 1)


def test_structures_reduce_to_each_other():
    pair = make_pair(DotSpec(kind="normal", k=257, seed=1, storage="float32"))
    x, y = pair.x, pair.y
    fma = run_model(DOT_MODELS["fma"], x, y, "float32")[0]
    assert run_model(DOT_MODELS["tiles"], x, y, "float32", tile=1)[0] == fma
    assert run_model(DOT_MODELS["split_k"], x, y, "float32", tile=1, slices=1)[0] == fma
    whole = run_model(DOT_MODELS["tiles"], x, y, "float32", tile=257)[0]  # one block: the exact sum rounded once
    assert whole.value == round_to_format(exact_dot_fraction(x, y), FORMATS["float32"])
    # float32 inputs already fit float32: the "float32 inputs" of a tensor-core model change nothing
    f16 = make_pair(DotSpec(kind="normal", k=100, seed=2, storage="float16"))
    fma = run_model(DOT_MODELS["fma"], f16.x, f16.y, "float32")[0]
    assert run_model(DOT_MODELS["fp16"], f16.x, f16.y, "float32")[0] == fma
    assert run_model(DOT_MODELS["tf32"], f16.x, f16.y, "float32")[0] == fma


def test_slices_cover_k_in_order():
    for k in (1, 5, 16, 17):
        for s in (1, 2, 3, 8):
            spans = slice_bounds(k, s)
            assert len(spans) == s and spans[0][0] == 0 and spans[-1][1] == k
            assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def test_rounder_against_round_to_format():
    rng = np.random.default_rng(0)
    for name in FORMATS:
        fmt = FORMATS[name]
        scale = 1200
        rnd = make_rounder(fmt, scale)
        for _ in range(300):
            n = int(rng.integers(1, 1 << 62)) << int(rng.integers(0, 1200)) >> int(rng.integers(0, 1300))
            n = -n if rng.random() < 0.5 else n
            ref = round_to_format(Fraction(n, 1 << scale), fmt)
            got = rnd(n)
            assert (got == ref) if isinstance(ref, float) else (Fraction(got, 1 << scale) == ref)


def test_exact_products_are_exact():
    x = np.array([3.0, -0.0, 2.0**-149, 2.0**127], dtype=np.float32)
    y = np.array([0.5, 5.0, 2.0**-149, 2.0**127], dtype=np.float32)
    units, negative, scale = exact_products(x, y)
    assert [Fraction(u, 1 << scale) for u in units] == [Fraction(3, 2), 0, Fraction(1, 2**298), Fraction(2) ** 254]
    assert negative == [False, True, False, False]
    units, _, scale = exact_products(np.array([5e-324, 1e308]), np.array([5e-324, 1e308]))
    assert Fraction(units[0], 1 << scale) == Fraction(1, 2**2148)
    assert Fraction(units[1], 1 << scale) == Fraction(1e308) ** 2


def test_zero_signs_follow_ieee():
    neg = np.array([-0.0, -0.0], dtype=np.float32)
    pos = np.array([1.0, 1.0], dtype=np.float32)
    for key in ("separate", "fma", "tiles", "split_k"):
        got = run_model(DOT_MODELS[key], neg, pos, "float32")[0]
        assert got.bits == 0  # the accumulator starts at +0, and +0 + -0 = +0
    cancel = run_model(DOT_MODELS["fma"], np.array([1.0, -1.0], np.float32), pos, "float32")[0]
    assert cancel.bits == 0
    tiny = np.array([2.0**-100, 2.0**-100], dtype=np.float32)  # each product -2^-200 underflows to -0
    minus = -tiny
    negative_zero = 0x80000000
    assert run_model(DOT_MODELS["fma"], tiny, minus, "float32")[0].bits == negative_zero
    # multiply, then add: the product alone rounds to -0, and +0 + -0 is +0
    assert run_model(DOT_MODELS["separate"], tiny, minus, "float32")[0].bits == 0
    assert ref_bits(ref_model("separate", list(tiny), list(minus), "float32")[0], FORMATS["float32"]) == 0
    assert run_model(DOT_MODELS["split_k"], tiny, minus, "float32", tile=1, slices=2)[0].bits == negative_zero
    assert run_model(DOT_MODELS["tiles"], tiny, minus, "float32", tile=2)[0].bits == negative_zero
    mixed = np.array([2.0**-100, -(2.0**-100)], dtype=np.float32)
    assert run_model(DOT_MODELS["split_k"], mixed, tiny, "float32", tile=1, slices=2)[0].bits == 0  # -0 + +0


def test_overflow_and_specials():
    big = np.array([2.0**100, 2.0**100], dtype=np.float32)
    sep = run_model(DOT_MODELS["separate"], big, big, "float32")[0]
    assert sep.value == math.inf  # each product overflows float32
    assert run_model(DOT_MODELS["separate"], big, big, "float64")[0].value == Fraction(2) ** 201
    nan = run_model(DOT_MODELS["fma"], np.array([np.inf, 1.0], np.float32), np.array([0.0, 1.0], np.float32),
                    "float32")[0]
    assert math.isnan(nan.value)


def test_refusals():
    assert check_formats("float32", "float16") is not None and check_formats("float16", "bfloat16") is not None
    assert check_formats("bfloat16", "float32") is None
    with pytest.raises(VectorError, match="K must be"):
        make_pair(DotSpec(k=0))
    with pytest.raises(ModelNotApplicable):
        run_model(DOT_MODELS["tf32"], np.ones(3), np.ones(3), "float64")


@pytest.mark.parametrize(("kind", "storage", "acc"), [
    ("normal", "float32", "float32"),
    ("lognormal", "float64", "float64"),
    ("ill_conditioned_dot", "float32", "float64"),
    ("uniform", "bfloat16", "float32"),
    ("normal", "float16", "float16"),
])
def test_every_result_within_its_bound(kind, storage, acc):
    lab = run_lab(
        make_pair(DotSpec(kind=kind, k=300, seed=4, storage=storage, condition=1e12)),
        acc,
        tuple(DOT_MODELS),
        tile=4,
        slices=3,
    )
    for row in lab.rows:
        assert row.metrics is None or row.metrics.within_bound is not False, row.name
    assert {"model", "live", "exact"} <= {r.origin for r in lab.rows}


def test_trace_ends_at_the_engine_result():
    for storage in ("float32", "float8_e5m2"):
        pair = make_pair(DotSpec(kind="lognormal", k=19, seed=7, storage=storage))
        for key, model in DOT_MODELS.items():
            if (model.inputs == "fp8") == FORMATS[storage].arithmetic:
                continue  # the FP8 tensor-core models take FP8 inputs; the others are checked on float32
            for acc in ("float32", "float64"):
                ops = trace(model, pair.x, pair.y, acc, tile=4, slices=3)
                assert ops[-1].rounded == run_model(model, pair.x, pair.y, acc, tile=4, slices=3)[0].value, key


def test_prefix_checkpoints_equal_runs_on_prefixes():
    pair = make_pair(DotSpec(kind="normal", k=100, seed=9, storage="float32"))
    ks = tuple(k_grid(100))
    for key in ("separate", "fma", "tf32", "bf16"):
        _, seen = run_model(DOT_MODELS[key], pair.x, pair.y, "float32", checkpoints=ks)
        for k in ks[:-1]:
            assert seen[k] == run_model(DOT_MODELS[key], pair.x[:k], pair.y[:k], "float32")[0]
    points = error_curves(pair, "float32", ("fma", "tiles"), tile=4)
    assert {p.k for p in points} == set(ks) and {p.origin for p in points} == {"model", "live"}


def test_torch_results_are_one_dot_product():
    pair = make_pair(DotSpec(kind="normal", k=50, seed=0, storage="float32"))
    exact = exact_dot_fraction(pair.x, pair.y)
    for r in torch_results(pair):
        assert abs(r.result.value - exact) < Fraction(1, 1000) and "live" in r.provenance


@pytest.mark.parametrize("storage", ["float32", "float64", "bfloat16"])
def test_gendot_reaches_about_the_condition_number(storage):
    for c in (1e6, 1e12):
        x, y, _ = ill_conditioned_dot(2000, c, 1, storage)
        assert x.dtype == NP[storage] and x.size == y.size == 2000
        kappa = exact_dot_fraction(np.abs(x), np.abs(y)) / abs(exact_dot_fraction(x, y))
        assert c / 100 < kappa < c * 100, (c, float(kappa))
    x2, _, _ = ill_conditioned_dot(2000, 1e12, 1, storage)
    assert np.array_equal(x.view(UINT[FORMATS[storage].width]), x2.view(UINT[FORMATS[storage].width]))


def test_gendot_caps_narrow_formats():
    _, _, notes = ill_conditioned_dot(1000, 1e30, 0, "float16")
    assert notes and "capped" in notes[0]


def test_atomics_simulation():
    spec = AtomicsSpec(buckets=3, values=600, runs=80, seed=2, storage="float32")
    res = simulate_atomics(spec)
    fmt = FORMATS["float32"]
    for b in res.buckets:
        assert b.runs.shape == (80,) and 1 <= b.distinct <= 80
        assert b.reproducible.value == round_to_format(b.exact, fmt)
        vals = [Fraction(float(v)) for v in b.runs]
        n = b.count
        bound = (n - 1) * fmt.unit_roundoff / (1 - (n - 1) * fmt.unit_roundoff) * 600 * 10
        assert all(abs(v - b.exact) <= bound for v in vals)
    assert sum(b.count for b in res.buckets) == 600
    one = simulate_atomics(AtomicsSpec(buckets=4, values=4, runs=20))
    assert all(b.distinct == 1 for b in one.buckets)  # one value per bucket (or none): no order to vary


def test_atomics_fixed_order_is_the_index_order_sum():
    spec = AtomicsSpec(buckets=2, values=300, runs=5, seed=4, storage="float16")
    values, index = atomic_inputs(spec)
    res = simulate_atomics(spec)
    fmt = FORMATS["float16"]
    for b in res.buckets:
        s = Fraction(0)
        for v in values[index == b.bucket]:
            s = round_to_format(s + Fraction(float(v)), fmt)
        assert b.fixed.value == s
        assert b.exact == exact_sum_fraction(values[index == b.bucket])


def test_atomics_refuses_too_much_work():
    with pytest.raises(VectorError, match="more than this page simulates"):
        simulate_atomics(AtomicsSpec(values=1_000_000, runs=10_000))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_gpu_rows_when_present():  # pragma: no cover - runs only on a machine with CUDA
    from core.studies.gpu_arithmetic import torch_gpu_results

    rows = torch_gpu_results(make_pair(DotSpec(kind="normal", k=1000, seed=0, storage="float32")))
    assert {r.key for r in rows} >= {"gpu_torch_dot_ieee", "gpu_torch_dot_tf32"}


def test_value_of_bits_roundtrip_of_results():
    got, _ = run_model(DOT_MODELS["fma"], np.array([1.5], np.float32), np.array([2.0], np.float32), "float32")
    assert value_of_bits(got.bits, FORMATS["float32"]) == Fraction(3)
