"""Is my mismatch normal? Diagnose the difference between two results of one computation.

``diagnose(actual, expected)`` takes two arrays of one shape (NumPy arrays or torch tensors,
float16 / bfloat16 / float32 / float64), measures every element's difference, and decides
which explanation covers it, the smallest first:

``"identical"``          every element has the same value;
``"reordering"``         the differences fit the same sums added in another order (another
                         kernel, thread count, batch size or device) in the format that ran;
``"reduced_precision"``  too large for that, but they fit one side having rounded its inputs
                         to TF32, float16 or bfloat16 (float32 when the result is float64)
                         and accumulated in float32;
``"too_large"``          no rounding explanation covers them, or a few elements are far off
                         while the rest agree, or NaN/Inf appear in one result only.

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
about 0.47 u sqrt(K) |S|. Both are below T_R = u_A sqrt(K) s (plus sqrt(K) times A's
smallest subnormal: roundings in the subnormal range are absolute), where s is the element's
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
loop) the error grows like K u, not sqrt(K) u; given the inputs, the simulation below
detects that and widens the envelope (never beyond B_R).

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
least ``BULK_SHARE`` = 1/16 of T_P: large differences confined to a few per cent of the
elements are not reduced precision, even inside its envelope.
TF32 keeps 10 explicit mantissa bits (p = 11, float32's exponent range); float16 p = 11
with a 5-bit exponent; bfloat16 p = 8 with float32's exponent range.

**Pattern check (heuristic).** Rounding spreads over all elements: the largest
differences are a few times the typical ones. Measured in ULPs of each element's scale
(q = |d| / ulp_F(s)), an element more than ``OUTLIER_FACTOR`` = 16 times the level of the
other 99 % (the largest q outside the top 1 %, at least one ULP) is an outlier; any
outlier means "too_large", whatever its magnitude. (An element computed by another
kernel than the rest, such as a ragged edge tile, can trip it: the report lists where.)

**Simulation (with the inputs).** For up to ``SIM_ELEMENTS`` outputs the K terms are formed
exactly in float64 (products of float32 or narrower values are exact), then summed in A
in the orders listed in ``SIM_ORDERS`` (sequential with fused multiply-add emulated
exactly by round-to-odd, sequential, reverse, pairwise, 8 and 32 lanes then pairwise,
split-K, seeded random orders) and with the inputs rounded to each reduced format. The
user's differences are placed in the distribution of differences between those orders,
and each side is compared with the correctly rounded float64 sum of the exact terms. If
the inputs' own orders spread further than T_R predicts, the envelope factor grows to
twice the largest spread seen (never beyond B).

Recommended tolerances
----------------------
rtol0 = the largest |d| / |expected| over elements at least as large as the median
|expected|; atol0 = the largest remaining |d| - rtol0 |expected| over all elements, and at
least rtol0 * median|expected| (elements near zero carry the absolute noise of typical
ones). rtol and atol are ``MARGIN`` = 4 times those, rounded up to 1, 2 or 5 times a power
of ten, so every element satisfies |d| <= (atol + rtol |expected|) / 4 and
``torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)`` passes (it compares
in float64, as here).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from core.arith.formats import FORMATS, FloatFormat

VERDICTS = ("identical", "reordering", "reduced_precision", "too_large")
# how each verdict's one-sentence summary begins
VERDICT_HEADS = {"identical": "Identical", "reordering": "Normal rounding noise",
                 "reduced_precision": "Expected for reduced precision", "too_large": "Too large for rounding"}
ENVELOPE_FACTOR = 8.0  # Z: envelope = Z x typical size (capped by the a-priori bound)
OUTLIER_FACTOR = 16.0  # G: an element this many times the level of the other 99 % is an outlier
OUTLIER_SHARE = 0.01  # "a few elements": at most 1 % of them (at least one)
MIN_PATTERN_ELEMENTS = 4
MIN_MEDIAN = 8  # a row or column median of the scale model needs at least this many elements
BULK_SHARE = 1 / 16  # reduced precision: the median element must differ by at least this share of T_P
MARGIN = 4.0  # recommended tolerances are at least this many times what the data needs
ASSUMED_K = 65_536  # reduction length assumed when neither K nor the inputs are given
MAX_ELEMENTS = 1_000_000  # per compared array
MAX_INPUT_ELEMENTS = 4_000_000  # all inputs together
MAX_INPUT_WORK = 1_000_000_000  # M * K * N for the float64 products of sum|t| and sum t^2
SIM_ELEMENTS = 256
SIM_TERMS = 2**21  # sampled elements x K
SIM_FMA_MAX_K = 8192  # the exact fused-multiply-add emulation loops over K in Python
SIM_PERMUTATIONS = 6
ALLCLOSE_DEFAULT = (1e-5, 1e-8)  # torch.allclose / numpy.allclose: rtol, atol
# torch.testing.assert_close's defaults by dtype (rtol, atol), from its documentation
ASSERT_CLOSE_DEFAULTS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                         "float64": (1e-7, 1e-7)}
REDUCED_PRECISION_CHOICES = ("any", "none", "float32", "tf32", "float16", "bfloat16")

_TORCH_NAMES = {f.torch_dtype: name for name, f in FORMATS.items()}
_NUMPY_NAMES = {f.numpy_dtype: name for name, f in FORMATS.items()}


# ---------------------------------------------------------------------------- formats


@dataclass(frozen=True)
class InputFormat:
    """A format one side may have rounded its inputs to (reduced precision)."""

    key: str
    name: str
    precision: int  # p, with the implicit bit
    emin: int
    max_finite: float
    rounds_output: bool  # autocast returns results in this format
    what: str
    may_truncate: bool = False  # some hardware converts by truncation: twice the error, biased toward zero

    @property
    def u(self) -> float:
        return 2.0**-self.precision

    @property
    def half_min_subnormal(self) -> float:
        return 2.0 ** (self.emin - self.precision)


REDUCED_FORMATS: dict[str, InputFormat] = {
    "float32": InputFormat("float32", "float32", 24, -126, float(FORMATS["float32"].max_finite), False,
                           "one side ran in float32 (inputs rounded to float32, float32 accumulation)"),
    "tf32": InputFormat("tf32", "TF32", 11, -126, float((2 - 2.0**-10) * 2.0**127), False,
                        "TF32 tensor cores: float32 inputs rounded to 10 explicit mantissa bits, "
                        "float32 accumulation, float32 result", may_truncate=True),
    "float16": InputFormat("float16", "float16", 11, -14, 65504.0, True,
                           "float16 autocast: inputs rounded to float16, float32 accumulation, float16 result"),
    "bfloat16": InputFormat("bfloat16", "bfloat16", 8, -126, float(FORMATS["bfloat16"].max_finite), True,
                            "bfloat16 autocast: inputs rounded to bfloat16, float32 accumulation, bfloat16 result"),
}


def accumulation_format(fmt: str) -> str:
    """The format torch accumulates reductions of ``fmt`` in (float32 below float64)."""
    return "float64" if fmt == "float64" else "float32"


def _candidates(fmt: str) -> tuple[str, ...]:
    """Reduced-precision explanations worth testing for a result in ``fmt``, finest first."""
    return {"float64": ("float32", "tf32", "float16", "bfloat16"), "float32": ("tf32", "float16", "bfloat16"),
            "float16": ("float16", "bfloat16"), "bfloat16": ("bfloat16",)}[fmt]


def round_precision(x, precision: int, emin: int, max_finite: float) -> np.ndarray:
    """Round float64 values to ``precision`` significant bits (exponents >= ``emin``, with
    subnormals below), to nearest with ties to even, overflowing to +-inf: exactly one
    IEEE rounding, for any precision up to 53.

    x = m 2^e with the quantum q = 2^(max(e, emin) - p + 1): x / q is exact (a power of two
    scaling) and below 2^p, so ``np.rint`` (ties to even) rounds it exactly.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        _, e = np.frexp(np.abs(x))  # |x| = m 2^e, 0.5 <= m < 1: floor(log2|x|) = e - 1
        qexp = np.maximum(e.astype(np.int64) - 1, emin) - precision + 1
        r = np.ldexp(np.rint(np.ldexp(x, -qexp)), qexp)
        r = np.where(np.isfinite(x) & (np.abs(r) > max_finite), np.copysign(np.inf, x), r)
    return np.where(np.isfinite(x), r, x)


