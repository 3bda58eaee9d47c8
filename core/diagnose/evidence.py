"""What the Diagnose page shows as evidence, computed from a ``Diagnosis``: each envelope's typical
relative size, histograms of the differences on a log scale with each envelope at its median element,
the simulation's spread and errors in ULPs, where the outliers sit, and a loss log's fitted growth.

The page's charts and tables draw these as they are (``ui.diagnose_view``); every number here is a
plain float or a tuple of them, so each can be tested without drawing anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.arith.metrics import GrowthFit
from core.diagnose.results import Diagnosis, Simulation

HIST_BINS = 40  # at most, for the differences; a quarter of a decade each
SIM_HIST_BINS = 30  # at most, for the simulation's series


@dataclass(frozen=True, kw_only=True)
class LogHistogram:
    """Counts of positive finite values in bins a quarter of a decade wide (or wider, to stay within the
    bin limit): bin i holds the values from ``lo[i]`` to ``hi[i]``."""

    lo: tuple[float, ...]
    hi: tuple[float, ...]
    count: tuple[int, ...]

    @property
    def empty(self) -> bool:
        return not self.count


def log_histogram(values: np.ndarray, bins: int = HIST_BINS) -> LogHistogram:
    """The positive finite ``values`` binned on a log scale, the edges on quarter decades."""
    v = values[np.isfinite(values) & (values > 0)]
    if v.size == 0:
        return LogHistogram(lo=(), hi=(), count=())
    lv = np.log10(v)
    lo, hi = math.floor(lv.min() * 4) / 4, math.ceil(lv.max() * 4) / 4
    if hi <= lo:
        hi = lo + 0.25
    counts, edges = np.histogram(lv, bins=min(bins, max(1, int((hi - lo) * 4))), range=(lo, hi))
    return LogHistogram(lo=tuple(float(x) for x in 10 ** edges[:-1]), hi=tuple(float(x) for x in 10 ** edges[1:]),
                        count=tuple(int(c) for c in counts))


@dataclass(frozen=True, kw_only=True)
class EnvelopeMark:
    """One envelope at the median differing element, in the histogram's unit."""

    key: str  # the envelope's key (Envelope.key)
    index: int  # its place in Diagnosis.envelopes
    at: float


@dataclass(frozen=True, kw_only=True)
class DifferenceHistogram:
    """The differing elements' differences (in ULPs of B, or relative to |B|) and each envelope's median."""

    kind: str  # "ulp" or "rel"
    histogram: LogHistogram
    marks: tuple[EnvelopeMark, ...]


def ulp_sizes(d: Diagnosis) -> np.ndarray:
    """The size of one ULP of B at each element, where the elements differ (NaN elsewhere)."""
    differ = ~np.isnan(d.abs_diff) & (d.abs_diff > 0)
    return np.where(differ, d.abs_diff / np.where(d.ulp_diff > 0, d.ulp_diff, np.inf), np.nan)


def difference_evidence(d: Diagnosis, kind: str) -> DifferenceHistogram:
    """ULP (``kind="ulp"``) or relative (``"rel"``) differences of the differing elements, with each envelope
    at its median element in the same unit (envelopes with no positive finite value there have no mark)."""
    if kind not in ("ulp", "rel"):
        raise ValueError(f"kind must be 'ulp' or 'rel', got {kind!r}")
    differ = ~np.isnan(d.abs_diff) & (d.abs_diff > 0)
    hist = log_histogram((d.ulp_diff if kind == "ulp" else d.rel_diff)[differ])
    marks = []
    if not hist.empty:
        unit = ulp_sizes(d)
        for i, env in enumerate(d.envelopes):
            if kind == "ulp":
                v = env.envelope[differ] / unit[differ]
            else:
                mag = np.abs(d.scale[differ])
                v = env.envelope[differ] / np.where(mag > 0, mag, np.nan)
            v = v[np.isfinite(v) & (v > 0)]
            if v.size:
                marks.append(EnvelopeMark(key=env.key, index=i, at=float(np.median(v))))
    return DifferenceHistogram(kind=kind, histogram=hist, marks=tuple(marks))


def typical_relative(d: Diagnosis) -> tuple[float, ...]:
    """Each envelope's typical size relative to its element's scale, at the median element (NaN when every
    compared element's scale is 0)."""
    fin = ~np.isnan(d.abs_diff)
    mags = np.abs(d.scale[fin])
    out = []
    for env in d.envelopes:
        t = env.typical[fin]
        out.append(float(np.median(t / mags[mags > 0])) if np.any(mags > 0) else math.nan)
    return tuple(out)


def outlier_positions(d: Diagnosis, limit: int = 12) -> tuple[tuple[int, ...], ...]:
    """The first ``limit`` isolated outliers of the pattern check, as positions in the result's shape."""
    if d.pattern is None:
        return ()
    return tuple(tuple(int(v) for v in np.unravel_index(int(i), d.shape)) for i in d.pattern.outliers[:limit])


@dataclass(frozen=True, kw_only=True)
class ShareHistogram:
    """A log histogram of one series, each bin's count as a share of the series' finite values."""

    histogram: LogHistogram
    share: tuple[float, ...]


def share_histogram(values: np.ndarray, bins: int = SIM_HIST_BINS) -> ShareHistogram:
    vals = np.asarray(values, dtype=np.float64)
    hist = log_histogram(vals, bins)
    finite = max(1, int(np.sum(np.isfinite(vals))))
    return ShareHistogram(histogram=hist, share=tuple(c / finite for c in hist.count))


@dataclass(frozen=True, kw_only=True)
class SimulationEvidence:
    """The simulated orders against the visitor's difference, in ULPs of B."""

    spread: float  # the largest difference between two simulated orders at one element (0 with none)
    orders: ShareHistogram  # the orders' pairwise differences
    user: ShareHistogram  # the visitor's differences at the sampled elements
    reduced: ShareHistogram | None  # inputs rounded to the explanation's format, against the orders
    actual_median: float  # median |result A − exact|
    expected_median: float
    actual_max: float  # largest |result A − exact|
    expected_max: float


def simulation_evidence(sim: Simulation, explanation: str | None = None) -> SimulationEvidence:
    """The simulation's spread, its series as histograms (``explanation``'s reduced inputs among them when the
    simulation ran that format) and both results' errors against the exact sums."""
    pairs = sim.pair_diffs_ulps
    reduced = (share_histogram(sim.reduced_diffs_ulps(explanation))
               if explanation is not None and explanation in sim.reduced else None)
    actual, expected = sim.actual_err / sim.unit, sim.expected_err / sim.unit
    return SimulationEvidence(
        spread=float(np.max(pairs)) if pairs.size else 0.0, orders=share_histogram(pairs),
        user=share_histogram(sim.user_ulps), reduced=reduced,
        actual_median=float(np.median(actual)), expected_median=float(np.median(expected)),
        actual_max=float(np.max(actual)), expected_max=float(np.max(expected)))


@dataclass(frozen=True, kw_only=True)
class Curve:
    """A line to draw: ``values[i]`` at ``steps[i]``."""

    steps: tuple[float, ...]
    values: tuple[float, ...]


def fitted_curve(fit: GrowthFit | None, points: int = 50) -> Curve | None:
    """The fitted exponential at ``points`` evenly spaced steps over the steps it was fitted on (None without a
    fit, or with a flat one)."""
    if fit is None or not fit.slope:
        return None
    steps = np.linspace(fit.first_step, fit.last_step, points)
    return Curve(steps=tuple(float(x) for x in steps), values=tuple(fit.at(x) for x in steps))
