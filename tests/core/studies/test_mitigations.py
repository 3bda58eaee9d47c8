"""core.studies.mitigations: the Mitigations page's studies, on small inputs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from core.arith.exact import correctly_rounded_sum, shortest_repr
from core.arith.formats import FORMATS, bits_of_value
from core.arith.vectors import VectorSpec, generate
from core.machines import timing
from core.machines.devices import Device, cpu_device
from core.machines.progress import Progress
from core.machines.timing import Throughput
from core.studies import mitigations
from core.studies.mitigations import (
    LAB_ORDERS,
    WIDER,
    accumulation_errors,
    determinism_study,
    distinct_results,
    lab,
    measure_devices,
    reproducible_study,
    training_pair,
    wider_study,
)

SMALL = VectorSpec(kind="normal", n=2_000, seed=0, storage="float32")
HARD = VectorSpec(kind="ill_conditioned", n=2_000, seed=0, storage="float32", condition=1e12)


def test_a_failing_device_is_reported_and_the_others_still_measured(monkeypatch):
    def fake(device, on_progress=None):
        if device.name == "gone":
            raise RuntimeError("device disappeared")
        on_progress(Progress(done=1, total=2, what="half"))
        on_progress(Progress(done=2, total=2, what="done"))
        return [
            Throughput(
                device=device.name,
                op="matmul",
                size=8,
                seconds32=1.0,
                seconds64=2.0,
                rate32=1.0,
                rate64=0.5,
                unit="GFLOP/s",
            )
        ]

    monkeypatch.setattr(timing, "measure_throughput", fake)
    seen = []
    run = measure_devices([cpu_device(), Device("cuda", 9, "gone")], lambda p: seen.append(p.fraction))
    assert [t.device for t in run.rows] == [cpu_device().name] and run.failures == ("gone: device disappeared",)
    assert seen == sorted(seen) and seen[0] > 0 and seen[-1] <= 1
    assert run.first("matmul").ratio == 0.5 and run.first("sum") is None


def test_the_pages_orders_are_the_labs_default_orders_a_program_runs():
    """The lab's default orders that run here (not the GPU model or the correctly rounded sum), plus the two
    reorderings; eight, as the page's spinner says."""
    from core.kernels.orders import DEFAULT_ORDERS, ORDERS

    assert LAB_ORDERS == ("sequential", "reverse", "sorted_abs", "pairwise", "numpy", "torch_1", "torch_all", "kahan")
    assert set(DEFAULT_ORDERS) - set(LAB_ORDERS) == {"cuda_model", "correct"}
    assert all(ORDERS[k].origin in ("live", "algorithm") for k in LAB_ORDERS)


def test_accumulation_errors_shrink_order_by_order():
    in32, in64 = lab("same", SMALL), lab("float64", SMALL)
    errors = accumulation_errors(in32, in64)
    assert [e.order for e in errors] == [r.order.name for r in in32.rows] and len(errors) == len(LAB_ORDERS)
    for e in errors:
        assert (e.shrink is None) == (e.error64 == 0)
        if e.shrink is not None:
            assert e.shrink == Fraction(e.error32) / Fraction(e.error64)


def test_distinct_results_counts_different_values():
    hard = lab("float64", HARD)
    assert distinct_results(hard) == len({r.metrics.value for r in hard.rows}) >= 1


@pytest.mark.parametrize("storage", list(WIDER))
def test_wider_study_compares_plain_and_wider_sums(storage):
    study = wider_study(storage, n=10_000)
    assert {r.accumulate for r in study.rows} == {storage, WIDER[storage]}
    assert study.base.accumulate == storage and study.base.threads == 1
    assert study.wide.accumulate == WIDER[storage] and study.wide.threads == 1
    assert study.slowdown == study.wide.vs_base
    one = {r.accumulate: r.vs_base for r in study.rows if r.threads == 1}
    assert all(r.threads > 1 and r.vs_base > one[r.accumulate] for r in study.threads_slower)
    assert study.wide.abs_error <= study.base.abs_error  # one format wider: never a larger error here
    with pytest.raises(ValueError):
        wider_study("float64")


def test_the_order_independent_sum_is_the_correctly_rounded_sum_for_every_shuffle_and_device():
    study = reproducible_study(SMALL, shuffles=4)
    fmt = FORMATS["float32"]
    exact = bits_of_value(correctly_rounded_sum(generate(SMALL).values, fmt), fmt)
    assert study.shuffled_bits == (exact,) and study.shuffles == 4
    assert {b for _, b in study.devices} == {exact}
    assert [o for o, _ in study.ordinary] == [r.order.name for r in lab("same", SMALL).rows]
    assert study.distinct_ordinary == len({v for _, v in study.ordinary})
    assert float(study.value) == float(shortest_repr(correctly_rounded_sum(generate(SMALL).values, fmt), fmt))


def test_determinism_study_runs_on_the_given_vector():
    det = determinism_study(SMALL)
    assert 1 in det.distinct_by_threads and all(d >= 1 for d in det.distinct_by_threads.values())


def test_training_pair_in_float64_ends_closer_than_in_float32():
    p32, p64 = training_pair("float32"), training_pair("float64")
    assert (p32.dtype, p64.dtype, p32.steps) == ("float32", "float64", 500)
    assert p64.final_distance < p32.final_distance  # roundings 2^29 times finer: a far smaller gap


@pytest.mark.parametrize("storage", list(WIDER))
def test_the_wider_sum_copies_its_input_and_16_bit_sums_already_accumulate_in_float32(storage):
    """torch.sum(x, dtype=wider) works on a wider copy: its bytes are n times the wider format's width; a plain
    16-bit sum on one thread is within the one rounding of its total (torch accumulates it in float32)."""
    study = wider_study(storage, n=20_000)
    width = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
    assert study.copy_bytes == 20_000 * width[WIDER[storage]] and study.input_bytes == 20_000 * width[storage]
    errors = study.threads_errors
    assert set(errors) == {r.threads for r in study.rows if r.accumulate == storage}
    if storage != "float32":
        assert errors[1] <= 0.5, errors  # a 16-bit running sum of 2*10^4 normal values would be far off


def test_a_batch_size_mismatch_is_judged_normal_and_a_flipped_sign_is_not():
    check = mitigations.mismatch_check()
    assert check.outputs == 1024 and check.k == 2048
    assert check.normal_verdict in ("identical", "reordering") and check.normal_worst <= 1
    assert check.broken_verdict == "too_large" and check.broken_worst > 1
    det = determinism_study(SMALL)
    assert det.mm_differing == check.differing  # the same pair the determinism section shows
