"""What one request costs, and how much one request may spend.

**Work** is counted in *value operations*: one unit is one float32 value through one cheap
pass (a left-to-right ``np.add.accumulate``). Every weight below is a computation's cost
per value (or per training step) in those units, measured relative to that pass by
``benchmarks/bench_budget.py`` from the CPU time of the computing thread, so that other load on
the machine cancels out; that script prints every weight next to what it measures on the
machine that runs it. Weights are relative costs and carry over between machines far better
than seconds; the weights are rounded up (the model may overestimate, and should not
underestimate by much).

**Memory** is the most a computation holds at once while it runs, the vector it works on
included (tracemalloc peaks, measured by the same script), in bytes per value.

**The budget.** A request may use at most ``WORK_BUDGET`` units (``LONG_WORK_BUDGET`` for
training, which reports progress and stops when its visitor leaves) and ``MEMORY_BUDGET``
bytes; a page refuses a request above it with a message saying what to reduce. A request
above ``HEAVY_WORK`` or ``HEAVY_BYTES`` is *heavy*: it runs through ``core.crowd.gate.HEAVY``, a
few at a time. Sizing, checked by tests/core/test_budget.py:

* every page's defaults are below both heavy thresholds (at defaults nothing waits, and
  the smallest hosting tier, 690 MB, sees only small requests);
* at the caps, the defaults' footprint (at most 690 MB) plus the most that heavy requests
  can hold at once (two slots at most, ``MEMORY_BUDGET`` each) plus the byte-bounded caches
  (``core.crowd.bytecache``) stays within the largest tier, 2.7 GB, however many heavy visitors
  arrive: the rest wait for a slot.

Nothing here imports streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from core.arith.formats import ARITHMETIC, FORMATS, working_format
from core.arith.vectors import GENERATOR_REGISTRY
from core.kernels.orders import ORDERS

MB = 2**20

WORK_BUDGET = 1.2e9  # value operations per request
LONG_WORK_BUDGET = 1.2e10  # for training: interruptible, with progress
MEMORY_BUDGET = 512 * MB  # bytes held at once by one request
HEAVY_WORK = 4e8  # above this (or HEAVY_BYTES) a request waits for a slot of core.crowd.gate.HEAVY
HEAVY_BYTES = 64 * MB

HOSTING_SMALL = 690 * MB  # the smallest hosting tier: every page at its defaults must fit
HOSTING_LARGE = 2700 * MB  # the largest: the caps, with a crowd of heavy visitors

ITEMSIZE = {name: f.numpy_dtype.itemsize for name, f in FORMATS.items()}  # bytes a value, by stored format
_DT = tuple(ARITHMETIC)  # the formats sums accumulate in: a weight for each is measured


def _by_dtype(weights: dict[str, float]) -> dict[str, float]:
    """One weight per format that torch computes in, keyed by the format's name; every such format needs one."""
    if set(weights) != set(_DT):
        raise ValueError(f"weights are needed for exactly {_DT}, got {tuple(weights)}")
    return {dt: weights[dt] for dt in _DT}


# ---------------------------------------------------------------- summation lab weights
# Units per value, by the working format (the format every addition rounds to).
# Each order's weights live in its core.kernels.orders.ORDERS entry (``work``, ``memory``); these are views.
def order_work(key: str) -> dict[str, float]:
    return dict(ORDERS[key].work)


def order_bytes(key: str) -> tuple[float, float]:
    return ORDERS[key].memory


ORDER_WORK: dict[str, dict[str, float]] = {k: order_work(k) for k in ORDERS}
# The exact sum and the exact sum of |x|, by storage format. A one-byte format's exact sum counts its 256
# bit patterns (core.arith.exact): 2.6 ns a value against float32's 0.7 ns on the 2-core Intel Xeon VM.
BYTE_EXACT_WORK = 6.0
EXACT_WORK = {**_by_dtype({"float64": 4.6, "float32": 1.6, "float16": 3.1, "bfloat16": 1.8}),
              **{name: BYTE_EXACT_WORK for name, f in FORMATS.items() if f.numpy_dtype.itemsize == 1}}
