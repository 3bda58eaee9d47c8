"""How far apart a pair ended, and whether that gap matters: the divergence summary and the seed study.

summarize turns a pair's step records into the steps at which it first differed and parted; the
seed study trains K seeds per side so that the A/B gap can be compared with the spread that the
seed alone causes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np

from core.arith.metrics import FittedGrowth, GrowthFit, growth_fit
from core.machines.progress import OnProgress, offset, report
from core.training.mlp import TrainSettings
from core.training.pair import PairedRun, StepRecord

# ------------------------------------------------------------------------ summaries


# A pair's losses are "apart" once their relative gap (core.arith.metrics.relative_gap) exceeds 1%: some 80,000
# float32 ULPs, so a pair that gets there has parted, not merely rounded differently.
APART = 0.01


def first_apart(gaps: Iterable[float], steps: Iterable[int] | None = None) -> int | None:
    """The first step whose relative loss gap exceeds ``APART`` (``steps``: the steps of ``gaps``, by default
    1, 2, ...); None where none does."""
    by_step = enumerate(gaps, start=1) if steps is None else zip(steps, gaps, strict=True)
    return next((s for s, g in by_step if g > APART), None)


@dataclass(frozen=True, kw_only=True)
class DivergenceSummary(FittedGrowth):
    first_difference: int | None  # first step at which anything (loss or a parameter bit) differs
    first_rel_1pct: int | None  # first step whose losses are more than APART (1%) apart, relative to loss A
    fit: GrowthFit | None = None  # ln||dtheta|| against step over the growth phase


def summarize(records: list[StepRecord], saturation: float = 0.1) -> DivergenceSummary:
    """First differences and an exponential fit of ||delta theta|| over its growth phase.

    The growth phase runs from the first step with a nonzero distance until the distance
    first reaches ``saturation`` times its largest value (after that it stops growing
    exponentially); a least-squares line is fitted to ln||delta theta|| over it.
    """
    first = next((r.step for r in records if r.differing_bits or r.loss_a_bits != r.loss_b_bits), None)
    rel = first_apart([r.rel_diff for r in records], [r.step for r in records])
    fit = distance_growth([r.step for r in records], [r.param_distance for r in records], saturation)
    return DivergenceSummary(first_difference=first, first_rel_1pct=rel, fit=fit)


def distance_growth(steps, distances, saturation: float = 0.1) -> GrowthFit | None:
    """The exponential fit of ||delta theta|| from its first nonzero step over its growth phase (None: never
    nonzero, or too few points)."""
    dist = np.asarray(distances, dtype=np.float64)
    nz = np.flatnonzero(dist > 0)
    return growth_fit(steps, dist, int(nz[0]), saturation) if nz.size else None


# ------------------------------------------------------------------------- seed study


@dataclass(frozen=True, kw_only=True)
class SeedStudy:
    seeds: tuple[int, ...]
    final_loss_a: tuple[float, ...]
    final_loss_b: tuple[float, ...]
    final_acc_a: tuple[float, ...]  # on the whole data set
    final_acc_b: tuple[float, ...]


SEED_CHUNK = 10  # steps between two progress reports of a seed study (tens of milliseconds on an idle core)


def train_seed(settings: TrainSettings, on_progress: OnProgress | None = None,
               chunk: int = SEED_CHUNK) -> tuple[float, float, float, float]:
    """One pair trained to the end: (final loss A, final loss B, accuracy A, accuracy B).

    ``on_progress`` gets the steps done after every ``chunk`` steps; it may raise to stop.
    """
    run = PairedRun(settings)
    recs = run.run(settings.steps, on_progress, chunk)
    fa, fb = run.full_accuracy()
    return recs[-1].loss_a, recs[-1].loss_b, fa, fb


def seed_study(settings: TrainSettings, k: int, on_progress: OnProgress | None = None,
               memo=None) -> SeedStudy:
    """Train k seeds of the pair and collect final losses and accuracies per side.

    ``on_progress`` gets the steps done of all the seeds' steps every few tens of milliseconds of work and
    may raise to stop the study (nothing is returned then). ``memo``, when given, is a mapping-like
    object with ``get(key)`` and ``put(key, value)`` that keeps finished seeds (keyed by the full
    settings of that seed) so a repeated study only trains the seeds it has not seen.
    """
    if not 1 <= k <= 32:
        raise ValueError("between 1 and 32 seeds")
    la, lb, aa, ab = [], [], [], []
    seeds = tuple(settings.seed + i for i in range(k))
    total = k * settings.steps
    for i, s in enumerate(seeds):
        one = replace(settings, seed=s)
        result = memo.get(one) if memo is not None else None
        if result is None:
            base = i * settings.steps
            result = train_seed(one, offset(on_progress, before=base, total=total))
            if memo is not None:
                memo.put(one, result)
        else:
            report(on_progress, done=(i + 1) * settings.steps, total=total, what="steps")
        la.append(result[0])
        lb.append(result[1])
        aa.append(result[2])
        ab.append(result[3])
    return SeedStudy(
        seeds=seeds, final_loss_a=tuple(la), final_loss_b=tuple(lb), final_acc_a=tuple(aa), final_acc_b=tuple(ab)
    )
