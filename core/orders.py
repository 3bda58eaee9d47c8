"""Summation orders: each a named algorithm whose every rounding happens in the working dtype.

The working dtype mirrors ``torch.sum(x, dtype=...)``: the stored values are first cast
to it (exactly, when it is at least as wide), and every addition then rounds to it.
All orders are vectorized: sequential sums use ``np.add.accumulate`` (a true left-to-right
loop in C, unlike ``np.sum``, which is pairwise), trees are computed level by level, and
compensated sums run across many lanes at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

from core.formats import FORMATS, round_to_format
from core.vectors import NUMPY_DTYPES

ORIGIN_LIVE = "live"  # the real library ran on this machine
ORIGIN_MODEL = "model"  # our reimplementation of a library's or device's order
ORIGIN_ALGORITHM = "algorithm"  # a textbook order computed here in the working dtype
ORIGIN_EXACT = "exact"


@dataclass(frozen=True)
class Order:
    key: str
    name: str
    origin: str
    bound: str  # "sequential", "pairwise", "compensated", "tree" or "exact": which a-priori bound applies
    description: str


@dataclass(frozen=True)
class OrderOutcome:
    key: str
    value: np.generic  # in the working dtype (torch's result dtype for the real torch sums)
    seconds: float
    provenance: str
    tree_depth: int | None = None  # additions on the longest path, for the "tree" bound


# ----------------------------------------------------------------------------- helpers


def working_array(values: np.ndarray, working: str) -> np.ndarray:
    """Cast stored values to the working dtype (exact unless narrowing)."""
    dt = NUMPY_DTYPES[working]
    return values if values.dtype == dt else values.astype(dt)


def sequential(x: np.ndarray) -> np.generic:
    """Left to right, each partial sum rounded to x's dtype."""
    if x.size == 0:
        return x.dtype.type(0)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is a result, not an error
        return np.add.accumulate(x)[-1]




def pairwise(x: np.ndarray) -> np.generic:
    """Plain pairwise tree: add neighbours level by level, (x0+x1), (x2+x3), ...

    The vector is padded with +0.0 to a power of two (adding +0 is exact), so this is
    the balanced binary tree over the original order; depth ceil(log2 n).
    """
    n = x.size
    if n == 0:
        return x.dtype.type(0)
    size = 1 << max(0, (n - 1).bit_length())
    level = np.zeros(size, dtype=x.dtype)
    level[:n] = x
    with np.errstate(over="ignore", invalid="ignore"):
        while level.size > 1:
            level = level[0::2] + level[1::2]
    return level[0]




LANES = 1024