CAST_WORK = 1.0  # casting to another working format
NARROWING_WORK = 6.0  # and, when that rounds, the exact sum of the rounding errors
# One random permutation and its left-to-right sum, per value: cache-friendly up to about 10^6 values.
PERMUTATION_WORK_SMALL, PERMUTATION_WORK_LARGE, PERMUTATION_SMALL_N = 13.0, 19.0, 1 << 20
# The running error: a fixed part (exact partial sums at 200 points) plus a pass over the data.
RUNNING_FIXED = _by_dtype({"float64": 2.2e7, "float32": 1.1e7, "float16": 1.1e7, "bfloat16": 1.1e7})
RUNNING_WORK = _by_dtype({"float64": 8.5, "float32": 3.6, "float16": 6.8, "bfloat16": 6.2})
# Generating a vector, per value (float64 draws, then one correct rounding to the storage format).
GENERATOR_WORK = {k: g.work for k, g in GENERATOR_REGISTRY.items()}  # each entry's weight (core.arith.vectors)
# Rounding to a format NumPy does not store itself (core.arith.formats.round_values: an integer rounding of the
# float64 bits, then an exact store), per value, by the format's bytes: bfloat16 4.1 ns, FP8 6.8-7.7 ns of CPU
# time, against 0.4 ns for NumPy's own float32 cast (10^6 normal values, the 2-core Intel Xeon VM, under load).
NARROW_ROUNDING_WORK = {2: 9.0, 1: 17.0}

# Bytes per value held at once while generating (float64 intermediates), and on top of the
# vector while an order runs, as multiples of the working format's item size (w) plus bytes.
GENERATOR_BYTES = {k: g.memory for k, g in GENERATOR_REGISTRY.items()}
NARROW_ROUNDING_BYTES = 0  # its temporaries are per piece of 2^16 values, whatever n
ORDER_BYTES: dict[str, tuple[float, float]] = {k: order_bytes(k) for k in ORDERS}  # (times w, plus bytes) per value
PERMUTATION_BYTES = 2  # times w: the shuffled copy and its running sums
RUNNING_BYTES = 1.2  # times w
MAX_PERMUTATION_VALUES = 20_000_000  # core.kernels.orders.clamp_permutations: k * n at most this

# ------------------------------------------------------------------- training weights
# One step of the paired run (A and B, with the comparison), float32, SGD with momentum, at the
# page's network size; float64 and Adam cost more.
TRAIN_PAIR_STEP = 5.5e5
TRAIN_DTYPE_FACTOR = {"float32": 1.0, "float64": 1.2}
TRAIN_OPTIMIZER_FACTOR = {"sgd_momentum": 1.0, "adam": 1.2}
TRAIN_BYTES_PER_STEP = 2_000  # records kept per step (losses, distances, bits)
TRAIN_BYTES_FIXED = 16 * MB  # the two networks, the data set, optimizer state, autograd buffers


@dataclass(frozen=True, kw_only=True)
class Cost:
    """A request's estimated work (value operations) and peak memory (bytes), with its parts."""

    work: float
    peak_bytes: float
    parts: tuple[tuple[str, float], ...] = ()  # (what, work), largest first
    long: bool = False  # interruptible work with progress (training): LONG_WORK_BUDGET applies

    @property
    def work_budget(self) -> float:
        return LONG_WORK_BUDGET if self.long else WORK_BUDGET

    @property
    def fits(self) -> bool:
        return self.work <= self.work_budget and self.peak_bytes <= MEMORY_BUDGET

    @property
    def heavy(self) -> bool:
        return self.work > HEAVY_WORK or self.peak_bytes > HEAVY_BYTES

    @property
    def share(self) -> float:
        """The largest fraction of the budget this request needs (above 1: over budget)."""
        return max(self.work / self.work_budget, self.peak_bytes / MEMORY_BUDGET)

    def summary(self) -> str:
        return f"about {amount(self.work)} value operations and {self.peak_bytes / MB:,.0f} MB of memory"

    def over(self) -> list[str]:
        """What exceeds the budget, in words (empty when it fits)."""
        out = []
        if self.work > self.work_budget:
            out.append(f"{amount(self.work)} value operations, {self.work / self.work_budget:.1f}× the "
                       f"{amount(self.work_budget)} one request may use")
        if self.peak_bytes > MEMORY_BUDGET:
            out.append(f"{self.peak_bytes / MB:,.0f} MB of memory at once, more than the {MEMORY_BUDGET / MB:,.0f} MB "
                       "one request may hold")
        return out


def amount(x: float) -> str:
    """1.8 billion, 450 million, 12,000."""
    for size, word in ((1e9, "billion"), (1e6, "million")):
        if x >= size:
            return f"{x / size:.2g} {word}" if x < 10 * size else f"{x / size:,.0f} {word}"
    return f"{x:,.0f}"


