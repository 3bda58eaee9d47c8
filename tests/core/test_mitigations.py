"""core.mitigations: wider formats help, the reproducible sum is order-independent and exact."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.devices import cpu_device
from core.exact import correctly_rounded_sum, exact_sum_fraction
from core.formats import FORMATS, bits_of, value_of_bits
from core.globalstate import GlobalState, torch_threads
from core.metrics import bits_of_scalar
from core.mitigations import (
    VENDOR_RATIOS,
    determinism,
    measure_throughput,
    reproducible_sum,
    reproducible_sum_devices,
    wider_accumulation,
)
from core.sumlab import run_lab
from core.torch_cpu_model import cpu_capability, torch_cpu_sum_model
from core.vectors import VectorSpec, generate
from tests.strategies import finite_values

TORCH = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def as_tensor(vals, name):
    from core.formats import bits_of_value

    fmt = FORMATS[name]
    bits = [bits_of_value(v, fmt) for v in vals]
    signed = [b - (1 << fmt.width) if b >> (fmt.width - 1) else b for b in bits]
    return torch.tensor(signed, dtype=fmt.int_dtype).view(fmt.torch_dtype)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), name=st.sampled_from(list(FORMATS)))
def test_reproducible_sum_is_the_correctly_rounded_sum_in_every_order(data, name):
    fmt = FORMATS[name]
    vals = data.draw(st.lists(finite_values(fmt), min_size=1, max_size=60))
    x = as_tensor(vals, name)
    expected = correctly_rounded_sum(x, fmt)
    got = value_of_bits(bits_of(reproducible_sum(x)), fmt)
    assert got == expected
    perm = data.draw(st.permutations(range(len(vals))))
    assert bits_of(reproducible_sum(x[list(perm)])) == bits_of(reproducible_sum(x))


@pytest.mark.parametrize("name", list(FORMATS))
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
    v = generate(VectorSpec("normal", 200_000, 0, "float32"))
    orders = ("sequential", "pairwise", "torch_1", "torch_all", "numpy")
    r32 = run_lab(v.values, "float32", "same", orders)
    r64 = run_lab(v.values, "float32", "float64", orders)
    for a, b in zip(r32.rows, r64.rows, strict=True):
        assert b.metrics.abs_error < a.metrics.abs_error / 1e6, a.order.key


@pytest.mark.parametrize(("storage", "wider"), [("float32", torch.float64), ("float16", torch.float32),
                                               ("bfloat16", torch.float32)])
def test_wider_accumulation_beats_storage_accumulation(storage, wider):
    x = torch.from_numpy(generate(VectorSpec("normal", 100_000, 1, storage)).values.astype(np.float32)).to(
        TORCH[storage])
    before = GlobalState.capture()
    rows = wider_accumulation(x, wider, repeats=2)
    assert GlobalState.capture() == before
    narrow = [r for r in rows if r.accumulate == storage]
    wide = [r for r in rows if r.accumulate != storage]
    assert narrow and wide and all(r.seconds > 0 for r in rows)
    assert max(r.abs_error for r in wide) < min(r.abs_error for r in narrow)
    exact = exact_sum_fraction(x)
    for r in rows:
        assert r.abs_error == abs(r.value - exact)


def test_determinism_measurements():
    x = torch.from_numpy(generate(VectorSpec("normal", 1_000_000, 0, "float32")).values.copy())
    before = GlobalState.capture()
    d = determinism(x, repeats=3)
    assert GlobalState.capture() == before
    assert all(v == 1 for v in d.distinct_by_threads.values())  # run to run: repeatable
    if cpu_capability().upper() in {"AVX2", "AVX512", "DEFAULT"}:  # where the CPU sum model is established
        # each thread count's sum is the one the bit-exact model of torch's CPU reduction predicts for it
        values = generate(VectorSpec("normal", 1_000_000, 0, "float32")).values
        for t, bits in d.values_by_threads.items():
            assert bits == bits_of_scalar(torch_cpu_sum_model(values, threads=t)), t
    assert 0 <= d.mm_differing <= d.mm_shape[2]
    assert (d.mm_differing == 0) == (d.mm_max_ulps == 0)


def test_throughput_is_measured_for_both_formats():
    rows = measure_throughput(cpu_device(), matmul_n=128, sum_n=100_000, repeats=2)
    assert [r.op for r in rows] == ["matmul", "sum"]
    for r in rows:
        assert r.rate32 > 0 and r.rate64 > 0 and r.seconds32 > 0 and r.seconds64 > 0
        assert math.isclose(r.ratio, r.rate64 / r.rate32)
    assert {name for name, _, _ in VENDOR_RATIOS} >= {"NVIDIA RTX 4090", "NVIDIA T4", "Apple GPU (MPS)"}


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
