"""Errors, condition numbers and a-priori error bounds (Higham, ch. 4) for sum results.

All comparisons are exact: the result's value is decoded from its bits, the reference is
the exact rational sum, and the bounds are Fractions. ``ErrorReport`` (built by ``measure``) is the
one record of a result against its exact value, in ULPs and against its bound (``BoundKind``), and
``UlpText`` the one way an error in ULPs is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Literal

import numpy as np

from core.arith.formats import Exact, FloatFormat, bits_of, bits_of_value, value_of_bits
from core.arith.ulps import error_in_ulps, ulp


def exact_value(v: np.generic, fmt: FloatFormat) -> Exact:
    """The exact value of a NumPy scalar, cast to ``fmt`` first."""
    return value_of_bits(bits_of(np.asarray(v).astype(fmt.numpy_dtype)), fmt)


def kappa(exact: Exact, sum_abs: Exact) -> float:
    """The condition number of a sum (or dot product), sum|x| / |sum x|, from its exact parts.

    inf when the exact result is 0 and sum|x| is not; nan for 0 / 0 or non-finite data.
    The one place κ is computed: the lab, the dot-product lab and the generators' checks use it.
    """
    if isinstance(exact, float) or isinstance(sum_abs, float):
        return math.nan
    if exact == 0:
        return math.inf if sum_abs != 0 else math.nan
    return float(sum_abs / abs(exact))


def gamma(k: int, u, unbounded=None):
    """gamma_k = k u / (1 - k u) (Higham, Lemma 3.1): exact for a Fraction u, a float for a float u.

    When k u >= 1 there is no bound: ``unbounded`` is returned (None by default; the float envelopes of
    core.diagnose and core.traces pass ``math.inf``, so a sum that long is never "within" a bound)."""
    if k * u >= 1:
        return unbounded
    return k * u / (1 - k * u)


def input_rounding_error(sum_abs, k: int, u, eta, *, truncating: bool = False, rows_abs=None):
    """A bound on how far rounding every input to a format moves a K-term sum, exact for Fractions and
    per element for arrays.

    One rounding moves x by at most u|x| + eta (u the unit roundoff, eta half the smallest subnormal:
    only an underflow has an absolute part); a truncation, by twice both. For a sum of values
    (``rows_abs`` None) that gives u S + K eta with S = sum|x|; for a dot product of rounded x and y,
    |x^ y^ - x y| <= ((1 + u)^2 - 1)|x y| + (1 + u) eta (|x| + |y|) + eta^2, so
    ((1 + u)^2 - 1) S + (1 + u) eta R + K eta^2 with S = sum|x y| and R = ``rows_abs`` = sum|x| + sum|y|.
    """
    if truncating:
        u, eta = 2 * u, 2 * eta
    if rows_abs is None:
        return u * sum_abs + k * eta
    return (2 * u + u * u) * sum_abs + (1 + u) * eta * rows_abs + k * eta * eta


def _compensated(n: int, depth: int | None, u):
    m = depth if depth is not None else n
    g_m1, g_m = gamma(max(m - 1, 0), u), gamma(m, u)
    if g_m1 is None or g_m is None:
        return None
    return 2 * u + (1 + u) * g_m1 * u * m * (1 + g_m)


class BoundKind(Enum):
    """Which a-priori bound an algorithm has: each member carries its factor g(n, depth, u), the bound
    being g S with S = sum|x| (None: no finite bound). An order's ``bound`` (core.kernels.order_types.Order) is
    a member, which the registry of orders names by its value."""

    SEQUENTIAL = "sequential", lambda n, depth, u: gamma(n - 1, u)
    PAIRWISE = "pairwise", lambda n, depth, u: gamma(math.ceil(math.log2(n)), u)
    TREE = "tree", lambda n, depth, u: gamma(depth if depth is not None else n - 1, u)
    COMPENSATED = "compensated", _compensated
    EXACT = "exact", lambda n, depth, u: u

    def __new__(cls, key: str, factor):
        member = object.__new__(cls)
        member._value_ = key
        member.factor = factor
        return member


def a_priori_bound(kind: BoundKind | str, n: int, sum_abs: Fraction, fmt: FloatFormat,
                   depth: int | None = None) -> Fraction | None:
    """Largest possible |computed - exact| for an algorithm (None: no finite bound); ``kind`` is a
    ``BoundKind`` or its value (ValueError for any other).

    sequential: gamma_{n-1} S;  pairwise: gamma_{ceil(log2 n)} S;  tree: gamma_depth S for
    any summation tree whose longest root-to-leaf path has ``depth`` additions;
    exact: one rounding, at most u |sum| <= u S.
    compensated (``depth`` = m, values per lane; lanes combined exactly, rounded once):
    2u S + (1 + u) * E with E = gamma_{m-1} * u * m * (1 + gamma_m) * S. For Neumaier this is
    proved: each lane's running sums split exactly into s + sum(q_i) (error-free
    transformations), |q_i| <= u |sigma_i| <= u (1 + gamma_m) S_lane, and the corrections
    are summed in floating point with at most gamma_{m-1} sum|q_i| error. For Kahan it
    is Higham's 2u + O(m u^2) with the O-term written the same way: checked by
    property tests, not proved here.
    """
    kind = BoundKind(kind)
    if n <= 1:
        return Fraction(0)
    g = kind.factor(n, depth, fmt.unit_roundoff)
    return None if g is None else g * sum_abs


# ------------------------------------------------------------- one result against its exact value
HUGE_ULPS = 1e6  # from here on an error in ULPs is shown with its relative error too (1e16 − 1e16 + 1: 4.5e15 ULPs)


def _ratio(r: Fraction) -> float:
    """A Fraction as a float, ±inf past float64's range (a bound over ulp(0), the smallest subnormal)."""
    try:
        return float(r)
    except OverflowError:
        return math.inf if r > 0 else -math.inf