def _sorted_parts(parts: dict[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(((k, v) for k, v in parts.items() if v > 0), key=lambda kv: -kv[1]))


# ------------------------------------------------------------------------ summation lab


def permutations_done(k: int, n: int) -> int:
    """How many permutations the lab really sums (core.kernels.orders.clamp_permutations; none for n = 1)."""
    if k <= 0 or n <= 1:
        return 0
    return max(1, min(k, MAX_PERMUTATION_VALUES // max(n, 1)))


def permutations_note(k: int, n: int) -> str | None:
    """What the lab says next to its permutation control when the work budget sums fewer than asked
    (None when it sums them all): how many, and why (otherwise a visitor who asked for
    1,000 and got 20 is told nothing)."""
    done = permutations_done(k, n)
    if k <= 0 or done >= k:
        return None
    if n <= 1:
        return f"With n = {n} there is only one order: no permutations are summed (a link keeps {k:,})."
    return (f"At n = {n:,} the lab sums {done:,} of the {k:,} permutations asked for: at most "
            f"{MAX_PERMUTATION_VALUES:,} values of work in all (permutations × n). A link keeps {k:,}; "
            f"n ≤ {MAX_PERMUTATION_VALUES // k:,} sums them all.")


def vector_cost(generator: str, n: int, storage: str) -> tuple[float, float]:
    """(work, peak bytes) of generating a vector."""
    if generator == "large_one_minus_large":
        return 0.0, 0.0
    fmt = FORMATS[storage]
    narrow = not fmt.native_numpy
    work = GENERATOR_REGISTRY[generator].work + (NARROW_ROUNDING_WORK[fmt.numpy_dtype.itemsize] if narrow else 0)
    per = GENERATOR_REGISTRY[generator].memory + (NARROW_ROUNDING_BYTES if narrow else 0)
    return work * n, per * n


def sumlab_cost(n: int, storage: str, working: str, orders: Sequence[str], permutations: int,
                generator: str | None = None, running: bool = True) -> Cost:
    """The Summation lab's request: generate (when ``generator`` is given; pasted and uploaded
    vectors exist already), exact sums, every order, the permutation study, the running error."""
    working = working_format(storage, working)
    n = 3 if generator == "large_one_minus_large" else int(n)
    s, w = ITEMSIZE[storage], ITEMSIZE[working]
    parts: dict[str, float] = {}
    gen_work, gen_bytes = vector_cost(generator, n, storage) if generator else (0.0, 0.0)
    parts["generating the vector"] = gen_work
    parts["exact sums"] = EXACT_WORK[storage] * n
    held = s * n  # the vector
    transient = s * n  # |x| for the exact sum of magnitudes
    if working != storage:
        held += w * n
        parts["casting to the accumulation format"] = CAST_WORK * n
        if w < s:  # rounding errors of the cast, summed exactly
            parts["casting to the accumulation format"] += NARROWING_WORK * n
            transient = max(transient, 24 * n)
    for key in orders:
        parts[ORDERS[key].name] = order_work(key)[working] * n
        a, b = order_bytes(key)
        transient = max(transient, (a * w + b) * n)
    k = permutations_done(permutations, n)
    if k:
        weight = PERMUTATION_WORK_SMALL if n <= PERMUTATION_SMALL_N else PERMUTATION_WORK_LARGE
        parts[f"{k:,} random permutation{'s' if k > 1 else ''}"] = weight * k * n
        transient = max(transient, PERMUTATION_BYTES * w * n)
    if running and n > 1:
        parts["the running error"] = RUNNING_FIXED[working] + RUNNING_WORK[working] * n
        transient = max(transient, RUNNING_BYTES * w * n)
    peak = max(gen_bytes, held + transient)
    return Cost(work=sum(parts.values()), peak_bytes=peak, parts=_sorted_parts(parts))


def _largest_fitting(lo: int, hi: int, fits) -> int | None:
    """The largest x in [lo, hi] with fits(x), for a fits that holds up to some point; None if none."""
    if not fits(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _round_down(x: int) -> int:
    """Two significant digits, rounded down: 4,637,000 -> 4,600,000."""
    if x < 100:
        return x
    step = 10 ** (int(math.log10(x)) - 1)
    return x // step * step


@dataclass(frozen=True)
class Suggestion:
    """One change that brings a request within the budget: its words, and the settings it changes
    (keyword arguments of the cost function it was computed with)."""

    text: str
    change: dict


def sumlab_advice(n: int, storage: str, working: str, orders: Sequence[str], permutations: int,
                  generator: str | None = None) -> list[Suggestion]:
    """Ways to bring an over-budget lab request within the budget, each changing one setting."""
    def cost(**change) -> Cost:
        args = {"n": n, "storage": storage, "working": working, "orders": orders, "permutations": permutations,
                "generator": generator} | change
        return sumlab_cost(**args)

    resolved = working_format(storage, working)
    out = []
    if generator and generator != "large_one_minus_large":
        best = _largest_fitting(1, n, lambda m: cost(n=m).fits)
        if best is not None and best < n:
            out.append(Suggestion(f"n at most {_round_down(best):,} with these orders", {"n": _round_down(best)}))
    if len(orders) > 1:
        dropped, kept = [], list(orders)
        for key in sorted(orders, key=lambda k: -order_work(k)[resolved]):
            if cost(orders=kept).fits or len(kept) == 1:
                break
            kept.remove(key)
            dropped.append(key)
        if dropped and cost(orders=kept).fits:
            names = ", ".join(f"“{ORDERS[k].name}”" for k in dropped)
            out.append(Suggestion(f"without {names} (the most expensive order{'s' if len(dropped) > 1 else ''} "
                                  "here)", {"orders": tuple(kept)}))
    if permutations_done(permutations, n):
        fewer = _largest_fitting(0, permutations, lambda m: cost(permutations=m).fits)
        if fewer is not None and permutations_done(fewer, n) < permutations_done(permutations, n):
            out.append(Suggestion(f"at most {fewer:,} random permutations" if fewer else "no random permutations",
                                  {"permutations": fewer}))
    if resolved != storage and cost(working=storage).fits:
        out.append(Suggestion(f"accumulating in {storage}, the storage format", {"working": storage}))
    if storage == "float64" and cost(storage="float32").fits:
        out.append(Suggestion("float32 storage", {"storage": "float32"}))
    return out


# ------------------------------------------------------------------------ other pages


def cpu_vs_gpu_cost(n: int, dtype: str, generator: str, recordings: int = 0, gpus: int = 0,
                    cached: bool = False) -> Cost:
    """CPU vs GPU: the vector (generated and hashed once, unless ``cached`` in core.crowd.bytecache,
    which then also holds its bytes), its exact sum, torch.sum with 1 and all threads, each GPU,
    and the CUDA model (once, and once more per recording, an upper bound for GPU recordings)."""
    gen_work, gen_bytes = (0.0, 0.0) if cached else vector_cost(generator, n, dtype)
    s = ITEMSIZE[dtype]
    parts = {
        "generating the vector": gen_work,
        "checking the recordings' vector (SHA-256)": 0.0 if cached or not recordings else 1.0 * n,
        "the exact sum": ORDER_WORK["correct"][dtype] * n,
        "torch.sum with 1 and all threads": 2 * ORDER_WORK["torch_1"][dtype] * n,
        "each GPU (copying the vector there)": 1.0 * n * gpus,
        "the CUDA model": ORDER_WORK["cuda_model"][dtype] * n * (1 + recordings),
    }
    peak = max(gen_bytes, (0 if cached else s * n) + max(ORDER_BYTES["cuda_model"][0] * s, s + 8) * n)
    return Cost(work=sum(parts.values()), peak_bytes=peak, parts=_sorted_parts(parts))


def training_cost(steps: int, seeds: int = 1, dtype: str = "float32", optimizer: str = "sgd_momentum",
                  pairs: int = 1) -> Cost:
    """``seeds`` paired runs (A and B) of ``steps`` steps each, ``pairs`` such studies in a row."""
    per_step = TRAIN_PAIR_STEP * TRAIN_DTYPE_FACTOR.get(dtype, 1.2) * TRAIN_OPTIMIZER_FACTOR.get(optimizer, 1.2)
    runs = steps * seeds * pairs
    work = per_step * runs
    what = f"{seeds:,} seed{'s' if seeds > 1 else ''} × {steps:,} steps" + (f" × {pairs} pairs" if pairs > 1 else "")
    return Cost(
        work=work, peak_bytes=TRAIN_BYTES_FIXED + TRAIN_BYTES_PER_STEP * steps, parts=((what, work),), long=True
    )


def training_advice(steps: int, seeds: int, dtype: str = "float32",
                    optimizer: str = "sgd_momentum") -> list[Suggestion]:
    out = []
    fewer = _largest_fitting(1, seeds, lambda k: training_cost(steps, k, dtype, optimizer).fits)
    if fewer is not None and fewer < seeds:
        out.append(Suggestion(f"{fewer} seed{'s' if fewer > 1 else ''} or fewer at {steps:,} steps", {"seeds": fewer}))
    shorter = _largest_fitting(1, steps, lambda s: training_cost(s, seeds, dtype, optimizer).fits)
    if shorter is not None and shorter < steps:
        out.append(Suggestion(f"{_round_down(shorter):,} steps or fewer with {seeds} seeds",
                              {"steps": _round_down(shorter)}))
    return out
