"""core.arith.metrics, core.kernels.trees and core.studies.sumlab, checked against Fractions and the orders
themselves."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FLOAT16, FLOAT32, FLOAT64, FORMATS, NUMPY_DTYPES, round_to_format
from core.arith.formats import bits_of as bits_of_scalar
from core.arith.metrics import a_priori_bound, evaluate, exact_value, gamma
from core.arith.vectors import VectorSpec, generate
from core.kernels.orders import DEFAULT_ORDERS, ORDERS
from core.kernels.sums import pairwise, sequential
from core.kernels.trees import MAX_TREE_N, TREE_ORDERS, Tree, build_tree
from core.studies.sumlab import run_lab, running_error


def exact_total(tree: Tree) -> Fraction:
    """The exact sum of a tree's leaves."""
    return sum((n.exact for n in tree.nodes if n.leaf_index is not None), Fraction(0))

NP = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}


def test_gamma_and_bounds():
    u = FLOAT32.unit_roundoff
    assert gamma(3, u) == 3 * u / (1 - 3 * u)
    assert gamma(2**24, u) is None
    s = Fraction(10)
    assert a_priori_bound("sequential", 5, s, FLOAT32) == gamma(4, u) * s
    assert a_priori_bound("pairwise", 5, s, FLOAT32) == gamma(3, u) * s
    assert a_priori_bound("tree", 5, s, FLOAT32, depth=2) == gamma(2, u) * s
    assert a_priori_bound("exact", 5, s, FLOAT32) == u * s
    assert a_priori_bound("sequential", 1, s, FLOAT32) == 0
    assert a_priori_bound("sequential", 10**4, s, FLOAT16) is None  # n u >= 1: no bound
    with pytest.raises(ValueError):
        a_priori_bound("magic", 5, s, FLOAT32)


def test_evaluate_exact_zero_and_overflow():
    m = evaluate(np.float32(0.5), Fraction(1, 2), FLOAT32, Fraction(0))
    assert m.abs_error == 0 and m.ulps == 0 and m.correct_digits == math.inf and m.within_bound
    m = evaluate(np.float32(2**-20), Fraction(0), FLOAT32, None)
    assert m.rel_error is None and m.correct_digits is None and m.within_bound is None
    m = evaluate(np.float16(np.inf), Fraction(70000), FLOAT16, Fraction(1))
    assert m.overflowed and m.ulps == math.inf and m.within_bound is None
    m = evaluate(np.float16(-np.inf), Fraction(-70000), FLOAT16, Fraction(1))
    assert m.overflowed and m.ulps == -math.inf  # overflowed downwards: the error keeps its sign
    m = evaluate(np.float64(0.1 + 0.2), Fraction(0.1) + Fraction(0.2), FLOAT64, Fraction(1, 10**10))
    assert m.ulps == float((Fraction(0.1 + 0.2) - Fraction(0.1) - Fraction(0.2)) / Fraction(2) ** -54)
    assert bits_of_scalar(np.float32(1.0)) == 0x3F800000


@pytest.mark.parametrize("name", list(NP))
@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 17, 32])
def test_trees_reproduce_their_orders_bit_for_bit(name, n):
    x = (np.random.default_rng(n).standard_normal(n) * 100).astype(NP[name])
    fmt = FORMATS[name]
    expected = {
        "sequential": sequential(x),
        "reverse": sequential(x[::-1]),
        "sorted_abs": sequential(x[np.argsort(np.abs(x.astype(np.float64)), kind="stable")]),
        "pairwise": pairwise(x),
    }
    if name in ("float32", "float64"):  # numpy's float16 loop accumulates in float32: not this tree
        expected["numpy"] = np.sum(x)
    for order, value in expected.items():
        tree = build_tree(x, name, order)
        assert tree.result == exact_value(value, fmt), order
        assert exact_total(tree) == exact_sum_fraction(x)
        leaves = [nd for nd in tree.nodes if nd.leaf_index is not None]
        assert sorted(nd.leaf_index for nd in leaves) == list(range(n))
        for nd in tree.internal():
            a, b = tree.nodes[nd.left].rounded, tree.nodes[nd.right].rounded
            assert nd.exact == a + b and nd.rounded == round_to_format(nd.exact, fmt)
            assert nd.error == nd.rounded - nd.exact


def test_tree_limits():
    with pytest.raises(ValueError):
        build_tree(np.ones(MAX_TREE_N + 1, dtype=np.float32), "float32", "sequential")
    with pytest.raises(ValueError):
        build_tree(np.ones(3, dtype=np.float32), "float32", "warp")
    assert set(TREE_ORDERS) >= {"sequential", "pairwise", "numpy", "cuda"}


@pytest.mark.parametrize("working", ["float32", "float64"])
def test_cuda_tree_is_the_cuda_models_sum_addition_by_addition(working):
    """The GPU block tree. Its root is core.kernels.cuda_model's torch 2.13 result for every small n."""
    from core.kernels.cuda_model import cuda_launch, cuda_sum_model

    fmt = FORMATS[working]
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 5, 8, 13, 16, 31, 32):
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(-4, 5, n)).astype(NUMPY_DTYPES[working])
        tree = build_tree(x, working, "cuda")
        assert tree.result == exact_value(cuda_sum_model(x), fmt), n
        assert exact_total(tree) == exact_sum_fraction(x)
        width = cuda_launch(n).threads_per_block
        assert tree.nodes[tree.root].depth == (width.bit_length() - 1) + (1 if n > width else 0), n


