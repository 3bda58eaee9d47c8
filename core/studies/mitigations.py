"""Mitigations and what they cost, measured on the machine that runs this code.

* float64 versus float32 throughput (core.machines.timing), with the cited vendor ratios of
  core.studies.peak_rates beside it;
* wider accumulation (``torch.sum(x, dtype=...)``): errors and cost;
* determinism is not reproducibility: run-to-run, thread count, batch size;
* the order-independent sum (core.kernels.reprosum) against torch.sum and np.sum;
* is a mismatch normal or a bug: the Diagnose page's verdict on a one-row-against-batch pair and on a broken one;
* the Mitigations page's studies: each fix applied to fixed vectors and a fixed training pair.

Timings use ``time.perf_counter`` medians after a warm-up; on a GPU they synchronize.
Only core.machines.globalstate.torch_threads changes a global setting (locked and restored).
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

import numpy as np
import torch

from core.arith.exact import exact_sum_fraction, shortest_repr
from core.arith.formats import FORMATS, Exact, bits_of, format_of, value_of_bits
from core.arith.metrics import exact_value
from core.arith.ulps import ulp, ulp_distance_array
from core.arith.vectors import VectorSpec, generate
from core.crowd.bytecache import RESULTS
from core.diagnose.verdict import diagnose
from core.kernels.orders import DEFAULT_ORDERS, ORDERS, ORIGIN_ALGORITHM, ORIGIN_LIVE, run_order
from core.kernels.reprosum import reproducible_sum, reproducible_sum_devices
from core.machines import timing
from core.machines.devices import Device
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.machines.progress import OnProgress, Progress, report
from core.machines.timing import Throughput, interleaved_times, median_and_quartiles
from core.studies.sumlab import LabResult, run_lab
from core.training.mlp import TrainSettings
from core.training.pair import PairedRun
from core.training.seeds import summarize

# ---------------------------------------------------------------- wider accumulation


@dataclass(frozen=True, kw_only=True)
class AccumulationRow:
    storage: str
    accumulate: str
    threads: int
    value: Exact
    abs_error: Exact
    seconds: float  # median over the repeats of the fastest of ``inner`` calls
    # time / the plain one-thread sum's time, per repeat: median and quartiles of the same per-repeat ratios
    vs_base: float = 1.0
    vs_base_iqr: tuple[float, float] = (1.0, 1.0)

    # a result is shared by every viewer of the page: its shortest decimal is found once, not once per view
    @cached_property
    def value_text(self) -> str:
        """The sum, shortest decimal in its accumulation format."""
        return shortest_repr(self.value, FORMATS[self.accumulate])


def wider_accumulation(x: torch.Tensor, wider: torch.dtype, repeats: int = 7, inner: int = 3) -> list[AccumulationRow]:
    """torch.sum(x) and torch.sum(x, dtype=wider), each with 1 and all threads, against the exact sum.

    Timed interleaved: each repeat times every row once, in an order that rotates from repeat to
    repeat, each as the fastest of ``inner`` consecutive calls, so a slow phase of a shared machine
    hits every row alike; a row's time is the median over the repeats, and its ratio to the plain
    one-thread sum is the median and quartiles of the per-repeat ratios (one statistic, one sample).
    A thread count above 1 still pays when another process holds a core: the sum waits at its end for
    its slowest thread (see ``cpu_load``)."""
    exact = exact_sum_fraction(x)
    threads_all = PROCESS_THREADS
    keys = [(dt, threads) for dt in (x.dtype, wider) for threads in sorted({1, threads_all})]

    def call(dt):
        return x.sum() if dt == x.dtype else x.sum(dtype=dt)

    results = {}
    for dt, threads in keys:  # the values, and a warm-up of each row
        with torch_threads(threads):
            results[(dt, threads)] = call(dt)
            call(dt)
    times: dict[tuple, list[float]] = {k: [] for k in keys}
    for i in range(repeats):
        r = i % len(keys)
        for k in keys[r:] + keys[:r]:
            dt, threads = k
            with torch_threads(threads):
                best = math.inf
                for _ in range(inner):
                    t0 = time.perf_counter()
                    call(dt)
                    best = min(best, time.perf_counter() - t0)
            times[k].append(best)
    base = times[keys[0]]
    rows = []
    for k in keys:
        dt, threads = k
        r = results[k]
        fmt = format_of(r.dtype)
        value = _exact(r)
        err = abs(value - exact) if not isinstance(value, float) else float("inf")
        med, iqr = median_and_quartiles([a / b for a, b in zip(times[k], base, strict=True)])
        rows.append(
            AccumulationRow(
                storage=format_of(x.dtype).name,
                accumulate=fmt.name,
                threads=threads,
                value=value,
                abs_error=err,
                seconds=statistics.median(times[k]),
                vs_base=med,
                vs_base_iqr=iqr,
            )
        )
    return rows


def _exact(t: torch.Tensor) -> Exact:
    return value_of_bits(bits_of(t), format_of(t.dtype))


# --------------------------------------------------------------------------- determinism


@dataclass(frozen=True, kw_only=True)
class DeterminismResult:
    repeats: int
    distinct_by_threads: dict[int, int]  # thread count -> number of distinct results over repeats
    values_by_threads: dict[int, int]  # thread count -> bit pattern of the result
    mm_shape: tuple[int, int, int]
    mm_differing: int  # elements where mm(a[:1], b) != mm(a, b)[:1]
    mm_max_ulps: int


MM_SHAPE = (64, 2048, 1024)  # a: m x k, b: k x n (float32)


def _one_row_and_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """a, b, row 0 of mm(a[:1], b) and row 0 of mm(a, b): the same products, as one row and in a batch."""
    g = torch.Generator().manual_seed(seed)
    m, k, n = MM_SHAPE
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    return a, b, torch.mm(a[:1], b)[0], torch.mm(a, b)[0]


def determinism(x: torch.Tensor, repeats: int = 5, seed: int = 0) -> DeterminismResult:
    """Run-to-run (same threads), thread count, and batch size (mm of one row vs of all rows)."""
    counts = sorted({1, PROCESS_THREADS})
    distinct, values = {}, {}
    for t in counts:
        with torch_threads(t):
            bits = {bits_of(x.sum()) for _ in range(repeats)}
        distinct[t] = len(bits)
        values[t] = next(iter(bits))
    _, _, one, batch = _one_row_and_batch(seed)
    diff = one != batch
    max_ulps = int(ulp_distance_array(one.numpy(), batch.numpy()).max(initial=0))
    return DeterminismResult(
        repeats=repeats,
        distinct_by_threads=distinct,
        values_by_threads=values,
        mm_shape=MM_SHAPE,
        mm_differing=int(diff.sum()),
        mm_max_ulps=max_ulps,
    )


@dataclass(frozen=True, kw_only=True)
class MismatchCheck:
    """Is a mismatch normal or a bug? The Diagnose page's verdict (core.diagnose.verdict) on two live cases:
    one row of a matrix product computed alone against the same row computed in a batch (normal: another
    order of the same sums), and the same pair with one output's sign flipped (what a bug can look like)."""

    outputs: int
    differing: int
    k: int  # terms summed into each output
    normal_verdict: str
    normal_worst: float  # the largest |difference| over its rounding envelope (below 1: inside it)
    broken_verdict: str
    broken_worst: float


