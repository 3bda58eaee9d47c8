"""Recommended tolerances for a mismatch, the allclose checks with given tolerances, and the words for the two
kinds of tolerance that the command and the pages give before a mismatch.

rtol0 = the largest |d| / |expected| over elements at least as large as the median
|expected|; atol0 = the largest remaining |d| - rtol0 |expected| over all elements, and at
least rtol0 * median|expected| (elements near zero carry the absolute noise of typical
ones). rtol and atol are ``MARGIN`` = 4 times those, rounded up to 1, 2 or 5 times a power
of ten, so every element satisfies |d| <= (atol + rtol |expected|) / 4 and
``torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)`` passes (it compares
in float64, as here). ``nice_up`` is the one rounding up of a tolerance: to 1, 2 or 5 times a power of
ten here, to two significant digits (``TWO_DIGITS``) for a tolerance suggested before any mismatch.

Two kinds of tolerance. A *typical* tolerance covers a rounding envelope of core.diagnose.envelopes:
a multiple of the typical error, which assumes that the rounding errors behave independently (a
heuristic). A *guarantee* covers the worst-case bound instead (Higham's gamma_K sum|t| for each of the
two results, for any order), which holds whatever the data, and is far larger. ``scaled_cover`` turns
a typical tolerance into a guarantee without the values: where (rtol, atol) covers each element's
envelope E and the bound is at most R E, (R rtol, R atol) covers the bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from core.arith.formats import FloatFormat

MARGIN = 4.0  # recommended tolerances are at least this many times what the data needs
ALLCLOSE_DEFAULT = (1e-5, 1e-8)  # torch.allclose / numpy.allclose: rtol, atol
# torch.testing.assert_close's defaults by dtype (rtol, atol), from its documentation
ASSERT_CLOSE_DEFAULTS = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                         "float64": (1e-7, 1e-7)}


# The words both the command (scripts.tolerance) and the pages use for the two kinds.
TYPICAL_KIND = "Typical tolerance, not a guarantee"
TYPICAL_ASSUMES = ("It assumes that the rounding errors behave independently, so that they grow like √K; sorted or "
                   "same-sign data, long left-to-right loops and NumPy reductions along an outer axis break that "
                   "assumption, and their differences can exceed it.")
GUARANTEE_KIND = "Guaranteed for every order of summation"
GUARANTEE_FROM = "the worst-case bound γ(K)·Σ|x| of each of the two results (Higham; γ(K) = K·u/(1 − K·u))"


def no_tolerance(k: int, acc: FloatFormat) -> str | None:
    """One line saying why no tolerance can mean anything for K-term sums accumulated in ``acc``, or None.

    With K u >= 1 the worst-case bound gamma_K does not exist, and rounding no longer behaves like small
    independent errors: a loop adding ones stops growing at 2^p (2^p + 1 rounds back to 2^p)."""
    ku = k * acc.unit_roundoff
    if ku < 1:
        return None
    return (f"No tolerance can mean anything here: K·u = {float(ku):g} ≥ 1 for {k:,}-term sums accumulated in "
            f"{acc.name} (u = 2^-{acc.precision}), where the worst-case bound γ(K) = K·u/(1 − K·u) does not exist "
            f"(a loop adding ones in {acc.name} stops at {2**acc.precision:,}).")


def ratio_text(r: float) -> str:
    """A ratio to two significant digits, as the words give it: '4.1×', '9,000×'."""
    r = float(f"{r:.2g}")
    return f"{r:,.0f}×" if r >= 10 else f"{r:g}×"


def scaled_cover(typical: tuple[float, float], envelope: np.ndarray,
                 bound: np.ndarray) -> tuple[float, float, float] | None:
    """(rtol, atol, R) that cover every compared element's ``bound``, given ``typical`` = (rtol, atol) that
    cover its ``envelope`` (NaN where not compared): R is the largest bound / envelope (at least 1), and
    bound <= R E <= R (atol + rtol |e|). None where a bound is infinite (no guarantee exists)."""
    seen = ~np.isnan(envelope)
    env, b = envelope[seen], bound[seen]
    if not np.all(np.isfinite(b)):
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(env > 0, b / np.where(env > 0, env, 1.0), np.where(b > 0, np.inf, 1.0))
    r = max(1.0, float(np.max(ratios))) if ratios.size else 1.0
    if not math.isfinite(r):
        return None
    r *= 1 + 2.0**-40  # cover the rounding of the division above
    return nice_up(r * typical[0]), nice_up(r * typical[1]), r


ONE_TWO_FIVE = (1, 2, 5)  # a recommended tolerance: 1, 2 or 5 times a power of ten
TWO_DIGITS = tuple(range(10, 100))  # two significant digits: 1.0 to 9.9 times a power of ten


def nice_up(x: float, leading: Sequence[int] = ONE_TWO_FIVE) -> float:
    """A tolerance rounded up: the smallest m × 10^e >= x over the leading digits m in ``leading`` (whole
    numbers of one digit count: ``ONE_TWO_FIVE``, or ``TWO_DIGITS`` for two significant digits) and whole e.
    Each candidate is the float nearest its decimal text, so it prints as written (0 stays 0)."""
    if not x > 0:
        return 0.0
    if not math.isfinite(x):
        return math.inf
    width = len(str(leading[0]))
    e = math.floor(math.log10(x)) - (width - 1)
    for _ in range(3):  # log10 may be one off near a power of ten: the next exponent's candidates follow
        for m in (*leading, 10**width):
            v = float(f"{m}e{e}")
            if v >= x:
                return v
        e += 1
    return x  # pragma: no cover - unreachable


def format_tol(v: float) -> str:
    return "0" if v == 0 else f"{v:.0e}".replace("e-0", "e-").replace("e+0", "e")


def format_two_digits(v: float) -> str:
    """A tolerance rounded up to ``TWO_DIGITS``, as an assert_close line writes it: '1.3e-05'."""
    return f"{v:.1e}"


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
