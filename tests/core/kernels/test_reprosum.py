"""core.studies.mitigations: wider formats help, the reproducible sum is order-independent and exact."""

from __future__ import annotations

import contextlib
import math
import statistics
from fractions import Fraction
from unittest import mock

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.exact import correctly_rounded_sum, exact_sum_fraction
from core.arith.formats import (
    ARITHMETIC,
    FORMATS,
    bit_view,
    bits_of,
    from_bit_view,
    round_to_format,
    to_torch,
    value_of_bits,
)
from core.arith.formats import bits_of as bits_of_scalar
from core.arith.vectors import VectorSpec, generate
from core.kernels import reprosum
from core.kernels.reprosum import (
    _FAST_CPU,
    _FAST_DEVICE,
    _cauchy_schwarz_bound,
    _decided_sum,
    _exact_sum,
    _exact_units,
    _round_float,
    reproducible_sum,
    reproducible_sum_devices,
)
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.machines.devices import cpu_device
from core.machines.globalstate import GlobalState, torch_threads
from core.machines.timing import Throughput, measure_throughput, median_and_quartiles
from core.studies.mitigations import determinism, reproducible_sum_cost, wider_accumulation
from core.studies.peak_rates import VENDOR_RATIOS
from core.studies.sumlab import run_lab
from tests.machine import X86_SUM_KERNEL
from tests.strategies import bit_patterns, finite_values

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def as_tensor(vals, name):
    from core.arith.formats import bits_of_value

    fmt = FORMATS[name]
    bits = [bits_of_value(v, fmt) for v in vals]
    signed = [b - (1 << fmt.width) if b >> (fmt.width - 1) else b for b in bits]
    return torch.tensor(signed, dtype=fmt.int_dtype).view(fmt.torch_dtype)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(ARITHMETIC)))
def test_reproducible_sum_is_the_correctly_rounded_sum_in_every_order(data, name):
    fmt = FORMATS[name]
    vals = data.draw(st.lists(finite_values(fmt), min_size=1, max_size=60))
    x = as_tensor(vals, name)
    expected = correctly_rounded_sum(x, fmt)
    got = value_of_bits(bits_of(reproducible_sum(x)), fmt)
    assert got == expected
    perm = data.draw(st.permutations(range(len(vals))))
    assert bits_of(reproducible_sum(x[list(perm)])) == bits_of(reproducible_sum(x))


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_reproducible_sum_across_thread_counts_and_large_shuffles(name):
    x = torch.from_numpy(np.random.default_rng(3).standard_normal(300_000) * 50).to(TORCH[name])
    ref = bits_of(reproducible_sum(x))
    for threads in (1, 2):
        with torch_threads(threads):
            assert bits_of(reproducible_sum(x)) == ref
            shuffled = x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(threads))]
            assert bits_of(reproducible_sum(shuffled)) == ref
    places = reproducible_sum_devices(x)
    assert len({b for _, b in places}) == 1 and places[0][0].startswith("CPU, 1 thread")


def test_reproducible_sum_specials_follow_ieee():
    for dt in TORCH.values():
        assert math.isinf(float(reproducible_sum(torch.tensor([1.0, math.inf], dtype=dt))))
        assert math.isnan(float(reproducible_sum(torch.tensor([math.inf, -math.inf], dtype=dt))))
        assert math.isnan(float(reproducible_sum(torch.tensor([math.nan, 2.0], dtype=dt))))


def test_float64_errors_are_smaller_than_float32_on_the_same_vector():
    v = generate(VectorSpec(kind="normal", n=200_000, seed=0, storage="float32"))
    orders = ("sequential", "pairwise", "torch_1", "torch_all", "numpy")
    r32 = run_lab(v.values, "float32", "same", orders)
    r64 = run_lab(v.values, "float32", "float64", orders)
    for a, b in zip(r32.rows, r64.rows, strict=True):
        assert b.metrics.abs_error < a.metrics.abs_error / 1e6, a.order.key


@pytest.mark.parametrize(("storage", "wider"), [("float32", torch.float64), ("float16", torch.float32),
                                               ("bfloat16", torch.float32)])