def mismatch_check(seed: int = 0) -> MismatchCheck:
    a, b, one, batch = _one_row_and_batch(seed)
    normal = diagnose(one[None], batch[None], inputs=(a[:1], b), reduced_precision="none")
    broken_row = batch.clone()
    broken_row[0] = -broken_row[0]
    broken = diagnose(one[None], broken_row[None], inputs=(a[:1], b), reduced_precision="none")
    return MismatchCheck(outputs=one.numel(), differing=int((one != batch).sum()), k=MM_SHAPE[1],
                         normal_verdict=str(normal.verdict), normal_worst=float(normal.envelopes[0].worst_ratio),
                         broken_verdict=str(broken.verdict), broken_worst=float(broken.envelopes[0].worst_ratio))


@dataclass(frozen=True, kw_only=True)
class ReproducibleSumCost:
    """reproducible_sum against torch.sum and np.sum on the same float32 vector."""

    n: int
    repeats: int
    threads: int
    seconds: float  # median over the repeats, reproducible_sum
    torch_seconds: float  # median over the repeats, torch.sum
    numpy_seconds: float  # median over the repeats, np.sum
    vs_torch: float  # median over the repeats of (reproducible_sum time / torch.sum time)
    vs_torch_iqr: tuple[float, float]  # quartiles of that ratio over the repeats
    vs_numpy: float
    vs_numpy_iqr: tuple[float, float]