def bound_in_ulps(bound: Fraction | None, exact: Exact, fmt: FloatFormat) -> float | None:
    """An absolute a-priori bound in ULPs of the exact value in ``fmt``: the unit of the error in ULPs.

    None where there is no finite bound or no finite exact value (nothing to convert); inf past float64's range."""
    if bound is None or isinstance(exact, float):
        return None
    return _ratio(Fraction(bound) / ulp(exact, fmt))


def relative_error(computed: Exact, exact: Exact) -> float | None:
    """|computed − exact| / |exact|, exactly then rounded once; None when the exact value is 0 or not finite,
    inf when the computed value is not finite."""
    if isinstance(exact, float) or exact == 0:
        return None
    if isinstance(computed, float):
        return math.inf
    return float(abs(Fraction(computed) - exact) / abs(exact))


@dataclass(frozen=True, kw_only=True)
class ErrorReport:
    """One computed result against the exact value it approximates, in the result's format: its error
    absolute, relative and in ULPs, and against an a-priori bound. Built by ``measure`` (``evaluate`` for a
    NumPy scalar) for every lab's rows: the one place a result is compared with its exact value."""

    value: Exact  # the computed result, exactly
    fmt: FloatFormat
    bits: int
    abs_error: Exact  # |computed - exact|; inf when they differ and one is not finite, 0 when the same
    rel_error: float | None  # None when the exact value is 0 or not finite
    ulps: float  # signed, in ULPs of the exact value in ``fmt``; nan when undefined
    correct_digits: float | None  # -log10(rel error); inf if exact; None if undefined
    bound: Fraction | None  # None: no finite bound, or nothing finite to bound
    bound_ulps: float | None  # the bound in ULPs of the exact value (the unit of ``ulps``)
    within_bound: bool | None  # None: no finite bound, or a result that is not finite

    @property
    def overflowed(self) -> bool:
        return isinstance(self.value, float) and math.isinf(self.value)

    @property
    def negative_zero(self) -> bool:
        return self.bits == 1 << (self.fmt.width - 1)


