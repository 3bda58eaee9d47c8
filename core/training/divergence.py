"""What the Training divergence page says about a pair and a seed study: a snapshot of the pair
with its summary and labels, the settings that differ from a preset, and the seed study's verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields

from core.training.mlp import TrainSettings
from core.training.pair import STAND_IN, PairedRun, StepRecord
from core.training.seeds import DivergenceSummary, SeedStudy, summarize


def changed_settings(settings: TrainSettings, preset: TrainSettings) -> tuple[str, ...]:
    """The names of the settings that differ from the preset's, in field order."""
    return tuple(f.name for f in fields(TrainSettings) if getattr(settings, f.name) != getattr(preset, f.name))


@dataclass(frozen=True)
class PairSnapshot:
    """The pair's records and decision grid at one moment (read atomically), and what is shown of them."""

    settings: TrainSettings
    records: tuple[StepRecord, ...]
    grid: tuple | None  # (x, y, class by A, class by B) over the data, or None while playing
    b_device_name: str

    @property
    def last(self) -> StepRecord | None:
        return self.records[-1] if self.records else None

    @property
    def summary(self) -> DivergenceSummary | None:
        return summarize(list(self.records)) if self.records else None

    @property
    def finite(self) -> bool:
        """Both last losses are finite (a too-large learning rate overflows them)."""
        last = self.last
        return last is None or (math.isfinite(last.loss_a) and math.isfinite(last.loss_b))

    @property
    def loss_a_dtype(self) -> str:
        """The format of run A's loss (the loss is float32 unless the run is float64)."""
        return "float64" if self.settings.dtype == "float64" else "float32"

    @property
    def loss_b_dtype(self) -> str:
        return "float64" if self.settings.source == "float64" else self.loss_a_dtype

    @property
    def b_kind(self) -> str:
        """"device" (B on a real GPU), "stand-in" (B reordered on this CPU for another device) or "cpu"."""
        if self.settings.source == "device":
            return "device"
        return "stand-in" if self.settings.source in STAND_IN else "cpu"


def snapshot(run: PairedRun, settings: TrainSettings, resolution: int | None) -> PairSnapshot:
    """The pair as it is now; with ``resolution``, the decision grid at the same step."""
    recs, grid = run.snapshot(resolution)
    return PairSnapshot(settings, tuple(recs), grid, run.b_device_name)


def frame_steps(steps: int, frames: int) -> int:
    """Steps between two redraws so that a whole run is drawn ``frames`` times (at least 1)."""
    return max(1, -(-steps // frames))


@dataclass(frozen=True)
class SeedVerdict:
    gap: float  # |mean final loss of A − mean final loss of B|
    spread: float  # the larger sample standard deviation of the final loss over one side's seeds

    @property
    def inside(self) -> bool:
        """The gap is no larger than the spread between seeds: which side matters less than the seed."""
        return self.gap <= self.spread


def seed_verdict(study: SeedStudy) -> SeedVerdict:
    a, b = study.final_loss_a, study.final_loss_b
    return SeedVerdict(abs(statistics.mean(a) - statistics.mean(b)), max(statistics.stdev(a), statistics.stdev(b)))