def reproducible_sum_cost(n: int = 10_000_000, repeats: int = 21, inner: int = 3, seed: int = 0,
                          budget_s: float | None = None) -> ReproducibleSumCost:
    """Time reproducible_sum, torch.sum and np.sum on one vector of n standard normal
    float32 values (CPU, this process's threads), robustly on a busy machine.

    After a warm-up, each repeat times the three back to back, in an order that rotates
    from repeat to repeat, each as the fastest of ``inner`` consecutive calls (a call that
    another process preempted does not count), and forms the two ratios within the
    repeat, so a slow phase of the machine slows both sides of a ratio alike. Reported:
    the median ratio over the repeats and its quartiles. With ``budget_s``, repeats stop
    once that many seconds have passed (after at least 5): a page must not hang on a busy
    machine; ``repeats`` then says how many were made.
    """
    a = np.random.default_rng(seed).standard_normal(n).astype(np.float32)
    t = torch.from_numpy(a)
    times = interleaved_times({"repro": lambda: reproducible_sum(t), "torch": lambda: t.sum(),
                               "numpy": lambda: np.sum(a)}, repeats, inner, budget_s)

    def summary(other: str) -> tuple[float, tuple[float, float]]:
        return median_and_quartiles([r / o for r, o in zip(times["repro"], times[other], strict=True)])

    (vs_torch, torch_iqr), (vs_numpy, numpy_iqr) = summary("torch"), summary("numpy")
    med = {k: statistics.median(v) for k, v in times.items()}
    return ReproducibleSumCost(
        n=n,
        repeats=len(times["repro"]),
        threads=torch.get_num_threads(),
        seconds=med["repro"],
        torch_seconds=med["torch"],
        numpy_seconds=med["numpy"],
        vs_torch=vs_torch,
        vs_torch_iqr=torch_iqr,
        vs_numpy=vs_numpy,
        vs_numpy_iqr=numpy_iqr,
    )


# ------------------------------------------------------------------ the page's studies

DEFAULT_VECTOR = VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")  # the Summation lab's default vector
HARD_VECTOR = VectorSpec(kind="ill_conditioned", n=100_000, seed=0, storage="float32", condition=1e12)
# The Summation lab's default orders that a program on this CPU runs (live, or a textbook algorithm; not the GPU
# model, nor the correctly rounded sum, which no order changes), and the two reorderings a programmer tries first
LAB_ORDERS = tuple(k for k, o in ORDERS.items() if k in ("reverse", "sorted_abs")
                   or (k in DEFAULT_ORDERS and o.origin in (ORIGIN_LIVE, ORIGIN_ALGORITHM)))
STORAGE_FORMATS = ("float32", "float16", "bfloat16")
WIDER = {"float32": "float64", "float16": "float32", "bfloat16": "float32"}


# ------------------------------------------------------------------------- float64


@dataclass(frozen=True, kw_only=True)
class PrecisionPair:
    """The training pair (default settings) in one format."""

    dtype: str
    steps: int
    first_rel_1pct: int | None  # first step more than 1% apart; None within ``steps``
    final_distance: float  # ‖θA − θB‖ after the last step


