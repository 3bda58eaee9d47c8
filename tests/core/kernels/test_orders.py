"""core.kernels.orders: every order against a slow, obvious reference and against its error bound."""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, NUMPY_DTYPES, working_format
from core.arith.metrics import a_priori_bound, exact_value
from core.arith.vectors import GENERATORS, VectorSpec, generate
from core.kernels.numpy_model import tree_depth_numpy
from core.kernels.orders import (
    ORDERS,
    clamp_permutations,
    permutation_sums,
    run_order,
    working_array,
)
from core.kernels.sums import compensated, lanes_then_pairwise, pairwise, sequential, split_sequential
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.machines.globalstate import GlobalState
from tests.machine import X86_SUM_KERNEL, X86_SUM_REASON

NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def slow_sequential(x):
    acc = x[0]
    for v in x[1:]:
        acc = (np.array([acc]) + np.array([v]))[0]  # one rounding in x's dtype per step
    return acc


def slow_pairwise(x):
    vals = list(x)
    while len(vals) > 1:
        nxt = [(np.array([vals[i]]) + np.array([vals[i + 1]]))[0] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def slow_kahan(x):
    s = x.dtype.type(0)
    c = x.dtype.type(0)
    for v in x:
        y = x.dtype.type(v - c)
        t = x.dtype.type(s + y)
        c = x.dtype.type(x.dtype.type(t - s) - y)
        s = t
    return s


def bits(v):
    a = np.asarray(v).reshape(1)
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])[0]


@pytest.mark.parametrize("name", list(NP))
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 100, 1000])
def test_sequential_and_pairwise_match_slow_references(name, n):
    x = (np.random.default_rng(n).standard_normal(n) * 10).astype(NP[name])
    assert bits(sequential(x)) == bits(slow_sequential(x))
    assert bits(pairwise(x)) == bits(slow_pairwise(x))


def slow_lanes(x, lanes):
    rounds = -(-len(x) // lanes)
    padded = np.concatenate([x, np.zeros(rounds * lanes - len(x), x.dtype)])
    return slow_pairwise(np.array([slow_sequential(padded[j::lanes]) for j in range(lanes)], x.dtype))


def slow_split(x, chunks):
    size = -(-len(x) // chunks)
    return slow_sequential(np.array([slow_sequential(x[s:s + size]) for s in range(0, len(x), size)], x.dtype))


@pytest.mark.parametrize("name", list(NP))
@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 9, 31, 32, 33, 100, 1000])
def test_lanes_and_split_k_match_slow_references(name, n):
    x = (np.random.default_rng(n).standard_normal(n) * 10).astype(NP[name])
    for lanes in (8, 32):
        assert bits(lanes_then_pairwise(x, lanes)) == bits(slow_lanes(x, lanes)), lanes
    assert bits(split_sequential(x, 4)) == bits(slow_split(x, 4))


@pytest.mark.parametrize("name", list(NP))
@pytest.mark.parametrize("n", [1, 3, 8, 33, 257])
def test_an_orders_row_shape_gives_each_rows_own_bits(name, n):
    """core.diagnose.simulate sums many rows at once: each row's result is the order's result for that row."""
    rows = (np.random.default_rng(n).lognormal(0, 3, (5, n)) * np.random.default_rng(0).choice([-1, 1], (5, n)))
    rows = rows.astype(NP[name])
    shaped = [o for o in ORDERS.values() if o.rows is not None]
    assert [o.key for o in shaped] == ["sequential", "reverse", "pairwise", "lanes_8", "lanes_32", "split_4"]
    for order in shaped:
        together = order.rows.run(rows)
        assert together.shape == (5,) and together.dtype == rows.dtype
        for i in range(5):
            assert bits(together[i]) == bits(run_order(order.key, rows[i], name).value), (order.key, i)


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
def test_single_lane_kahan_matches_the_textbook_loop(name):
    x = (np.random.default_rng(5).standard_normal(777) * 1000).astype(NP[name])
    assert bits(compensated(x, "kahan", lanes=1)) == bits(slow_kahan(x))


def test_kahan_beats_sequential_on_an_easy_bad_case():
    x = np.full(100_000, 0.1, dtype=np.float32)
    exact = exact_sum_fraction(x)
    err = {k: abs(exact_value(run_order(k, x, "float32").value, FORMATS["float32"]) - exact)
           for k in ("sequential", "kahan", "neumaier")}
    assert err["kahan"] * 1000 < err["sequential"] and err["neumaier"] * 1000 < err["sequential"]


def test_neumaier_handles_large_terms_that_break_kahan():
    x = np.array([1.0, 1e100, 1.0, -1e100])
    assert float(compensated(x, "neumaier", lanes=1)) == 2.0
    assert float(compensated(x, "kahan", lanes=1)) == 0.0


