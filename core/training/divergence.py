"""What the Training divergence page says about a pair and a seed study: a snapshot of the pair
with its summary and labels, which of the losses and the weights differ first, how fast Play
draws, the settings that differ from a preset, the seed study's verdict, what float64 buys
(postponement), an input whose class flips at once (boundary_flip) and what a seed fixes
(seed_streams).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, fields

import numpy as np
import torch

from core.arith.formats import format_of
from core.arith.ulps import in_ulps
from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.machines.devices import available_devices
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.training.differences import STAND_IN
from core.training.mlp import TrainSettings, init_params
from core.training.pair import PairedRun, StepRecord
from core.training.seeds import DivergenceSummary, SeedStudy, distance_growth, summarize


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
SEED_RULE = ("Rule of thumb, not a statistical test: the A-B difference counts as seed noise when |mean final loss "
             "of A − mean final loss of B| is no larger than the larger sample standard deviation of the final loss "
             "over one side's seeds (the same k seeds on both sides; the same rule for the accuracy). That spread is "
             "one run's: a difference of two k-run means varies about √(2/k) times as much, so the rule asks "
             "whether the sides differ by more than seeds do, not whether their means differ at all.")


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


    def outcome_words(self, k: int) -> str:
        """What the verdict supports about the two sides' outcomes, for the loss and the accuracy (k seeds)."""
        if not self.inside:
            return (f"So with these settings the side matters: the difference between A and B changes the outcome "
                    f"itself, not only the path (over {k} seeds per side); the two sides are not interchangeable here.")
        acc = (f", nor for the accuracy (gap {self.acc_gap:.3g}, spread {self.acc_spread:.3g})" if self.acc_inside
               else f"; for the accuracy it does (gap {self.acc_gap:.3g} above the spread {self.acc_spread:.3g})")
        return (f"So with these settings and {k} seeds per side, the distribution of outcomes does not measurably "
                f"depend on the side for the final loss{acc}. Single runs still end differently, and {k} seeds "
                "cannot rule out a smaller effect.")


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


# ------------------------------------------------------------------- float64 postpones

# float32 rounds to 24 significant bits, float64 to 53: each rounding is 2^29 times smaller, so a gap
# that starts at rounding size starts about 2^29 times smaller in a float64 pair.
PRECISION_BITS = {"float32": 24, "float64": 53}
HEAD_START_BITS = PRECISION_BITS["float64"] - PRECISION_BITS["float32"]


@dataclass(frozen=True, kw_only=True)
class Postponement:
    """What float64 buys a pair, predicted from the float32 pair's own growth and compared with the float64
    pair's: a gap that doubles every D steps and starts 2^29 times smaller needs about 29·D steps more."""

    steps: int
    parts32: int | None  # first step whose relative loss gap exceeds 1%: the float32 pair
    parts64: int | None  # and the float64 pair
    doubling: float | None  # the float32 pair's fitted doubling time of ||dtheta|| (steps), where it grows
    fit_range: tuple[int, int] | None
    start_step: int | None  # the first step at which both pairs' weights differ
    start_log2: float | None  # log2(||dtheta|| of float32 / ||dtheta|| of float64) at that step
    growth64_end: int | None  # the last step of the float64 pair's growth phase (where its fit ends)
    peak64: float  # the float64 pair's largest ||dtheta||

    @property
    def bought(self) -> float | None:
        """HEAD_START_BITS doublings of the float32 pair: the steps float64 should buy."""
        return HEAD_START_BITS * self.doubling if self.doubling else None

    @property
    def predicted(self) -> int | None:
        """The step at which the float64 pair would be 1% apart if its gap grew like the float32 pair's."""
        if self.parts32 is None or self.bought is None:
            return None
        return self.parts32 + round(self.bought)

    def words(self, plain: str) -> list[str]:
        """The prediction and what the float64 pair shows, as sentences (``plain``: what B changes)."""
        n = f"{self.steps:,}"
        if self.parts32 is None:
            return [f"The float32 pair is not 1% apart within {n} steps here, so there is no parting for "
                    "float64 to postpone: choose a preset that parts (Fast chaos parts soonest)."]
        if self.bought is None:
            return [f"The float32 pair is first 1% apart at step {self.parts32}, but its ‖Δθ‖ shows no steady growth "
                    "to fit a doubling time to, so no prediction is made."]
        a, b = self.fit_range
        grows = (f"The float32 pair's ‖Δθ‖ doubles every {self.doubling:.1f} steps (fitted over steps {a}–{b}); its "
                 f"losses are first 1% apart at step {self.parts32}.")
        if self.start_log2 is not None and self.start_log2 < HEAD_START_BITS / 2:
            return [grows + f" But the float64 pair's weights are only 2^{self.start_log2:.1f} times closer at step "
                    f"{self.start_step}: the difference ({plain.lower()}) is not a float32 rounding, so float64 "
                    "gives it no head start"
                    + (f", and the float64 pair is first 1% apart at step {self.parts64}." if self.parts64 is not None
                       else f"; the float64 pair is not 1% apart within {n} steps.")]
        out = [grows + f" Each float64 rounding is 2^{HEAD_START_BITS} times "
               "smaller (53 significant bits instead of 24)"
               + (f"; measured here, the float64 pair's weights are 2^{self.start_log2:.1f} times closer at step "
                  f"{self.start_step}" if self.start_log2 is not None else "")
               + f". A gap that doubles every {self.doubling:.1f} steps needs about {HEAD_START_BITS} × "
               f"{self.doubling:.1f} ≈ {self.bought:.0f} steps more to close that head start: the prediction is "
               f"1% apart near step {self.predicted:,}."]
        if self.parts64 is not None and self.parts64 <= self.parts32:
            out.append(f"The float64 pair is first 1% apart at step {self.parts64}, no later than the float32 pair: "
                       f"float64 cannot postpone a difference that is not a float32 rounding ({plain.lower()}).")
        elif self.parts64 is not None:
            delay = self.parts64 - self.parts32
            rough = not self.bought / 1.5 <= delay <= self.bought * 1.5
            out.append(f"The float64 pair is first 1% apart at step {self.parts64}: {delay} steps later than the "
                       f"float32 pair (predicted: about {self.bought:.0f}"
                       + ("; the gap does not double at one steady rate, so the rule is a rough guide" if rough
                          else "") + "). float64 postponed the divergence; it did not prevent it.")
        elif self.predicted > self.steps:
            out.append(f"The float64 pair is not 1% apart within {n} steps, as predicted: the parting lies beyond "
                       "the end of this run. float64 postpones it; a longer run would show it.")
        else:
            end = f" about step {self.growth64_end}" if self.growth64_end else " its early steps"
            out.append(f"The float64 pair is not 1% apart within {n} steps, though the prediction was step "
                       f"{self.predicted:,}: its ‖Δθ‖ grew until{end} (at most {self.peak64:.2g}), then stopped "
                       "growing. Here the training amplifies differences only in its early phase, and float64's "
                       "head start outlasted it. Where the growth lasts longer (a larger learning rate, such as "
                       "Fast chaos), float64 only postpones the parting.")
        return out