PRECISION_DTYPES = ("float32", "float64")


def training_pair(dtype: str) -> PrecisionPair:
    """The default pair trained in ``dtype``, once per process while it stays in the shared results
    cache (simultaneous callers wait for one training; ``warm_up`` may have trained it already)."""

    def compute() -> PrecisionPair:
        run = PairedRun(TrainSettings(dtype=dtype))
        recs = run.run(run.settings.steps)
        return PrecisionPair(
            dtype=dtype,
            steps=run.settings.steps,
            first_rel_1pct=summarize(recs).first_rel_1pct,
            final_distance=recs[-1].param_distance,
        )

    return RESULTS.get_or_compute(("mitigations-pair", dtype), compute)


def warm_up() -> None:
    """Train the page's two pairs now (a server calls this at its start, in a thread of its own), so
    the first visitor of a fresh server reads their numbers without waiting for them."""
    for dtype in PRECISION_DTYPES:
        training_pair(dtype)


@dataclass(frozen=True)
class ThroughputRun:
    rows: tuple[Throughput, ...]
    failures: tuple[str, ...]  # one message per device whose measurement failed
    torch_version: str

    def first(self, op: str) -> Throughput | None:
        return next((t for t in self.rows if t.op == op), None)


def measure_devices(devices: list[Device], on_progress: OnProgress | None = None) -> ThroughputRun:
    """float32 against float64 on every device (core.machines.timing.measure_throughput); a device that
    fails is reported and does not take the others' numbers down. ``on_progress`` counts devices
    (a fraction of one while its repeats run), its ``what`` the device's repeat."""
    rows, failures = [], []
    for i, d in enumerate(devices):
        def each(p: Progress, i: int = i) -> None:
            report(on_progress, done=i + p.fraction, total=len(devices), what=p.what)
        try:
            rows += timing.measure_throughput(d, on_progress=each)
        except RuntimeError as err:
            failures.append(f"{d.name}: {err}")
    return ThroughputRun(tuple(rows), tuple(failures), torch.__version__)


def lab(working: str, spec: VectorSpec = DEFAULT_VECTOR) -> LabResult:
    """The Summation lab's orders on a float32 vector, accumulating in ``working``."""
    return run_lab(generate(spec).values, "float32", working, LAB_ORDERS)


@dataclass(frozen=True, kw_only=True)
class AccumulationError:
    order: str
    error32: Fraction  # |error| against the exact sum, accumulating in float32
    error64: Fraction  # the same order accumulating in float64
    shrink: Fraction | None  # error32 / error64; None when float64 is exact


def accumulation_errors(in32: LabResult, in64: LabResult) -> tuple[AccumulationError, ...]:
    """Order by order, how much smaller the error is when the same values are summed in float64."""
    return tuple(AccumulationError(order=a.order.name, error32=a.metrics.abs_error, error64=b.metrics.abs_error,
                                   shrink=a.metrics.abs_error / b.metrics.abs_error if b.metrics.abs_error else None)
                 for a, b in zip(in32.rows, in64.rows, strict=True))


def distinct_results(result: LabResult) -> int:
    """How many different values the lab's orders gave."""
    return len({r.metrics.value for r in result.rows})


# ---------------------------------------------------------------- wider accumulation