def measure(value: Exact, fmt: FloatFormat, exact: Exact, bound: Fraction | None = None,
            bits: int | None = None) -> ErrorReport:
    """A result of ``fmt`` (its exact value, and its bit pattern when it has a sign the value loses: -0)
    against the exact value, within ``bound`` (an absolute bound; None: none)."""
    bits = bits_of_value(value, fmt) if bits is None else bits
    if isinstance(exact, float) or isinstance(value, float):
        same = isinstance(exact, float) and isinstance(value, float) and (
            value == exact or (math.isnan(value) and math.isnan(exact)))
        ulps = math.nan if same else math.inf
        if not same and not isinstance(exact, float) and math.isinf(value):
            ulps = value  # overflowed: infinitely many ULPs, on the side it overflowed to
        return ErrorReport(value=value, fmt=fmt, bits=bits, abs_error=0 if same else math.inf, rel_error=None,
                           ulps=ulps, correct_digits=None, bound=bound, bound_ulps=bound_in_ulps(bound, exact, fmt),
                           within_bound=None)
    err = abs(value - exact)
    rel = relative_error(value, exact)
    digits = None if rel is None else math.inf if rel == 0 else max(0.0, -math.log10(rel))
    return ErrorReport(value=value, fmt=fmt, bits=bits, abs_error=err, rel_error=rel,
                       ulps=error_in_ulps(value, exact, fmt), correct_digits=digits, bound=bound,
                       bound_ulps=bound_in_ulps(bound, exact, fmt),
                       within_bound=None if bound is None else err <= bound)


def evaluate(v: np.generic, exact: Exact, fmt: FloatFormat, bound: Fraction | None = None) -> ErrorReport:
    """``measure`` for a NumPy scalar, cast to ``fmt`` first."""
    bits = bits_of(np.asarray(v).astype(fmt.numpy_dtype))
    return measure(value_of_bits(bits, fmt), fmt, exact, bound, bits)


@dataclass(frozen=True, kw_only=True)
class UlpText:
    """How an error (or a distance, or a bound) in ULPs is written: the one formatter, with one preset per
    way the app writes them (``ulps_text``, ``ulps_short``, ``ulps_cell``, ``ulps_brief``, ``bound_cell``,
    ``ulps_count``, ``ulps_gap``, ``ulps_tenths``, ``ulps_whole``)."""

    sign: str = "+"  # "+": a signed error; "±": a bound on one; "": a size
    spec: str = ".4g"
    large: float = math.inf  # from here on ``large_spec``, its exponent written bare ("-6.26e7")
    large_spec: str = ""
    unit: str = ""  # "ULP" after the number ("ULPs" when ``plural`` and the number is not written "1")
    plural: bool = False
    infinite: str | None = None  # how ±inf reads; None: "+∞" / "−∞" (with the sign ``sign`` asks for)
    undefined: str = "undefined"  # nan
    missing: str = "—"  # None
    huge: float = math.inf  # from here on a relative error, when given, goes beside (HUGE_ULPS)

    def __call__(self, x: float | None, relative: float | None = None) -> str:
        if x is None:
            return self.missing
        if math.isnan(x):
            return self.undefined
        if math.isinf(x):
            if self.infinite is not None:
                return self.infinite
            return ("+∞" if x > 0 else "−∞") if self.sign == "+" else self.sign + "∞"
        big = abs(x) >= self.large
        number = format(x, ("+" if self.sign == "+" else "") + (self.large_spec if big else self.spec))
        if big and "e" in number:
            mantissa, exponent = number.split("e")
            number = f"{mantissa}e{int(exponent)}"
        if self.sign == "±":
            number = "±" + number
        if self.unit:
            number += f" {self.unit}{'s' if self.plural and number != '1' else ''}"
        if relative is not None and abs(x) >= self.huge:
            number += f" (relative error {relative:.3g})"
        return number


# in a sentence; an error of 4.5e15 ULPs means little until it reads 'relative error 1', the whole answer
ulps_text = UlpText(unit="ULP", infinite="∞ (overflowed)", huge=HUGE_ULPS)
# in a metric ("-6.264e+07 UL…" was cut): 4 significant digits below 10^5, else three with a bare exponent
ulps_short = UlpText(unit="ULP", infinite="∞ (overflowed)", large=1e5, large_spec=".2e")
ulps_cell = UlpText()  # a table's error column, whose heading says "(ULPs)"
ulps_brief = UlpText(spec=".3g")  # three digits, in tables of many: each addition's rounding error, a range
bound_cell = UlpText(sign="±")  # a table's bound column: the error lies in ±bound
ulps_count = UlpText(sign="", spec=",.3g", unit="ULP", plural=True)  # a size in a sentence: "1 ULP", "3 ULPs"
ulps_gap = UlpText(sign="", spec=",.1f", large=1000, large_spec=",.0f")  # a gap in a column: "12.5", "1,234"
ulps_tenths = UlpText(sign="", spec=",.1f", unit="ULP", plural=True)  # a measured move: "0.5 ULPs", "1.0 ULPs"
ulps_whole = UlpText(sign="", spec=",.0f", unit="ULP", plural=True)  # a gap in whole ULPs: "1 ULP", "1,234 ULPs"