def test_wider_accumulation_beats_storage_accumulation(storage, wider):
    x = torch.from_numpy(
        generate(VectorSpec(kind="normal", n=100_000, seed=1, storage=storage)).values.astype(np.float32)
    ).to(TORCH[storage])
    before = GlobalState.capture()
    rows = wider_accumulation(x, wider, repeats=2)
    assert GlobalState.capture() == before
    narrow = [r for r in rows if r.accumulate == storage]
    wide = [r for r in rows if r.accumulate != storage]
    assert narrow and wide and all(r.seconds > 0 for r in rows)
    assert rows[0].threads == 1 and rows[0].accumulate == storage and rows[0].vs_base_iqr == (1.0, 1.0)
    for r in rows:  # one statistic: the median per-repeat ratio lies inside the same ratios' quartiles
        assert r.vs_base_iqr[0] <= r.vs_base <= r.vs_base_iqr[1]
    assert max(r.abs_error for r in wide) < min(r.abs_error for r in narrow)
    exact = exact_sum_fraction(x)
    for r in rows:
        assert r.abs_error == abs(r.value - exact)


def test_determinism_measurements():
    x = torch.from_numpy(generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values.copy())
    before = GlobalState.capture()
    d = determinism(x, repeats=3)
    assert GlobalState.capture() == before
    assert all(v == 1 for v in d.distinct_by_threads.values())  # run to run: repeatable
    if X86_SUM_KERNEL:  # where the CPU sum model is established (tests.machine: from the live facts)
        # each thread count's sum is the one the bit-exact model of torch's CPU reduction predicts for it
        values = generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values
        for t, bits in d.values_by_threads.items():
            assert bits == bits_of_scalar(torch_cpu_sum_model(values, threads=t)), t
    assert 0 <= d.mm_differing <= d.mm_shape[2]
    assert (d.mm_differing == 0) == (d.mm_max_ulps == 0)


def test_throughput_is_measured_for_both_formats():
    rows = measure_throughput(cpu_device(), matmul_n=128, sum_n=100_000, repeats=2)
    assert [r.op for r in rows] == ["matmul", "sum"]
    for r in rows:
        assert r.rate32 > 0 and r.rate64 > 0 and r.seconds32 > 0 and r.seconds64 > 0
        # one statistic ("0.50 (0.51–0.75)"): the median of the per-repeat ratios, inside their quartiles
        assert r.repeats == 2 and r.ratio_quartiles[0] <= r.ratio <= r.ratio_quartiles[1]
        assert math.isfinite(r.ratio_median) and r.ratio == r.ratio_median
    assert math.isclose(rows[0].seconds32 / rows[0].seconds64, rows[0].rate64 / rows[0].rate32)  # FLOP/s per value
    assert rows[1].unit == "GB/s"
    assert math.isclose(rows[1].seconds32 / rows[1].seconds64, rows[1].rate64 / rows[1].rate32 / 2)


def test_a_throughput_without_per_repeat_ratios_falls_back_to_the_median_times():
    t = Throughput(
        device="cpu", op="matmul", size=8, seconds32=1.0, seconds64=2.0, rate32=1.0, rate64=0.5, unit="GFLOP/s"
    )
    assert t.ratio == 0.5
    assert (
        Throughput(
            device="cpu",
            op="matmul",
            size=8,
            seconds32=1.0,
            seconds64=2.0,
            rate32=1.0,
            rate64=0.5,
            unit="GFLOP/s",
            repeats=3,
            ratio_quartiles=(0.4, 0.6),
            ratio_median=0.55,
        ).ratio
        == 0.55
    )


@pytest.mark.parametrize("xs", [[1.0], [3.0, 1.0], [0.1, 5.9, 6.0, 6.1, 0.2], [0.51, 0.5, 0.75, 0.6, 0.52, 0.49]])
def test_median_lies_inside_its_own_quartiles(xs):
    med, (q1, q3) = median_and_quartiles(xs)
    assert q1 <= med <= q3 and med == statistics.median(xs)
    assert {name for name, _, _ in VENDOR_RATIOS} >= {"NVIDIA RTX 4090", "NVIDIA T4", "Apple GPU (MPS)"}