VECTOR_KINDS = [k for k in GENERATORS if k != "large_one_minus_large"]
BOUNDED_ORDERS = [k for k in ORDERS if k != "correct"]


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from(VECTOR_KINDS),
    storage=st.sampled_from(list(FORMATS)),
    working=st.sampled_from(["same", "float32", "float64"]),
    n=st.integers(1, 5000),
    seed=st.integers(0, 10_000),
)
def test_every_order_stays_within_its_a_priori_bound(kind, storage, working, n, seed):
    vec = generate(VectorSpec(kind=kind, n=n, seed=seed, storage=storage, condition=1e6))
    if not np.isfinite(vec.values.astype(np.float64)).all():
        return
    w = working_format(storage, working)  # FP8 storage accumulates in float32
    fmt = FORMATS[w]
    cast = NUMPY_DTYPES[w].itemsize < vec.values.dtype.itemsize
    exact = exact_sum_fraction(vec.values)
    s = exact_sum_fraction(np.abs(vec.values))
    for key in BOUNDED_ORDERS:
        out = run_order(key, vec.values, w)
        value = exact_value(out.value, fmt)
        if isinstance(value, float):  # overflow: bounds assume none
            continue
        bound = a_priori_bound(ORDERS[key].bound, vec.n, s, fmt, out.tree_depth)
        if bound is None:
            continue
        if cast:
            bound += fmt.unit_roundoff * s
        assert abs(value - exact) <= bound, (key, kind, storage, w, n, seed)


@pytest.mark.parametrize("name", list(NP))
def test_correctly_rounded_is_the_rounding_of_the_exact_sum(name):
    from core.arith.formats import round_to_format

    x = (np.random.default_rng(2).standard_normal(3000)).astype(NP[name])
    out = run_order("correct", x, name)
    assert exact_value(out.value, FORMATS[name]) == round_to_format(exact_sum_fraction(x), FORMATS[name])


def test_real_numpy_and_torch_orders_are_the_real_libraries():
    x = generate(VectorSpec(kind="normal", n=100_000, seed=1, storage="float32")).values
    assert bits(run_order("numpy", x, "float32").value) == bits(np.sum(x))
    t = torch.from_numpy(x.copy())
    assert bits(run_order("torch_all", x, "float32").value) == bits(t.sum().numpy())
    d = run_order("torch_1", x, "float64").value  # torch.sum(x, dtype=float64) casts first
    assert d.dtype == np.float64 and bits(d) == bits(t.sum(dtype=torch.float64).numpy())


@pytest.mark.parametrize("name", list(NP))
def test_models_agree_with_the_real_thing_on_this_machine(name):
    for n in (7, 300, 200_000):
        x = generate(VectorSpec(kind="normal", n=n, seed=4, storage=name)).values
        assert bits(run_order("numpy_model", x, name).value) == bits(run_order("numpy", x, name).value)


@pytest.mark.skipif(not X86_SUM_KERNEL, reason=X86_SUM_REASON)
@pytest.mark.parametrize("name", list(NP))
def test_torch_model_agrees_with_torch_where_the_model_is_established(name):
    for n in (7, 300, 200_000):
        x = generate(VectorSpec(kind="normal", n=n, seed=4, storage=name)).values
        assert bits(run_order("torch_model", x, name).value) == bits(run_order("torch_all", x, name).value)


def test_thread_counts_can_differ_and_globals_are_restored():
    x = generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values  # the lab's default vector
    before = GlobalState.capture()
    one = run_order("torch_1", x, "float32")
    all_ = run_order("torch_all", x, "float32")
    assert GlobalState.capture() == before
    assert "1 thread" in one.provenance and f"{torch.get_num_threads()} thread" in all_.provenance
    if X86_SUM_KERNEL:  # where the bit-exact model of torch's sum is established (tests.machine)
        # other bits exactly when the model says this thread count groups these values otherwise
        threads = torch.get_num_threads()
        differs = bits(torch_cpu_sum_model(x, 1)) != bits(torch_cpu_sum_model(x, threads))
        assert (bits(one.value) != bits(all_.value)) == differs
    # and they can differ: the model (pure arithmetic, the same everywhere) gives other bits with two threads
    assert bits(torch_cpu_sum_model(x, 1)) != bits(torch_cpu_sum_model(x, 2))


def test_permutation_sums_are_deterministic_and_real_permutations():
    x = np.array([1e8, 1.0, -1e8, 3.0, 0.5], dtype=np.float32)
    a, b = permutation_sums(x, 50, 9), permutation_sums(x, 50, 9)
    assert np.array_equal(a, b) and a.dtype == np.float32
    assert len(set(a.tolist())) > 1
    assert clamp_permutations(1000, 10**6) == 20 and clamp_permutations(5, 10) == 5


def test_working_array_casts_and_numpy_depth():
    x = np.array([1.5, 2.5], dtype=np.float16)
    assert working_array(x, "float32").dtype == np.float32
    assert tree_depth_numpy(5) == 4 and tree_depth_numpy(128) == 16 + 3 + 7
    assert tree_depth_numpy(10**6) < 60


def test_empty_input_and_unknown_order():
    x = np.array([], dtype=np.float32)
    assert float(sequential(x)) == 0 and float(pairwise(x)) == 0 and float(compensated(x)) == 0
    with pytest.raises(ValueError):
        run_order("bogus", np.ones(3, dtype=np.float32), "float32")


def test_exact_sum_of_a_cast_vector_differs_only_by_the_cast():
    x = np.array([0.1, 0.2, 0.3])
    w = working_array(x, "float32")
    assert exact_sum_fraction(w) == sum(Fraction(float(v)) for v in w)
