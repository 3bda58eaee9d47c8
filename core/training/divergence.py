"""What the Training divergence page says about a pair and a seed study: a snapshot of the pair
with its summary and labels, which of the losses and the weights differ first, how fast Play
draws, the settings that differ from a preset, and the seed study's verdict.
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
    def firsts(self) -> FirstDifferences:
        return first_differences(self.records)

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


@dataclass(frozen=True)
class FirstDifferences:
    """The first step at which the two losses have other bits, and the first after which a weight does.

    They need not agree: a reordered sum changes a weight's last bit at step 1 while the rounded
    loss of the next batch can stay bit-identical for several steps (the loss is one float32 made
    of many; a tiny weight change often rounds away in it). ``DivergenceSummary.first_difference``
    is the earlier of the two.
    """

    loss: int | None
    weights: int | None  # a parameter bit differs (B rounded to A's format and mapped back to A's layout)

    @property
    def note(self) -> str:
        """One sentence saying what differs so far, in the words the metrics use."""
        if self.loss is None and self.weights is None:
            return "So far A and B are bit-identical: losses and weights."
        if self.loss is None:
            return f"Losses bit-identical so far; the weights differ since step {self.weights}."
        if self.weights is None:
            return f"The losses differ since step {self.loss}; the weights are bit-identical so far."
        return f"The weights differ since step {self.weights}, the losses since step {self.loss}."


def first_differences(records) -> FirstDifferences:
    """Which step first shows other loss bits, and which first shows other weight bits (None: not yet)."""
    loss = next((r.step for r in records if r.loss_a_bits != r.loss_b_bits), None)
    weights = next((r.step for r in records if r.differing_bits), None)
    return FirstDifferences(loss, weights)


# Play draws the pair every ``speed`` steps: 1 shows each update (slow to watch, a few frames a
# second), 100 runs 500 steps in 5 frames. Only these values are offered (the link field reads them).
SPEEDS = (1, 2, 5, 10, 25, 50, 100)
DEFAULT_SPEED = 10


def check_speed(speed: int) -> int:
    """A speed (steps per frame) from SPEEDS, or ValueError."""
    if speed not in SPEEDS:
        raise ValueError(f"steps per frame must be one of {', '.join(map(str, SPEEDS))}")
    return int(speed)


def frames_for(steps: int, speed: int) -> int:
    """How many frames Play draws for ``steps`` steps at ``speed`` steps per frame."""
    return -(-max(0, steps) // check_speed(speed))


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
