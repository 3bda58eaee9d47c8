"""What rounding can explain, element by element: the envelope of each explanation, the scale it is
measured against, and the pattern check.

Notation. Each compared element is a reduction of K terms t_k (the products a_ik b_kj of a
matrix product, or the values of a summed axis); S = sum t_k is its exact value.
u = 2^-p is the unit roundoff of a format with p significant bits (float32: 2^-24), and
gamma_K = K u / (1 - K u) (Higham, *Accuracy and Stability of Numerical Algorithms*, 3.1).
F is the format the computation ran in (its result format); A the format it accumulated in:
float32 for float16, bfloat16 and float32 (what torch's CPU and CUDA kernels do), float64
for float64.

Envelopes (each one per element, as an absolute difference)
-----------------------------------------------------------
Every explanation has a *typical* size T (what the difference usually is) and an
*envelope* E = min(B, Z T) (+ output rounding), the largest difference it accepts, where B
is an a-priori bound and Z = ``ENVELOPE_FACTOR`` = 8.

**Reordering, a-priori bound (rigorous given sum|t|).** Any summation order, fused or not,
computes fl(S) with |fl(S) - S| <= gamma_K sum|t_k| (every term passes through at most K
roundings: its product and at most K - 1 additions; Higham Lemma 3.4 / eq. 3.4), plus at
most K half-subnormals of A when unfused products underflow. Two orders therefore differ
by at most B_R = 2 gamma_K sum|t| + K * minsub_A. When F is narrower than A (float16 and
bfloat16 results), each side then rounds once more to F, at most half an ULP of F each:
|r1 - r2| <= |s1 - s2| + ulp_F(max |r|). With the inputs, sum|t| is computed (|a| @ |b|
in float64, inflated by 4 K 2^-53 to cover its own rounding) and B_R is rigorous;
without them it is *estimated* as sqrt(K) s (heuristic: exact for terms of random sign
and equal size, an overestimate for same-sign terms, an underestimate under heavy
cancellation).

**Reordering, typical size (heuristic).** Model each rounding as an independent error of
relative size up to u (the standard probabilistic model, Higham 2.8; Higham and Mary,
SISC 2019). A left-to-right sum makes error sum_k delta_k s_k with s_k the partial sums;
with |delta_k| uniform, its standard deviation is u sqrt(sum s_k^2 / 3). For terms of
random sign, s_k^2 grows like k/K * sum t^2, so sum s_k^2 ~ K/2 * sum t^2 and one order's
error is about 0.41 u sqrt(K) sqrt(sum t^2); two independent orders differ by about
0.58 u sqrt(K) sqrt(sum t^2). For same-sign terms s_k ~ k/K * S and the difference is
about 0.47 u sqrt(K) |S|. Both are below T_R = u_A sqrt(K) max(s, |y|) (plus sqrt(K) times A's
smallest subnormal: roundings in the subnormal range are absolute; ``reordering_sizes``), where
|y| = max(|actual|, |expected|) and s is the element's
*scale*: sqrt(sum t^2) from the inputs, else max(|actual|, |expected|, a floor) with the
floor 1.4826 * r_i * c_j with r_i the median |expected| of the element's row and c_j the
median of |expected| / r over its column (a rank-one model of row and column scales, fitted
by medians; 1.4826 turns a median of |N(0, sigma^2)| into sigma; with fewer than 8 rows or
columns only the longer direction's medians, or the overall median, are used), so
an element that cancelled to near zero is judged by the size of its neighbours (a heuristic:
a 1-D result, or one with few columns, whose elements differ in scale by decades gives the
model nothing to learn from; give the inputs there). Z = 8 puts
the envelope about 14 standard deviations out, beyond the largest of a million Gaussian
draws (about 5). Where rounding is *systematic* (many equal same-sign terms in one long
loop) the error grows like K u, not sqrt(K) u; given the inputs, the simulation
(core.diagnose.simulate) detects that and widens the envelope (never beyond B_R). Sorted data,
long left-to-right loops and NumPy's reductions along an outer axis (a loop per column) make such
errors without inputs to simulate: the envelope is a typical size, not a bound, and a tolerance
from it is the *typical* one (core.diagnose.tolerances); only B_R holds for every order.

**Reduced precision (one side rounded its inputs to P).** A factor x rounded to P changes
by at most u_P |x| + h_P (h_P: half P's smallest subnormal), so a product by at most
(2 u_P + u_P^2)|t| + h_P (1 + u_P)(|a| + |b|) + h_P^2, and the sum by
E_in = (2 u_P + u_P^2) sum|t| + h_P (1 + u_P)(sum|a| + sum|b|) + K h_P^2 (for a summed
vector: u_P sum|x| + K h_P). The P side accumulates in float32 (error at most
gamma_K(2^-24)(sum|t| + E_in)), the other side in A, and autocast returns bfloat16 or
float16 outputs (half an ULP of P): B_P = E_in + gamma_K(u_32)(sum|t| + E_in) +
gamma_K(u_A) sum|t| + K minsub_32, plus the output rounding. Typical: the rounding errors
of a and b are independent with relative standard deviation about 0.42 u_P each, so
sum_k t_k (delta_a + delta_b) has standard deviation about 0.59 u_P sqrt(sum t^2):
T_P = (u_P + u_32 sqrt(K)) s. TF32 hardware that truncates instead of rounding doubles
the per-input error (B_P then uses 2 u_P per input) and adds a bias of about 2 u_P |S|
(every product shrinks toward zero), which the TF32 envelope adds to Z T_P: where |S| is
several times the scale s, the bias alone can exceed Z T_P.
Reduced inputs move nearly every element (the median of |N(0, sigma^2)| is 0.67 sigma,
about 0.4 T_P), so this explanation also needs the median element's difference to be at
least ``BULK_SHARE`` = 1/16 of T_P (core.diagnose.results): large differences confined to a
few per cent of the elements are not reduced precision, even inside its envelope.
The formats P are ``core.diagnose.rounding.REDUCED_FORMATS``.

**Pattern check (heuristic).** Rounding spreads over all elements: the largest
differences are a few times the typical ones. Measured in ULPs of each element's scale
(q = |d| / ulp_F(s)), an element more than ``OUTLIER_FACTOR`` = 16 times the level of the
other 99 % (the largest q outside the top 1 %, at least one ULP) is an outlier; any
outlier means "too_large", whatever its magnitude. (An element computed by another
kernel than the rest, such as a ragged edge tile, can trip it: the report lists where.)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from core.arith.formats import FLOAT32, FloatFormat
from core.arith.metrics import gamma, input_rounding_error
from core.arith.ulps import ulp_array
from core.diagnose.inputs import Inputs
from core.diagnose.results import REORDERING_ENVELOPE, EnvelopeCheck, PatternCheck, Simulation
from core.diagnose.rounding import REDUCED_FORMATS
from core.diagnose.tolerances import covering_tolerances, nice_up

ENVELOPE_FACTOR = 8.0  # Z: envelope = Z x typical size (capped by the a-priori bound)
OUTLIER_FACTOR = 16.0  # G: an element this many times the level of the other 99 % is an outlier
OUTLIER_SHARE = 0.01  # "a few elements": at most 1 % of them (at least one)
MIN_PATTERN_ELEMENTS = 4
MIN_MEDIAN = 8  # a row or column median of the scale model needs at least this many elements


# ------------------------------------------------------------------------------ scale


def median_floor(e: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """1.4826 * r_i * c_j: row medians of |expected|, then column medians of |expected| / r (see the
    module docstring); 1-D: 1.4826 * median; a single element: 0."""
    mag = np.where(finite, np.abs(e), np.nan)
    if mag.size <= 1 or not finite.any():
        return np.zeros(e.shape)
    with np.errstate(all="ignore"):
        overall = float(np.nanmedian(mag))
        if mag.ndim <= 1:
            return np.full(e.shape, 1.4826 * overall)
        m2 = mag.reshape(-1, mag.shape[-1])
        if overall == 0:
            return np.zeros(e.shape)
        n_rows, n_cols = m2.shape
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-nan rows or columns
            if n_rows >= MIN_MEDIAN and n_cols >= MIN_MEDIAN:
                rows = np.nan_to_num(np.nanmedian(m2, axis=1))
                norm = np.where(rows[:, None] > 0, m2 / np.where(rows[:, None] > 0, rows[:, None], 1.0), np.nan)
                cols = np.nan_to_num(np.nanmedian(norm, axis=0))
                floor = rows[:, None] * cols[None, :]
            elif n_cols >= MIN_MEDIAN:  # a few long rows
                floor = np.broadcast_to(np.nan_to_num(np.nanmedian(m2, axis=1))[:, None], m2.shape)
            elif n_rows >= MIN_MEDIAN:  # a few long columns
                floor = np.broadcast_to(np.nan_to_num(np.nanmedian(m2, axis=0))[None, :], m2.shape)
            else:
                floor = np.full(m2.shape, overall)
        return (1.4826 * floor).reshape(e.shape)


# -------------------------------------------------------------------------- envelopes


def _widened(factor: float, typical_core: np.ndarray, out: np.ndarray, spread: np.ndarray | None,
             elements) -> float:
    """Z, or twice the largest simulated spread (beyond the output rounding) in units of the typical size."""
    if spread is None:
        return factor
    t = typical_core[elements]
    excess = np.maximum(spread - out[elements], 0.0)
    ok = t > 0
    if not ok.any():
        return factor
    return max(factor, 2.0 * float(np.max(excess[ok] / t[ok])))


def ratio_to(d, env) -> np.ndarray:
    """d / env per element, where an envelope of 0 admits only 0: 0/0 is 0 and d/0 is inf."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(env > 0, d / np.where(env > 0, env, 1.0), np.where(d > 0, np.inf, 0.0))