# -------------------------------------------------------------------------- exponential growth


def relative_gap(a, b, scale: Literal["first", "larger"] = "first"):
    """|a - b| relative to |a| (``scale="first"``: b measured against the reference a, as a training pair's
    run B against run A) or to max(|a|, |b|) (``"larger"``: neither is the reference, as two loss logs);
    elementwise for arrays, a float for two numbers. The one relative loss gap of the training pair, the
    recordings and the loss logs.

    The zero rule: two equal values are 0 apart (two zeros, equal infinities, two NaNs); any other two are
    infinitely apart where the scale is 0 or either is not finite, since no finite ratio measures them."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        den = np.abs(a) if scale == "first" else np.maximum(np.abs(a), np.abs(b))
        measurable = np.isfinite(a) & np.isfinite(b) & (den > 0)
        gap = np.where(same, 0.0, np.where(measurable, np.abs(a - b) / np.where(measurable, den, 1.0), np.inf))
    return float(gap) if gap.ndim == 0 else gap



@dataclass(frozen=True, kw_only=True)
class GrowthFit:
    """ln(value) = intercept + slope * step, fitted by least squares over the growth phase."""

    slope: float  # per step
    intercept: float
    first_step: int
    last_step: int

    @property
    def doubling_steps(self) -> float | None:
        return math.log(2) / self.slope if self.slope > 0 else None

    def at(self, step: float) -> float:
        return math.exp(self.intercept + self.slope * step)


class FittedGrowth:
    """What a result that carries a ``fit: GrowthFit | None`` says of it: growth figures only where
    the fitted value grows (a shrinking or missing fit has no rate and no doubling)."""

    fit: GrowthFit | None

    @property
    def growing(self) -> bool:
        return self.fit is not None and self.fit.slope > 0

    @property
    def growth_per_step(self) -> float | None:
        """The fitted d ln(value) / d step, where the value grows."""
        return self.fit.slope if self.growing else None

    @property
    def doubling_steps(self) -> float | None:
        return self.fit.doubling_steps if self.growing else None

    @property
    def fit_range(self) -> tuple[int, int] | None:
        return (self.fit.first_step, self.fit.last_step) if self.fit else None


def growth_fit(steps, values, start: int, saturation: float = 0.1, min_points: int = 5) -> GrowthFit | None:
    """The exponential fit of a gap that grows from rounding size until it saturates.

    The growth phase runs from index ``start`` to the first later index whose value reaches
    ``saturation`` times the largest finite value from ``start`` on (after that the gap stops growing
    exponentially), or to the last index. Only finite, positive values are fitted; None with fewer
    than ``min_points`` of them. The training pair's ||delta theta|| (core.training.seeds) and two
    loss logs' gap (core.diagnose.logs) are fitted by this one function."""
    steps, g = np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)
    fin = np.isfinite(g)
    tail = np.where(fin, g, 0.0)[start:]
    if tail.size < 2:
        return None
    cap = saturation * float(tail.max())
    reach = np.flatnonzero(tail[1:] >= cap)
    end = start + 1 + int(reach[0]) if reach.size else g.size - 1
    sel = np.arange(start, end + 1)
    sel = sel[fin[sel] & (g[sel] > 0)]
    if sel.size < min_points:
        return None
    slope, intercept = np.polyfit(steps[sel], np.log(g[sel]), 1)
    return GrowthFit(slope=float(slope), intercept=float(intercept), first_step=int(steps[sel[0]]),
                     last_step=int(steps[sel[-1]]))
