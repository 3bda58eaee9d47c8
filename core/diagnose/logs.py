"""Two training loss logs: a tiny difference amplified by training, or a jump at step k?

Two runs that differ only in rounding (another device, thread count or kernel) agree
exactly, or to the last bit, for a while; their first difference is the size of a rounding
(relative gap |a - b| / max(|a|, |b|) of a few ULPs). Training may then amplify it: where it
does, the gap grows roughly exponentially until it saturates at the size of the step-to-step
noise; where it does not, the gap stays tiny. Which happens depends on the learning rate, the
optimizer and the model (the Training divergence page shows pairs of both kinds, and its
bundled pair here grows), so neither is assumed: the logs are read for either. A bug, a
different batch or a different hyperparameter instead makes the gap appear *at once*: the
first difference is far above rounding size, or the gap jumps by orders of magnitude in one
logged interval, far faster than the fitted growth.

Rules (thresholds are heuristics, stated here and on the page):

* rounding size at a step: ``TINY_ULPS`` = 1024 ULPs of the format relative
  (1024 * 2^(1-p), 1.2e-4 for float32), or ten times the printed resolution of the two
  values (half a unit in the last written digit, relative), whichever is larger;
* first differing step k0: a relative gap above rounding size there is "a jump at k0";
* growth: least squares of ln(gap) against the step over the growth phase, from k0 until the
  running maximum of the gap first reaches ``SATURATION`` (10 %) of its largest value (the
  fit of ``core.training.seeds.summarize``, ``core.arith.metrics.growth_fit``, applied to the loss gap);
* a later jump: a logged interval in which the running maximum of the gap grows by
  ``JUMP_FACTOR`` (100) times more than the fitted growth predicts, to at least ``JUMP_MIN``
  (1e-3 relative); NaN or inf in one log only is a jump too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from core.arith.formats import FORMATS
from core.arith.metrics import FittedGrowth, GrowthFit, growth_fit, relative_gap
from core.diagnose.loaders import LoadError, LossLog

TINY_ULPS = 1024
JUMP_FACTOR = 100.0
JUMP_MIN = 1e-3
SATURATION = 0.1
MIN_FIT_POINTS = 5
class LogVerdict(StrEnum):
    """How two loss logs part (the module docstring defines each); each member is its name as text."""
    IDENTICAL = "identical"
    TINY = "tiny"
    AMPLIFIED = "amplified"
    JUMP = "jump"


@dataclass(frozen=True, kw_only=True)
class LogDiagnosis(FittedGrowth):
    verdict: LogVerdict
    sentence: str
    reasons: tuple[str, ...]
    steps: np.ndarray = field(repr=False)
    a: np.ndarray = field(repr=False)
    b: np.ndarray = field(repr=False)
    rel_gap: np.ndarray = field(repr=False)  # |a - b| / max(|a|, |b|); inf where one is not finite
    tiny: np.ndarray = field(repr=False)  # rounding size per step (relative)
    first_step: int | None
    first_gap: float | None
    fit: GrowthFit | None  # ln(gap) against step over the growth phase
    jump_step: int | None
    jump_factor: float | None  # gap growth in that interval beyond the fitted trend
    notes: tuple[str, ...] = ()


def _aligned(log_a: LossLog, log_b: LossLog, fmt: str) -> dict:
    """The logs on their common steps: the steps, both values, the relative gap, and the largest gap
    rounding explains at each step (``tiny``: a few ULPs of ``fmt``, or ten times the printed resolution)."""
    steps, ia, ib = np.intersect1d(log_a.steps, log_b.steps, assume_unique=True, return_indices=True)
    if steps.size < 2:
        raise LoadError("The two logs share fewer than 2 steps; they need common step numbers.")
    notes = []
    dropped = log_a.steps.size + log_b.steps.size - 2 * steps.size
    if dropped:
        notes.append(f"{dropped:,} row(s) whose step appears in only one log were left out.")
    a, b = log_a.values[ia], log_b.values[ib]
    with np.errstate(invalid="ignore", divide="ignore"):
        mag = np.maximum(np.abs(a), np.abs(b))
        printed = 10 * np.maximum(log_a.resolution[ia], log_b.resolution[ib]) / np.where(mag > 0, mag, 1.0)
    tiny = np.maximum(TINY_ULPS * 2.0 ** (1 - FORMATS[fmt].precision), np.nan_to_num(printed, nan=0.0))
    return dict(steps=steps, a=a, b=b, rel_gap=relative_gap(a, b, scale="larger"), tiny=tiny, notes=tuple(notes))


def _smooth(base: dict, i0: int, fit: GrowthFit | None, reasons: list[str], fmt: str) -> LogDiagnosis:
    """A rounding-sized first difference and no jump after it: tiny throughout, or grown smoothly."""
    steps, g = base["steps"], base["rel_gap"]
    k0, g0 = int(steps[i0]), float(g[i0])
    gmax = float(np.max(g))
    if gmax <= TINY_ULPS * 2.0 ** (1 - FORMATS[fmt].precision):
        sentence = (f"A tiny difference that stays tiny: the logs differ from step {k0:,} by at most {gmax:.2g} "
                    "relative, rounding-sized throughout; nothing amplifies it (yet).")
        return LogDiagnosis(verdict=LogVerdict.TINY, sentence=sentence,
                            reasons=(*reasons, "The gap never grows beyond rounding size."), first_step=k0,
                            first_gap=g0, fit=fit, jump_step=None, jump_factor=None, **base)
    doubling = fit.doubling_steps if fit else None
    if fit is not None and fit.slope > 0:
        reasons.append(f"The gap then grows by a factor {math.exp(fit.slope):.3g} per step (doubling every "
                       f"{doubling:,.3g} steps, fitted from step {fit.first_step:,} to {fit.last_step:,}) up to "
                       f"{gmax:.2g} relative, "
                       "with no jump beyond that trend: the signature of training amplifying a rounding difference "
                       "(how fast depends on the learning rate, the optimizer and the model).")
    else:
        reasons.append(f"The gap grows to {gmax:.2g} relative without any single jump (too few points to fit a rate).")
    sentence = (f"A tiny difference amplified by training: the logs first differ at step {k0:,} by a "
                f"rounding-sized {g0:.2g}, and the gap grows smoothly"
                + (f" (doubling every {doubling:,.3g} steps)" if doubling else "")
                + " instead of jumping. Compare such runs by their final metrics over several seeds, not step by step.")
    return LogDiagnosis(verdict=LogVerdict.AMPLIFIED, sentence=sentence, reasons=tuple(reasons), first_step=k0,
                        first_gap=g0, fit=fit, jump_step=None, jump_factor=None, **base)


def diagnose_logs(log_a: LossLog, log_b: LossLog, fmt: str = "float32") -> LogDiagnosis:
    """Compare two loss logs step by step (aligned on their common steps): identical, a first difference
    beyond rounding, a jump after a rounding-sized start, or a rounding-sized start that stays tiny or
    grows smoothly (``_smooth``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}")
    base = _aligned(log_a, log_b, fmt)
    steps, g, tiny = base["steps"], base["rel_gap"], base["tiny"]
    differ = np.flatnonzero(g > 0)
    if differ.size == 0:
        return LogDiagnosis(verdict=LogVerdict.IDENTICAL,
                            sentence=f"Identical: the two logs agree at all {steps.size:,} common steps.",
                            reasons=("Every logged value is the same in both runs.",), first_step=None,
                            first_gap=None, fit=None, jump_step=None, jump_factor=None, **base)
    i0 = int(differ[0])
    k0, g0 = int(steps[i0]), float(g[i0])
    if not math.isfinite(g0):
        return _jump(base, i0, k0, g0, None, math.inf,
                     [f"At step {k0:,} one log is NaN or infinite and the other is not: a run that blew up, not "
                      "rounding."])
    if g0 > tiny[i0]:
        return _jump(base, i0, k0, g0, None, math.inf,
                     [(f"The logs agree up to step {steps[i0 - 1]:,} and first differ at step {k0:,}" if i0 else
                       f"The logs differ from their first common step, {k0:,},")
                      + f" by {g0:.2g} relative: {g0 / tiny[i0]:,.3g} times the size of a rounding difference there. "
                      "Rounding differences start at the last bit and grow step by step; a first difference this "
                      "large comes from something else, or from a discontinuity that a last-bit difference crossed "
                      "(an argmax, a threshold, gradient clipping)."])
    reasons = [f"The logs first differ at step {k0:,}, by {g0:.2g} relative: rounding-sized (below "
               f"{tiny[i0]:.2g})."]
    fit = growth_fit(steps, g, i0, SATURATION, MIN_FIT_POINTS)
    jump_i, jump_factor = _find_jump(steps, g, i0, fit.slope if fit else None)
    if jump_i is not None:
        kj = int(steps[jump_i])
        why = (f"At step {kj:,} the gap jumps to {g[jump_i]:.2g} relative, " +
               ("with NaN or inf in one log only." if not math.isfinite(g[jump_i]) else
                f"{jump_factor:,.3g} times more in one logged interval than the fitted growth predicts."))
        return _jump(base, jump_i, k0, g0, fit, jump_factor, [*reasons, why])
    return _smooth(base, i0, fit, reasons, fmt)


