"""The summation lab: run a panel of orders on one vector and measure each exactly."""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Hashable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.exact import exact_sum_fraction, to_mpf
from core.arith.formats import FORMATS, Exact, FloatFormat, round_to_format, working_format
from core.arith.metrics import ErrorReport, a_priori_bound, evaluate, exact_value, gamma, kappa, measure
from core.arith.metrics import relative_error as relative_error  # pages/non_associativity.py imports it from here
from core.arith.ulps import error_in_ulps
from core.arith.vectors import Vector, VectorSpec, generate
from core.crowd import budget
from core.crowd.bytecache import RESULTS, vector_for
from core.kernels.orders import (
    DEFAULT_ORDERS,
    ORDERS,
    Order,
    OrderOutcome,
    available_threads,
    clamp_permutations,
    permutation_sums,
    run_order,
    working_array,
)
from core.kernels.torch_cpu_model import thread_chunks
from core.kernels.trees import MAX_TREE_N, Tree, build_tree
from core.machines.progress import OnProgress, report

WORKING_CHOICES = ("same", "float32", "float64")
MAX_PERMUTATIONS = 1000


@dataclass(frozen=True)
class OrderRow:
    order: Order
    outcome: OrderOutcome
    metrics: ErrorReport


@dataclass(frozen=True, kw_only=True)
class PermutationStudy:
    k: int
    seed: int
    values: np.ndarray  # k results, working dtype
    distinct: int
    metrics_min_max: tuple[ErrorReport, ErrorReport]  # the lowest and highest result


@dataclass(frozen=True, kw_only=True)
class LabResult:
    n: int
    storage: str
    working: str
    exact: Exact  # exact sum of the stored values
    sum_abs: Fraction
    kappa: float  # inf when the exact sum is 0, nan with non-finite data
    rows: tuple[OrderRow, ...]
    permutations: PermutationStudy | None
    cast_note: str | None  # set when casting to the working dtype rounds values
    bound_sum: Fraction | None = None  # Σ|x| of the values summed (after the cast); None: no finite bound
    cast_error: Fraction | None = None  # exact total of the cast's rounding errors; None: no narrowing cast

    @property
    def fmt(self) -> FloatFormat:
        return FORMATS[self.working]

    @property
    def exact_mpf(self):
        return to_mpf(self.exact)

    @property
    def exact_bits(self) -> int:
        """Significant bits of the exact sum (what an mpf needs to hold it unrounded)."""
        return self.exact_mpf._mpf_[3]

    @property
    def correctly_rounded(self) -> Exact:
        return round_to_format(self.exact, self.fmt)

    @property
    def distinct_results(self) -> int:
        """How many different bit patterns the orders gave."""
        return len({r.metrics.bits for r in self.rows})

    @property
    def smallest_error(self) -> OrderRow | None:
        """The order with the smallest |error| in ULPs (None when no error is finite)."""
        finite = [r for r in self.rows if math.isfinite(r.metrics.ulps)]
        return min(finite, key=lambda r: abs(r.metrics.ulps)) if finite else None

    @property
    def largest_error(self) -> OrderRow | None:
        """The order with the largest finite |error| in ULPs (None when no error is finite)."""
        finite = [r for r in self.rows if math.isfinite(r.metrics.ulps)]
        return max(finite, key=lambda r: abs(r.metrics.ulps)) if finite else None

    @property
    def outside_bound(self) -> list[str]:
        """Names of the orders whose error exceeds their a-priori bound (a bug if any)."""
        return [r.order.name for r in self.rows if r.metrics.within_bound is False]

    def permutation_ulps(self) -> list[float]:
        """Each random permutation's error in ULPs of the exact sum, where finite (a sum that overflowed, or a
        nonzero sum of an exact 0, is left out); [] without the study or a finite exact sum."""
        if self.permutations is None or isinstance(self.exact, float):
            return []
        errors = (error_in_ulps(exact_value(v, self.fmt), self.exact, self.fmt) for v in self.permutations.values)
        return [e for e in errors if math.isfinite(e)]

    @property
    def shows_trees(self) -> bool:
        """Small enough, and finite, for every partial sum to be drawn."""
        return self.n <= MAX_TREE_N and not isinstance(self.exact, float)


def _bound(order: Order, outcome: OrderOutcome, n: int, sum_abs: Fraction, fmt: FloatFormat,
           cast_error: Fraction | None):
    """The order's bound for the values it summed, plus the exact error of casting them (if any)."""
    b = a_priori_bound(order.bound, n, sum_abs, fmt, outcome.tree_depth)
    if b is not None and cast_error is not None:
        b += cast_error
    return b


