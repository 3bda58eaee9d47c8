"""The WebGPU workgroup-tree model against the shader's order written out one addition at a time, over every
class of float32 value; and its depth against the bound it claims."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, bits_of, from_bit_view
from core.arith.metrics import a_priori_bound
from core.arith.vectors import VectorSpec, generate
from core.kernels import webgpu
from core.kernels.orders import ORDERS, run_order
from tests.strategies import bit_patterns

F32 = FORMATS["float32"]


def shader_by_hand(x: np.ndarray, workgroup: int = webgpu.WORKGROUP, groups: int = webgpu.GROUPS) -> np.float32:
    """tree.wgsl then sequential.wgsl, invocation by invocation, with NumPy float32 scalars."""
    lanes, n = workgroup * groups, x.size
    partial = []
    with np.errstate(all="ignore"):
        for g in range(groups):
            sh = []
            for t in range(workgroup):
                i = g * workgroup + t
                acc = np.float32(0.0)
                if i < n:
                    acc = x[i]
                    i += lanes
                    while i < n:
                        acc = np.float32(acc + x[i])
                        i += lanes
                sh.append(acc)
            s = workgroup // 2
            while s > 0:
                for t in range(s):
                    sh[t] = np.float32(sh[t] + sh[t + s])
                s //= 2
            partial.append(sh[0])
        total = partial[0]
        for v in partial[1:]:
            total = np.float32(total + v)
    return total


def same(a, b) -> bool:
    return bits_of(np.float32(a)) == bits_of(np.float32(b)) or (np.isnan(a) and np.isnan(b))


@pytest.mark.parametrize("n", [1, 2, 3, 255, 256, 257, webgpu.LANES - 1, webgpu.LANES, webgpu.LANES + 1, 40_000])
def test_model_is_the_shader_order(n):
    x = generate(VectorSpec(kind="lognormal", n=n, seed=n, storage="float32")).values
    assert same(webgpu.workgroup_tree(x), shader_by_hand(x))


@settings(max_examples=60, deadline=None)
@given(st.lists(bit_patterns(F32), min_size=1, max_size=300))
def test_model_is_the_shader_order_for_any_values(bits):
    """±0, subnormals, the largest finite values, infinities and NaN, in a small shape (8 invocations a
    workgroup, 4 workgroups): the model keeps every sign of zero and every overflow the shader makes."""
    x = from_bit_view(np.array(bits), F32)
    assert same(webgpu.workgroup_tree(x, 8, 4), shader_by_hand(x, 8, 4))


def test_a_lone_negative_zero_stays_negative():
    x = np.array([-0.0], dtype=np.float32)
    assert bits_of(webgpu.workgroup_tree(x)) == bits_of(shader_by_hand(x))


@pytest.mark.parametrize("kind", ["normal", "lognormal", "alternating", "tiny_huge"])
def test_model_within_its_tree_bound(kind):
    x = generate(VectorSpec(kind=kind, n=100_000, seed=5, storage="float32")).values
    out = run_order("webgpu_tree", x, "float32")
    exact = exact_sum_fraction(x)
    bound = a_priori_bound(ORDERS["webgpu_tree"].bound, x.size, exact_sum_fraction(np.abs(x)), F32, out.tree_depth)
    assert abs(exact_sum_fraction(np.array([out.value])) - exact) <= bound
    assert out.tree_depth == webgpu.workgroup_tree_depth(x.size) == 6 + 8 + 63