def _check(d, fin, env) -> tuple[int, float]:
    with np.errstate(invalid="ignore"):
        over = fin & ~(d <= env)
    worst = float(np.max(np.where(fin, ratio_to(d, env), 0.0))) if fin.any() else 0.0
    return int(over.sum()), worst


def output_rounding(m, fmt: FloatFormat, acc: FloatFormat) -> np.ndarray:
    """What rounding an accumulated result to the output format adds to a difference, per element:
    an ULP of ``fmt`` at the magnitude m where ``fmt`` is narrower than ``acc`` (each side rounds once,
    by at most half an ULP), else nothing."""
    return ulp_array(m, fmt) if fmt.precision < acc.precision else np.zeros_like(m)


def summed_ulps(l1: float, count: int, fmt: FloatFormat) -> float:
    """A bound on the sum of ulp(y_i) over ``count`` values of ``fmt`` whose absolute sum is ``l1``:
    ulp(y) <= 2 u |y| for a normal y, and the smallest subnormal below that."""
    return 2 * float(fmt.unit_roundoff) * l1 + count * float(fmt.min_subnormal)


def envelope_of(bound, widened, out) -> np.ndarray:
    """E = min(B, Z T) + output rounding: ``widened`` is Z T (with any bias), ``out`` the output rounding."""
    with np.errstate(invalid="ignore"):
        return np.minimum(bound, widened) + out