def run_orders(values: np.ndarray, storage: str, working: str, orders: tuple[str, ...],
               on_progress: OnProgress | None = None) -> LabResult:
    """Every requested order on the stored values, with exact errors and bounds (no permutations).

    The exact sums (of x, of |x|, and of the cast's errors) are computed once and serve every order.
    ``on_progress`` is told of each order before it runs (the orders done so far, its name in ``what``); it
    may raise to stop the computation.
    """
    working = working_format(storage, working)
    fmt = FORMATS[working]
    exact = exact_sum_fraction(values)
    abs_sum = exact_sum_fraction(np.abs(values))
    finite = not isinstance(abs_sum, float)
    sum_abs = abs_sum if finite else Fraction(0)
    condition = kappa(exact, abs_sum)
    xw = working_array(values, working)
    cast = bool(xw.dtype != values.dtype and values.dtype.itemsize > xw.dtype.itemsize)
    cast_note, cast_error, bound_sum = None, None, sum_abs
    if cast and finite:
        # float64 -> float32: each value's rounding error is exact in float64, so its total is exact
        with np.errstate(over="ignore", invalid="ignore"):
            diff = np.abs(xw.astype(np.float64) - values)
        cast_error = exact_sum_fraction(diff)
        bound_sum = exact_sum_fraction(np.abs(xw))
        if isinstance(cast_error, float) or isinstance(bound_sum, float):
            finite = False  # a value overflowed the working format: no finite bound
        elif cast_error:
            cast_note = f"Casting to {working} rounded some values: the errors include that rounding."
    rows = []
    for i, key in enumerate(orders):
        order = ORDERS[key]
        report(on_progress, done=i, total=len(orders), what=f"{order.name} (order {i + 1} of {len(orders)})")
        outcome = run_order(key, values, working)
        bound = _bound(order, outcome, values.size, bound_sum, fmt, cast_error) if finite else None
        rows.append(OrderRow(order, outcome, evaluate(outcome.value, exact, fmt, bound)))
    return LabResult(n=values.size, storage=storage, working=working, exact=exact, sum_abs=sum_abs, kappa=condition,
                     rows=tuple(rows), permutations=None, cast_note=cast_note,
                     bound_sum=bound_sum if finite else None, cast_error=cast_error if finite else None)


def permutation_study(values: np.ndarray, result: LabResult, permutations: int, perm_seed: int,
                      on_progress: OnProgress | None = None) -> PermutationStudy | None:
    """Left-to-right sums of random shuffles of the values, measured against ``result``'s exact sum
    (None when no permutation is asked for or there is only one value)."""
    if permutations <= 0 or values.size <= 1:
        return None
    fmt = result.fmt
    xw = working_array(values, result.working)
    k = clamp_permutations(min(permutations, MAX_PERMUTATIONS), values.size)
    report(on_progress, done=0, total=k, what=f"{k:,} random permutation{'s' if k > 1 else ''}")
    sums = permutation_sums(xw, k, perm_seed)
    seq_bound = (
        None
        if result.bound_sum is None
        else _bound(
            ORDERS["sequential"],
            OrderOutcome(key="p", value=sums[0], seconds=0, provenance=""),
            values.size,
            result.bound_sum,
            fmt,
            result.cast_error,
        )
    )
    lo, hi = sums[np.argmin(sums.astype(np.float64))], sums[np.argmax(sums.astype(np.float64))]
    return PermutationStudy(
        k=k, seed=perm_seed, values=sums, distinct=int(np.unique(sums).size),
        metrics_min_max=(evaluate(lo, result.exact, fmt, seq_bound), evaluate(hi, result.exact, fmt, seq_bound)),
    )


def run_lab(values: np.ndarray, storage: str, working: str, orders: tuple[str, ...],
            permutations: int = 0, perm_seed: int = 0,
            on_progress: OnProgress | None = None) -> LabResult:
    """Every requested order on the stored values, with exact errors and bounds, and the
    permutation study (``run_orders`` then ``permutation_study``).

    ``on_progress`` is told of each order and of the permutation study before they run; it
    may raise to stop the computation (nothing is returned then).
    """
    result = run_orders(values, storage, working, orders, on_progress)
    study = permutation_study(values, result, permutations, perm_seed, on_progress)
    return result if study is None else dataclasses.replace(result, permutations=study)


# ------------------------------------------------------------------- running error


