"""The summation lab: run a panel of orders on one vector and measure each exactly."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core import budget
from core.bytecache import RESULTS, vector_for
from core.exact import exact_sum_fraction, to_mpf
from core.formats import FORMATS, Exact, FloatFormat, error_in_ulps, round_to_format, ulp
from core.metrics import SumMetrics, a_priori_bound, evaluate, exact_value, gamma, kappa
from core.orders import ORDERS, Order, OrderOutcome, clamp_permutations, permutation_sums, run_order, working_array
from core.vectors import Vector, VectorSpec

WORKING_CHOICES = ("same", "float32", "float64")
MAX_PERMUTATIONS = 1000


def resolve_working(storage: str, working: str) -> str:
    return storage if working == "same" else working


@dataclass(frozen=True)
class OrderRow:
    order: Order
    outcome: OrderOutcome
    metrics: SumMetrics


@dataclass(frozen=True)
class PermutationStudy:
    k: int
    seed: int
    values: np.ndarray  # k results, working dtype
    distinct: int
    metrics_min_max: tuple[SumMetrics, SumMetrics]  # the lowest and highest result


@dataclass(frozen=True)
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

    @property
    def fmt(self) -> FloatFormat:
        return FORMATS[self.working]

    @property
    def exact_mpf(self):
        return to_mpf(self.exact)

    @property
    def correctly_rounded(self) -> Exact:
        return round_to_format(self.exact, self.fmt)


def _bound(order: Order, outcome: OrderOutcome, n: int, sum_abs: Fraction, fmt: FloatFormat,
           cast_error: Fraction | None):
    """The order's bound for the values it summed, plus the exact error of casting them (if any)."""
    b = a_priori_bound(order.bound, n, sum_abs, fmt, outcome.tree_depth)
    if b is not None and cast_error is not None:
        b += cast_error
    return b


def run_lab(values: np.ndarray, storage: str, working: str, orders: tuple[str, ...],
            permutations: int = 0, perm_seed: int = 0,
            on_progress: Callable[[str], None] | None = None) -> LabResult:
    """Every requested order on the stored values, with exact errors and bounds.

    ``on_progress(what)`` is called before each order and before the permutation study; it
    may raise to stop the computation (nothing is returned then).
    """
    working = resolve_working(storage, working)
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
        if on_progress is not None:
            on_progress(f"{order.name} (order {i + 1} of {len(orders)})")
        outcome = run_order(key, values, working)
        bound = _bound(order, outcome, values.size, bound_sum, fmt, cast_error) if finite else None
        rows.append(OrderRow(order, outcome, evaluate(outcome.value, exact, sum_abs, fmt, bound)))
    study = None
    if permutations > 0 and values.size > 1:
        k = clamp_permutations(min(permutations, MAX_PERMUTATIONS), values.size)
        if on_progress is not None:
            on_progress(f"{k:,} random permutation{'s' if k > 1 else ''}")
        sums = permutation_sums(xw, k, perm_seed)
        seq_bound = (_bound(ORDERS["sequential"], OrderOutcome("p", sums[0], 0, ""), values.size, bound_sum, fmt,
                            cast_error) if finite else None)
        lo, hi = sums[np.argmin(sums.astype(np.float64))], sums[np.argmax(sums.astype(np.float64))]
        study = PermutationStudy(
            k, perm_seed, sums, int(np.unique(sums).size),
            (evaluate(lo, exact, sum_abs, fmt, seq_bound), evaluate(hi, exact, sum_abs, fmt, seq_bound)),
        )
    return LabResult(values.size, storage, working, exact, sum_abs, condition, tuple(rows), study, cast_note)


# ------------------------------------------------------------------- running error


@dataclass(frozen=True)
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
    return RunningError(pos, np.array(errs), np.array(ulps), np.array(bounds))