def postponement(steps: int, dist32, parts32: int | None, dist64, parts64: int | None) -> Postponement:
    """The float32 pair's growth, the head start measured at the first step both pairs differ, and the float64
    pair's outcome (``dist32``, ``dist64``: each pair's ||dtheta|| at steps 1, 2, ...)."""
    d32, d64 = np.asarray(dist32, dtype=np.float64), np.asarray(dist64, dtype=np.float64)
    steps_axis = np.arange(1, len(d32) + 1)
    fit32, fit64 = distance_growth(steps_axis, d32), distance_growth(np.arange(1, len(d64) + 1), d64)
    growing = fit32 is not None and fit32.slope > 0
    both = np.flatnonzero((d32[: len(d64)] > 0) & (d64[: len(d32)] > 0))
    start = int(both[0]) if both.size else None
    return Postponement(
        steps=steps, parts32=parts32, parts64=parts64,
        doubling=fit32.doubling_steps if growing else None,
        fit_range=(fit32.first_step, fit32.last_step) if fit32 else None,
        start_step=start + 1 if start is not None else None,
        start_log2=float(np.log2(d32[start] / d64[start])) if start is not None else None,
        growth64_end=fit64.last_step if fit64 is not None and fit64.slope > 0 else None,
        peak64=float(np.nanmax(d64)) if d64.size else 0.0,
    )


# ------------------------------------------------------------------ a jump at once

@dataclass(frozen=True, kw_only=True)
class BoundaryFlip:
    """An input where A and B predict other classes right after their weights first differ: an argmax turns a
    difference of a few ULPs into a whole class at once, with no growth before it."""

    step: int  # the pair's step: the first whose weights (or losses) differ, or the last one tried
    differs: bool  # A and B differ at all at that step
    point: tuple[float, float] | None  # the input (in A's format); None: no flip found
    class_a: int | None = None
    class_b: int | None = None
    logit_ulps: float = 0.0  # the largest |logit of A − logit of B| at the point, in ULPs of A's format
    relative_distance: float = 0.0  # ||theta_A − theta_B|| / ||theta_A|| at the step
    rel_loss_gap: float = 0.0  # that step's |loss A − loss B| / loss A
    segments: int = 0  # segments between data points of two classes searched