def reordering_bound(k: int, sum_abs, acc: FloatFormat, outputs: int = 1):
    """B_R = 2 gamma_K sum|t| + K minsub of two orders of K-term sums in ``acc``; over ``outputs`` sums
    at once (``sum_abs`` then their total), the subnormal term counts once per sum."""
    return 2 * gamma(k, float(acc.unit_roundoff), math.inf) * sum_abs + k * outputs * float(acc.min_subnormal)


def reordering_sizes(k: int, s, m, sum_abs, acc: FloatFormat):
    """(T_R, B_R) of K-term sums accumulated in ``acc``, per element (see the module docstring).

    T_R = u sqrt(K) max(s, |y|) + sqrt(K) minsub: s = sqrt(sum t^2) is the size for terms of random
    sign, and max(s, |y|) covers terms of one sign, whose reorderings differ by about 0.47 u sqrt(K)|y|
    with |y| >= s; roundings in the subnormal range are absolute. B_R: ``reordering_bound``.
    Both diagnose's verdict and the traces' judge take the envelope from here.
    """
    u, minsub = float(acc.unit_roundoff), float(acc.min_subnormal)
    typical = u * math.sqrt(k) * np.maximum(s, m) + math.sqrt(k) * minsub
    return typical, reordering_bound(k, sum_abs, acc)