def round_to(x, key: str) -> np.ndarray:
    """Round float64 values to a named format (float16, bfloat16, float32, float64, tf32)."""
    if key == "float64":
        return np.asarray(x, dtype=np.float64)
    f = REDUCED_FORMATS[key]
    return round_precision(x, f.precision, f.emin, f.max_finite)


def ulp_array(x, precision: int, emin: int) -> np.ndarray:
    """ULP of each |x| in a format (the spacing in x's binade; the smallest subnormal at 0).
    nan where x is not finite."""
    x = np.abs(np.asarray(x, dtype=np.float64))
    _, e = np.frexp(x)
    out = np.ldexp(1.0, np.maximum(e.astype(np.int64) - 1, emin) - precision + 1)
    out = np.where(x == 0, 2.0 ** (emin - precision + 1), out)
    return np.where(np.isfinite(x), out, np.nan)


def _fmt_ulp(x, fmt: FloatFormat) -> np.ndarray:
    return ulp_array(x, fmt.precision, fmt.emin)


def gamma(k: int, u: float) -> float:
    """gamma_k = k u / (1 - k u); inf when k u >= 1 (no bound)."""
    return math.inf if k * u >= 1 else k * u / (1 - k * u)


# ----------------------------------------------------------------------------- inputs


def as_float_array(x, what: str = "array") -> tuple[np.ndarray, str]:
    """(float64 values, the format's name) of a tensor or array; every conversion is exact."""
    if isinstance(x, torch.Tensor):
        t = x.detach()
        name = _TORCH_NAMES.get(t.dtype)
        if name is None:
            raise TypeError(f"{what} has dtype {t.dtype}; diagnose needs float16, bfloat16, float32 or float64")
        return t.to("cpu").to(torch.float64).numpy().copy(), name
    arr = np.asarray(x)
    name = _NUMPY_NAMES.get(arr.dtype)
    if name is None:
        raise TypeError(f"{what} has dtype {arr.dtype}; diagnose needs float16, bfloat16, float32 or float64")
    return arr.astype(np.float64), name


def narrower(f1: str, f2: str) -> str:
    return f1 if FORMATS[f1].precision <= FORMATS[f2].precision else f2


@dataclass(frozen=True)
class Inputs:
    """The operands behind the compared results: a matrix product or a sum over the last axis."""

    kind: str  # "matmul" or "sum"
    a: np.ndarray  # float64; (M, K) for matmul, (M, K) rows to sum
    b: np.ndarray | None  # float64 (K, N) for matmul
    fmt: str  # the operands' own format (the wider of the two)

    @property
    def k(self) -> int:
        return int(self.a.shape[1])

    def terms(self, flat: np.ndarray, n_cols: int) -> np.ndarray:
        """(E, K) exact terms (float64) behind the outputs with these flat indices."""
        if self.kind == "sum":
            return self.a[flat]
        rows, cols = flat // n_cols, flat % n_cols
        return self.a[rows] * self.b[:, cols].T

    def rounded_terms(self, flat: np.ndarray, n_cols: int, key: str) -> np.ndarray:
        """Like ``terms``, with every factor first rounded to the format ``key`` (only the rows and
        columns these outputs need are rounded)."""
        if self.kind == "sum":
            return round_to(self.a[flat], key)
        rows, cols = flat // n_cols, flat % n_cols
        ur, ri = np.unique(rows, return_inverse=True)
        uc, ci = np.unique(cols, return_inverse=True)
        ar, bc = round_to(self.a[ur], key), round_to(self.b[:, uc], key)
        return ar[ri] * bc[:, ci].T