def _jump(base, i, k0, g0, fit: GrowthFit | None, factor, reasons) -> LogDiagnosis:
    """The diagnosis of a jump at index i: a first difference or a rise beyond the fitted trend."""
    kj = int(base["steps"][i])
    sentence = (f"A jump at step {kj:,}: look there. The gap appears at once (to {base['rel_gap'][i]:.2g} relative) "
                "instead of growing from a rounding-sized difference: most likely something other than rounding "
                "changed (the data, a random draw, a hyperparameter, or a bug), unless a discontinuity (an argmax, "
                "a threshold, gradient clipping) turned a last-bit difference into a jump at once.")
    return LogDiagnosis(
        verdict=LogVerdict.JUMP,
        sentence=sentence,
        reasons=tuple(reasons),
        first_step=k0,
        first_gap=g0,
        fit=fit,
        jump_step=kj,
        jump_factor=factor,
        **base,
    )


def _find_jump(steps: np.ndarray, g: np.ndarray, i0: int, growth: float | None):
    rate = max(growth or 0.0, 0.0)
    running = np.maximum.accumulate(np.where(np.isnan(g), np.inf, g)[i0:])
    for j in range(1, running.size):
        i = i0 + j
        if not math.isfinite(running[j]):
            return i, math.inf
        prev = running[j - 1]
        if prev <= 0 or running[j] < JUMP_MIN:
            continue
        excess = math.log(running[j] / prev) - rate * float(steps[i] - steps[i - 1])
        if excess >= math.log(JUMP_FACTOR):
            return i, math.exp(excess)
    return None, None