@dataclass(frozen=True, kw_only=True)
class Scale:
    """What each element's difference is measured against (the derivation is in the module docstring)."""

    m: np.ndarray  # max(|actual|, |expected|)
    s: np.ndarray  # the scale: m, or sqrt(sum t^2) from the inputs, or the median floor
    sum_abs: np.ndarray | float  # sum|t| per element, from the inputs, or estimated as sqrt(K) * s
    rows_abs: np.ndarray | None  # the rows' sums of |a| and |b| (inputs only)
    rigorous: bool  # from the inputs: the bounds are rigorous


@dataclass(frozen=True, kw_only=True)
class Elements:
    """The compared elements as every envelope reads them: each one's difference ``d``, whether both
    sides are finite (``fin``), its scale, the K terms it sums, the format the computation ran in
    (``fmt``) and the one it accumulated in (``acc``)."""

    d: np.ndarray
    fin: np.ndarray
    scale: Scale
    k: int
    fmt: FloatFormat
    acc: FloatFormat


def reordering_envelope(e: Elements, sim: Simulation | None) -> EnvelopeCheck:
    """The reordering envelope min(B_R, Z T_R) + output rounding, per element (see the module docstring)."""
    sc, k, fmt, acc, fin = e.scale, e.k, e.fmt, e.acc, e.fin
    out = output_rounding(sc.m, fmt, acc)
    core, bound_core = reordering_sizes(k, sc.s, sc.m, sc.sum_abs, acc)
    factor = _widened(ENVELOPE_FACTOR, core, out, sim.spread if sim is not None else None,
                      sim.elements if sim is not None else None)
    env = envelope_of(bound_core, factor * core, out)
    exceed, worst = _check(e.d, fin, env)
    notes = () if sc.rigorous else ("The bound uses the estimate sum|x| ≈ √K·scale (no inputs given).",)
    return EnvelopeCheck(key=REORDERING_ENVELOPE, name=f"Reordering in {acc.name}",
                         what=f"the same {k:,}-term sums added in another order, accumulating in {acc.name}"
                         + (f", rounded to {fmt.name}" if fmt.precision < acc.precision else ""),
                         typical=np.where(fin, core + out, np.nan), envelope=np.where(fin, env, np.nan),
                         bound=np.where(fin, bound_core + out, np.nan), bound_rigorous=sc.rigorous, factor=factor,
                         exceed=exceed, worst_ratio=worst, notes=notes)


def _reduced_bound(p, e: Elements, ops: Inputs | None):
    """B_P: the inputs' conversion to P, the float32 products and sums of the converted inputs, and the
    accumulation (see the module docstring)."""
    sum_abs, k = e.scale.sum_abs, e.k
    u_p = float(p.fmt.unit_roundoff)
    if ops is not None:
        rows = None if ops.kind == "sum" else e.scale.rows_abs
        e_in = input_rounding_error(sum_abs, k, u_p, float(p.fmt.min_subnormal) / 2, truncating=p.may_truncate,
                                    rows_abs=rows)
    else:  # no inputs: the relative part alone, at the estimated sum|t|
        e_in = input_rounding_error(sum_abs, k, u_p, 0.0, truncating=p.may_truncate, rows_abs=0.0)
    return reduced_bound(k, sum_abs, e_in, e.acc)


def reduced_bound(k: int, sum_abs, e_in, acc: FloatFormat):
    """B_P = E_in + gamma_K(u_32)(sum|t| + E_in) + gamma_K(u_A) sum|t| + K minsub_32 + K minsub_A, given E_in, the
    inputs' rounding to P (see the module docstring); the suggested guarantees take it from here too."""
    u32, u_acc = float(FLOAT32.unit_roundoff), float(acc.unit_roundoff)
    return (e_in + gamma(k, u32, math.inf) * (sum_abs + e_in) + gamma(k, u_acc, math.inf) * sum_abs
            + k * float(FLOAT32.min_subnormal) + k * float(acc.min_subnormal))