def lane_length(n: int, lanes: int = LANES) -> int:
    """Values per lane in the vectorized compensated sums."""
    return -(-n // max(1, min(lanes, n))) if n else 0


def compensated(x: np.ndarray, variant: str = "kahan", lanes: int = LANES) -> np.generic:
    """Kahan or Neumaier compensated summation, vectorized across ``lanes`` lanes.

    Lane j sums x[j], x[j + lanes], ... with compensation, all lanes at once (one numpy
    step per row of the reshaped vector), every operation rounding to x's dtype. With one
    lane this is the textbook algorithm (Kahan returns s, Neumaier s + c). With several,
    the lanes' sums and corrections are combined exactly and rounded once.
    """
    n = x.size
    if n == 0:
        return x.dtype.type(0)
    lanes = max(1, min(lanes, n))
    rows = -(-n // lanes)
    padded = np.zeros(rows * lanes, dtype=x.dtype)
    padded[:n] = x
    s = np.zeros(lanes, dtype=x.dtype)
    c = np.zeros(lanes, dtype=x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for row in padded.reshape(rows, lanes):
            if variant == "kahan":
                y = row - c
                t = s + y
                c = (t - s) - y  # minus the part of y that t lost
                s = t
            else:  # Neumaier: the exact error of each addition, whichever operand is larger
                t = s + row
                big = np.abs(s) >= np.abs(row)
                c = c + np.where(big, (s - t) + row, (row - t) + s)
                s = t
    if lanes == 1:
        return s[0] if variant == "kahan" else (s + c)[0]
    from core.exact import exact_sum_fraction

    parts = np.concatenate([s, -c if variant == "kahan" else c])
    total = round_to_format(exact_sum_fraction(parts), FORMATS[_name_of(x.dtype)])
    with np.errstate(over="ignore"):
        return np.array(float(total)).astype(x.dtype)[()]


def _name_of(dtype: np.dtype) -> str:
    return next(name for name, dt in NUMPY_DTYPES.items() if dt == dtype)


def correctly_rounded(values: np.ndarray, working: str) -> np.generic:
    from core.exact import correctly_rounded_sum

    r = correctly_rounded_sum(values, FORMATS[working])
    with np.errstate(over="ignore"):
        return np.array(float(r)).astype(NUMPY_DTYPES[working])[()]


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
    from core.globalstate import torch_threads

    t = _to_torch(values)
    dtype = FORMATS[working].torch_dtype
    with torch_threads(threads):
        r = t.sum() if t.dtype == dtype else t.sum(dtype=dtype)
    return _from_torch(r)


def _to_torch(values: np.ndarray) -> torch.Tensor:
    if values.dtype == NUMPY_DTYPES["bfloat16"]:
        return torch.from_numpy(values.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(values if values.flags.writeable else values.copy())


def _from_torch(t: torch.Tensor) -> np.generic:
    if t.dtype == torch.bfloat16:
        return t.reshape(1).view(torch.int16).numpy().view(NUMPY_DTYPES["bfloat16"])[0]
    return t.reshape(1).numpy()[0]


BFLOAT16 = NUMPY_DTYPES["bfloat16"]


def available_threads() -> int:
    from core.globalstate import PROCESS_THREADS

    return PROCESS_THREADS


ORDERS: dict[str, Order] = {
    o.key: o
    for o in [
        Order("sequential", "Sequential, left to right", ORIGIN_ALGORITHM, "sequential",
              "((x0 + x1) + x2) + ...: one running sum, rounded after every addition."),
        Order("reverse", "Sequential, right to left", ORIGIN_ALGORITHM, "sequential",
              "The same running sum, starting from the last element."),
        Order("sorted_asc", "Sorted ascending", ORIGIN_ALGORITHM, "sequential",
              "Sequential after sorting from most negative to most positive."),
        Order("sorted_desc", "Sorted descending", ORIGIN_ALGORITHM, "sequential",
              "Sequential after sorting from most positive to most negative."),
        Order("sorted_abs", "Sorted by increasing |x|", ORIGIN_ALGORITHM, "sequential",
              "Small magnitudes first, so they meet each other before the large ones."),
        Order("pairwise", "Pairwise tree", ORIGIN_ALGORITHM, "pairwise",
              "Neighbours added level by level: a balanced binary tree of depth ceil(log2 n)."),
        Order("numpy", "NumPy np.sum", ORIGIN_LIVE, "tree",
              "The real np.sum on this machine: pairwise over blocks of 128 with 8 accumulators."),
        Order("numpy_model", "Model of NumPy's pairwise sum", ORIGIN_MODEL, "tree",
              "Our reimplementation of numpy's 128-block, 8-accumulator pairwise sum. Measured: bit-identical to "
              "np.sum in 10,151 of 10,151 cases per dtype (float16/32/64, n = 1 .. 10^7) on x86-64; the test "
              "suite checks it again on every machine it runs on."),
        Order("torch_1", "torch.sum, CPU, 1 thread", ORIGIN_LIVE, "tree",
              "The real torch.sum on this CPU with one intra-op thread."),
        Order("torch_all", "torch.sum, CPU, all threads", ORIGIN_LIVE, "tree",
              "The real torch.sum with every intra-op thread: contiguous chunks per thread, then combined."),
        Order("torch_model", "Model of torch's CPU cascade sum", ORIGIN_MODEL, "tree",
              "Our reimplementation of PyTorch's CPU cascade sum (SIMD lanes, 4 accumulators, chunks per thread). "
              "Measured: bit-identical to torch.sum in every tested case (4 dtypes, 1-8 threads, n up to 10^7) "
              "on torch 2.13 x86-64 with AVX2, AVX512 and generic kernel dispatch (the tests and the bundled "
              "recordings); ARM builds and other versions not checked."),
        Order("cuda_model", "Model of a CUDA block reduction", ORIGIN_MODEL, "tree",
              "Per-thread strided accumulation, shared-memory tree, warp shuffles, multi-block combine; "
              "a model of the CUDA reduce kernel torch 2.13 ships; checked against published GPU results, not yet "
              "against a recording of a real GPU."),
        Order("kahan", "Kahan compensated", ORIGIN_ALGORITHM, "compensated",
              "Carries each addition's rounding error forward; 1024 lanes at once, combined exactly, rounded once."),
        Order("neumaier", "Neumaier compensated", ORIGIN_ALGORITHM, "compensated",
              "Kahan's improved variant that also handles terms larger than the running sum."),
        Order("correct", "Correctly rounded", ORIGIN_EXACT, "exact",
              "The exact sum, rounded once to the working dtype."),
    ]
}
DEFAULT_ORDERS = ("sequential", "pairwise", "numpy", "torch_1", "torch_all", "cuda_model", "kahan", "correct")


def run_order(key: str, values: np.ndarray, working: str) -> OrderOutcome:
    """Run one order on the stored values, in the working dtype; time it."""
    if key not in ORDERS:
        raise ValueError(f"unknown order {key!r}")
    x = working_array(values, working)
    n = x.size
    t0 = time.perf_counter()
    depth = None
    threads = available_threads()
    prov = {
        ORIGIN_ALGORITHM: f"computed live here with NumPy in {working}",
        ORIGIN_MODEL: f"a model of the order, computed here in {working}",
        ORIGIN_EXACT: "exact rational sum, one rounding",
        ORIGIN_LIVE: "",  # set below with the library and thread count
    }[ORDERS[key].origin]
    if key == "sequential":
        v = sequential(x)
    elif key == "reverse":
        v = sequential(x[::-1])
    elif key == "sorted_asc":
        v = sequential(np.sort(x))
    elif key == "sorted_desc":
        v = sequential(np.sort(x)[::-1])
    elif key == "sorted_abs":
        v = sequential(x[np.argsort(np.abs(x), kind="stable")])
    elif key == "pairwise":
        v = pairwise(x)
    elif key == "numpy":
        with np.errstate(over="ignore", invalid="ignore"):
            v = np.sum(x) if n else x.dtype.type(0)
        depth = n - 1 if x.dtype == BFLOAT16 else tree_depth_numpy(n)
        prov = f"real np.sum, NumPy {np.__version__}, on this CPU"
    elif key == "numpy_model":
        from core.numpy_model import numpy_pairwise_model

        if x.dtype == BFLOAT16:  # NumPy's pairwise loop exists only for its own float types;
            v = sequential(x)  # for ml_dtypes' bfloat16, np.sum runs the generic loop, left to right
            depth = n - 1
            prov += " (bfloat16: NumPy sums left to right)"
        else:
            v = numpy_pairwise_model(x)
            depth = tree_depth_numpy(n)
            prov += " (bit-identical to np.sum in 10,151 of 10,151 tested cases)"
    elif key in ("torch_1", "torch_all"):
        k = 1 if key == "torch_1" else threads
        v = _torch_sum(values, working, k)
        depth = n - 1  # not derived: the sequential bound is valid for any order
        prov = f"real torch.sum, torch {torch.__version__}, this CPU, {k} thread{'s' if k > 1 else ''}"
    elif key == "torch_model":
        from core.torch_cpu_model import torch_cpu_sum_model

        v = torch_cpu_sum_model(x, threads=threads)
        depth = n - 1
        prov += f" ({threads} threads; bit-identical to torch.sum in every case tested on torch 2.13 x86-64)"
    elif key == "cuda_model":
        from core.cuda_model import cuda_config_for, cuda_launch, cuda_sum_model, tree_depth

        cfg = cuda_config_for(n, x.dtype)
        launch = cuda_launch(n, cfg)
        v = cuda_sum_model(x, cfg)
        depth = tree_depth(n, cfg, x.dtype)
        prov += (f" ({launch.blocks} blocks × {launch.threads_per_block} threads as chosen for "
                 f"{cfg.sm_count} SMs, H100/H200-like; not checked against a GPU)")
    elif key in ("kahan", "neumaier"):
        v = compensated(x, key)
        depth = lane_length(n)  # for the bound: values per lane
    elif key == "correct":
        v = correctly_rounded(values, working)
    else:
        raise ValueError(f"unknown order {key!r}")
    return OrderOutcome(key, v, time.perf_counter() - t0, prov, depth)


def clamp_permutations(k: int, n: int) -> int:
    """How many random permutations fit the work budget (k * n <= 2e7) for this n."""
    return max(1, min(k, 20_000_000 // max(n, 1)))
