"""Summation orders: each a named algorithm whose every rounding happens in the working dtype.

The working dtype mirrors ``torch.sum(x, dtype=...)``: the stored values are first cast
to it (exactly, when it is at least as wide), and every addition then rounds to it.
All orders are vectorized: sequential sums use ``np.add.accumulate`` (a true left-to-right
loop in C, unlike ``np.sum``, which is pairwise), trees are computed level by level, and
compensated sums run across many lanes at once.

``ORDERS`` is the registry: each ``Order`` carries its label, the function that runs it, its
a-priori bound, its cost weights (for core.crowd.budget), for small vectors how to write it out
as a tree of additions (for core.kernels.trees) and, where it has one, how it sums many short rows
at once (for core.diagnose.simulate). The algorithms themselves are in core.kernels.sums. Adding an
order is adding one entry.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from core.arith.exact import correctly_rounded_sum
from core.arith.formats import BFLOAT16 as BFLOAT16_FORMAT
from core.arith.formats import FORMATS, to_scalar, to_torch
from core.kernels import webgpu
from core.kernels.cuda_model import cuda_config_for, cuda_launch, cuda_sum_model, tree_depth
from core.kernels.numpy_model import numpy_pairwise_model
from core.kernels.order_types import Order, OrderBytes, OrderOutcome, Ran, RowShape, SumInput, TreeShape
from core.kernels.sums import (
    compensated,
    lane_length,
    lanes_depth,
    lanes_then_pairwise,
    pairwise,
    sequential,
    split_depth,
    split_sequential,
)
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.machines.globalstate import PROCESS_THREADS, torch_threads

ORIGIN_LIVE = "live"  # the real library ran on this machine
ORIGIN_MODEL = "model"  # our reimplementation of a library's or device's order
ORIGIN_ALGORITHM = "algorithm"  # a textbook order computed here in the working dtype
ORIGIN_EXACT = "exact"


# ----------------------------------------------------------------------------- helpers


def working_array(values: np.ndarray, working: str) -> np.ndarray:
    """Cast stored values to the working dtype (exact unless narrowing)."""
    dt = FORMATS[working].numpy_dtype
    return values if values.dtype == dt else values.astype(dt)


def correctly_rounded(values: np.ndarray, working: str) -> np.generic:
    r = correctly_rounded_sum(values, FORMATS[working])
    with np.errstate(over="ignore"):
        return np.array(float(r)).astype(FORMATS[working].numpy_dtype)[()]


def permutation_sums(x: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Left-to-right sums of k random permutations of x (a local generator; one O(n)
    shuffle and one sequential pass per permutation)."""
    rng = np.random.default_rng(seed)
    out = np.empty(k, dtype=x.dtype)
    for i in range(k):
        out[i] = sequential(rng.permutation(x))
    return out