def test_a_float64_ratio_above_one_is_explained_not_shown_bare():
    from core.machines.timing import Throughput

    def row(op, s32, s64, q):
        return Throughput(
            device="cpu",
            op=op,
            size=10,
            seconds32=s32,
            seconds64=s64,
            rate32=1 / s32,
            rate64=1 / s64,
            unit="x",
            repeats=7,
            ratio_quartiles=q,
        )

    assert "noise" in row("sum", 1.0, 0.9, (1.05, 1.2)).verdict()  # float64 "faster"
    assert "noise" in row("matmul", 1.0, 1.1, (0.8, 1.02)).verdict()  # spread includes 1
    assert "memory-bound" in row("sum", 1.0, 2.0, (0.45, 0.55)).verdict()
    assert "half" in row("matmul", 1.0, 2.0, (0.45, 0.55)).verdict()


def test_reproducible_sum_refuses_absurd_sizes():
    class Huge:
        dtype = torch.float32

        def numel(self):
            return 1 << 29

    with pytest.raises(ValueError):
        reproducible_sum(Huge())  # type: ignore[arg-type]


def test_reproducible_sum_refuses_float64_sizes_it_cannot_keep_exact():
    big = torch.full((1,), 2 - 2**-52, dtype=torch.float64).expand(3 << 25)  # no extra memory
    with pytest.raises(ValueError, match="float64"):
        reproducible_sum(big)


# ------------------------------------------------- the order-independent sum, in depth


def _with_threads(fn, threads):
    with torch_threads(threads):
        return fn()


def _check_reproducible(x: torch.Tensor, fmt) -> int:
    """reproducible_sum(x) is the correctly rounded exact sum (sign of zero and specials as
    IEEE defines them) and has the same bits reversed and with 1 and 2 threads."""
    got = reproducible_sum(x)
    assert got.dtype == x.dtype and got.dim() == 0
    bits = bits_of(got)
    expected = correctly_rounded_sum(x, fmt)
    value = value_of_bits(bits, fmt)
    if isinstance(expected, float) and math.isnan(expected):
        assert isinstance(value, float) and math.isnan(value)
        assert bits == bits_of(torch.tensor(math.nan, dtype=x.dtype))  # one canonical NaN
    else:
        assert value == expected
    if expected == 0:  # -0 exactly when every value is -0
        all_negative_zero = bool((bit_view(x) == 1 << (fmt.width - 1)).all())
        assert bits == bits_of(torch.tensor(-0.0 if all_negative_zero else 0.0, dtype=x.dtype))
    assert bits_of(reproducible_sum(x.flip(0))) == bits
    for threads in (1, 2):
        assert bits_of(_with_threads(lambda: reproducible_sum(x), threads)) == bits
    return bits


def _bits_tensor(bits: list[int], fmt) -> torch.Tensor:
    signed = [b - (1 << fmt.width) if b >> (fmt.width - 1) else b for b in bits]
    return torch.tensor(signed, dtype=fmt.int_dtype).view(fmt.torch_dtype)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(ARITHMETIC)))
def test_reproducible_sum_over_raw_bit_patterns_with_specials(data, name):
    """Any bit patterns (±0, subnormals, the largest finite values, ±inf, NaN payloads):
    the correctly rounded sum, the same bits in every permutation and thread count."""
    fmt = FORMATS[name]
    bits = data.draw(st.lists(bit_patterns(fmt), min_size=1, max_size=40))
    x = _bits_tensor(bits, fmt)
    ref = _check_reproducible(x, fmt)
    perm = data.draw(st.permutations(range(len(bits))))
    assert bits_of(reproducible_sum(x[list(perm)])) == ref


@settings(max_examples=150, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(ARITHMETIC)))  # the paths of the formats torch sums in
def test_both_paths_agree_with_the_exact_sum_over_finite_bit_patterns(data, name):
    """The exact folds give the exact sum; the fast path gives the correctly rounded sum
    or defers (None), never a wrong value."""
    fmt = FORMATS[name]
    vals = data.draw(st.lists(finite_values(fmt), min_size=1, max_size=40))
    x = as_tensor(vals, name)
    assert _exact_sum(x) == sum(vals, Fraction(0)) == exact_sum_fraction(x)
    if name != "float64":
        decided, special = _decided_sum(x, fmt)
        assert special is None
        assert decided is None or decided == correctly_rounded_sum(x, fmt)


