"""Recommended tolerances for a mismatch, and the allclose checks with given tolerances.

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
from dataclasses import dataclass

import numpy as np

MARGIN = 4.0  # recommended tolerances are at least this many times what the data needs
ALLCLOSE_DEFAULT = (1e-5, 1e-8)  # torch.allclose / numpy.allclose: rtol, atol
# torch.testing.assert_close's defaults by dtype (rtol, atol), from its documentation
ASSERT_CLOSE_DEFAULTS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                         "float64": (1e-7, 1e-7)}


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


def covering_tolerances(d: np.ndarray, e: np.ndarray) -> tuple[float, float]:
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


@dataclass(frozen=True, kw_only=True)
class AllcloseReport:
    rtol: float
    atol: float
    failing: int  # elements that fail |d| <= atol + rtol |expected| (NaN always fails)
    failing_small: int  # ... of which |expected| is below 1 % of the median magnitude
    worst_index: tuple[int, ...] | None
    worst_ratio: float  # |d| / (atol + rtol |expected|) at the worst element


def allclose_report(d, e, nan_any: np.ndarray, rtol: float, atol: float, shape, small_cut: float) -> AllcloseReport:
    """Which elements fail |d| <= atol + rtol |e| (NaN always fails), and the worst of them."""
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
    return AllcloseReport(
        rtol=rtol, atol=atol, failing=int(fail.sum()), failing_small=small, worst_index=worst, worst_ratio=worst_ratio
    )