def boundary_flip(settings: TrainSettings, max_steps: int = 20, segments: int = 256,
                  bisections: int = 64) -> BoundaryFlip:
    """Train a fresh pair to the first step whose weights or losses differ (at most ``max_steps``), then look
    for an input where A and B predict other classes: along segments between data points that A puts in two
    classes, bisect to A's decision boundary (inputs rounded to A's format), and test both runs at the two
    inputs either side of it. Deterministic: the segments come from a generator seeded by the settings."""
    run = PairedRun(settings)
    rec = None
    for _ in range(max(1, min(max_steps, settings.steps))):
        rec = run.advance(1)[-1]
        if rec.differing_bits or rec.loss_a_bits != rec.loss_b_bits:
            break
    differs = bool(rec.differing_bits or rec.loss_a_bits != rec.loss_b_bits)
    with torch.no_grad():
        norm_a = float(torch.linalg.vector_norm(torch.cat([p.detach().reshape(-1).double()
                                                           for p in run.a.params.values()])))
    common = {"step": rec.step, "differs": differs, "relative_distance": rec.param_distance / norm_a,
              "rel_loss_gap": rec.rel_diff}
    x = run.x64
    np_dtype = np.float64 if run.a.x.dtype == torch.float64 else np.float32
    ca = run.logits(x)[0].argmax(1).numpy()
    rng = np.random.default_rng(settings.seed)
    i, j = rng.integers(0, len(x), segments), rng.integers(0, len(x), segments)
    keep = ca[i] != ca[j]
    i, j = i[keep], j[keep]
    p0, p1 = x[i], x[j]

    def points(t: np.ndarray) -> np.ndarray:  # rounded to A's input format, as the runs read them
        return (p0 + t[:, None] * (p1 - p0)).astype(np_dtype).astype(np.float64)

    lo, hi = np.zeros(len(i)), np.ones(len(i))
    for _ in range(bisections):  # every segment at once: A's class at lo stays ca[i], at hi it is another
        mid = (lo + hi) / 2
        same = run.logits(points(mid))[0].argmax(1).numpy() == ca[i]
        lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
    for ends in (lo, hi):
        pts = points(ends)
        la, lb = run.logits(pts)
        for k in np.flatnonzero((la.argmax(1) != lb.argmax(1)).numpy()):
            # confirmed with the input alone: a product's bits can depend on how many rows it has
            one = pts[k: k + 1]
            a1, b1 = run.logits(one)
            if int(a1[0].argmax()) == int(b1[0].argmax()):
                continue
            a_row, b_row = a1[0].double().numpy(), b1[0].double().numpy()
            ulps = float(np.max(in_ulps(np.abs(a_row - b_row), a_row, format_of(a1.dtype))))
            return BoundaryFlip(point=(float(one[0, 0]), float(one[0, 1])), class_a=int(a1[0].argmax()),
                                class_b=int(b1[0].argmax()), logit_ulps=ulps, segments=len(i), **common)
    return BoundaryFlip(point=None, segments=len(i), **common)


# ------------------------------------------------------------ same seed, same numbers?

@dataclass(frozen=True, kw_only=True)
class SeedStreams:
    """What a seed fixes, checked live on the app's own initial weights (core.training.mlp.init_params)."""

    seed: int
    parameters: int
    redrawn_identical: bool  # drawn twice from a torch.Generator on the CPU with the same seed: the same bits
    other_seed_differs: bool  # the next seed draws other bits
    widened_identical: bool  # float32 weights copied to float64 and back: the same bits
    moved: tuple[tuple[str, bool], ...]  # (device, a copy there and back has the same bits)
    device_stream_differs: tuple[tuple[str, bool], ...]  # (GPU, its own generator with this seed draws other bits)


def seed_streams(settings: TrainSettings) -> SeedStreams:
    """Draw the initial weights of ``settings`` twice and move them around; on every GPU torch sees, also draw
    the same shape from that device's own generator with the same seed."""
    def flat(p: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([v.reshape(-1) for v in p.values()])

    def bits(t: torch.Tensor) -> bytes:
        return t.detach().cpu().numpy().tobytes()

    s = settings
    first = flat(init_params(s.hidden, s.classes, s.seed)).float()
    again = flat(init_params(s.hidden, s.classes, s.seed)).float()
    other = flat(init_params(s.hidden, s.classes, s.seed + 1 if s.seed < 2**31 - 1 else s.seed - 1)).float()
    moved, streams = [], []
    for d in available_devices():
        moved.append((d.name, bits(first.to(d.torch_device, copy=True).cpu()) == bits(first)))
        if d.kind != "cpu":
            g = torch.Generator(device=d.torch_device).manual_seed(s.seed)
            drawn = torch.rand(first.numel(), generator=g, dtype=torch.float64, device=d.torch_device)
            cpu = torch.rand(first.numel(), generator=torch.Generator().manual_seed(s.seed), dtype=torch.float64)
            streams.append((d.name, bits(drawn) != bits(cpu)))
    return SeedStreams(seed=s.seed, parameters=first.numel(), redrawn_identical=bits(first) == bits(again),
                       other_seed_differs=bits(first) != bits(other),
                       widened_identical=bits(first.double().float()) == bits(first),
                       moved=tuple(moved), device_stream_differs=tuple(streams))