@dataclass(frozen=True)
class WiderStudy:
    storage: str
    rows: tuple[AccumulationRow, ...]
    n: int = 1_000_000

    @property
    def base(self) -> AccumulationRow:
        """Plain torch.sum on one thread."""
        return next(r for r in self.rows if r.accumulate == self.storage and r.threads == 1)

    @property
    def wide(self) -> AccumulationRow:
        """torch.sum with the wider dtype on one thread."""
        return next(r for r in self.rows if r.accumulate != self.storage and r.threads == 1)

    @property
    def slowdown(self) -> float:
        """The wider sum's time over the plain one's (one thread): the median of the per-repeat ratios."""
        return self.wide.vs_base

    @property
    def threads_slower(self) -> tuple[AccumulationRow, ...]:
        """Rows on more than one thread that took longer than the same sum on one thread (median ratio)."""
        one = {r.accumulate: r.vs_base for r in self.rows if r.threads == 1}
        return tuple(r for r in self.rows if r.threads > 1 and r.vs_base > one[r.accumulate])

    @property
    def wide_differs_across_threads(self) -> bool:
        return len({r.value for r in self.rows if r.accumulate != self.storage}) > 1

    @property
    def copy_bytes(self) -> int:
        """The wider copy of the input that torch.sum(x, dtype=wider) makes before it reduces (torch.sum's
        documentation: "the input tensor is casted to dtype before the operation is performed")."""
        return self.n * FORMATS[WIDER[self.storage]].width // 8

    @property
    def input_bytes(self) -> int:
        return self.n * FORMATS[self.storage].width // 8

    @property
    def threads_errors(self) -> dict[int, float]:
        """The plain sum's |error| in ULPs of its own (stored-format) result, by thread count: at most a half
        where the result is a float32 total rounded once to the format."""
        fmt = FORMATS[self.storage]
        return {r.threads: float(abs(Fraction(r.abs_error)) / ulp(r.value, fmt))
                for r in self.rows if r.accumulate == self.storage}


def wider_study(storage: str, n: int = 1_000_000) -> WiderStudy:
    """``n`` normal values stored in ``storage``, summed by torch.sum plainly and one format wider."""
    if storage not in WIDER:
        raise ValueError(f"storage must be one of {', '.join(WIDER)}")
    v = generate(VectorSpec(kind="normal", n=n, seed=0, storage=storage))
    t = torch.from_numpy(v.values.astype(np.float32)).to(FORMATS[storage].torch_dtype)
    return WiderStudy(storage, tuple(wider_accumulation(t, FORMATS[WIDER[storage]].torch_dtype)), n)


# --------------------------------------------------------------------- determinism


def determinism_study(spec: VectorSpec = DEFAULT_VECTOR) -> DeterminismResult:
    return determinism(torch.from_numpy(generate(spec).values.copy()))


# ------------------------------------------------------------ order-independent sum


@dataclass(frozen=True, kw_only=True)
class ReproducibleStudy:
    ordinary: tuple[tuple[str, str], ...]  # (order, its float32 sum, shortest decimal)
    shuffles: int
    shuffled_bits: tuple[int, ...]  # distinct float32 bit patterns of the order-independent sum over the shuffles
    devices: tuple[tuple[str, int], ...]  # (where, bits) of the order-independent sum

    @property
    def distinct_ordinary(self) -> int:
        return len({value for _, value in self.ordinary})

    @cached_property  # found once per result, which every viewer shares
    def value(self) -> str:
        """The order-independent sum (the first shuffle's), shortest decimal."""
        fmt = FORMATS["float32"]
        return shortest_repr(value_of_bits(self.shuffled_bits[0], fmt), fmt)


def reproducible_study(spec: VectorSpec = DEFAULT_VECTOR, shuffles: int = 5, seed: int = 7) -> ReproducibleStudy:
    """The lab's ordinary orders against the order-independent sum, over ``shuffles`` orders of the
    values (the first unshuffled; the others from a seeded generator) and on every device."""
    fmt = FORMATS["float32"]
    v = generate(spec).values
    ordinary = tuple((ORDERS[key].name, shortest_repr(exact_value(run_order(key, v, "float32").value, fmt), fmt))
                     for key in LAB_ORDERS)
    rng = np.random.default_rng(seed)
    bits: list[int] = []
    for i in range(shuffles):
        perm = v if i == 0 else v[rng.permutation(v.size)]
        b = bits_of(reproducible_sum(torch.from_numpy(np.array(perm))))
        if b not in bits:
            bits.append(b)
    return ReproducibleStudy(ordinary=ordinary, shuffles=shuffles, shuffled_bits=tuple(bits),
                             devices=tuple(reproducible_sum_devices(torch.from_numpy(v.copy()))))