def test_lab_panel_on_the_default_vector():
    v = generate(VectorSpec(kind="normal", n=100_000, seed=0, storage="float32"))
    r = run_lab(v.values, "float32", "same", tuple(ORDERS), permutations=10, perm_seed=1)
    assert r.exact == exact_sum_fraction(v.values)
    assert r.kappa == pytest.approx(float(exact_sum_fraction(np.abs(v.values)) / abs(r.exact)))
    assert [row.order.key for row in r.rows] == list(ORDERS)
    assert all(row.metrics.within_bound for row in r.rows)
    correct = next(row for row in r.rows if row.order.key == "correct")
    assert correct.metrics.value == r.correctly_rounded and abs(correct.metrics.ulps) <= 0.5
    assert r.permutations.k == 10 and 1 <= r.permutations.distinct <= 10
    assert r.cast_note is None


def test_lab_casts_and_notes_it():
    v = generate(VectorSpec(kind="normal", n=1000, seed=0, storage="float64"))
    r = run_lab(v.values, "float64", "float32", DEFAULT_ORDERS)
    assert r.working == "float32" and r.cast_note and all(row.metrics.within_bound for row in r.rows)
    widened = run_lab(
        generate(VectorSpec(kind="normal", n=1000, seed=0, storage="float16")).values,
        "float16",
        "float64",
        ("sequential",),
    )
    assert widened.cast_note is None and widened.rows[0].metrics.abs_error < Fraction(1, 10**9)


def test_lab_with_zero_sum_and_with_infinities():
    zeros = run_lab(np.zeros(10, dtype=np.float32), "float32", "same", ("sequential", "correct"))
    assert math.isnan(zeros.kappa) and zeros.rows[0].metrics.rel_error is None
    cancel = run_lab(np.array([1.0, -1.0], dtype=np.float32), "float32", "same", ("sequential",))
    assert cancel.kappa == math.inf
    inf = run_lab(np.array([1.0, np.inf], dtype=np.float32), "float32", "same", ("sequential", "pairwise"))
    assert inf.exact == math.inf and math.isnan(inf.kappa)
    assert inf.rows[0].metrics.abs_error == 0  # inf is the IEEE answer


def test_running_error_ends_at_the_sequential_error():
    v = generate(VectorSpec(kind="uniform", n=50_000, seed=2, storage="float32"))
    re = running_error(v.values, "float32", points=50)
    assert re.positions[-1] == 50_000 and re.positions[0] == 1
    seq = exact_value(sequential(v.values), FLOAT32)
    assert re.abs_error[-1] == float(abs(seq - exact_sum_fraction(v.values)))
    assert (re.abs_error <= re.bound).all()


def test_regressions_from_review():
    """Inputs a reviewer found: each once crashed or raised a false bound alarm."""
    from core.arith.ulps import error_in_ulps

    # a nonzero result for an exact sum of 0 is infinitely many ULPs of 0 away, not an OverflowError
    assert error_in_ulps(Fraction(-1), Fraction(0), FLOAT64) == -math.inf
    r = run_lab(np.array([1e16, 1.0, -1e16, -1.0]), "float64", "same", ("sequential", "pairwise", "correct"))
    assert r.exact == 0 and r.rows[0].metrics.ulps in (-math.inf, math.inf)
    running_error(np.array([1e16, 1.0, -1e16, -1.0]), "float64")
    # narrowing float64 -> float32 that underflows: the exact cast error is part of the bound
    tiny = run_lab(np.array([1e-50, 1e-50, 1e-50]), "float64", "float32", ("sequential", "correct"))
    assert all(row.metrics.within_bound for row in tiny.rows) and tiny.cast_note
    # permutation histogram with sums that overflow
    from ui.sumlab_view import permutation_frames

    big = run_lab(np.array([1e308, 1e308]), "float64", "same", ("sequential",), permutations=5)
    if big.permutations is not None and not isinstance(big.exact, float) and big.exact != 0:
        hist, _marks = permutation_frames(big)
        assert hist.empty or hist["ulps"].notna().all()



@pytest.mark.parametrize(("n", "order"), [(32, "pairwise"), (32, "sequential"), (20, "pairwise")])
def test_differing_tree_seed_makes_the_cpu_and_gpu_trees_differ(n, order):
    """The talk's "GPU block tree" scenario showed two trees with the same sum."""
    from core.arith.vectors import VectorSpec, generate
    from core.kernels.trees import build_tree
    from core.studies.sumlab import differing_tree_seed

    seed = differing_tree_seed(n, order)
    values = generate(VectorSpec(kind="normal", n=n, seed=seed, storage="float32")).values
    assert build_tree(values, "float32", order).result != build_tree(values, "float32", "cuda").result
    for earlier in range(seed):  # the first such seed: every earlier one gives equal sums
        v = generate(VectorSpec(kind="normal", n=n, seed=earlier, storage="float32")).values
        assert build_tree(v, "float32", order).result == build_tree(v, "float32", "cuda").result