@dataclass(frozen=True, kw_only=True)
class RunningError:
    positions: np.ndarray  # 1-based count of values summed
    abs_error: np.ndarray  # |sequential partial sum - exact partial sum|, float64
    ulps: np.ndarray  # signed, in ULPs of the exact partial sum
    bound: np.ndarray  # gamma_{k-1} * sum_{i<=k} |x_i|  (nan where no finite bound)


def running_error(values: np.ndarray, working: str, points: int = 200) -> RunningError:
    """Error of the left-to-right sum after k values, at up to ``points`` positions.

    Exact prefix sums are accumulated segment by segment (one exact sum per segment), so
    the cost is one pass over the data plus a few hundred Fraction additions.
    """
    fmt = FORMATS[working]
    xw = working_array(values, working)
    n = values.size
    pos = np.unique(np.linspace(1, n, num=min(points, n)).round().astype(np.int64))
    with np.errstate(over="ignore", invalid="ignore"):
        partial = np.add.accumulate(xw)[pos - 1]
    exact_prefix, abs_prefix = Fraction(0), Fraction(0)
    start = 0
    errs, ulps, bounds = [], [], []
    for p, v in zip(pos, partial, strict=True):
        seg = values[start:p]
        exact_prefix += exact_sum_fraction(seg)
        abs_prefix += exact_sum_fraction(np.abs(seg))
        start = p
        computed = exact_value(v, fmt)
        if isinstance(computed, float):
            errs.append(math.inf)
            ulps.append(math.inf)
        else:
            errs.append(float(abs(computed - exact_prefix)))
            ulps.append(error_in_ulps(computed, exact_prefix, fmt))
        g = gamma(int(p) - 1, fmt.unit_roundoff)
        bounds.append(math.nan if g is None else float(g * abs_prefix))
    return RunningError(positions=pos, abs_error=np.array(errs), ulps=np.array(ulps), bound=np.array(bounds))


# ------------------------------------------------------------- a request, through the caches
# A page keeps only the request in its session (a VectorSpec, or a pasted or uploaded Vector,
# which its size limits keep small); the generated vector lives in core.crowd.bytecache.VECTORS and
# the outcome, a few kilobytes whatever n is, in core.crowd.bytecache.RESULTS.

Source = VectorSpec | Vector


def source_key(source: Source) -> Hashable:
    if isinstance(source, VectorSpec):
        return source
    digest = hashlib.sha256(source.values.tobytes()).hexdigest()
    return ("data", source.storage, digest, source.source, source.notes)


@dataclass(frozen=True, eq=False, kw_only=True)
class LabRequest:
    """The lab's settings: a vector (a recipe, or the visitor's numbers), the accumulation choice
    ("same" or a format), the orders, and the permutation study."""

    source: Source
    working_choice: str = "same"
    orders: tuple[str, ...] = DEFAULT_ORDERS
    permutations: int = 0
    perm_seed: int = 0

    @property
    def working(self) -> str:
        return working_format(self.source.storage, self.working_choice)

    @property
    def generator(self) -> str | None:
        return self.source.kind if isinstance(self.source, VectorSpec) else None

    def cost(self) -> budget.Cost:
        """What the whole request costs (generating the vector included, when it is generated)."""
        return budget.sumlab_cost(self.source.n, self.source.storage, self.working, self.orders, self.permutations,
                                  self.generator)

    def stage_costs(self) -> tuple[budget.Cost, budget.Cost]:
        """The cost of the orders (with the vector and its exact sums), and of the rest: the
        permutation study and the running error. Both are held at the whole request's peak memory."""
        whole = self.cost()
        first = budget.sumlab_cost(self.source.n, self.source.storage, self.working, self.orders, 0, self.generator,
                                   running=False)
        done = dict(first.parts)
        rest = tuple((what, work) for what, work in whole.parts if what not in done)
        return (dataclasses.replace(first, peak_bytes=whole.peak_bytes),
                budget.Cost(work=max(0.0, whole.work - first.work), peak_bytes=whole.peak_bytes, parts=rest))

    def advice(self) -> list[budget.Suggestion]:
        return budget.sumlab_advice(self.source.n, self.source.storage, self.working, self.orders, self.permutations,
                                    self.generator)

    def orders_key(self) -> Hashable:
        return ("lab", source_key(self.source), self.working, tuple(self.orders))

    def study_key(self) -> Hashable:
        return ("lab-study", source_key(self.source), self.working, int(self.permutations), int(self.perm_seed))


@dataclass(frozen=True)
class LabOutcome:
    """The orders on the vector, the first thing the page shows."""

    result: LabResult  # without the permutation study (see LabStudy)
    source: str  # the vector's provenance line
    notes: tuple[str, ...]