# ------------------------------------------------------------- a request, through the caches
# A page keeps only the request in its session (a VectorSpec, or a pasted or uploaded Vector,
# which its size limits keep small); the generated vector lives in core.bytecache.VECTORS and
# the outcome, a few kilobytes whatever n is, in core.bytecache.RESULTS.

Source = VectorSpec | Vector


@dataclass(frozen=True)
class LabOutcome:
    result: LabResult
    running: RunningError | None  # None when the sum is not finite or n = 1
    source: str  # the vector's provenance line
    notes: tuple[str, ...]


def source_storage(source: Source) -> str:
    return source.storage


def source_key(source: Source) -> Hashable:
    if isinstance(source, VectorSpec):
        return source
    digest = hashlib.sha256(source.values.tobytes()).hexdigest()
    return ("data", source.storage, digest, source.source, source.notes)


def lab_key(source: Source, working: str, orders: tuple[str, ...], k: int, seed: int) -> Hashable:
    return ("lab", source_key(source), resolve_working(source.storage, working), tuple(orders), int(k), int(seed))


def lab_cost(source: Source, working: str, orders: tuple[str, ...], k: int, seed: int = 0) -> budget.Cost:
    """What computing this request costs (generating the vector included, when it is generated)."""
    if isinstance(source, VectorSpec):
        return budget.sumlab_cost(source.n, source.storage, resolve_working(source.storage, working), orders, k,
                                  source.kind)
    return budget.sumlab_cost(source.n, source.storage, resolve_working(source.storage, working), orders, k)


def lab_advice(source: Source, working: str, orders: tuple[str, ...], k: int) -> list[budget.Suggestion]:
    generator = source.kind if isinstance(source, VectorSpec) else None
    return budget.sumlab_advice(source.n, source.storage, resolve_working(source.storage, working), orders, k,
                                generator)


def cached_outcome(source: Source, working: str, orders: tuple[str, ...], k: int, seed: int) -> LabOutcome | None:
    return RESULTS.get(lab_key(source, working, orders, k, seed))


def lab_outcome(source: Source, working: str, orders: tuple[str, ...], k: int, seed: int,
                on_progress: Callable[[str], None] | None = None) -> LabOutcome:
    """The lab's whole result for a request, computed once while it stays in RESULTS
    (simultaneous identical requests wait for one computation)."""
    working = resolve_working(source.storage, working)

    def compute() -> LabOutcome:
        if isinstance(source, VectorSpec):
            if on_progress is not None:
                on_progress("making the vector")
            vector = vector_for(source)
        else:
            vector = source
        result = run_lab(vector.values, vector.storage, working, tuple(orders), k, seed, on_progress)
        running = None
        if not isinstance(result.exact, float) and result.n > 1:
            if on_progress is not None:
                on_progress("the running error")
            running = running_error(vector.values, working)
        return LabOutcome(result, running, vector.source, vector.notes)

    return RESULTS.get_or_compute(lab_key(source, working, orders, k, seed), compute)


# ------------------------------------------------------------------ errors in one unit
HUGE_ULPS = 1e6  # from here on an error in ULPs is shown with its relative error too (1e16 − 1e16 + 1: 4.5e15 ULPs)


def bound_in_ulps(bound: Fraction | None, exact: Exact, fmt: FloatFormat) -> float | None:
    """An absolute a-priori bound in ULPs of the exact sum in ``fmt``: the unit of the error column.

    None where there is no finite bound or no finite exact sum (nothing to convert)."""
    if bound is None or isinstance(exact, float):
        return None
    return float(Fraction(bound) / ulp(exact, fmt))


def relative_error(computed: Exact, exact: Exact) -> float | None:
    """|computed − exact| / |exact|, exactly then rounded once; None when the exact value is 0 or not finite,
    inf when the computed value is not finite."""
    if isinstance(exact, float) or exact == 0:
        return None
    if isinstance(computed, float):
        return math.inf
    return float(abs(Fraction(computed) - exact) / abs(exact))
