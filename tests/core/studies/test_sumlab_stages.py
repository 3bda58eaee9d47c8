"""core.studies.sumlab's page-facing pieces: the two stages (orders, then the permutation study and the running
error) give what run_lab gives; the request's costs; the punchline's spread, trees and thread split."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS
from core.arith.metrics import exact_value
from core.arith.ulps import error_in_ulps
from core.arith.vectors import Vector, VectorSpec, generate
from core.crowd import budget
from core.crowd.bytecache import RESULTS
from core.kernels.orders import DEFAULT_ORDERS, ORDERS
from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.kernels.trees import MAX_TREE_N
from core.studies.sumlab import (
    LabRequest,
    cached_outcome,
    cached_study,
    lab_outcome,
    lab_study,
    lab_trees,
    permutation_study,
    run_lab,
    run_orders,
    running_error,
    thread_split,
)

CASES = [
    (VectorSpec(kind="normal", n=3000, seed=1, storage="float32"), "same", 7),
    (
        VectorSpec(kind="ill_conditioned", n=2000, seed=2, storage="float64", condition=1e12),
        "float32",
        5,
    ),  # a narrowing cast
    (VectorSpec(kind="uniform", n=500, seed=3, storage="float16"), "float64", 3),
]


def _same_study(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return (a.k == b.k and a.seed == b.seed and a.distinct == b.distinct
            and a.values.tobytes() == b.values.tobytes() and a.metrics_min_max == b.metrics_min_max)


@pytest.mark.parametrize(("spec", "working", "k"), CASES)
def test_the_two_stages_give_what_run_lab_gives(spec, working, k):
    x = generate(spec).values
    whole = run_lab(x, spec.storage, working, DEFAULT_ORDERS, k, 9)
    first = run_orders(x, spec.storage, working, DEFAULT_ORDERS)
    assert first.permutations is None
    assert [r.metrics for r in first.rows] == [r.metrics for r in whole.rows]
    assert (first.exact, first.sum_abs, first.cast_note) == (whole.exact, whole.sum_abs, whole.cast_note)
    assert _same_study(permutation_study(x, first, k, 9), whole.permutations)
    assert permutation_study(x, first, 0, 9) is None


def test_the_stages_with_non_finite_data_and_single_values():
    x = np.array([1.0, np.inf, 2.0], dtype=np.float32)
    first = run_orders(x, "float32", "same", ("sequential",))
    assert first.bound_sum is None and first.rows[0].metrics.bound is None
    study = permutation_study(x, first, 4, 0)
    assert _same_study(study, run_lab(x, "float32", "same", ("sequential",), 4, 0).permutations)
    one = np.array([3.0], dtype=np.float32)
    assert permutation_study(one, run_orders(one, "float32", "same", ("sequential",)), 5, 0) is None


def test_requests_through_the_caches_match_the_lab_and_share_the_study():
    spec = VectorSpec(kind="normal", n=4000, seed=21, storage="float32")
    request = LabRequest(
        source=spec, working_choice="same", orders=("sequential", "pairwise"), permutations=6, perm_seed=2
    )
    RESULTS.discard(request.orders_key())
    RESULTS.discard(request.study_key())
    assert cached_outcome(request) is None and cached_study(request) is None
    steps = []
    outcome = lab_outcome(request, lambda p: steps.append(p.what))
    study = lab_study(request, outcome, lambda p: steps.append(p.what))
    assert steps[0] == "making the vector" and steps[-1] == "the running error"
    assert any("random permutations" in s for s in steps)
    assert cached_outcome(request) is outcome and cached_study(request) is study
    x = generate(spec).values
    direct = run_lab(x, "float32", "same", ("sequential", "pairwise"), 6, 2)
    full = study.applied_to(outcome.result)
    assert [r.metrics.bits for r in full.rows] == [r.metrics.bits for r in direct.rows]
    assert _same_study(full.permutations, direct.permutations)
    reference = running_error(x, "float32")
    assert study.running.abs_error.tobytes() == reference.abs_error.tobytes()
    # other orders: new results for the orders, the same study (it does not depend on them)
    other = LabRequest(source=spec, working_choice="same", orders=("kahan",), permutations=6, perm_seed=2)
    assert other.study_key() == request.study_key() and other.orders_key() != request.orders_key()
    assert cached_study(other) is study


def test_pasted_numbers_are_keyed_by_their_content():
    a = Vector(values=np.array([1.0, 2.0], dtype=np.float32), storage="float32", source="pasted")
    b = Vector(values=np.array([1.0, 3.0], dtype=np.float32), storage="float32", source="pasted")
    assert LabRequest(source=a).orders_key() != LabRequest(source=b).orders_key()
    assert (
        LabRequest(source=a).orders_key()
        == LabRequest(source=Vector(values=a.values.copy(), storage="float32", source="pasted")).orders_key()
    )


@pytest.mark.parametrize("source", [VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32"),
                                    VectorSpec(kind="normal", n=50, seed=0, storage="float64"),
                                    Vector(values=np.ones(10, dtype=np.float16), storage="float16", source="pasted")])
@pytest.mark.parametrize("working", ["same", "float64"])
def test_the_stage_costs_add_up_to_the_request(source, working):
    request = LabRequest(source=source, working_choice=working, orders=DEFAULT_ORDERS, permutations=20, perm_seed=0)
    whole = request.cost()
    generator = source.kind if isinstance(source, VectorSpec) else None
    assert whole == budget.sumlab_cost(source.n, source.storage, request.working, DEFAULT_ORDERS, 20, generator)
    first, rest = request.stage_costs()
    assert first.work == budget.sumlab_cost(source.n, source.storage, request.working, DEFAULT_ORDERS, 0, generator,
                                            running=False).work
    assert first.work + rest.work == pytest.approx(whole.work)
    assert first.peak_bytes == rest.peak_bytes == whole.peak_bytes
    assert {w for w, _ in first.parts}.isdisjoint({w for w, _ in rest.parts})
    assert request.advice() == budget.sumlab_advice(source.n, source.storage, request.working, DEFAULT_ORDERS, 20,
                                                    generator)


def test_the_spread_of_the_orders():
    x = generate(VectorSpec(kind="normal", n=10_000, seed=5, storage="float32")).values
    r = run_orders(x, "float32", "same", tuple(ORDERS))
    exact = exact_sum_fraction(x)
    errors = {row.order.name: abs(exact_value(row.metrics.value, r.fmt) - exact) for row in r.rows}
    assert r.smallest_error.order.name in {k for k, v in errors.items() if v == min(errors.values())}
    assert r.largest_error.order.name in {k for k, v in errors.items() if v == max(errors.values())}
    assert r.distinct_results == len({exact_value(row.metrics.value, r.fmt) for row in r.rows})
    assert r.outside_bound == []
    assert not r.shows_trees


def test_no_finite_error_means_no_spread():
    r = run_orders(np.array([1.0, np.inf], dtype=np.float32), "float32", "same", ("sequential", "pairwise"))
    assert r.smallest_error is None and r.largest_error is None
    assert not r.shows_trees  # n is small, but there is no exact sum to compare with


def test_exact_bits_is_the_significand_length():
    r = run_orders(np.array([1e8, 1.0, -1e8, 0.1], dtype=np.float64), "float64", "same", ("sequential",))
    num = Fraction(r.exact).numerator
    assert r.exact_bits == (abs(num) >> ((num & -num).bit_length() - 1)).bit_length()


def test_the_punchline_trees():
    spec = VectorSpec(kind="normal", n=20, seed=4, storage="float32")
    request = LabRequest(source=spec)
    result = run_orders(generate(spec).values, "float32", "same", DEFAULT_ORDERS)
    cpu, gpu = lab_trees(request, result, "pairwise")
    assert (cpu.order, gpu.order) == ("pairwise", "cuda")
    fmt = FORMATS["float32"]
    for t in (cpu, gpu):
        assert t.additions == 20 - 1
        assert t.error.ulps == error_in_ulps(t.tree.result, result.exact, fmt)
        assert t.error.abs_error == abs(t.tree.result - result.exact) and t.error.within_bound is None
        assert t.depth == t.tree.nodes[t.tree.root].depth
    pairwise = next(row for row in result.rows if row.order.key == "pairwise")
    assert cpu.tree.result == exact_value(pairwise.metrics.value, fmt)  # the tree is the order
    assert cpu.depth == math.ceil(math.log2(20))
    big = VectorSpec(kind="normal", n=MAX_TREE_N + 1, seed=4, storage="float32")
    assert lab_trees(LabRequest(source=big), run_orders(generate(big).values, "float32", "same", ("sequential",)),
                     "sequential") is None


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
@pytest.mark.parametrize("n", [1, 1000, GRAIN_SIZE, GRAIN_SIZE + 1, 1_000_000])
def test_thread_split(n, threads):
    split = thread_split(n, threads)
    assert split.threads == threads and split.n == n
    assert split.chunks[0][0] == 0 and split.chunks[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(split.chunks, split.chunks[1:], strict=False))
    assert split.serial == (threads == 1 or n <= GRAIN_SIZE)
    assert len(split.chunks) <= threads
