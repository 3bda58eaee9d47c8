"""Summation orders: each a named algorithm whose every rounding happens in the working dtype.

The working dtype mirrors ``torch.sum(x, dtype=...)``: the stored values are first cast
to it (exactly, when it is at least as wide), and every addition then rounds to it.
All orders are vectorized: sequential sums use ``np.add.accumulate`` (a true left-to-right
loop in C, unlike ``np.sum``, which is pairwise), trees are computed level by level, and
compensated sums run across many lanes at once.

``ORDERS`` is the registry: each ``Order`` carries its label, the function that runs it, its
a-priori bound, its cost weights (for core.crowd.budget), for small vectors how to write it out
as a tree of additions (for core.kernels.trees) and, where it has one, how it sums many short rows
at once (for core.diagnose.simulate). Those functions are core.kernels.order_runs', the algorithms
they call core.kernels.sums' and the models'. Adding an order is adding one entry (and its function).
"""

from __future__ import annotations

import time

import numpy as np

from core.arith.formats import FORMATS
from core.kernels import webgpu
from core.kernels.order_runs import (
    balanced_tree,
    by_magnitude_leaves,
    chain_tree,
    cuda_tree,
    lanes_8_rows,
    lanes_32_rows,
    numpy_tree,
    reverse_rows,
    reversed_leaves,
    run_correct,
    run_cuda_model,
    run_kahan,
    run_lanes_8,
    run_lanes_32,
    run_neumaier,
    run_numpy,
    run_numpy_model,
    run_pairwise,
    run_reverse,
    run_sequential,
    run_sorted_abs,
    run_sorted_asc,
    run_sorted_desc,
    run_split_4,
    run_torch_1,
    run_torch_all,
    run_torch_model,
    run_webgpu_tree,
    split_4_rows,
)
from core.kernels.order_types import Order, OrderBytes, OrderOutcome, RowShape, SumInput, TreeShape
from core.kernels.sums import pairwise, sequential
from core.machines.globalstate import PROCESS_THREADS

ORIGIN_LIVE = "live"  # the real library ran on this machine
ORIGIN_MODEL = "model"  # our reimplementation of a library's or device's order
ORIGIN_ALGORITHM = "algorithm"  # a textbook order computed here in the working dtype
ORIGIN_EXACT = "exact"
ORIGIN_RECORDED = "recorded"  # a real device's result read from a recording (core.recordings): no order here has it


# ----------------------------------------------------------------------------- helpers


def working_array(values: np.ndarray, working: str) -> np.ndarray:
    """Cast stored values to the working dtype (exact unless narrowing)."""
    dt = FORMATS[working].numpy_dtype
    return values if values.dtype == dt else values.astype(dt)