def tree_depth_numpy(n: int) -> int:
    """Additions on the longest path of NumPy's pairwise sum (blocks of 128, 8 lanes)."""
    if n < 8:
        return max(n - 1, 0)
    levels = 0
    m = n
    while m > 128:
        m = m // 2 + 8  # the larger half, rounded to a multiple of 8 at most 8 larger
        levels += 1
    return levels + (m // 8) + 3 + 7


# -------------------------------------------------------------------------- the orders


def _torch_sum(values: np.ndarray, working: str, threads: int) -> np.generic:
    t = to_torch(values)
    dtype = FORMATS[working].torch_dtype
    with torch_threads(threads):
        r = t.sum() if t.dtype == dtype else t.sum(dtype=dtype)
    return to_scalar(r)


BFLOAT16 = BFLOAT16_FORMAT.numpy_dtype


def available_threads() -> int:
    return PROCESS_THREADS


def _numpy(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    with np.errstate(over="ignore", invalid="ignore"):
        v = np.sum(x) if n else x.dtype.type(0)
    depth = n - 1 if x.dtype == BFLOAT16 else tree_depth_numpy(n)
    return Ran(value=v, depth=depth, provenance=f"real np.sum, NumPy {np.__version__}, on this CPU")


def _numpy_model(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    if x.dtype == BFLOAT16:  # NumPy's pairwise loop exists only for its own float types;
        # for ml_dtypes' bfloat16, np.sum runs the generic loop, left to right
        return Ran(value=sequential(x), depth=n - 1, note=" (bfloat16: NumPy sums left to right)")
    return Ran(value=numpy_pairwise_model(x), depth=tree_depth_numpy(n),
               note=" (bit-identical to np.sum in 10,151 of 10,151 tested cases)")


def _torch(s: SumInput, k: int) -> Ran:
    # depth n - 1: not derived; the sequential bound is valid for any order
    return Ran(value=_torch_sum(s.values, s.working, k), depth=s.x.size - 1,
               provenance=f"real torch.sum, torch {torch.__version__}, this CPU, {k} thread{'s' if k > 1 else ''}")


def _torch_1(s: SumInput) -> Ran:
    return _torch(s, 1)


def _torch_all(s: SumInput) -> Ran:
    return _torch(s, s.threads)


def _torch_model(s: SumInput) -> Ran:
    return Ran(value=torch_cpu_sum_model(s.x, threads=s.threads), depth=s.x.size - 1,
               note=f" ({s.threads} threads; bit-identical to torch.sum in every case tested on torch 2.13 x86-64)")


def _cuda_model(s: SumInput) -> Ran:
    x, n = s.x, s.x.size
    cfg = cuda_config_for(n, x.dtype)
    launch = cuda_launch(n, cfg)
    return Ran(value=cuda_sum_model(x, cfg), depth=tree_depth(n, cfg, x.dtype),
               note=(f" ({launch.blocks} blocks × {launch.threads_per_block} threads as chosen for "
                     f"{cfg.sm_count} SMs, H100/H200-like; not checked against a GPU)"))


def _webgpu_tree(s: SumInput) -> Ran:
    return Ran(value=webgpu.workgroup_tree(s.x), depth=webgpu.workgroup_tree_depth(s.x.size))


# Module-level functions, not lambdas: a result that holds an Order can still be pickled (a lambda cannot).
def _kahan(s: SumInput) -> Ran:
    return Ran(value=compensated(s.x, "kahan"), depth=lane_length(s.x.size))  # depth: values per lane


def _neumaier(s: SumInput) -> Ran:
    return Ran(value=compensated(s.x, "neumaier"), depth=lane_length(s.x.size))


def _sequential(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x))


def _reverse(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x[::-1]))


def _sorted_asc(s: SumInput) -> Ran:
    return Ran(value=sequential(np.sort(s.x)))


def _sorted_desc(s: SumInput) -> Ran:
    return Ran(value=sequential(np.sort(s.x)[::-1]))


def _by_magnitude(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.abs(x), kind="stable")


def _sorted_abs(s: SumInput) -> Ran:
    return Ran(value=sequential(s.x[_by_magnitude(s.x)]))


def _pairwise(s: SumInput) -> Ran:
    return Ran(value=pairwise(s.x))


def _reverse_rows(x: np.ndarray) -> np.ndarray:
    return sequential(x[..., ::-1])


def _lanes_8(s: SumInput) -> Ran:
    return Ran(value=lanes_then_pairwise(s.x, 8), depth=lanes_depth(s.x.size, 8))


def _lanes_8_rows(x: np.ndarray) -> np.ndarray:
    return lanes_then_pairwise(x, 8)


def _lanes_32(s: SumInput) -> Ran:
    return Ran(value=lanes_then_pairwise(s.x, 32), depth=lanes_depth(s.x.size, 32))


def _lanes_32_rows(x: np.ndarray) -> np.ndarray:
    return lanes_then_pairwise(x, 32)


def _split_4(s: SumInput) -> Ran:
    return Ran(value=split_sequential(s.x, 4), depth=split_depth(s.x.size, 4))


def _split_4_rows(x: np.ndarray) -> np.ndarray:
    return split_sequential(x, 4)


def _correct(s: SumInput) -> Ran:
    return Ran(value=correctly_rounded(s.values, s.working))


def _reversed(x: np.ndarray) -> Sequence[int]:
    return range(x.size)[::-1]


def _by_magnitude_exact(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.abs(x.astype(np.float64)), kind="stable")


# ------------------------------------------------------------ the orders as trees of additions


def _chain(b, ids: list[int]) -> int:
    return b.chain(ids)


def _balanced(b, ids: list[int]) -> int:
    return b.balanced(ids)


def _numpy_tree(b, ids: list[int]) -> int:
    """NumPy's pairwise scheme for n <= 128: n < 8 sequential; else 8 strided accumulators, then the tail."""
    n = len(ids)
    if n < 8:
        return b.chain(ids)
    r = [b.chain(ids[j : n - n % 8 : 8]) for j in range(8)]
    root = b.add(b.add(b.add(r[0], r[1]), b.add(r[2], r[3])), b.add(b.add(r[4], r[5]), b.add(r[6], r[7])))
    for i in ids[n - n % 8 :]:
        root = b.add(root, i)
    return root


def _cuda_tree(b, ids: list[int]) -> int:
    """core.kernels.cuda_model's reduction for a small vector, addition by addition.

    For n <= 32 the kernel (``cuda_launch``, torch 2.13) runs one block of ``last_pow2(n)``
    threads without vector loads: thread t's accumulators hold elements t, t + T, ... (combined
    left to right; their +0 padding adds nothing), then the block's lanes combine by warp
    shuffles with decreasing offsets T/2, ..., 1: lane t adds lane t + offset.
    """
    n = len(ids)
    launch = cuda_launch(n)
    if launch.vectorized or launch.blocks != 1 or launch.threads_per_block > 32:
        raise ValueError(f"the CUDA tree is drawn for one warp-sized block, not for n = {n}")
    width = launch.threads_per_block
    lanes = [b.chain([ids[t + m * width] for m in range(launch.accumulators) if t + m * width < n])
             for t in range(width)]
    while len(lanes) > 1:  # shfl_down, offset = width/2, ..., 1
        half = len(lanes) // 2
        lanes = [b.add(lanes[t], lanes[t + half]) for t in range(half)]
    return lanes[0]


ORDERS: dict[str, Order] = {
    o.key: o
    for o in [
        Order(
            key="sequential",
            name="Sequential, left to right",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="((x0 + x1) + x2) + ...: one running sum, rounded after every addition.",
            run=_sequential,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.2, "bfloat16": 1.9},
            memory=OrderBytes(per_item=1, extra=0),
            tree=TreeShape(key="sequential", label="Sequential, left to right", combine=_chain),
            rows=RowShape(label="sequential", run=sequential),
        ),
        Order(
            key="reverse",
            name="Sequential, right to left",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="The same running sum, starting from the last element.",
            run=_reverse,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.2, "bfloat16": 1.9},
            memory=OrderBytes(per_item=1, extra=0),
            tree=TreeShape(key="reverse", label="Sequential, right to left", combine=_chain, leaves=_reversed),
            rows=RowShape(label="reverse", run=_reverse_rows),
        ),
        Order(
            key="sorted_asc",
            name="Sorted ascending",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Sequential after sorting from most negative to most positive.",
            run=_sorted_asc,
            work={"float64": 8, "float32": 3.5, "float16": 24, "bfloat16": 36},
            memory=OrderBytes(per_item=2, extra=0),
        ),
        Order(
            key="sorted_desc",
            name="Sorted descending",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Sequential after sorting from most positive to most negative.",
            run=_sorted_desc,
            work={"float64": 8, "float32": 3.5, "float16": 24, "bfloat16": 38},
            memory=OrderBytes(per_item=2, extra=0),
        ),
        Order(
            key="sorted_abs",
            name="Sorted by increasing |x|",
            origin=ORIGIN_ALGORITHM,
            bound="sequential",
            description="Small magnitudes first, so they meet each other before the large ones.",
            run=_sorted_abs,
            work={"float64": 60, "float32": 60, "float16": 55, "bfloat16": 56},
            memory=OrderBytes(per_item=2, extra=8),  # a stable argsort of |x|
            tree=TreeShape(
                key="sorted_abs", label="Sorted by increasing |x|", combine=_chain, leaves=_by_magnitude_exact
            ),
        ),
        Order(
            key="pairwise",
            name="Pairwise tree",
            origin=ORIGIN_ALGORITHM,
            bound="pairwise",
            description="Neighbours added level by level: a balanced binary tree of depth ceil(log2 n).",
            run=_pairwise,
            work={"float64": 1.5, "float32": 0.7, "float16": 3.8, "bfloat16": 1.0},
            memory=OrderBytes(per_item=2.6, extra=0),
            tree=TreeShape(key="pairwise", label="Pairwise tree", combine=_balanced),
            rows=RowShape(label="pairwise", run=pairwise),
        ),
        Order(
            key="lanes_8",
            name="8 lanes, then pairwise",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="Eight running sums, lane j over x[j], x[j + 8], ..., then the lanes added as a pairwise "
            "tree: the shape of a CPU's SIMD accumulators, not any one library's order.",
            run=_lanes_8,
            work={"float64": 2.0, "float32": 1.4, "float16": 3.8, "bfloat16": 2.4},
            memory=OrderBytes(per_item=2, extra=0),
            rows=RowShape(label="8 lanes, then pairwise (CPU SIMD-like)", run=_lanes_8_rows),
        ),
        Order(
            key="lanes_32",
            name="32 lanes, then pairwise",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="32 running sums, lane j over x[j], x[j + 32], ..., then the lanes added as a pairwise "
            "tree: the shape of a GPU warp's threads, not any one kernel's order.",
            run=_lanes_32,
            work={"float64": 2.4, "float32": 1.5, "float16": 3.9, "bfloat16": 2.5},
            memory=OrderBytes(per_item=2, extra=0),
            rows=RowShape(label="32 lanes, then pairwise (GPU warp-like)", run=_lanes_32_rows),
        ),
        Order(
            key="split_4",
            name="Split into 4 chunks",
            origin=ORIGIN_ALGORITHM,
            bound="tree",
            description="Four contiguous slices, each summed left to right, then their four sums left to right: "
            "a split-K reduction.",
            run=_split_4,
            work={"float64": 1.2, "float32": 1.1, "float16": 3.8, "bfloat16": 2.4},
            memory=OrderBytes(per_item=0.3, extra=0),
            rows=RowShape(label="split-K: 4 chunks", run=_split_4_rows),
        ),
        Order(
            key="numpy",
            name="NumPy np.sum",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real np.sum on this machine: pairwise over blocks of 128 with 8 accumulators.",
            run=_numpy,
            work={"float64": 0.2, "float32": 0.2, "float16": 0.8, "bfloat16": 2.0},
            memory=OrderBytes(per_item=0, extra=0),
            tree=TreeShape(
                key="numpy",
                label="NumPy's pairwise scheme (n < 8: sequential; else 8 accumulators + tail)",
                combine=_numpy_tree,
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
            run=_numpy_model,
            work={"float64": 5, "float32": 2.1, "float16": 3.1, "bfloat16": 2.0},
            memory=OrderBytes(per_item=0.5, extra=0),
        ),
        Order(
            key="torch_1",
            name="torch.sum, CPU, 1 thread",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real torch.sum on this CPU with one intra-op thread.",
            run=_torch_1,
            work={"float64": 0.7, "float32": 0.3, "float16": 0.3, "bfloat16": 0.3},
            memory=OrderBytes(per_item=1, extra=8),
        ),
        Order(
            key="torch_all",
            name="torch.sum, CPU, all threads",
            origin=ORIGIN_LIVE,
            bound="tree",
            description="The real torch.sum with every intra-op thread: contiguous chunks per thread, then combined.",
            run=_torch_all,
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
            run=_torch_model,
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
            run=_cuda_model,
            work={"float64": 2.1, "float32": 0.4, "float16": 1.1, "bfloat16": 0.6},
            memory=OrderBytes(per_item=1.3, extra=0),
            tree=TreeShape(
                key="cuda",
                label="GPU: torch 2.13's CUDA block reduction (model): threads, then warp shuffles",
                combine=_cuda_tree,
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
            run=_webgpu_tree,
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
            run=_kahan,
            work={"float64": 1.4, "float32": 1.7, "float16": 14, "bfloat16": 3.2},
            memory=OrderBytes(per_item=1.1, extra=0),
        ),
        Order(
            key="neumaier",
            name="Neumaier compensated",
            origin=ORIGIN_ALGORITHM,
            bound="compensated",
            description="Kahan's improved variant that also handles terms larger than the running sum.",
            run=_neumaier,
            work={"float64": 3.0, "float32": 4.2, "float16": 16, "bfloat16": 6},
            memory=OrderBytes(per_item=1.1, extra=1),
        ),
        Order(
            key="correct",
            name="Correctly rounded",
            origin=ORIGIN_EXACT,
            bound="exact",
            description="The exact sum, rounded once to the working dtype.",
            run=_correct,
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
