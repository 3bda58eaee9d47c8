"""Registries own their code: adding an order is one ORDERS entry, and every consumer sees it.

The new order here ("sorted by magnitude, largest first") is registered with one entry and
nothing else; run_order runs it, the summation lab measures it against its a-priori bound,
the budget prices it, core.kernels.trees writes it out as a tree of additions, and
core.diagnose.simulate sums a user's sampled outputs in it.
"""

from __future__ import annotations

import numpy as np
import pytest

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, bits_of, round_to_format
from core.arith.metrics import BoundKind, exact_value
from core.arith.vectors import VectorSpec, generate
from core.crowd import budget
from core.kernels.order_types import Ran
from core.kernels.orders import ORDERS, Order, OrderBytes, RowShape, TreeShape, run_order
from core.kernels.sums import sequential
from core.kernels.trees import build_tree, tree_shapes
from core.studies.sumlab import run_lab


def _largest_first(x: np.ndarray) -> np.ndarray:
    return np.argsort(-np.abs(x.astype(np.float64)), kind="stable")


NEW = Order(
    key="largest_first",
    name="Sorted by decreasing |x|",
    origin="algorithm",
    bound="sequential",
    description="Large magnitudes first: the small ones are added last, to a large running sum.",
    run=lambda s: Ran(value=sequential(s.x[_largest_first(s.x)])),
    work={"float64": 60, "float32": 60, "float16": 55, "bfloat16": 56},
    memory=OrderBytes(per_item=2, extra=8),
    tree=TreeShape(
        key="largest_first",
        label="Sorted by decreasing |x|",
        combine=lambda b, ids: b.chain(ids),
        leaves=_largest_first,
    ),
    rows=RowShape(label="largest first", run=lambda x: sequential(np.take_along_axis(
        x, np.argsort(-np.abs(x.astype(np.float64)), axis=-1, kind="stable"), axis=-1))),
)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(ORDERS, NEW.key, NEW)  # the one entry
    return NEW


def test_a_new_order_is_one_entry_and_runs_everywhere(registered):
    x = generate(VectorSpec(kind="lognormal", n=1000, seed=3, storage="float32")).values
    out = run_order("largest_first", x, "float32")
    expected = sequential(x[np.argsort(-np.abs(x.astype(np.float64)), kind="stable")])
    assert bits_of(out.value) == bits_of(expected)
    assert out.provenance == "computed live here with NumPy in float32"

    lab = run_lab(x, "float32", "same", ("sequential", "largest_first"))
    row = next(r for r in lab.rows if r.order.key == "largest_first")
    assert row.metrics.within_bound  # the sequential bound gamma_(n-1) sum|x| holds for any order

    cost = budget.sumlab_cost(1000, "float32", "same", ("largest_first",), 0, "lognormal")
    assert "Sorted by decreasing |x|" in dict(cost.parts)


def test_a_new_orders_tree_is_drawn_from_the_same_entry(registered):
    x = np.array([1.0, -3.0, 2.0**-30, 7.0], dtype=np.float32)
    assert "largest_first" in tree_shapes()
    tree = build_tree(x, "float32", "largest_first")
    leaves = [n.leaf_index for n in tree.nodes if n.leaf_index is not None]
    assert leaves == [3, 1, 0, 2]
    assert tree.result == round_to_format(exact_value(sequential(x[[3, 1, 0, 2]]), FORMATS["float32"]),
                                          FORMATS["float32"])
    assert sum(n.exact for n in tree.nodes if n.leaf_index is not None) == exact_sum_fraction(x)


def test_a_new_orders_row_shape_is_a_column_of_the_mismatch_simulation(registered):
    from core.diagnose.simulate import _sum_orders, sim_orders

    terms = np.random.default_rng(4).lognormal(0, 3, (6, 40)).astype(np.float32).astype(np.float64)
    columns = sim_orders()
    assert columns.count("largest first") == 1 and columns[0] == "sequential, fused multiply-add"
    results = _sum_orders(terms, "float32", fused=False)
    assert results.shape == (6, len(columns))
    got = results[:, columns.index("largest first")]
    for i in range(6):
        assert got[i] == run_order("largest_first", terms[i], "float32").value


def test_without_the_entry_the_order_is_unknown():
    assert "largest_first" not in ORDERS
    with pytest.raises(ValueError, match="unknown order"):
        run_order("largest_first", np.ones(3, np.float32), "float32")
    with pytest.raises(ValueError, match="no tree"):
        build_tree(np.ones(3, np.float32), "float32", "largest_first")


def test_a_new_generator_is_one_entry(monkeypatch):
    from core.arith.vectors import GENERATOR_REGISTRY, Generator

    monkeypatch.setitem(
        GENERATOR_REGISTRY,
        "powers_of_two",
        Generator(
            key="powers_of_two",
            label="Powers of two, 2^0 .. 2^(n-1)",
            make=lambda rng, spec, fmt, notes: np.exp2(np.arange(spec.n)),
            work=1.0,
            memory=17,
        ),
    )
    v = generate(VectorSpec(kind="powers_of_two", n=5, seed=0, storage="float32"))
    assert v.values.tolist() == [1.0, 2.0, 4.0, 8.0, 16.0] and v.values.dtype == np.float32
    assert v.source.startswith("Powers of two, 2^0 .. 2^(n-1); n = 5")
    assert budget.vector_cost("powers_of_two", 1000, "float32")[0] == 1000.0


def test_a_new_difference_source_is_one_entry(monkeypatch):
    from core.training.differences import DIFFERENCES, Difference
    from core.training.mlp import TrainSettings
    from core.training.pair import PairedRun

    def swap_classes_of_w3(s, rng, plan):  # B starts with its output rows 0 and 1 swapped: a real difference
        plan.params["w3"] = plan.params["w3"][[1, 0, *range(2, s.classes)]]

    monkeypatch.setitem(
        DIFFERENCES, "swap_rows", Difference(key="swap_rows", label="Output rows swapped", apply=swap_classes_of_w3)
    )
    run = PairedRun(TrainSettings(source="swap_rows", steps=3))
    records = run.run(3)
    assert len(records) == 3 and records[0].differing_bits > 0
    control = PairedRun(TrainSettings(source="none", steps=3)).run(3)
    assert control[-1].differing_bits == 0


def test_every_orders_weights_are_keyed_by_the_formats_sums_accumulate_in():
    from core.arith.formats import ARITHMETIC

    for order in ORDERS.values():
        assert set(order.work) == set(ARITHMETIC), order.key
        assert all(w > 0 for w in order.work.values()) and isinstance(order.memory, OrderBytes), order.key
    with pytest.raises(TypeError):
        Order("k", "name", "algorithm", "sequential", "text", lambda s: Ran(value=0.0), {}, OrderBytes(1, 0))  # type: ignore[misc]


def test_an_orders_bound_is_a_bound_kind_named_by_its_value():
    assert NEW.bound is BoundKind.SEQUENTIAL
    with pytest.raises(ValueError, match="'sequentail' is not a valid BoundKind"):
        Order(key="k", name="name", origin="algorithm", bound="sequentail", description="text",
              run=lambda s: Ran(value=0.0), work={}, memory=OrderBytes(1, 0))
