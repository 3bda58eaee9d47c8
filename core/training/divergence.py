"""What the Training divergence page says about a pair and a seed study: a snapshot of the pair
with its summary and labels, which of the losses and the weights differ first, how fast Play
draws, the settings that differ from a preset, and the seed study's verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields

import torch

from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.training.mlp import TrainSettings
from core.training.pair import STAND_IN, PairedRun, StepRecord
from core.training.seeds import DivergenceSummary, SeedStudy, summarize


def changed_settings(settings: TrainSettings, preset: TrainSettings) -> tuple[str, ...]:
    """The names of the settings that differ from the preset's, in field order."""
    return tuple(f.name for f in fields(TrainSettings) if getattr(settings, f.name) != getattr(preset, f.name))


@dataclass(frozen=True, kw_only=True)
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
    return PairSnapshot(settings=settings, records=tuple(recs), grid=grid, b_device_name=run.b_device_name)


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


DEFAULT_SEEDS = 6  # seeds per side that both pages (Training divergence, Mitigations) train by default

# The one rule both pages state and apply (the two pages gave opposite verdicts on the same
# question because each used its own statistic): train the same k seeds on side A and side B; the A-B
# difference is "inside the seed spread" when the gap between the two sides' MEAN final losses is no
# larger than the LARGER of the two sides' SAMPLE standard deviations of the final loss over the seeds.
# The same rule is applied to the accuracy and reported beside it.
SEED_RULE = ("Rule: the A-B difference counts as seed noise when |mean final loss of A − mean final loss of B| "
             "is no larger than the larger sample standard deviation of the final loss over one side's seeds "
             "(the same k seeds on both sides; the same test for the accuracy).")


@dataclass(frozen=True, kw_only=True)
class SeedVerdict:
    gap: float  # |mean final loss of A − mean final loss of B|
    spread: float  # the larger sample standard deviation of the final loss over one side's seeds
    acc_gap: float = 0.0  # the same two numbers for the accuracy
    acc_spread: float = 0.0
    seeds: int = 0

    @property
    def inside(self) -> bool:
        """The gap is no larger than the spread between seeds: which side matters less than the seed."""
        return self.gap <= self.spread

    @property
    def acc_inside(self) -> bool:
        return self.acc_gap <= self.acc_spread

    def words(self) -> str:
        """The verdict in words, for both pages."""
        if self.inside:
            return ("inside the spread between seeds: which side a run is on matters less than its seed")
        return ("larger than the spread between seeds: here the difference between A and B is systematic, "
                "not just a different trajectory")


def _gap_and_spread(a, b) -> tuple[float, float]:
    return abs(statistics.mean(a) - statistics.mean(b)), max(statistics.stdev(a), statistics.stdev(b))


def seed_verdict(study: SeedStudy) -> SeedVerdict:
    """SEED_RULE applied to a seed study (at least 2 seeds: a standard deviation needs two)."""
    if len(study.seeds) < 2:
        raise ValueError("a seed verdict needs at least 2 seeds per side")
    gap, spread = _gap_and_spread(study.final_loss_a, study.final_loss_b)
    acc_gap, acc_spread = _gap_and_spread(study.final_acc_a, study.final_acc_b)
    return SeedVerdict(gap=gap, spread=spread, acc_gap=acc_gap, acc_spread=acc_spread, seeds=len(study.seeds))


@dataclass(frozen=True)
class ThreadsNote:
    """Why the "one thread vs all threads" pair gives identical bits on this server (computed live)."""

    threads: int  # this process's torch threads (A's)
    largest: int  # elements of the largest tensor one training step makes (batch × hidden)
    products_agree: bool  # the step's largest matrix products gave the same bits on 1 and on all threads, here

    def text(self) -> str:
        """What this server's numbers say about the pair, computed live (shown beside the preset)."""
        if self.threads == 1:
            return ("On this server torch has one thread, so A (all threads) and B (one thread) run the same "
                    "computation: identical bits, by construction.")
        if self.largest < GRAIN_SIZE:
            size = (f"the largest tensor of one step has {self.largest:,} elements, below torch's grain size of "
                    f"{GRAIN_SIZE:,} from which its CPU kernels split an element-wise operation or a sum across "
                    "threads")
        else:
            size = (f"the largest tensor of one step has {self.largest:,} elements, at or above torch's grain size "
                    f"of {GRAIN_SIZE:,}, so torch splits some operations across threads")
        products = ("gave the same bits" if self.products_agree else "gave different bits")
        return (f"On this server (live): A has {self.threads} threads, B one; {size}; this step's largest matrix "
                f"products, run just now on 1 and on {self.threads} threads, {products}. So the pair "
                + ("can stay bit-identical here (the first step that differs, below, says whether it does); a "
                   "larger batch or hidden width can make it part." if self.largest < GRAIN_SIZE and
                   self.products_agree else "may part: the first step that differs, below, says whether it does."))


def threads_note(settings: TrainSettings, threads: int = PROCESS_THREADS) -> ThreadsNote:
    """Live on this CPU: the forward and weight-gradient products of one step (shapes of ``settings``), with
    one thread and with ``threads``, compared bit for bit (under core.machines.globalstate's lock and restore)."""
    g = torch.Generator().manual_seed(settings.seed)
    dt = torch.float64 if settings.dtype == "float64" else torch.float32
    h = torch.randn(settings.batch, settings.hidden, generator=g, dtype=dt)
    w = torch.randn(settings.hidden, settings.hidden, generator=g, dtype=dt)

    def products() -> tuple[bytes, bytes]:
        return ((h @ w.T).numpy().tobytes(), (h.T @ h).numpy().tobytes())  # forward, and a weight gradient

    with torch_threads(1):
        one = products()
    with torch_threads(max(1, threads)):
        many = products()
    return ThreadsNote(threads, settings.batch * settings.hidden, one == many)