def prepare_inputs(inputs, shape: tuple[int, ...]) -> Inputs:
    """Check operands against the result shape: ``(a, b)`` for ``a @ b``, or one array ``x``
    whose last axis was summed. ValueError with the reason when they do not fit."""
    if isinstance(inputs, tuple | list) and len(inputs) == 2:
        (a, fa), (b, fb) = as_float_array(inputs[0], "the first factor"), as_float_array(inputs[1], "the second factor")
        if a.ndim not in (1, 2) or b.ndim not in (1, 2):
            raise ValueError(f"the factors must be vectors or matrices (got shapes {a.shape} and {b.shape})")
        if a.shape[-1] != b.shape[0]:
            raise ValueError(f"the factors do not multiply: {a.shape} @ {b.shape} (inner sizes "
                             f"{a.shape[-1]} and {b.shape[0]})")
        out_shape = np.empty(a.shape[:-1] + b.shape[1:], dtype=np.int8).shape
        if out_shape != tuple(shape):
            raise ValueError(f"a @ b has shape {out_shape}, but the compared results have shape {tuple(shape)}")
        if a.size + b.size > MAX_INPUT_ELEMENTS:
            raise ValueError(f"the factors hold {a.size + b.size:,} values; at most {MAX_INPUT_ELEMENTS:,} are "
                             "accepted")
        a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(b.shape[0], -1)
        if a2.shape[0] * a2.shape[1] * b2.shape[1] > MAX_INPUT_WORK:
            raise ValueError(f"the product is too large to re-derive here (M·K·N = "
                             f"{a2.shape[0] * a2.shape[1] * b2.shape[1]:,}; at most {MAX_INPUT_WORK:,})")
        if a2.shape[1] == 0:
            raise ValueError("the factors have an empty inner dimension")
        return Inputs("matmul", a2, b2, fa if FORMATS[fa].precision >= FORMATS[fb].precision else fb)
    x, fx = as_float_array(inputs, "the summed array")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError("the summed array needs at least one value along its last axis")
    if x.size > MAX_INPUT_ELEMENTS:
        raise ValueError(f"the summed array holds {x.size:,} values; at most {MAX_INPUT_ELEMENTS:,} are accepted")
    want = x.shape[:-1]
    if tuple(shape) != want and not (x.ndim == 1 and int(np.prod(shape)) == 1):
        raise ValueError(f"summing the last axis of shape {x.shape} gives shape {want}, but the compared results "
                         f"have shape {tuple(shape)}")
    return Inputs("sum", x.reshape(-1, x.shape[-1]), None, fx)


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Distribution:
    """Summary of one per-element quantity over the finite elements."""

    count: int
    max: float
    p50: float
    p90: float
    p99: float
    p999: float

    @staticmethod
    def of(x: np.ndarray) -> Distribution:
        x = np.asarray(x, dtype=np.float64)
        x = np.sort(x[~np.isnan(x)])
        if x.size == 0:
            return Distribution(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        q = [float(x[min(x.size - 1, math.ceil(p * (x.size - 1)))]) for p in (0.5, 0.9, 0.99, 0.999)]
        return Distribution(int(x.size), float(x[-1]), *q)


@dataclass(frozen=True)
class EnvelopeCheck:
    """One explanation's envelope, element by element, and whether the data fits it."""

    key: str  # "reordering", or a key of REDUCED_FORMATS
    name: str
    what: str
    typical: np.ndarray = field(repr=False)  # T per element (absolute), nan where not compared
    envelope: np.ndarray = field(repr=False)  # E per element (absolute)
    bound: np.ndarray = field(repr=False)  # the a-priori bound B per element
    bound_rigorous: bool  # True when sum|t| came from the inputs
    factor: float  # the Z used (ENVELOPE_FACTOR, or wider after the simulation)
    exceed: int  # elements with |d| > E
    worst_ratio: float  # max |d| / E over the compared elements
    notes: tuple[str, ...] = ()
    bulk_ratio: float = math.inf  # median |d| / T (reduced precision must move the bulk, not a few elements)

    @property
    def bulk_ok(self) -> bool:
        return self.key == "reordering" or self.bulk_ratio >= BULK_SHARE

    @property
    def fits(self) -> bool:
        return self.exceed == 0 and self.bulk_ok


@dataclass(frozen=True)
class PatternCheck:
    applicable: bool
    level: float  # the other 99 %'s level, ULPs of the local scale (at least 1)
    outliers: np.ndarray = field(repr=False)  # flat indices of the outliers
    worst: float  # the largest q

    @property
    def localized(self) -> bool:
        return self.applicable and self.outliers.size > 0


@dataclass(frozen=True)
class Simulation:
    """The inputs recomputed in several orders, and where the user's differences fall."""

    kind: str
    k: int
    elements: np.ndarray = field(repr=False)  # flat indices of the sampled outputs
    orders: tuple[str, ...]
    results: np.ndarray = field(repr=False)  # (E, orders): each order's result, in the result format
    reference: np.ndarray = field(repr=False)  # (E,): the exact sum of the terms rounded once to float64
    reduced: dict = field(repr=False)  # format key -> (E,) results with inputs rounded to it
    user_diff: np.ndarray = field(repr=False)  # (E,) |actual - expected|
    unit: np.ndarray = field(repr=False)  # (E,) ULP of |expected| in the result format
    actual_err: np.ndarray = field(repr=False)  # (E,) |actual - reference|
    expected_err: np.ndarray = field(repr=False)
    notes: tuple[str, ...] = ()

    @property
    def spread(self) -> np.ndarray:
        """Per sampled element: the largest minus the smallest result over the orders."""
        return self.results.max(axis=1) - self.results.min(axis=1)

    @property
    def pair_diffs_ulps(self) -> np.ndarray:
        """Every |order i - order j| over every sampled element, in ULPs of that element's expected value."""
        r = self.results
        i, j = np.triu_indices(r.shape[1], 1)
        return (np.abs(r[:, i] - r[:, j]) / self.unit[:, None]).ravel()

    @property
    def user_ulps(self) -> np.ndarray:
        return self.user_diff / self.unit

    @property
    def within(self) -> int:
        """Sampled elements whose difference is no larger than the spread of the simulated orders."""
        return int(np.sum(self.user_diff <= self.spread))

    def reduced_diffs_ulps(self, key: str) -> np.ndarray:
        """|result with inputs rounded to ``key`` - each order's result|, in ULPs."""
        return (np.abs(self.reduced[key][:, None] - self.results) / self.unit[:, None]).ravel()

    def percentile_of(self, value_ulps: float) -> float:
        """Share (0..1) of the simulated pair differences that are below ``value_ulps``."""
        p = self.pair_diffs_ulps
        return float(np.mean(p < value_ulps)) if p.size else math.nan


@dataclass(frozen=True)
class AllcloseReport:
    rtol: float
    atol: float
    failing: int  # elements that fail |d| <= atol + rtol |expected| (NaN always fails)
    failing_small: int  # ... of which |expected| is below 1 % of the median magnitude
    worst_index: tuple[int, ...] | None
    worst_ratio: float  # |d| / (atol + rtol |expected|) at the worst element


@dataclass(frozen=True)
class WorstElement:
    index: tuple[int, ...]
    actual: float
    expected: float
    abs_diff: float
    rel_diff: float
    ulps: float
    ratio_typical: float  # |d| / T_R
    fits: tuple[str, ...]  # envelope keys that hold this element


@dataclass(frozen=True)
class Diagnosis:
    verdict: str
    sentence: str  # the verdict in one sentence
    reasons: tuple[str, ...]  # why the verdict follows
    explanation: str | None  # reduced-precision format key for "reduced_precision"
    rtol: float | None
    atol: float | None
    equal_nan: bool
    check_dtype: bool
    margin: float | None  # the smallest (atol + rtol |e|) / |d| over the elements (inf if none differ)
    envelope_rtol: float | None  # tolerances that admit everything the explanation allows
    envelope_atol: float | None
    shape: tuple[int, ...]
    size: int
    fmt: str  # the format the computation ran in
    acc_fmt: str
    actual_fmt: str
    expected_fmt: str
    k: int
    k_source: str  # "given", "inputs" or "assumed"
    abs_diff: np.ndarray = field(repr=False)  # flat, nan where not both finite
    rel_diff: np.ndarray = field(repr=False)
    ulp_diff: np.ndarray = field(repr=False)  # |d| / ulp_F(expected)
    scale: np.ndarray = field(repr=False)
    abs_stats: Distribution = None
    rel_stats: Distribution = None
    ulp_stats: Distribution = None
    n_compared: int = 0  # both finite
    n_differ: int = 0
    n_signed_zero: int = 0  # +0 against -0
    n_both_nan: int = 0
    nan_mismatch: int = 0
    inf_mismatch: int = 0
    nonfinite_index: np.ndarray = field(default=None, repr=False)
    envelopes: tuple[EnvelopeCheck, ...] = ()
    pattern: PatternCheck | None = None
    simulation: Simulation | None = None
    allclose: AllcloseReport | None = None
    assert_close_defaults: AllcloseReport | None = None
    worst: tuple[WorstElement, ...] = ()
    next_checks: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def envelope(self, key: str) -> EnvelopeCheck | None:
        return next((e for e in self.envelopes if e.key == key), None)

    @property
    def assert_line(self) -> str | None:
        if self.rtol is None:
            return None
        extra = (", equal_nan=True" if self.equal_nan else "") + ("" if self.check_dtype else ", check_dtype=False")
        return (f"torch.testing.assert_close(actual, expected, rtol={format_tol(self.rtol)}, "
                f"atol={format_tol(self.atol)}{extra})")


# ------------------------------------------------------------------------- tolerances


def nice_up(x: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is >= x (0 stays 0)."""
    if not x > 0:
        return 0.0
    if not math.isfinite(x):
        return math.inf
    e = math.floor(math.log10(x))
    for _ in range(3):
        for m in (1, 2, 5, 10):
            v = float(f"{m}e{e}")
            if v >= x:
                return v
        e += 1
    return x  # pragma: no cover - unreachable


def format_tol(v: float) -> str:
    return "0" if v == 0 else f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e")


def _tolerances(d: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    """(rtol0, atol0): the smallest pair of the shape described in the module docstring that covers d."""
    if d.size == 0 or not np.any(d > 0):
        return 0.0, 0.0
    mag = np.abs(e)
    c = float(np.median(mag))
    if c == 0:
        c = float(mag.max())
    big = mag >= c if c > 0 else np.zeros_like(mag, dtype=bool)
    rtol0 = float(np.max(d[big] / mag[big])) if big.any() else 0.0
    rtol0 *= 1 + 2.0**-40  # cover the rounding of the division above
    atol0 = float(np.max(np.maximum(d - rtol0 * mag, 0.0)))
    atol0 = max(atol0 * (1 + 2.0**-40), rtol0 * c)
    return rtol0, atol0


def _allclose(d, e, nan_any: np.ndarray, rtol: float, atol: float, shape, small_cut: float) -> AllcloseReport:
    lim = atol + rtol * np.abs(e)
    fail = (d > lim) | nan_any
    ratio = np.where(lim > 0, d / np.where(lim > 0, lim, 1.0), np.where(d > 0, np.inf, 0.0))
    ratio = np.where(nan_any, np.inf, ratio)
    worst = None
    worst_ratio = 0.0
    if fail.any():
        i = int(np.argmax(np.where(fail, ratio, -1.0)))
        worst, worst_ratio = tuple(int(v) for v in np.unravel_index(i, shape)), float(ratio[i])
    small = int(np.sum(fail & ~nan_any & (np.abs(e) < small_cut)))
    return AllcloseReport(rtol, atol, int(fail.sum()), small, worst, worst_ratio)


# ------------------------------------------------------------------------------ scale


def _median_floor(e: np.ndarray, finite: np.ndarray) -> np.ndarray:
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


# ------------------------------------------------------------------------- simulation

SIM_ORDERS = ("sequential, fused multiply-add", "sequential", "reverse", "pairwise",
              "8 lanes, then pairwise (CPU SIMD-like)", "32 lanes, then pairwise (GPU warp-like)",
              "split-K: 4 chunks", *(f"random order #{i + 1}" for i in range(SIM_PERMUTATIONS)))


def _pairwise_rows(x: np.ndarray) -> np.ndarray:
    n = x.shape[1]
    size = 1 << max(0, (n - 1).bit_length())
    level = np.zeros((x.shape[0], size), dtype=x.dtype)
    level[:, :n] = x
    while level.shape[1] > 1:
        level = level[:, 0::2] + level[:, 1::2]
    return level[:, 0]


def _sequential_rows(x: np.ndarray) -> np.ndarray:
    return np.add.accumulate(x, axis=1)[:, -1]


def _lanes_rows(x: np.ndarray, lanes: int) -> np.ndarray:
    e, n = x.shape
    rows = -(-n // lanes)
    padded = np.zeros((e, rows * lanes), dtype=x.dtype)
    padded[:, :n] = x
    per_lane = np.add.accumulate(padded.reshape(e, rows, lanes), axis=1)[:, -1, :]
    return _pairwise_rows(per_lane)


def _split_rows(x: np.ndarray, chunks: int = 4) -> np.ndarray:
    n = x.shape[1]
    size = -(-n // chunks)
    parts = [_sequential_rows(x[:, s:s + size]) for s in range(0, n, size)]
    return _sequential_rows(np.stack(parts, axis=1))


def fma_sequential(terms: np.ndarray) -> np.ndarray:
    """Left-to-right float32 sums acc = fl32(acc + t_k) of exact float64 terms, each step
    rounded once (a fused multiply-add): the float64 sum is made round-to-odd with TwoSum,
    and rounding a round-to-odd value of 53 bits to 24 bits is the correct rounding of the
    exact sum (Boldo and Melquiond, 2008)."""
    acc = np.zeros(terms.shape[0], dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(terms.shape[1]):
            t = terms[:, k]
            s = acc + t
            bb = s - acc
            err = (acc - (s - bb)) + (t - bb)
            even = (s.view(np.int64) & 1) == 0
            fix = (err != 0) & even & np.isfinite(s)
            if fix.any():
                s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
            acc = s.astype(np.float32).astype(np.float64)
    return acc


def _sum_orders(terms: np.ndarray, acc: str, fused: bool, seed: int = 0) -> np.ndarray:
    """(E, len(SIM_ORDERS)) results of each order in the accumulation format (float64 values).
    Columns whose order does not apply (no fused emulation) repeat the plain sequential sum."""
    dt = np.float32 if acc == "float32" else np.float64
    with np.errstate(over="ignore", invalid="ignore"):
        t = terms.astype(dt)  # products rounded to the accumulation format (exact for a summed vector)
        seq = _sequential_rows(t)
        out = [fma_sequential(terms) if fused else seq, seq, _sequential_rows(t[:, ::-1]), _pairwise_rows(t),
               _lanes_rows(t, 8), _lanes_rows(t, 32), _split_rows(t)]
        rng = np.random.default_rng(seed)
        for _ in range(SIM_PERMUTATIONS):
            out.append(_sequential_rows(t[:, rng.permutation(t.shape[1])]))
    return np.stack([np.asarray(o, dtype=np.float64) for o in out], axis=1)


def _one_order(terms: np.ndarray, fused: bool) -> np.ndarray:
    """The sequential float32 sum (fused when possible): the reduced-precision side's result."""
    if fused:
        return fma_sequential(terms)
    with np.errstate(over="ignore", invalid="ignore"):
        return _sequential_rows(terms.astype(np.float32)).astype(np.float64)


def _sample(score: np.ndarray, candidates: np.ndarray, count: int) -> np.ndarray:
    """The ``count // 2`` highest-scoring candidates plus a seeded random draw of the rest."""
    if candidates.size <= count:
        return np.sort(candidates)
    order = candidates[np.argsort(-score[candidates], kind="stable")]
    top = order[: count // 2]
    rest = order[count // 2:]
    extra = np.random.default_rng(0).choice(rest, size=count - top.size, replace=False)
    return np.sort(np.concatenate([top, extra]))


def simulate(inputs: Inputs, a: np.ndarray, e: np.ndarray, fmt: str, elements: np.ndarray,
             reduced_keys: tuple[str, ...]) -> Simulation:
    """Recompute the sampled outputs from the inputs in ``SIM_ORDERS`` (see the module docstring)."""
    acc = accumulation_format(fmt)
    fused = inputs.kind == "matmul" and acc == "float32" and inputs.k <= SIM_FMA_MAX_K
    notes = []
    if inputs.kind == "matmul" and acc == "float32" and not fused:
        notes.append(f"K = {inputs.k:,} is above {SIM_FMA_MAX_K:,}: the fused multiply-add order is replaced by a "
                     "plain sequential sum of rounded products.")
    if inputs.fmt == "float64":
        notes.append("The inputs are float64: their products are rounded to float64 before summing, so the "
                     "reference is not exact.")
    n_cols = inputs.b.shape[1] if inputs.kind == "matmul" else 1
    terms = inputs.terms(elements, n_cols)
    results = _sum_orders(terms, acc, fused)
    f = FORMATS[fmt]
    if f.precision < FORMATS[acc].precision:
        results = round_precision(results, f.precision, f.emin, float(f.max_finite))
    reference = np.array([math.fsum(row) for row in terms])
    reduced = {}
    for key in reduced_keys:
        p = REDUCED_FORMATS[key]
        # the input rounding dominates: fused or not hardly matters, and the plain sum is fast
        r = _one_order(inputs.rounded_terms(elements, n_cols, key), False)
        if p.rounds_output:
            r = round_to(r, key)
        if f.precision < 24:
            r = round_precision(r, f.precision, f.emin, float(f.max_finite))
        reduced[key] = r
    flat_a, flat_e = a.reshape(-1)[elements], e.reshape(-1)[elements]
    unit = _fmt_ulp(flat_e, f)
    with np.errstate(invalid="ignore", over="ignore"):
        return Simulation(inputs.kind, inputs.k, elements, SIM_ORDERS, results, reference, reduced,
                          np.abs(flat_a - flat_e), unit, np.abs(flat_a - reference), np.abs(flat_e - reference),
                          tuple(notes))


# -------------------------------------------------------------------------- diagnose


NEXT_CHECKS = (
    "Same inputs? Hash the inputs of both runs (and the weights) just before the operation; a difference there "
    "is not the operation's fault.",
    "Randomness: dropout, data augmentation, random initialisation or sampling without a shared seed. CPU and "
    "CUDA generators give different streams even with the same seed.",
    "Nondeterministic operations: atomics in index_add_, scatter_add_, embedding and interpolation backward on "
    "GPUs. torch.use_deterministic_algorithms(True) makes torch raise where one is used.",
    "Uninitialised memory: torch.empty / empty_like / new_empty read before every element is written gives "
    "different garbage (sometimes NaN) each run.",
    "A real bug: a wrong axis, an off-by-one slice, an unintended broadcast, a missing mask, a stale buffer.",
)


def _check_k(reduction_length, inputs: Inputs | None) -> tuple[int, str]:
    if reduction_length is not None:
        if isinstance(reduction_length, bool) or not isinstance(reduction_length, int | np.integer) \
                or reduction_length < 1:
            raise ValueError(f"reduction_length must be a whole number of at least 1 (got {reduction_length!r})")
        k = int(reduction_length)
        if inputs is not None and inputs.k != k:
            raise ValueError(f"reduction_length = {k:,}, but the inputs sum {inputs.k:,} terms per element")
        return k, "given"
    if inputs is not None:
        return inputs.k, "inputs"
    return ASSUMED_K, "assumed"


def _reduced_keys(fmt: str, reduced_precision: str | None) -> tuple[str, ...]:
    choice = "none" if reduced_precision is None else reduced_precision
    if choice not in REDUCED_PRECISION_CHOICES:
        raise ValueError(f"reduced_precision must be one of {', '.join(REDUCED_PRECISION_CHOICES)}")
    if choice == "none":
        return ()
    cands = _candidates(fmt)
    return cands if choice == "any" else tuple(c for c in cands if c == choice) or (choice,)


def diagnose(actual, expected, *, reduction_length: int | None = None, dtype: str | None = None,
             reduced_precision: str | None = "any", inputs=None, simulate_orders: bool = True) -> Diagnosis:
    """Diagnose the difference between two results of the same computation.

    ``reduction_length``: K, the number of terms summed into each element (the inner
    dimension of a matrix product, the length of the summed axis), when known; ``dtype``:
    the format the computation ran in (default: the arrays' own, the narrower of the two);
    ``reduced_precision``: which reduced-precision explanations to consider ("any", "none",
    or one of "float32", "tf32", "float16", "bfloat16"); ``inputs``: the operands, ``(a, b)``
    of ``a @ b`` or one array whose last axis was summed (or an ``Inputs`` from
    ``prepare_inputs``), for rigorous bounds and the simulation. Raises TypeError / ValueError
    for inputs it cannot diagnose.
    """
    a, fa = as_float_array(actual, "actual")
    e, fe = as_float_array(expected, "expected")
    if a.shape != e.shape:
        raise ValueError(f"actual has shape {a.shape} but expected has shape {e.shape}")
    if a.size == 0:
        raise ValueError("the arrays are empty")
    if a.size > MAX_ELEMENTS:
        raise ValueError(f"the arrays hold {a.size:,} elements; at most {MAX_ELEMENTS:,} are diagnosed")
    fmt_name = dtype if dtype is not None else narrower(fa, fe)
    if fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; choose one of {', '.join(FORMATS)}")
    fmt, acc_name = FORMATS[fmt_name], accumulation_format(fmt_name)
    acc = FORMATS[acc_name]
    ops = inputs if isinstance(inputs, Inputs) or inputs is None else prepare_inputs(inputs, a.shape)
    if ops is not None and ops.a.shape[0] * (ops.b.shape[1] if ops.b is not None else 1) != a.size:
        raise ValueError("the prepared inputs do not match the compared results")
    k, k_source = _check_k(reduction_length, ops)
    keys = _reduced_keys(fmt_name, reduced_precision)
    shape = a.shape
    notes: list[str] = []
    if fa != fe:
        notes.append(f"actual is {fa} and expected is {fe}: differences are measured in {fmt_name}.")
    if k_source == "assumed":
        notes.append(f"K (terms per element) is unknown: the envelopes assume K = {ASSUMED_K:,}. Give K (or the "
                     "inputs) for a sharper envelope.")

    af, ef = a.reshape(-1), e.reshape(-1)
    fin = np.isfinite(af) & np.isfinite(ef)
    both_nan = np.isnan(af) & np.isnan(ef)
    nan_mismatch = np.isnan(af) != np.isnan(ef)
    with np.errstate(invalid="ignore"):
        same_inf = ~fin & ~both_nan & (af == ef)
    inf_mismatch = ~fin & ~both_nan & ~same_inf & ~nan_mismatch
    nonfinite = np.flatnonzero(nan_mismatch | inf_mismatch)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        d = np.where(fin, np.abs(af - ef), np.nan)
        rel = np.where(fin, np.where(ef != 0, d / np.abs(ef), np.where(d > 0, np.inf, 0.0)), np.nan)
        unit = _fmt_ulp(np.where(fin, ef, 0.0), fmt)
        ulps = np.where(fin, d / unit, np.nan)
    n_signed_zero = int(np.sum(fin & (af == 0) & (ef == 0) & (np.signbit(af) != np.signbit(ef))))
    differ = fin & (d > 0)

    # ---- scale and envelopes
    m = np.where(fin, np.maximum(np.abs(af), np.abs(ef)), 0.0)
    sum_abs = rows_abs = sq = None
    if ops is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            if ops.kind == "matmul":
                sum_abs = (np.abs(ops.a) @ np.abs(ops.b)).reshape(-1)
                sq = np.sqrt((ops.a * ops.a) @ (ops.b * ops.b)).reshape(-1)
                rows_abs = (np.abs(ops.a).sum(1)[:, None] + np.abs(ops.b).sum(0)[None, :]).reshape(-1)
            else:
                sum_abs = np.abs(ops.a).sum(1)
                sq = np.sqrt((ops.a * ops.a).sum(1))
                rows_abs = sum_abs
        sum_abs = sum_abs * (1 + 4 * k * 2.0**-53)
        good = np.isfinite(sum_abs) & np.isfinite(sq)
        if not good.all():
            notes.append("Some inputs are not finite or too large to square: those elements use the estimated scale.")
    floor = _median_floor(e, fin.reshape(shape)).reshape(-1)
    if ops is not None:
        s = np.maximum(m, np.where(good, sq, floor))
        sum_abs_used = np.where(good, sum_abs, math.sqrt(k) * s)
    else:
        s = np.maximum(m, floor)
        sum_abs_used = math.sqrt(k) * s
    rigorous = ops is not None

    sim = None
    if ops is not None and simulate_orders:
        cand = np.flatnonzero(fin)
        budget = max(1, min(SIM_ELEMENTS, SIM_TERMS // max(k, 1)))
        if cand.size:
            score = np.where(fin, d / np.maximum(s, np.finfo(float).tiny), 0.0)
            sim = simulate(ops, af, ef, fmt_name, _sample(score, cand, budget),
                           tuple(kk for kk in keys if _inputs_fit(ops, kk)))
            notes += list(sim.notes)

    envs = [_reordering_envelope(d, fin, m, s, sum_abs_used, rigorous, k, fmt, acc, sim)]
    for key in keys:
        envs.append(_reduced_envelope(key, d, fin, m, s, sum_abs_used, rows_abs, ops, k, fmt, acc, sim))

    pattern = _pattern(d, fin, s, fmt)

    # ---- verdict
    reasons: list[str] = []
    explanation = None
    reorder = envs[0]
    if nonfinite.size:
        verdict = "too_large"
        reasons.append(f"NaN or infinity in one result but not the other at {nonfinite.size:,} element(s) "
                       f"({int(nan_mismatch.sum()):,} NaN, {int(inf_mismatch.sum()):,} infinite): no rounding of a "
                       "finite computation turns a finite value into NaN, and no tolerance accepts inf against a "
                       "finite number.")
        near = np.abs(np.where(np.isfinite(af), af, ef)[inf_mismatch]) if inf_mismatch.any() else np.array([])
        if near.size and np.any(near > float(fmt.max_finite) / 2):
            reasons.append(f"The finite side is within a factor of 2 of {fmt_name}'s largest value: one run may have "
                           "overflowed where the other just did not (an order-dependent overflow).")
    elif not differ.any():
        verdict = "identical"
        reasons.append(f"All {a.size:,} elements have equal values.")
        if n_signed_zero:
            reasons.append(f"{n_signed_zero:,} of them are +0 against -0: equal as numbers, different in the sign bit.")
        if both_nan.any():
            reasons.append(f"{int(both_nan.sum()):,} element(s) are NaN in both.")
    elif pattern.localized:
        verdict = "too_large"
        reasons.append(
            f"{pattern.outliers.size:,} element(s) are far off (up to {pattern.worst:,.3g} ULPs of their scale) while "
            f"the rest agree to {pattern.level:,.3g} ULP(s) or better: rounding spreads over all elements, so "
            "isolated large differences are not rounding, whatever their size. (Only if just those elements were "
            "computed by another kernel, an edge tile say, could they be; their positions are listed below.)")
    elif reorder.fits:
        verdict = "reordering"
        reasons.append(_fit_reason(reorder, k, acc_name))
    else:
        fitting = next((env for env in envs[1:] if env.fits), None)
        reasons.append(f"{reorder.exceed:,} element(s) exceed the reordering envelope (up to "
                       f"{reorder.worst_ratio:,.3g} times it): another summation order in {acc_name} does not "
                       "explain them.")
        if fitting is not None:
            verdict, explanation = "reduced_precision", fitting.key
            reasons.append(_fit_reason(fitting, k, acc_name))
            reasons.append("If neither side can have used reduced precision (TF32, autocast, .half(), "
                           "torch.set_float32_matmul_precision), treat this as too large.")
        else:
            verdict = "too_large"
            for env in envs[1:]:
                if env.exceed:
                    reasons.append(f"{env.name}: {env.exceed:,} element(s) exceed its envelope (up to "
                                   f"{env.worst_ratio:,.3g} times it).")
                else:
                    reasons.append(f"{env.name}: every element is inside its envelope, but such inputs would move "
                                   f"most elements by about its typical size, and the median element differs by only "
                                   f"{env.bulk_ratio:.2g} of it (at least {BULK_SHARE:.3g} expected): the large "
                                   "differences are confined to some elements.")
            if not envs[1:]:
                reasons.append("Reduced precision was ruled out.")
    if pattern.applicable and verdict in ("reordering", "reduced_precision"):
        reasons.append(f"The pattern check found no isolated outliers (the largest difference is "
                       f"{pattern.worst:,.3g} ULPs of its scale; the other 99 % reach {pattern.level:,.3g}).")
    if sim is not None:
        reasons += _simulation_reasons(sim, envs, verdict, explanation)

    # ---- tolerances
    df, efin = d[fin], ef[fin]
    rtol = atol = margin = env_rtol = env_atol = None
    if verdict != "too_large":
        rtol0, atol0 = _tolerances(df, efin)
        if verdict != "identical":  # another order can always move the last bit: at least one ULP, relatively
            rtol0 = max(rtol0, 2.0 ** (1 - fmt.precision))
        rtol, atol = nice_up(MARGIN * rtol0), nice_up(MARGIN * atol0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lim = atol + rtol * np.abs(efin)
            margin = float(np.min(np.where(df > 0, lim / df, np.inf))) if df.size else math.inf
        chosen = reorder if verdict in ("identical", "reordering") else next(x for x in envs if x.key == explanation)
        env_rtol, env_atol = _envelope_tolerances(chosen, fin, ef)
    c = float(np.median(np.abs(efin))) if efin.size else 0.0
    nan_any = np.isnan(af) | np.isnan(ef)
    d_all = np.where(fin, d, np.where(nan_any | ~(same_inf | fin), np.inf, 0.0))
    ac = _allclose(d_all, np.where(np.isfinite(ef), ef, 0.0), nan_any, *ALLCLOSE_DEFAULT, shape, c * 1e-2)
    defaults = ASSERT_CLOSE_DEFAULTS[narrower(fa, fe)]
    acd = _allclose(d_all, np.where(np.isfinite(ef), ef, 0.0), nan_any, *defaults, shape, c * 1e-2)

    worst = _worst(af, ef, d, rel, ulps, reorder, envs, fin, nonfinite, shape)
    sentence = _sentence(verdict, explanation, ef, rel, ulps, fin, differ, k, k_source, acc_name, fmt_name,
                         rtol, atol, pattern, nonfinite.size, a.size)
    return Diagnosis(
        verdict=verdict, sentence=sentence, reasons=tuple(reasons), explanation=explanation, rtol=rtol, atol=atol,
        equal_nan=bool(both_nan.any()), check_dtype=fa == fe, margin=margin, envelope_rtol=env_rtol,
        envelope_atol=env_atol, shape=tuple(shape), size=int(a.size), fmt=fmt_name, acc_fmt=acc_name,
        actual_fmt=fa, expected_fmt=fe, k=k, k_source=k_source, abs_diff=d, rel_diff=rel, ulp_diff=ulps, scale=s,
        abs_stats=Distribution.of(d), rel_stats=Distribution.of(rel), ulp_stats=Distribution.of(ulps),
        n_compared=int(fin.sum()), n_differ=int(differ.sum()), n_signed_zero=n_signed_zero,
        n_both_nan=int(both_nan.sum()), nan_mismatch=int(nan_mismatch.sum()), inf_mismatch=int(inf_mismatch.sum()),
        nonfinite_index=nonfinite, envelopes=tuple(envs), pattern=pattern, simulation=sim, allclose=ac,
        assert_close_defaults=acd, worst=worst, next_checks=NEXT_CHECKS if verdict == "too_large" else (),
        notes=tuple(notes),
    )


def _inputs_fit(ops: Inputs, key: str) -> bool:
    """float16 cannot hold inputs beyond its range: that explanation is skipped in the simulation."""
    lim = REDUCED_FORMATS[key].max_finite
    big = float(np.max(np.abs(ops.a))) if ops.a.size else 0.0
    if ops.b is not None and ops.b.size:
        big = max(big, float(np.max(np.abs(ops.b))))
    return not big > lim


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


def _check(d, fin, env) -> tuple[int, float]:
    with np.errstate(divide="ignore", invalid="ignore"):
        over = fin & ~(d <= env)
        ratio = np.where(env > 0, d / np.where(env > 0, env, 1.0), np.where(d > 0, np.inf, 0.0))
    worst = float(np.max(np.where(fin, ratio, 0.0))) if fin.any() else 0.0
    return int(over.sum()), worst


def _reordering_envelope(d, fin, m, s, sum_abs, rigorous, k, fmt: FloatFormat, acc: FloatFormat,
                         sim: Simulation | None) -> EnvelopeCheck:
    u = float(acc.unit_roundoff)
    out = _fmt_ulp(m, fmt) if fmt.precision < acc.precision else np.zeros_like(m)
    # u sqrt(K) s, plus sqrt(K) smallest subnormals: roundings in the subnormal range are absolute
    core = u * math.sqrt(k) * s + math.sqrt(k) * float(acc.min_subnormal)
    bound_core = 2 * gamma(k, u) * sum_abs + k * float(acc.min_subnormal)
    factor = _widened(ENVELOPE_FACTOR, core, out, sim.spread if sim is not None else None,
                      sim.elements if sim is not None else None)
    with np.errstate(invalid="ignore"):
        env = np.minimum(bound_core, factor * core) + out
    exceed, worst = _check(d, fin, env)
    notes = () if rigorous else ("The bound uses the estimate sum|x| ≈ √K·scale (no inputs given).",)
    return EnvelopeCheck("reordering", f"Reordering in {acc.name}",
                         f"the same {k:,}-term sums added in another order, accumulating in {acc.name}"
                         + (f", rounded to {fmt.name}" if fmt.precision < acc.precision else ""),
                         np.where(fin, core + out, np.nan), np.where(fin, env, np.nan),
                         np.where(fin, bound_core + out, np.nan), rigorous, factor, exceed, worst, notes)


def _reduced_envelope(key, d, fin, m, s, sum_abs, rows_abs, ops: Inputs | None, k, fmt: FloatFormat,
                      acc: FloatFormat, sim: Simulation | None) -> EnvelopeCheck:
    p = REDUCED_FORMATS[key]
    u_p, h = p.u, p.half_min_subnormal
    u_in = 2 * u_p if p.may_truncate else u_p  # the largest relative change of one input's conversion
    u32, u_acc = 2.0**-24, float(acc.unit_roundoff)
    if ops is not None and ops.kind == "sum":
        e_in = u_in * sum_abs + k * h
    elif ops is not None:
        e_in = (2 * u_in + u_in * u_in) * sum_abs + h * (1 + u_in) * rows_abs + k * h * h
    else:
        e_in = (2 * u_in + u_in * u_in) * sum_abs
    bound_core = (e_in + gamma(k, u32) * (sum_abs + e_in) + gamma(k, u_acc) * sum_abs + k * 2.0**-149
                  + k * float(acc.min_subnormal))
    out = _fmt_ulp(m, fmt) if fmt.precision < acc.precision else np.zeros_like(m)
    if p.rounds_output:
        out = np.maximum(out, ulp_array(m, p.precision, p.emin))
    core = (u_p + u32 * math.sqrt(k)) * s + math.sqrt(k) * (2.0**-149 + 2 * h)
    notes = []
    spread = None
    if sim is not None and key in sim.reduced:
        spread = np.max(np.abs(sim.reduced[key][:, None] - sim.results), axis=1)
    elif sim is not None:
        notes.append(f"The inputs do not fit {p.name}'s range: not simulated.")
    factor = _widened(ENVELOPE_FACTOR, core, out, spread, sim.elements if sim is not None else None)
    # Truncation shrinks every product toward zero by 2 u_P on average: a bias of about 2 u_P |S| on top of the
    # unbiased spread, which a large |S| against the scale s can carry beyond Z T_P (found by hypothesis).
    bias = 2 * u_p * m if p.may_truncate else 0.0
    with np.errstate(invalid="ignore"):
        env = np.minimum(bound_core, factor * core + bias) + out
    exceed, worst = _check(d, fin, env)
    typical = core + out
    with np.errstate(divide="ignore", invalid="ignore"):
        bulk = float(np.median(np.where(typical[fin] > 0, d[fin] / typical[fin], 0.0))) if fin.any() else 0.0
    if ops is None:
        notes.append("The bound uses the estimate sum|x| ≈ √K·scale (no inputs given).")
    return EnvelopeCheck(key, f"{p.name} inputs", p.what, np.where(fin, typical, np.nan), np.where(fin, env, np.nan),
                         np.where(fin, bound_core + out, np.nan), ops is not None, factor, exceed, worst, tuple(notes),
                         bulk)


def _pattern(d, fin, s, fmt: FloatFormat) -> PatternCheck:
    n = int(fin.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(fin, d / _fmt_ulp(np.where(fin, s, 0.0), fmt), 0.0)
    worst = float(q.max()) if n else 0.0
    if n < MIN_PATTERN_ELEMENTS:
        return PatternCheck(False, 1.0, np.array([], dtype=np.int64), worst)
    kk = max(1, int(OUTLIER_SHARE * n))
    qs = np.sort(q[fin])[::-1]
    level = max(float(qs[kk]), 1.0)
    out = np.flatnonzero(fin & (q > OUTLIER_FACTOR * level))
    return PatternCheck(True, level, out, worst)


def _envelope_tolerances(env: EnvelopeCheck, fin, ef) -> tuple[float, float]:
    """Tolerances that admit every difference up to this explanation's envelope."""
    lim = env.envelope[fin]
    if lim.size == 0:
        return 0.0, 0.0
    r0, a0 = _tolerances(lim, ef[fin])
    return nice_up(r0), nice_up(a0)


def _fit_reason(env: EnvelopeCheck, k: int, acc: str) -> str:
    kind = "rigorous a-priori bound (from the inputs)" if env.bound_rigorous else "estimated a-priori bound"
    return (f"Every element is within the envelope of {env.name[0].lower() + env.name[1:]} "
            f"(the largest difference uses {env.worst_ratio:.2g} of it): min({kind}, {env.factor:g} × typical), "
            f"with typical = " + ("u·√K·scale" if env.key == "reordering" else "(u_in + u_32·√K)·scale")
            + f" for K = {k:,}.")


def _simulation_reasons(sim: Simulation, envs, verdict, explanation) -> list[str]:
    out = []
    n = sim.elements.size
    p = sim.pair_diffs_ulps
    umax = float(np.max(sim.user_ulps)) if n else 0.0
    pmax = float(np.max(p)) if p.size else 0.0
    out.append(f"Simulation: {len(sim.orders)} summation orders of the inputs on {n:,} sampled element(s) differ "
               f"from each other by up to {pmax:,.3g} ULPs; your differences there reach {umax:,.3g} ULPs, and "
               f"{sim.within:,} of {n:,} lie within their element's spread of orders.")
    if explanation is not None and explanation in sim.reduced:
        rd = sim.reduced_diffs_ulps(explanation)
        u = sim.user_ulps
        out.append(f"With the inputs rounded to {REDUCED_FORMATS[explanation].name}, the simulated results move by "
                   f"a median {float(np.median(rd)):,.3g} ULPs (at most {float(np.max(rd)):,.3g}) from the "
                   f"full-precision orders; your differences there: median {float(np.median(u)):,.3g}, at most "
                   f"{float(np.max(u)):,.3g} ULPs.")
    env_r = envs[0].envelope[sim.elements]
    a_ok = sim.actual_err <= env_r
    e_ok = sim.expected_err <= env_r
    if verdict == "too_large" and e_ok.all() and not a_ok.all():
        out.append("expected is within reordering distance of the exact result of these inputs at every sampled "
                   f"element; actual is not at {int((~a_ok).sum()):,} of them.")
    elif verdict == "too_large" and a_ok.all() and not e_ok.all():
        out.append("actual is within reordering distance of the exact result of these inputs at every sampled "
                   f"element; expected is not at {int((~e_ok).sum()):,} of them.")
    widest = envs[-1].envelope[sim.elements] if len(envs) > 1 else env_r
    if np.mean((sim.actual_err > widest) & (sim.expected_err > widest)) > 0.5:
        out.append("Neither result is near the exact result of the inputs given at most sampled elements: are "
                   "these the inputs behind them?")
    return out


def _worst(af, ef, d, rel, ulps, reorder: EnvelopeCheck, envs, fin, nonfinite, shape, count: int = 10):
    rows = []
    for i in nonfinite[:count]:
        rows.append(WorstElement(tuple(int(v) for v in np.unravel_index(int(i), shape)), float(af[i]), float(ef[i]),
                                 math.nan, math.nan, math.nan, math.inf, ()))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(fin, d / reorder.typical, -1.0)
        ratio = np.where(fin & (reorder.typical == 0), np.where(d > 0, np.inf, 0.0), ratio)
    cand = np.flatnonzero(fin & (d > 0))
    if cand.size and len(rows) < count:
        top = cand[np.argsort(-ratio[cand], kind="stable")[: count - len(rows)]]
        for i in top:
            rows.append(WorstElement(tuple(int(v) for v in np.unravel_index(int(i), shape)), float(af[i]),
                                     float(ef[i]), float(d[i]), float(rel[i]), float(ulps[i]), float(ratio[i]),
                                     tuple(env.key for env in envs if d[i] <= env.envelope[i])))
    return tuple(rows)


def _size_text(ef, rel, ulps, fin, differ) -> str:
    """"median 3 ULPs where they differ, at most 2.1e-06 relative at ordinary magnitudes" (elements at
    least as large as the median |expected|)."""
    if not differ.any():
        return "none"
    med = float(np.median(ulps[differ]))
    mag = np.abs(ef)
    c = float(np.median(mag[fin])) if fin.any() else 0.0
    ordinary = fin & (mag >= c) & (mag > 0)
    rmax = float(np.max(rel[ordinary])) if ordinary.any() else float(np.max(rel[fin]))
    return (f"median {_ulps(med)} where they differ, at most {rmax:.2g} relative at ordinary magnitudes")


def _ulps(x: float) -> str:
    return "1 ULP" if x == 1 else f"{x:,.3g} ULPs"


def _sentence(verdict, explanation, ef, rel, ulps, fin, differ, k, k_source, acc, fmt, rtol, atol, pattern, n_nonfinite,
              size) -> str:
    if verdict == "identical":
        return f"Identical: all {size:,} elements have the same value, so any tolerance passes (even rtol=0, atol=0)."
    size_txt = _size_text(ef, rel, ulps, fin, differ)
    kk = f"K = {k:,}" + (" (assumed)" if k_source == "assumed" else "")
    tol = f"rtol={format_tol(rtol)}, atol={format_tol(atol)}" if rtol is not None else ""
    if verdict == "reordering":
        return (f"Normal rounding noise: {int(differ.sum()):,} of {size:,} elements differ ({size_txt}), as much "
                f"as adding the same {kk} terms in another order in {acc} does; compare with {tol}.")
    if verdict == "reduced_precision":
        p = REDUCED_FORMATS[explanation]
        also = " (or float16, which keeps as many bits)" if explanation == "tf32" else ""
        return (f"Expected for reduced precision: the differences ({size_txt}) are too large for another summation "
                f"order in {acc} but fit {p.name} inputs{also} with float32 accumulation; compare with {tol} if that "
                "precision is intended.")
    if n_nonfinite:
        return f"Too large for rounding: {n_nonfinite:,} element(s) are NaN or infinite in only one of the results."
    if pattern.localized:
        return (f"Too large for rounding: {pattern.outliers.size:,} element(s) are far off ({size_txt}) while "
                "the rest agree, which is the signature of a bug, not of rounding.")
    return (f"Too large for rounding: the differences ({size_txt}) exceed what any summation order or reduced "
            f"precision explains for {kk}; look for a bug or a different input.")
