"""The result dataclasses of a mismatch diagnosis: the distribution of one per-element quantity, each
explanation's envelope check, the pattern check, the simulation, the worst elements, and the Diagnosis that
holds them (the allclose reports are ``core.diagnose.tolerances.AllcloseReport``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from core.diagnose.tolerances import AllcloseReport, format_tol

BULK_SHARE = 1 / 16  # reduced precision: the median element must differ by at least this share of T_P (envelopes)


class Verdict(StrEnum):
    """What explains a difference, the smallest explanation first (core.diagnose.verdict defines each).

    A StrEnum: each member is its own name as text, so it prints, compares and serialises as that text."""
    IDENTICAL = "identical"
    REORDERING = "reordering"
    REDUCED_PRECISION = "reduced_precision"
    TOO_LARGE = "too_large"


REORDERING_ENVELOPE = "reordering"  # the key of the envelope of another summation order (the others: formats)


@dataclass(frozen=True, kw_only=True)
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
            return Distribution(count=0, max=math.nan, p50=math.nan, p90=math.nan, p99=math.nan, p999=math.nan)
        p50, p90, p99, p999 = (float(x[min(x.size - 1, math.ceil(p * (x.size - 1)))]) for p in (0.5, 0.9, 0.99, 0.999))
        return Distribution(count=int(x.size), max=float(x[-1]), p50=p50, p90=p90, p99=p99, p999=p999)


@dataclass(frozen=True, kw_only=True)
class EnvelopeCheck:
    """One explanation's envelope, element by element, and whether the data fits it."""

    key: str  # REORDERING_ENVELOPE, or a key of REDUCED_FORMATS
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
        return self.key == REORDERING_ENVELOPE or self.bulk_ratio >= BULK_SHARE

    @property
    def fits(self) -> bool:
        return self.exceed == 0 and self.bulk_ok


@dataclass(frozen=True, kw_only=True)
class PatternCheck:
    applicable: bool
    level: float  # the other 99 %'s level, ULPs of the local scale (at least 1)
    outliers: np.ndarray = field(repr=False)  # flat indices of the outliers
    worst: float  # the largest q

    @property
    def localized(self) -> bool:
        return self.applicable and self.outliers.size > 0


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class SideError:
    """One result's errors against the reference, in ULPs of the reference (core.diagnose.accuracy)."""

    name: str  # "result A" or "result B"
    median_ulps: float
    max_ulps: float
    beyond_bound: int  # judged elements whose error exceeds the bound
    worst_ratio: float  # the largest error / bound


@dataclass(frozen=True, kw_only=True)
class Accuracy:
    """Both results judged against a reference, never one against the other (core.diagnose.accuracy)."""

    source: str  # "given" (the visitor's reference) or "exact" (the exact result of the inputs)
    ref_fmt: str  # the reference's format ("exact": rounded once to float64)
    fmt: str  # the format the errors are counted in (ULPs of the reference in it)
    elements: np.ndarray = field(repr=False)  # flat indices judged
    reference: np.ndarray = field(repr=False)  # (E,) the reference, float64
    err_a: np.ndarray = field(repr=False)  # (E,) |A - R| in ULPs of R
    err_b: np.ndarray = field(repr=False)
    bound: np.ndarray = field(repr=False)  # (E,) the bound on one side's error, in the same ULPs
    bound_rigorous: bool  # sum|t| from the inputs
    side_a: SideError
    side_b: SideError
    a_closer: int
    b_closer: int
    ties: int
    sampled: bool  # only some of the elements were judged
    sentence: str  # the whole comparison, with the bound
    headline: str  # the comparison in one short line
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WorstElement:
    index: tuple[int, ...]
    actual: float
    expected: float
    abs_diff: float
    rel_diff: float
    ulps: float
    ratio_typical: float  # |d| / T_R
    fits: tuple[str, ...]  # envelope keys that hold this element


@dataclass(frozen=True, kw_only=True)
class Diagnosis:
    verdict: Verdict
    sentence: str  # the verdict in one sentence
    reasons: tuple[str, ...]  # why the verdict follows
    explanation: str | None  # the reduced-precision format key, for Verdict.REDUCED_PRECISION
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
    rel_typical_max: float = math.nan  # the largest relative difference among elements of at least median size
    accuracy: Accuracy | None = None  # both results against a reference, when one is given or computable

    def envelope(self, key: str) -> EnvelopeCheck | None:
        return next((e for e in self.envelopes if e.key == key), None)

    @property
    def assert_line(self) -> str | None:
        if self.rtol is None:
            return None
        extra = (", equal_nan=True" if self.equal_nan else "") + ("" if self.check_dtype else ", check_dtype=False")
        return (f"torch.testing.assert_close(result_a, result_b, rtol={format_tol(self.rtol)}, "
                f"atol={format_tol(self.atol)}{extra})")