@dataclass(frozen=True)
class LabStudy:
    """What the page shows after the orders: the random permutations and the running error."""

    permutations: PermutationStudy | None  # None when none were asked for or n = 1
    running: RunningError | None  # None when the sum is not finite or n = 1

    def applied_to(self, result: LabResult) -> LabResult:
        """``result`` with this permutation study, as ``run_lab`` returns it."""
        return dataclasses.replace(result, permutations=self.permutations)


def _vector(source: Source, on_progress: OnProgress | None) -> Vector:
    if not isinstance(source, VectorSpec):
        return source
    report(on_progress, done=0, total=1, what="making the vector")
    return vector_for(source)


def cached_outcome(request: LabRequest) -> LabOutcome | None:
    return RESULTS.get(request.orders_key())


def lab_outcome(request: LabRequest, on_progress: OnProgress | None = None) -> LabOutcome:
    """The orders' results for a request, computed once while they stay in RESULTS
    (simultaneous identical requests wait for one computation)."""

    def compute() -> LabOutcome:
        vector = _vector(request.source, on_progress)
        result = run_orders(vector.values, vector.storage, request.working, tuple(request.orders), on_progress)
        return LabOutcome(result, vector.source, vector.notes)

    return RESULTS.get_or_compute(request.orders_key(), compute)


def cached_study(request: LabRequest) -> LabStudy | None:
    return RESULTS.get(request.study_key())


def lab_study(request: LabRequest, outcome: LabOutcome,
              on_progress: OnProgress | None = None) -> LabStudy:
    """The permutation study and the running error for a request whose orders gave ``outcome``,
    computed once while they stay in RESULTS."""

    def compute() -> LabStudy:
        vector = _vector(request.source, on_progress)
        result = outcome.result
        study = permutation_study(vector.values, result, request.permutations, request.perm_seed, on_progress)
        running = None
        if not isinstance(result.exact, float) and result.n > 1:
            report(on_progress, done=0, total=1, what="the running error")
            running = running_error(vector.values, result.working)
        return LabStudy(study, running)

    return RESULTS.get_or_compute(request.study_key(), compute)


# --------------------------------------------------------------- what the page explains


@dataclass(frozen=True, kw_only=True)
class LabTree:
    """One order's reduction tree over a small vector, measured against the exact sum."""

    order: str
    tree: Tree
    error: ErrorReport  # the tree's result against the exact sum (its absolute and relative error beside the ULPs:
    # ULPs mislead after cancellation)
    additions: int
    depth: int


def lab_trees(request: LabRequest, result: LabResult, cpu_order: str) -> tuple[LabTree, LabTree] | None:
    """The chosen CPU order's tree and the GPU's (the CUDA model), or None when the vector is
    too long (or not finite) for trees (``LabResult.shows_trees``)."""
    if not result.shows_trees:
        return None
    values = _vector(request.source, None).values

    def one(order: str) -> LabTree:
        tree = build_tree(values, result.working, order)
        return LabTree(order=order, tree=tree, error=measure(tree.result, result.fmt, result.exact),
                       additions=len(tree.internal()), depth=tree.nodes[tree.root].depth)

    return one(cpu_order), one("cuda")


@dataclass(frozen=True)
class ThreadSplit:
    """How torch.sum on this machine's CPU threads splits a vector of n values."""

    n: int
    threads: int
    chunks: tuple[tuple[int, int], ...]  # (start, stop) per thread

    @property
    def serial(self) -> bool:
        """One chunk (n at most torch's grain size, or one thread): no split to change the bits."""
        return len(self.chunks) <= 1


def thread_split(n: int, threads: int | None = None) -> ThreadSplit:
    """torch's chunks for n values on ``threads`` threads (default: the threads torch uses here)."""
    threads = available_threads() if threads is None else threads
    return ThreadSplit(n, threads, tuple(thread_chunks(n, threads)))


def differing_tree_seed(n: int = 32, cpu_order: str = "pairwise", storage: str = "float32",
                        generator: str = "normal", limit: int = 1000) -> int:
    """The first seed whose generated vector makes the CPU order's tree and the GPU's (the CUDA model's
    block reduction) give different sums, found by computation (both trees are exact models, so the seed
    holds on every machine). For the talk's "GPU block tree" scenario: a tree beside a tree that gives
    the same bits undercuts the point."""
    for seed in range(limit):
        values = generate(VectorSpec(kind=generator, n=n, seed=seed, storage=storage)).values
        if build_tree(values, storage, cpu_order).result != build_tree(values, storage, "cuda").result:
            return seed
    raise ValueError(f"no seed below {limit} makes the {cpu_order} and CUDA trees of {n} values differ")
