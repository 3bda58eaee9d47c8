"""Errors, condition numbers and a-priori error bounds (Higham, ch. 4) for sum results.

All comparisons are exact: the result's value is decoded from its bits, the reference is
the exact rational sum, and the bounds are Fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import Exact, FloatFormat, bits_of, error_in_ulps, value_of_bits


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


def a_priori_bound(kind: str, n: int, sum_abs: Fraction, fmt: FloatFormat, depth: int | None = None) -> Fraction | None:
    """Largest possible |computed - exact| for an algorithm (None: no finite bound).

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
    u = fmt.unit_roundoff
    if n <= 1:
        return Fraction(0)
    if kind == "sequential":
        g = gamma(n - 1, u)
    elif kind == "pairwise":
        g = gamma(math.ceil(math.log2(n)), u)
    elif kind == "tree":
        g = gamma(depth if depth is not None else n - 1, u)
    elif kind == "compensated":
        m = depth if depth is not None else n
        g_m1, g_m = gamma(max(m - 1, 0), u), gamma(m, u)
        if g_m1 is None or g_m is None:
            return None
        g = 2 * u + (1 + u) * g_m1 * u * m * (1 + g_m)
    elif kind == "exact":
        g = u
    else:
        raise ValueError(f"unknown bound kind {kind!r}")
    return None if g is None else g * sum_abs


@dataclass(frozen=True, kw_only=True)
class SumMetrics:
    value: Exact
    bits: int
    abs_error: Exact  # |computed - exact|, or inf
    rel_error: float | None  # None when the exact sum is 0
    ulps: float  # signed, in ULPs of the exact sum in the working format
    correct_digits: float | None  # -log10(rel error); inf if exact; None if undefined
    bound: Fraction | None
    within_bound: bool | None  # None: no finite bound, or overflow

    @property
    def overflowed(self) -> bool:
        return isinstance(self.value, float) and math.isinf(self.value)


def evaluate(
    v: np.generic, exact: Exact, sum_abs: Fraction, fmt: FloatFormat, bound: Fraction | None
) -> SumMetrics:
    """Errors of one computed sum against the exact sum of the values it was given."""
    value = exact_value(v, fmt)
    bits = bits_of(np.asarray(v).astype(fmt.numpy_dtype))
    if isinstance(exact, float) or isinstance(value, float):
        same = isinstance(exact, float) and isinstance(value, float) and (
            value == exact or (math.isnan(value) and math.isnan(exact))
        )
        return SumMetrics(
            value=value,
            bits=bits,
            abs_error=0 if same else math.inf,
            rel_error=None,
            ulps=math.nan if same else math.inf,
            correct_digits=None,
            bound=bound,
            within_bound=None,
        )
    err = abs(value - exact)
    rel = None if exact == 0 else float(err / abs(exact))
    if rel is None:
        digits = None
    elif rel == 0:
        digits = math.inf
    else:
        digits = max(0.0, -math.log10(rel))
    within = None if bound is None else err <= bound
    return SumMetrics(
        value=value,
        bits=bits,
        abs_error=err,
        rel_error=rel,
        ulps=error_in_ulps(value, exact, fmt),
        correct_digits=digits,
        bound=bound,
        within_bound=within,
    )


# -------------------------------------------------------------------------- exponential growth


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