def permutation_sums(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Left-to-right sums of k random permutations of x (a local generator; one O(n)
    shuffle and one sequential pass per permutation)."""
    rng = np.random.default_rng(seed)
    out = np.empty(k, dtype=x.dtype)
    for i in range(k):
        out[i] = sequential(rng.permutation(x))
    return out


def available_threads() -> int:
    return PROCESS_THREADS


ORDERS: dict[str, Order] = {
    o.key: o
    for o in [
        Order(
            key="sequential",
            name="Sequential, left to right",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="((x0 + x1) + x2) + ...: one running sum, rounded after every addition.",
            run=run_sequential,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.2, "bfloat16": 1.9},
            memory=OrderBytes(per_item=1, extra=0),
            tree=TreeShape(key="sequential", label="Sequential, left to right", combine=chain_tree),
            rows=RowShape(label="sequential", run=sequential),
        ),
        Order(
            key="reverse",
            name="Sequential, right to left",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="The same running sum, starting from the last element.",
            run=run_reverse,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.2, "bfloat16": 1.9},
            memory=OrderBytes(per_item=1, extra=0),
            tree=TreeShape(key="reverse", label="Sequential, right to left", combine=chain_tree,
                           leaves=reversed_leaves),
            rows=RowShape(label="reverse", run=reverse_rows),
        ),
        Order(
            key="sorted_asc",
            name="Sorted ascending",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Sequential after sorting from most negative to most positive.",
            run=run_sorted_asc,
            work={"float64": 8, "float32": 3.5, "float16": 24, "bfloat16": 36},
            memory=OrderBytes(per_item=2, extra=0),
        ),
        Order(
            key="sorted_desc",
            name="Sorted descending",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Sequential after sorting from most positive to most negative.",
            run=run_sorted_desc,
            work={"float64": 8, "float32": 3.5, "float16": 24, "bfloat16": 38},
            memory=OrderBytes(per_item=2, extra=0),
        ),
        Order(
            key="sorted_abs",
            name="Sorted by increasing |x|",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Small magnitudes first, so they meet each other before the large ones.",
            run=run_sorted_abs,
            work={"float64": 60, "float32": 60, "float16": 55, "bfloat16": 56},
            memory=OrderBytes(per_item=2, extra=8),  # a stable argsort of |x|
            tree=TreeShape(
                key="sorted_abs", label="Sorted by increasing |x|", combine=chain_tree, leaves=by_magnitude_leaves
            ),
        ),
        Order(
            key="pairwise",
            name="Pairwise tree",
            origin=ORIGIN_ALGORITHM,
            bound="pairwise",
            description="Neighbours added level by level: a balanced binary tree of depth ceil(log2 n).",
            run=run_pairwise,
            work={"float64": 1.5, "float32": 0.7, "float16": 3.8, "bfloat16": 1.0},
            memory=OrderBytes(per_item=2.6, extra=0),
            tree=TreeShape(key="pairwise", label="Pairwise tree", combine=balanced_tree),
            rows=RowShape(label="pairwise", run=pairwise),
        ),
        Order(
            key="lanes_8",
            name="8 lanes, then pairwise",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="Eight running sums, lane j over x[j], x[j + 8], ..., then the lanes added as a pairwise "
            "tree: the shape of a CPU's SIMD accumulators, not any one library's order.",
            run=run_lanes_8,
            work={"float64": 2.0, "float32": 1.4, "float16": 3.8, "bfloat16": 2.4},
            memory=OrderBytes(per_item=2, extra=0),
            rows=RowShape(label="8 lanes, then pairwise (CPU SIMD-like)", run=lanes_8_rows),
        ),
        Order(
            key="lanes_32",
            name="32 lanes, then pairwise",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="32 running sums, lane j over x[j], x[j + 32], ..., then the lanes added as a pairwise "
            "tree: the shape of a GPU warp's threads, not any one kernel's order.",
            run=run_lanes_32,
            work={"float64": 2.4, "float32": 1.5, "float16": 3.9, "bfloat16": 2.5},
            memory=OrderBytes(per_item=2, extra=0),
            rows=RowShape(label="32 lanes, then pairwise (GPU warp-like)", run=lanes_32_rows),
        ),
        Order(
            key="split_4",
            name="Split into 4 chunks",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="Four contiguous slices, each summed left to right, then their four sums left to right: "
            "a split-K reduction.",
            run=run_split_4,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.8, "bfloat16": 2.4},
            memory=OrderBytes(per_item=0.3, extra=0),
            rows=RowShape(label="split-K: 4 chunks", run=split_4_rows),
        ),
        Order(
            key="numpy",
            name="NumPy np.sum",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real np.sum on this machine: pairwise over blocks of 128 with 8 accumulators.",
            run=run_numpy,
            work={"float64": 0.2, "float32": 0.2, "float16": 0.8, "bfloat16": 2.0},
            memory=OrderBytes(per_item=0, extra=0),
            tree=TreeShape(
                key="numpy",
                label="NumPy's pairwise scheme (n < 8: sequential; else 8 accumulators + tail)",
                combine=numpy_tree,
            ),
        ),
        Order(
            key="numpy_model",
            name="Model of NumPy's pairwise sum",
            origin=ORIGIN_MODEL,
            bound="tree",
            description="Our reimplementation of numpy's 128-block, 8-accumulator pairwise sum. Measured: "
            "bit-identical to np.sum in 10,151 of 10,151 cases per dtype (float16/32/64, n = 1 .. 10^7) "
            "on x86-64; the test suite checks it again on every machine it runs on.",
            run=run_numpy_model,
            work={"float64": 5, "float32": 2.1, "float16": 3.1, "bfloat16": 2.0},
            memory=OrderBytes(per_item=0.5, extra=0),
        ),
        Order(
            key="torch_1",
            name="torch.sum, CPU, 1 thread",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real torch.sum on this CPU with one intra-op thread.",
            run=run_torch_1,
            work={"float64": 0.7, "float32": 0.3, "float16": 0.3, "bfloat16": 0.3},
            memory=OrderBytes(per_item=1, extra=8),
        ),
        Order(
            key="torch_all",
            name="torch.sum, CPU, all threads",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real torch.sum with every intra-op thread: contiguous chunks per thread, then combined.",
            run=run_torch_all,
            work={"float64": 0.7, "float32": 0.6, "float16": 0.3, "bfloat16": 0.3},
            memory=OrderBytes(per_item=1, extra=8),
        ),
        Order(
            key="torch_model",
            name="Model of torch's CPU cascade sum",
            origin=ORIGIN_MODEL,
            bound="tree",
            description="Our reimplementation of PyTorch's CPU cascade sum (SIMD lanes, 4 accumulators, chunks per "
            "thread). Measured: bit-identical to torch.sum in every tested case (4 dtypes, 1-8 threads, "
            "n up to 10^7) on torch 2.13 x86-64 with AVX2, AVX512 and generic kernel dispatch (the tests "
            "and the bundled recordings); ARM builds and other versions not checked.",
            run=run_torch_model,
            work={"float64": 1.7, "float32": 0.6, "float16": 1.3, "bfloat16": 0.6},
            memory=OrderBytes(per_item=0.2, extra=0),
        ),
        Order(
            key="cuda_model",
            name="Model of a CUDA block reduction",
            origin=ORIGIN_MODEL,
            bound="tree",
            description="Per-thread strided accumulation, shared-memory tree, warp shuffles, multi-block combine; a "
            "model of the CUDA reduce kernel torch 2.13 ships. Its match rate on a real GPU is unmeasured: the "
            "published GPU results it reproduces do not exercise the multi-block launch that the SM count decides.",
            run=run_cuda_model,
            work={"float64": 2.1, "float32": 0.4, "float16": 1.1, "bfloat16": 0.6},
            memory=OrderBytes(per_item=1.3, extra=0),
            tree=TreeShape(
                key="cuda",
                label="GPU: torch 2.13's CUDA block reduction (model): threads, then warp shuffles",
                combine=cuda_tree,
            ),
        ),
        Order(
            key="webgpu_tree",
            name="WebGPU workgroup tree (the kernel run on your GPU)",
            origin=ORIGIN_MODEL,
            bound="tree",
            description=f"{webgpu.LANES:,} invocations each add every {webgpu.LANES:,}-th value left to right; "
            f"each workgroup of {webgpu.WORKGROUP} halves its sums in shared memory; one invocation adds the "
            f"{webgpu.GROUPS} workgroup sums left to right. The exact order of the shader CPU vs GPU runs in "
            "your browser, which checks this model against your GPU's bits.",
            run=run_webgpu_tree,
            work={"float64": 1.0, "float32": 0.8, "float16": 1.5, "bfloat16": 1.2},
            memory=OrderBytes(per_item=0.1, extra=0),  # the lanes and one row, whatever n
        ),
        Order(
            key="kahan",
            name="Kahan compensated",
            origin=ORIGIN_ALGORITHM,
            bound="compensated",
            description="Carries each addition's rounding error forward; 1024 lanes at once, combined exactly, "
            "rounded once.",
            run=run_kahan,
            work={"float64": 1.4, "float32": 1.7, "float16": 14, "bfloat16": 3.2},
            memory=OrderBytes(per_item=1.1, extra=0),
        ),
        Order(
            key="neumaier",
            name="Neumaier compensated",
            origin=ORIGIN_ALGORITHM,
            bound="compensated",
            description="Kahan's improved variant that also handles terms larger than the running sum.",
            run=run_neumaier,
            work={"float64": 3.0, "float32": 4.2, "float16": 16, "bfloat16": 6},
            memory=OrderBytes(per_item=1.1, extra=1),
        ),
        Order(
            key="correct",
            name="Correctly rounded",
            origin=ORIGIN_EXACT,
            bound="exact",
            description="The exact sum, rounded once to the working dtype.",
            run=run_correct,
            work={"float64": 2.5, "float32": 1.1, "float16": 1.4, "bfloat16": 0.9},
            memory=OrderBytes(per_item=0.2, extra=0),
        ),
    ]
}
DEFAULT_ORDERS = ("sequential", "pairwise", "numpy", "torch_1", "torch_all", "cuda_model", "kahan", "correct")


def run_order(key: str, values: np.ndarray, working: str) -> OrderOutcome:
    """Run one order on the stored values, in the working dtype; time it."""
    order = ORDERS.get(key)
    if order is None:
        raise ValueError(f"unknown order {key!r}")
    given = SumInput(values=values, x=working_array(values, working), working=working, threads=available_threads())
    t0 = time.perf_counter()
    ran = order.run(given)
    prov = ran.provenance
    if prov is None:
        prov = {
            ORIGIN_ALGORITHM: f"computed live here with NumPy in {working}",
            ORIGIN_MODEL: f"a model of the order, computed here in {working}",
            ORIGIN_EXACT: "exact rational sum, one rounding",
            ORIGIN_LIVE: "computed live on this machine",
        }[order.origin] + ran.note
    return OrderOutcome(
        key=key, value=ran.value, seconds=time.perf_counter() - t0, provenance=prov, tree_depth=ran.depth
    )


def clamp_permutations(k: int, n: int) -> int:
    """How many random permutations fit the work budget (k * n <= 2e7) for this n."""
    return max(1, min(k, 20_000_000 // max(n, 1)))
