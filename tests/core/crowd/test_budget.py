"""core.crowd.budget: every page's cost model, the per-request budget and how it is sized."""

from __future__ import annotations

import itertools

import pytest

from core.arith.formats import ARITHMETIC, NUMPY_DTYPES
from core.arith.vectors import GENERATORS, MAX_N
from core.crowd import budget
from core.crowd.bytecache import CACHES
from core.crowd.gate import HEAVY_SLOTS
from core.kernels.orders import DEFAULT_ORDERS, ORDERS, clamp_permutations
from core.recordings.store import SUITE_DTYPES, SUITE_GENERATORS, SUITE_SIZES
from core.studies.sumlab import MAX_PERMUTATIONS
from core.training.mlp import MAX_STEPS

ALL_ORDERS = tuple(ORDERS)
# a shared link whose sum (10 million ill-conditioned float64 values, every order, 1000 permutations) once ran
# past the per-request budget
OVER_BUDGET_LINK = dict(n=10_000_000, storage="float64", working="same", orders=ALL_ORDERS, permutations=1000,
                        generator="ill_conditioned")


def test_every_order_generator_and_format_has_a_weight():
    for key in ORDERS:
        assert set(budget.ORDER_WORK[key]) == set(ARITHMETIC), key  # the formats a sum accumulates in
        assert key in budget.ORDER_BYTES
    assert set(budget.GENERATOR_WORK) == set(GENERATORS) == set(budget.GENERATOR_BYTES)
    assert set(budget.ITEMSIZE) == set(NUMPY_DTYPES) == set(budget.EXACT_WORK)
    assert all(budget.ITEMSIZE[k] == dt.itemsize for k, dt in NUMPY_DTYPES.items())


@pytest.mark.parametrize("n", [1, 2, 3, 1000, 20_000, 1 << 20, 10_000_000])
@pytest.mark.parametrize("k", [0, 1, 20, 1000])
def test_the_permutation_count_is_the_labs(n, k):
    expected = 0 if k == 0 or n == 1 else clamp_permutations(min(k, MAX_PERMUTATIONS), n)
    assert budget.permutations_done(k, n) == expected


def test_a_link_of_ten_million_values_is_over_budget_and_the_advice_fits():
    cost = budget.sumlab_cost(**OVER_BUDGET_LINK)
    assert not cost.fits and cost.heavy and cost.work > budget.WORK_BUDGET
    assert cost.over() and "value operations" in cost.over()[0]
    assert cost.parts[0][0] == "Sorted by increasing |x|"  # the most expensive part is named first
    advice = budget.sumlab_advice(**OVER_BUDGET_LINK)
    assert {next(iter(a.change)) for a in advice} >= {"n", "orders"}
    for a in advice:
        assert budget.sumlab_cost(**(OVER_BUDGET_LINK | a.change)).fits, a


def test_defaults_are_cheap_on_every_page():
    """At its defaults no page is heavy: nothing waits, and the smallest tier sees only small requests."""
    lab = budget.sumlab_cost(1_000_000, "float32", "same", DEFAULT_ORDERS, 20, "normal")
    cg = budget.cpu_vs_gpu_cost(1_000_000, "float32", "normal", recordings=8, gpus=1)
    for cost in (lab, cg):
        assert cost.fits and not cost.heavy, cost
    assert lab.peak_bytes < 32 * budget.MB


@pytest.mark.parametrize("storage,working", [(s, w) for s in NUMPY_DTYPES for w in ("same", "float32", "float64")])
def test_the_caps_with_the_default_orders_fit(storage, working):
    """The largest n with the default orders and the most permutations fits, for every generator."""
    for gen in GENERATORS:
        cost = budget.sumlab_cost(MAX_N, storage, working, DEFAULT_ORDERS, MAX_PERMUTATIONS, gen)
        assert cost.fits, (gen, cost.summary())


def test_every_cpu_vs_gpu_setting_fits():
    for gen, n, dtype in itertools.product(SUITE_GENERATORS, SUITE_SIZES, SUITE_DTYPES):
        assert budget.cpu_vs_gpu_cost(n, dtype, gen, recordings=8, gpus=2).fits, (gen, n, dtype)


def test_training_play_and_mitigations_seeds_fit_and_the_largest_seed_study_gets_advice():
    for dtype, opt in itertools.product(("float32", "float64"), ("sgd_momentum", "adam")):
        assert budget.training_cost(MAX_STEPS, 1, dtype, opt).fits  # Play to the end
    assert budget.training_cost(300, 12).fits  # the Mitigations page's largest seed study
    big = budget.training_cost(MAX_STEPS, 16, "float64", "adam")
    assert not big.fits and big.long
    advice = budget.training_advice(MAX_STEPS, 16, "float64", "adam")
    assert advice
    for a in advice:
        args = {"steps": MAX_STEPS, "seeds": 16, "dtype": "float64", "optimizer": "adam"} | a.change
        assert budget.training_cost(**args).fits, a


def test_cost_grows_with_every_setting():
    base = dict(n=100_000, storage="float32", working="same", orders=("sequential",), permutations=0,
                generator="normal")
    c0 = budget.sumlab_cost(**base)
    for change in ({"n": 200_000}, {"orders": ("sequential", "sorted_abs")}, {"permutations": 10},
                   {"generator": "ill_conditioned"}, {"working": "float64"}):
        assert budget.sumlab_cost(**(base | change)).work > c0.work, change
    assert budget.sumlab_cost(**(base | {"storage": "float64"})).peak_bytes > c0.peak_bytes
    # a pasted vector exists already: no generation cost
    assert budget.sumlab_cost(**(base | {"generator": None})).work < c0.work


def test_the_budget_fits_the_hosting_tiers():
    """Defaults fit the smallest tier (measured by benchmarks/bench_hosting.py); on top of that, the
    most heavy requests can hold at once and the caches stay within the largest tier."""
    assert HEAVY_SLOTS <= 2
    worst = budget.HOSTING_SMALL + 2 * budget.MEMORY_BUDGET + sum(c.capacity for c in CACHES.values())
    assert worst <= budget.HOSTING_LARGE, worst / budget.MB
    assert budget.HEAVY_BYTES < budget.MEMORY_BUDGET and budget.HEAVY_WORK < budget.WORK_BUDGET
    # the largest lab request the budget allows stays within its memory share
    worst_lab = max(budget.sumlab_cost(MAX_N, s, w, ALL_ORDERS, MAX_PERMUTATIONS, g).peak_bytes
                    for s in NUMPY_DTYPES for w in ("same", "float64") for g in GENERATORS)
    assert worst_lab <= budget.MEMORY_BUDGET, worst_lab / budget.MB


def test_amounts_read_as_words():
    assert budget.amount(1.75e9) == "1.8 billion"
    assert budget.amount(4.5e8) == "450 million"
    assert budget.amount(12_000) == "12,000"