def _finite_bits_vector(rng: np.random.Generator, fmt, n: int, kind: str) -> torch.Tensor:
    """n random values: raw finite bit patterns (the widest exponent range), normal
    values, or values that cancel almost completely."""
    if kind == "raw":
        bits = rng.integers(0, 1 << fmt.width, n, dtype=np.uint64)
        exp_mask = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
        special = (bits & exp_mask) == exp_mask
        bits[special] ^= np.uint64(1 << fmt.mantissa_bits)  # all-ones exponent: one lower, the largest binade
        unsigned, signed = {16: (np.uint16, np.int16), 32: (np.uint32, np.int32), 64: (np.uint64, np.int64)}[fmt.width]
        return torch.from_numpy(bits.astype(unsigned).view(signed)).view(fmt.torch_dtype)
    v = rng.standard_normal(n) * (30 if fmt.name == "float16" else 1e3)
    if kind == "cancel":
        v = np.concatenate([v[: n // 2], -v[: n // 2], rng.standard_normal(n - n // 2 * 2) * 1e-3])
        v = v[rng.permutation(v.size)]
    return torch.from_numpy(v).to(fmt.torch_dtype)


def torch_reductions_only():
    """Within it, the fast path takes torch reductions for every size (the path a GPU takes),
    not core.kernels.widesum's compiled pass."""
    return mock.patch.object(reprosum, "_KERNEL_MIN", 1 << 62)


@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from([*ARITHMETIC, "float32 through torch reductions"]),
       kind=st.sampled_from(["raw", "normal", "cancel"]), n=st.integers(1, 300_000), seed=st.integers(0, 2**32 - 1))
def test_reproducible_sum_of_large_vectors_across_pieces_threads_and_permutations(name, kind, n, seed):
    """Vectors longer than one cache-sized piece (several pieces, thread splits inside
    each reduction): the correctly rounded sum, invariant under permutation and threads;
    float32 both through core.kernels.widesum (from 2^15 values) and through torch reductions."""
    fmt = FORMATS[name.split()[0]]
    rng = np.random.default_rng(seed)
    x = _finite_bits_vector(rng, fmt, n, kind)
    with torch_reductions_only() if name != fmt.name else contextlib.nullcontext():
        bits = _check_reproducible(x, fmt)
        assert bits_of(reproducible_sum(x[torch.from_numpy(rng.permutation(n))])) == bits
    assert _exact_sum(x) == exact_sum_fraction(x)


def _tensor(vals, fmt) -> torch.Tensor:
    from core.arith.formats import bits_of_value

    return _bits_tensor([bits_of_value(v, fmt) for v in vals], fmt)


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_reproducible_sum_edges_of_range_sign_and_cancellation(name):
    fmt = FORMATS[name]
    big, tiny, low = fmt.max_finite, fmt.min_subnormal, fmt.min_normal
    half_ulp_of_max = Fraction(2) ** (fmt.emax - fmt.precision)
    cases = [
        [big, tiny, -big, low, -tiny, big / 2 ** (fmt.precision + 3), tiny * 3],  # the widest range
        [big, -big, tiny],  # huge cancellation leaves the smallest subnormal
        [big, big, -big],  # no intermediate overflow: the exact sum is big
        [big, big], [-big, -big],  # the rounded result overflows
        [big, half_ulp_of_max],  # a tie above the largest finite value: to even, 2^(emax+1): inf
        [big, half_ulp_of_max * (1 - Fraction(1, 2**fmt.precision))],  # just below that tie: big
        [big, -half_ulp_of_max],  # a tie below it: to even, the next smaller value
        [tiny] * 1000, [tiny, -tiny, tiny, low - tiny],  # subnormals
        [Fraction(1), Fraction(1, 2**fmt.precision)],  # exactly halfway: ties to even (1)
        [Fraction(1), Fraction(1, 2**fmt.precision), tiny],  # just above halfway: up
    ]
    for vals in cases:
        x = _tensor(vals, fmt)
        _check_reproducible(x, fmt)
        assert _exact_sum(x) == sum(vals, Fraction(0))
    assert math.isinf(float(reproducible_sum(_tensor([big, half_ulp_of_max], fmt))))
    below = value_of_bits(bits_of(reproducible_sum(_tensor([big, -half_ulp_of_max], fmt))), fmt)
    assert below == big - 2 * half_ulp_of_max
    assert value_of_bits(bits_of(reproducible_sum(_tensor([big, big, -big], fmt))), fmt) == big


@pytest.mark.parametrize("name", list(ARITHMETIC))
def test_reproducible_sum_sign_of_zero_and_specials(name):
    fmt = FORMATS[name]
    dt = fmt.torch_dtype
    pz, nz = bits_of(torch.tensor(0.0, dtype=dt)), bits_of(torch.tensor(-0.0, dtype=dt))
    for n in (1, 2, 1000, 200_000):
        assert bits_of(reproducible_sum(torch.full((n,), -0.0, dtype=dt))) == nz
        assert bits_of(reproducible_sum(torch.zeros(n, dtype=dt))) == pz
    assert bits_of(reproducible_sum(torch.tensor([-0.0, 0.0, -0.0], dtype=dt))) == pz
    assert bits_of(reproducible_sum(torch.tensor([-1.0, 1.0, -0.0], dtype=dt))) == pz
    assert bits_of(reproducible_sum(torch.tensor([], dtype=dt))) == pz
    nan_bits = bits_of(torch.tensor(math.nan, dtype=dt))
    payload = _bits_tensor([(1 << (fmt.width - 1)) | ((1 << (fmt.width - 1)) - 1)], fmt)  # -NaN, all ones
    for vals in ([math.inf, -math.inf], [math.nan, 1.0], [-math.inf, math.nan, math.inf], [2.0, math.inf, -math.inf]):
        x = torch.tensor(vals, dtype=dt)
        assert bits_of(reproducible_sum(x)) == bits_of(reproducible_sum(x.flip(0))) == nan_bits
    assert bits_of(reproducible_sum(torch.cat([payload, torch.ones(3, dtype=dt)]))) == nan_bits
    assert float(reproducible_sum(torch.tensor([1.0, math.inf, -2.0], dtype=dt))) == math.inf
    assert float(reproducible_sum(torch.tensor([1.0, -math.inf, 5.0], dtype=dt))) == -math.inf


def test_fast_path_defers_near_a_rounding_boundary():
    fmt = FORMATS["float32"]
    tie = torch.tensor([1.0, 2.0**-24])  # exactly halfway between 1 and 1 + 2^-23
    assert _decided_sum(tie, fmt)[0] is None
    assert float(reproducible_sum(tie)) == 1.0  # ties to even, by the exact folds
    above = torch.tensor([1.0, 2.0**-24, 2.0**-100])
    assert _decided_sum(above, fmt)[0] is None
    assert float(reproducible_sum(above)) == 1.0 + 2.0**-23
    plain = torch.from_numpy(np.random.default_rng(0).standard_normal(100_000).astype(np.float32))
    assert _decided_sum(plain, fmt)[0] == correctly_rounded_sum(plain, fmt)  # decided on ordinary data


@settings(max_examples=300, deadline=None)
@given(data=st.data(), name=st.sampled_from(["float16", "bfloat16", "float32"]))
def test_fast_path_rounding_of_a_float64_is_the_exact_rounding(data, name):
    """The fast path's decision rounds float64 values with _round_float: the same as the
    exact rounding, at ties, in the subnormals, at the overflow threshold and beyond."""
    fmt = FORMATS[name]
    near = data.draw(finite_values(fmt))  # a value of the format, then a float64 near it
    half = fmt.min_subnormal / 2 if abs(near) < fmt.min_normal else abs(near) * fmt.unit_roundoff
    offset = data.draw(st.sampled_from([Fraction(0), half, -half, half * 3, 2 * half]))
    raw = data.draw(st.floats(allow_nan=False, allow_infinity=False, width=64))
    for v in (float(near + offset), float(near + offset * Fraction(1, 3)), raw):
        want = round_to_format(Fraction(v), fmt)
        got = _round_float(v, fmt)
        assert got == want


def _exact_abs_sum(x: torch.Tensor) -> Fraction:
    return exact_sum_fraction(x.abs())


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_cauchy_schwarz_bound_is_an_upper_bound_on_the_absolute_sum(data):
    """Over raw finite float32 bit patterns (subnormals, squares that underflow, the
    largest finite values, whose squares overflow): the bound from the float32 dot product
    is at least the exact sum of |x|, or None where that dot product is not finite."""
    fmt = FORMATS["float32"]
    vals = data.draw(st.lists(finite_values(fmt), min_size=1, max_size=50))
    scale = data.draw(st.sampled_from([1, 2.0**-70, 2.0**-100, 2.0**60]))
    x = as_tensor(vals, "float32") * scale  # scaled (inexactly, fine): still float32 values
    x = x[torch.isfinite(x)]
    if x.numel() == 0:
        return
    for threads in (1, 2):
        squares = _with_threads(lambda: float(torch.dot(x, x)), threads)
        bound = _cauchy_schwarz_bound(x.numel(), squares)
        assert (bound is None) == (not math.isfinite(squares))
        if bound is not None:
            assert bound >= _exact_abs_sum(x)


@pytest.mark.parametrize("kind", ["normal", "tiny", "equal"])
def test_cauchy_schwarz_bound_at_the_largest_piece_the_proof_allows(kind):
    """2^22 values (k * 2^-24 = 1/4, the proof's limit; an accelerator's fast-path piece),
    spread so that rounding in the float32 dot product is as large as it gets: the bound
    still holds, and with ordinary values it is within a few percent of sum|x|."""
    assert _FAST_DEVICE == 1 << 22 and _FAST_CPU <= _FAST_DEVICE
    k = _FAST_DEVICE
    rng = np.random.default_rng(5)
    if kind == "normal":
        v = rng.standard_normal(k).astype(np.float32)
    elif kind == "tiny":  # squares underflow into the subnormals or to zero
        v = (rng.standard_normal(k) * 2.0**-70).astype(np.float32)
    else:  # one value: every partial sum of squares rounds the same way
        v = np.full(k, np.float32(1 + 2.0**-12), dtype=np.float32)
    x = torch.from_numpy(v)
    bound = _cauchy_schwarz_bound(k, float(torch.dot(x, x)))
    exact = Fraction(math.fsum(np.abs(v.astype(np.float64))))  # fsum: within 2^-53 relative
    assert bound >= exact * (1 + Fraction(1, 1 << 52))
    if kind == "normal":
        assert bound <= exact * Fraction(3, 2)


@pytest.mark.parametrize(("value", "n"), [(3.0 * 2.0**-140, 1000), (2.0**-75, 5000), (2.0**70, 1000),
                                          (-(2.0**127) * 1.5, 7)])
def test_fast_path_second_chance_where_squares_underflow_or_overflow(value, n):
    """float32 values whose squares underflow (the dot's bound is useless) or overflow
    (no bound at all): the fast path still decides, with length * max|x| per piece."""
    fmt = FORMATS["float32"]
    x = torch.full((n,), value, dtype=torch.float32)
    x[::3] *= -0.5
    decided, special = _decided_sum(x, fmt)
    assert special is None
    assert decided is not None and decided == correctly_rounded_sum(x, fmt)


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float32 through torch reductions"])
def test_fast_path_specials_and_zeros_across_pieces(name):
    """Infinities and NaN in different pieces (found from the float64 partial sums), and
    the sign of an exact zero sum over several pieces (float32 also in core.kernels.widesum's blocks)."""
    fmt = FORMATS[name.split()[0]]
    with torch_reductions_only() if name != fmt.name else contextlib.nullcontext():
        _specials_and_zeros_across_pieces(fmt)


def _specials_and_zeros_across_pieces(fmt) -> None:
    dt = fmt.torch_dtype
    n = 2 * _FAST_CPU + 5
    nan_bits = bits_of(torch.tensor(math.nan, dtype=dt))

    def with_at(values: dict[int, float]) -> torch.Tensor:
        x = torch.ones(n, dtype=dt)
        for i, v in values.items():
            x[i] = v
        return x

    assert bits_of(reproducible_sum(with_at({0: math.inf, n - 1: -math.inf}))) == nan_bits
    assert float(reproducible_sum(with_at({0: math.inf, n - 1: math.inf}))) == math.inf
    assert float(reproducible_sum(with_at({3: -math.inf, _FAST_CPU + 9: -math.inf}))) == -math.inf
    assert bits_of(reproducible_sum(with_at({n - 1: math.nan, 0: math.inf}))) == nan_bits
    assert _decided_sum(with_at({n - 1: -math.inf}), fmt) == (None, -math.inf)
    zeros = torch.full((n,), -0.0, dtype=dt)
    assert bits_of(reproducible_sum(zeros)) == bits_of(torch.tensor(-0.0, dtype=dt))
    zeros[_FAST_CPU + 1] = 0.0
    assert bits_of(reproducible_sum(zeros)) == bits_of(torch.tensor(0.0, dtype=dt))
    cancel = torch.ones(n, dtype=dt)  # n odd: n // 2 ones, n // 2 minus ones and one -0
    cancel[n // 2 :] = -1.0
    cancel[-1] = -0.0  # the sum is exactly 0, with nonzero values: +0
    cancel = cancel[torch.randperm(n, generator=torch.Generator().manual_seed(0))]
    assert bits_of(reproducible_sum(cancel)) == bits_of(torch.tensor(0.0, dtype=dt))


@pytest.mark.parametrize(("name", "value", "folds_on_all"), [
    ("float32", 2 - 2.0**-23, False), ("float32", 3.0 * 2.0**-140, True),
    ("float64", 2 - 2.0**-52, True), ("float64", -(2.0**1000) * 1.75, True)])
def test_reproducible_sum_at_the_largest_allowed_size(name, value, folds_on_all):
    """The most values a call takes, all equal (a zero-stride view, no memory): the
    fast path's bound (float32: through the compiled pass and through torch reductions, whose
    partial sums then take three levels) and every fold's sum stay exact, and the rounding is the
    exact one. The folds run on all of them, or (where that takes long) on the largest piece an
    accelerator gets (2^24 values: the narrowest float64 fold, 29 bits)."""
    fmt = FORMATS[name]
    limit = (1 << 26) if name == "float64" else (1 << 29)
    n = limit - 1
    x = torch.full((1,), value, dtype=fmt.torch_dtype).expand(n)
    exact = Fraction(value) * n
    with torch_threads(1):  # exactness is the point here; one thread keeps a busy machine from stalling it
        assert value_of_bits(bits_of(reproducible_sum(x)), fmt) == round_to_format(exact, fmt)
        if name == "float32":
            # through torch reductions at the full length for a normal value (three levels of partial sums);
            # a subnormal one there takes 2^29 subnormal products for the bound, which x86 CPUs make through
            # microcode assists (20 s on the development VM; GPUs do not slow down, and on a CPU float32
            # goes through the compiled pass, above): its check, the bound that falls back to length times
            # the largest value, is the same at 2^24 - 1 values (whose sum, unlike 2^23 - 1 values', is no tie)
            m = n if abs(value) >= fmt.min_normal else (1 << 24) - 1
            expect = round_to_format(Fraction(value) * m, fmt)
            assert _decided_sum(x[:m], fmt, kernel=False) == (expect, None)
        if folds_on_all:
            assert _exact_sum(x) == exact
        piece = 1 << 24
        assert _exact_units(x[:piece], {}) == Fraction(value) * piece * 2**1074


def test_reproducible_sum_cost_is_measured_by_interleaved_repeats():
    before = GlobalState.capture()
    c = reproducible_sum_cost(50_000, repeats=5, inner=2)
    assert GlobalState.capture() == before
    assert (c.n, c.repeats) == (50_000, 5) and c.threads >= 1
    assert min(c.seconds, c.torch_seconds, c.numpy_seconds) > 0
    for median, (q1, q3) in ((c.vs_torch, c.vs_torch_iqr), (c.vs_numpy, c.vs_numpy_iqr)):
        assert 0 < q1 <= median <= q3


@settings(max_examples=100, deadline=None)
@given(data=st.data(), name=st.sampled_from([n for n, f in FORMATS.items() if not f.arithmetic]))
def test_an_eight_bit_sum_is_the_correctly_rounded_one_in_every_order(data, name):
    """FP8, which torch cannot sum: the exact sum of the stored values rounded once (the format's overflow rule),
    whatever the order; -0 only when every value is -0."""
    fmt = FORMATS[name]
    bits = data.draw(st.lists(bit_patterns(fmt), min_size=1, max_size=40))
    perm = data.draw(st.permutations(range(len(bits))))
    x = from_bit_view(np.array(bits, dtype=np.uint8), fmt)
    got, again = (bits_of(reproducible_sum(to_torch(v))) for v in (x, x[list(perm)]))
    assert got == again
    expected = correctly_rounded_sum(x, fmt)
    value = value_of_bits(got, fmt)
    assert value == expected or (math.isnan(float(value)) and math.isnan(float(expected)))
    if expected == 0 and not all(b == 0x80 for b in bits):
        assert got == 0