def reduced_sizes(p, k: int, s):
    """T_P = (u_P + u_32 sqrt(K)) s + sqrt(K) (minsub_32 + 2 h_P): the typical difference that inputs rounded to
    P make in K-term sums of scale s (see the module docstring); the reduced envelope and suggested
    tolerances both take it from here."""
    return (float(p.fmt.unit_roundoff) + float(FLOAT32.unit_roundoff) * math.sqrt(k)) * s \
        + math.sqrt(k) * (float(FLOAT32.min_subnormal) + float(p.fmt.min_subnormal))


def reduced_envelope(key: str, e: Elements, ops: Inputs | None, sim: Simulation | None) -> EnvelopeCheck:
    """The envelope of inputs rounded to ``key``, min(B_P, Z T_P + bias) + output rounding, per element."""
    p = REDUCED_FORMATS[key]
    sc, k, fin = e.scale, e.k, e.fin
    bound_core = _reduced_bound(p, e, ops)
    out = output_rounding(sc.m, e.fmt, e.acc)
    if p.rounds_output:
        out = np.maximum(out, ulp_array(sc.m, p.fmt))
    core = reduced_sizes(p, k, sc.s)
    notes = []
    spread = None
    if sim is not None and key in sim.reduced:
        spread = np.max(np.abs(sim.reduced[key][:, None] - sim.results), axis=1)
    elif sim is not None:
        notes.append(f"The inputs do not fit {p.fmt.name}'s range: not simulated.")
    factor = _widened(ENVELOPE_FACTOR, core, out, spread, sim.elements if sim is not None else None)
    # Truncation shrinks every product toward zero by 2 u_P on average: a bias of about 2 u_P |S| on top of the
    # unbiased spread, which a large |S| against the scale s can carry beyond Z T_P (found by hypothesis).
    bias = 2 * float(p.fmt.unit_roundoff) * sc.m if p.may_truncate else 0.0
    env = envelope_of(bound_core, factor * core + bias, out)
    exceed, worst = _check(e.d, fin, env)
    typical = core + out
    with np.errstate(divide="ignore", invalid="ignore"):
        bulk = float(np.median(np.where(typical[fin] > 0, e.d[fin] / typical[fin], 0.0))) if fin.any() else 0.0
    if ops is None:
        notes.append("The bound uses the estimate sum|x| ≈ √K·scale (no inputs given).")
    return EnvelopeCheck(key=key, name=f"{p.fmt.name} inputs", what=p.what, typical=np.where(fin, typical, np.nan),
                         envelope=np.where(fin, env, np.nan), bound=np.where(fin, bound_core + out, np.nan),
                         bound_rigorous=ops is not None, factor=factor, exceed=exceed, worst_ratio=worst,
                         notes=tuple(notes), bulk_ratio=bulk)


def pattern_check(d, fin, s, fmt: FloatFormat) -> PatternCheck:
    """The outliers: elements more than OUTLIER_FACTOR times the level of the other 99 %, in ULPs of the scale."""
    n = int(fin.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(fin, d / ulp_array(np.where(fin, s, 0.0), fmt), 0.0)
    worst = float(q.max()) if n else 0.0
    if n < MIN_PATTERN_ELEMENTS:
        return PatternCheck(applicable=False, level=1.0, outliers=np.array([], dtype=np.int64), worst=worst)
    kk = max(1, int(OUTLIER_SHARE * n))
    qs = np.sort(q[fin])[::-1]
    level = max(float(qs[kk]), 1.0)
    out = np.flatnonzero(fin & (q > OUTLIER_FACTOR * level))
    return PatternCheck(applicable=True, level=level, outliers=out, worst=worst)


def envelope_tolerances(env: EnvelopeCheck, fin, ef) -> tuple[float, float]:
    """Tolerances that admit every difference up to this explanation's envelope."""
    lim = env.envelope[fin]
    if lim.size == 0:
        return 0.0, 0.0
    r0, a0 = covering_tolerances(lim, ef[fin])
    return nice_up(r0), nice_up(a0)
