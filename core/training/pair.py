"""Train a tiny model twice and record, step by step, how the two runs drift apart.

Runs A and B start from bit-identical weights and see bit-identical batches. B differs
from A by exactly one chosen source (core.training.differences: the control, threads, a
reduction's order, precision, a one-ULP nudge, a real GPU); each step's gap is measured as
core.training.gap says.

Everything random comes from local generators (numpy.random.Generator, torch.Generator);
the only process-global setting ever changed, torch's thread count, is changed inside
core.machines.globalstate.torch_threads (locked and restored).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np
import torch

from core.machines.progress import OnProgress, report
from core.training.differences import DIFFERENCES, BPlan
from core.training.gap import Snapshot, StepRecord, Yardstick, measure
from core.training.mlp import (
    DTYPES,
    FLUSH_EVERY,
    PARAM_NAMES,
    Run,
    TrainSettings,
    batch_schedule,
    forward,
    forward_as,
    init_params,
    make_optimizer,
    spirals,
    train_step,
)

# -------------------------------------------------------------------------- the pair


@dataclass(frozen=True, eq=False, kw_only=True)
class Layout:
    """How B's parameters map back to A's: the permutations B applied (None: not permuted)."""

    hidden: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    features: np.ndarray | None = None

    @property
    def identity(self) -> bool:
        return all(p is None for p in self.hidden) and self.features is None

    def to_b(self, p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return _permute(p, *self.hidden, self.features)

    def to_a(self, p: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return _unpermute(p, *self.hidden, self.features)

    def flat_index(self, shapes: dict[str, torch.Size]) -> torch.Tensor | None:
        """Index that puts B's flattened parameters into A's layout (None: same layout)."""
        if self.identity:
            return None
        sizes = [math.prod(shapes[k]) for k in PARAM_NAMES]
        offsets = np.cumsum([0, *sizes[:-1]])
        ids = {k: torch.arange(n, dtype=torch.float64).reshape(shapes[k]) + o
               for k, n, o in zip(PARAM_NAMES, sizes, offsets, strict=True)}
        permuted = self.to_b(ids)  # where each of A's entries sits in B's layout
        return torch.argsort(torch.cat([permuted[k].reshape(-1) for k in PARAM_NAMES]).long())


@dataclass(frozen=True, eq=False, kw_only=True)
class Pair:
    """Everything ``make_pair`` builds: the two runs, the shared data and schedule, B's layout."""

    settings: TrainSettings
    a: Run
    b: Run
    x64: np.ndarray
    y: np.ndarray
    schedule: np.ndarray  # every step's batch indices
    layout: Layout
    b_device_name: str


def validate(settings: TrainSettings) -> None:
    """ValueError with a plain reason for settings no pair can have: an unknown difference source, or
    any value TrainSettings.validate refuses."""
    if settings.source not in DIFFERENCES:
        raise ValueError(f"unknown difference source {settings.source!r}")
    settings.validate()


def make_pair(settings: TrainSettings) -> Pair:
    """Build A and B: the same data, schedule and initial weights; B changed by the settings' source."""
    s = settings
    validate(s)
    x64, y = spirals(s.n_points, s.classes, s.seed)
    schedule = batch_schedule(len(y), s.batch, s.steps, s.seed)
    base = init_params(s.hidden, s.classes, s.seed)
    dt = DTYPES[s.dtype]
    pa = {k: v.to(dt).clone().requires_grad_(True) for k, v in base.items()}
    plan = BPlan(params={k: v.to(dt).clone() for k, v in base.items()}, dtype=dt)
    DIFFERENCES[s.source].apply(s, np.random.default_rng(s.seed + 2), plan)
    layout = Layout(hidden=plan.hidden_perms, features=plan.feature_perm)
    pb = {k: v.to(plan.device).clone().requires_grad_(True) for k, v in layout.to_b(plan.params).items()}
    xa = torch.from_numpy(x64).to(dt)
    xb = xa.to(plan.dtype)
    if plan.feature_perm is not None:
        xb = xb[:, plan.feature_perm]
    yt = torch.from_numpy(y)
    a = Run(params=pa, opt=make_optimizer(pa, s), x=xa, y=yt, threads=plan.threads_a)
    b = Run(params=pb, opt=make_optimizer(pb, s), x=xb.to(plan.device), y=yt.to(plan.device), device=plan.device,
             autocast_bf16=plan.autocast_bf16, threads=plan.threads_b, batch_perm=plan.batch_perm)
    return Pair(settings=s, a=a, b=b, x64=x64, y=y, schedule=schedule, layout=layout, b_device_name=plan.device_name)


def _at_step_zero(run: Run, settings: TrainSettings) -> Run:
    params = {k: v.detach().clone().requires_grad_(True) for k, v in run.params.items()}
    return replace(run, params=params, opt=make_optimizer(params, settings))


def fresh_pair(template: Pair) -> Pair:
    """A pair at step 0, bit for bit what ``make_pair(template.settings)`` builds, from ``template`` (at step 0):
    new parameters and optimizers; the data, schedule and layout shared, since no step writes them."""
    s = template.settings
    return replace(template, a=_at_step_zero(template.a, s), b=_at_step_zero(template.b, s))


def yardstick(pair: Pair) -> Yardstick:
    a, b = pair.a, pair.b
    labels = a.y[torch.from_numpy(pair.schedule)]
    perm = torch.from_numpy(b.batch_perm) if b.batch_perm is not None else None
    return Yardstick(
        to_a=pair.layout.flat_index({k: a.params[k].shape for k in PARAM_NAMES}),
        total_bits=sum(p.numel() for p in a.params.values()) * 8 * a.x.element_size(),
        labels_a=labels,
        labels_b=(labels[:, perm] if perm is not None else labels).to(b.device),
        batch=pair.settings.batch,
    )


# ----------------------------------------------------------------------- the paired run


class StepRequests:
    """Steps a visitor asked for (Step, +10, Play), applied later in chunks by whichever script run is current.
    The target has its own lock, so asking never waits for a chunk being applied. A subclass sets ``settings``,
    ``_lock`` (held by ``advance``) and ``_target`` / ``_target_lock`` (``_start_requests``), and says how far
    it has got (``_reached``) and how it moves (``advance``)."""

    settings: TrainSettings
    _lock: threading.RLock

    def _start_requests(self) -> None:
        self._target = 0
        self._target_lock = threading.Lock()

    @property
    def _reached(self) -> int:
        raise NotImplementedError

    def advance(self, steps: int, timeout: float | None = None) -> list[StepRecord] | None:
        raise NotImplementedError

    def request(self, steps: int) -> int:
        """Ask for ``steps`` more steps than reached or already asked for; the step asked for."""
        with self._target_lock:
            self._target = min(self.settings.steps, max(self._target, self._reached) + max(0, steps))
            return self._target

    def request_to_end(self) -> None:
        with self._target_lock:
            self._target = self.settings.steps

    def cancel_requests(self) -> None:
        """Forget the steps asked for and not reached yet (a chunk being applied still completes)."""
        with self._target_lock:
            self._target = self._reached

    @property
    def requested(self) -> int:
        """Steps asked for and not reached yet."""
        with self._target_lock:
            return max(0, self._target - self._reached)

    def advance_requested(self, chunk: int) -> list[StepRecord]:
        """Move up to ``chunk`` of the steps asked for, atomically (see ``advance``)."""
        with self._lock:
            with self._target_lock:
                n = min(max(0, chunk), self._target - self._reached)
            return self.advance(n) if n > 0 else []


class PairedRun(StepRequests):
    """Two runs in lockstep, built by ``make_pair``; ``advance(n)`` applies n updates to each and
    records the gap (each step leaves a ``Snapshot``; ``measure`` turns them into records).

    A pair may be shared by several threads (Streamlit starts a new script run of a session
    while the previous one may still be computing), so every read and every mutation holds the
    pair's own lock: the only way a pair moves is ``advance`` (``run``, ``step`` and iteration
    call it), a whole chunk of steps at a time, so no thread ever sees, or adds to, half a step,
    and the state after N steps is bit for bit that of a clean run of N steps, whichever threads
    applied them. core.crowd.runner decides which pair a session owns.
    """

    def __init__(self, settings: TrainSettings, _template: PairedRun | None = None) -> None:
        self.pair = make_pair(settings) if _template is None else fresh_pair(_template.pair)
        self.settings = settings
        self.a, self.b = self.pair.a, self.pair.b
        self.x64, self.y, self.schedule = self.pair.x64, self.pair.y, self.pair.schedule
        self.b_device_name = self.pair.b_device_name
        self.yardstick = yardstick(self.pair) if _template is None else _template.yardstick  # read-only
        # step 0's decision grids by resolution: the same for every pair of these settings, so shared by the
        # pairs made from one template (every visitor sees step 0 first)
        self._grids_at_zero: dict[int, tuple] = {} if _template is None else _template._grids_at_zero
        # detached flat views share storage with the parameters, so they follow every update
        self._views_a = [self.a.params[k].detach().view(-1) for k in PARAM_NAMES]
        self._views_b = [self.b.params[k].detach().view(-1) for k in PARAM_NAMES]
        self._records: list[StepRecord] = []
        self._pending: list[Snapshot] = []  # not measured yet
        self._lock = threading.RLock()
        self._broken: BaseException | None = None
        self._applied = 0  # == done, readable without _lock
        self._start_requests()

    def __repr__(self) -> str:
        return f"PairedRun({self.settings!r}, done={self._applied})"

    @property
    def _reached(self) -> int:
        return self._applied

    def fresh(self) -> PairedRun:
        """A new pair of these settings at step 0, bit for bit ``PairedRun(self.settings)``, made in a fraction
        of the time: the data, batch schedule, yardstick and step 0's decision grids are shared with this pair,
        which must never have stepped (a template: many visitors, one build)."""
        if self._applied or self.done:
            raise ValueError("a template pair must be at step 0")
        return PairedRun(self.settings, _template=self)

    # ------------------------------------------------------------------ stepping
    @property
    def records(self) -> list[StepRecord]:
        """A copy of the records so far, one per step (pending snapshots are measured now)."""
        with self._lock:
            self._flush()
            return list(self._records)

    @property
    def done(self) -> int:
        with self._lock:
            return len(self._records) + len(self._pending)

    @property
    def finished(self) -> bool:
        return self.done >= self.settings.steps

    def advance(self, steps: int, timeout: float | None = None) -> list[StepRecord] | None:
        """Up to ``steps`` more updates of both runs, as one atomic chunk; their records.

        Waits for the pair's lock (at most ``timeout`` seconds when given; None comes back when
        another thread still holds it, and nothing was applied). A step that raises leaves the
        pair unusable (A may have moved and B not), so every later call raises too.
        """
        if not self._lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return None
        try:
            if self._broken is not None:
                raise RuntimeError("this pair stopped at an error and cannot continue") from self._broken
            start = len(self._records) + len(self._pending)
            try:
                for _ in range(max(0, min(steps, self.settings.steps - start))):
                    self._advance()
                    self._applied += 1
                    if len(self._pending) >= FLUSH_EVERY:
                        self._flush()
                self._flush()
            except BaseException as err:
                self._broken = err
                raise
            return self._records[start:]
        finally:
            self._lock.release()

    def _advance(self) -> None:
        """Apply one update to A and to B and keep its snapshot. Only ``advance`` calls this, holding the lock."""
        done = len(self._records) + len(self._pending)
        if done >= self.settings.steps:
            raise StopIteration
        idx = self.schedule[done]
        loss_a, logits_a = train_step(self.a, idx)
        loss_b, logits_b = train_step(self.b, idx)
        fb = torch.cat(self._views_b)
        if fb.device.type != "cpu":
            fb = fb.cpu()
        self._pending.append(
            Snapshot(
                step=done + 1,
                params_a=torch.cat(self._views_a),
                params_b=fb,
                loss_a=loss_a,
                loss_b=loss_b.cpu(),
                logits_a=logits_a,
                logits_b=logits_b,
            )
        )

    def _flush(self) -> None:
        """Measure every pending snapshot at once."""
        if self._pending:
            self._records += measure(self._pending, self.yardstick)
            self._pending.clear()

    def step(self) -> StepRecord:
        recs = self.advance(1)
        if not recs:
            raise StopIteration
        return recs[-1]

    def __iter__(self) -> Iterator[StepRecord]:
        while True:
            recs = self.advance(1)
            if not recs:
                return
            yield recs[-1]

    def run(self, steps: int, on_progress: OnProgress | None = None,
            chunk: int = FLUSH_EVERY) -> list[StepRecord]:
        """Up to ``steps`` more updates, in chunks of ``chunk``; a Progress of the steps this call applied
        (out of ``steps``) after each.

        ``on_progress`` may raise to stop early (what was applied stays applied, whole steps only).
        """
        applied: list[StepRecord] = []
        while len(applied) < steps:
            recs = self.advance(min(max(1, chunk), steps - len(applied)))
            if not recs:
                break
            applied += recs
            report(on_progress, done=len(applied), total=steps, what="steps")
        return applied

    # ------------------------------------------------------------------ predicting
    def b_params_in_a_layout(self) -> dict[str, torch.Tensor]:
        """B's parameters mapped back to A's layout exactly (permutations undone), on the CPU."""
        with self._lock:
            pb = {k: v.detach().cpu().clone() for k, v in self.b.params.items()}
        return self.pair.layout.to_a(pb)

    def snapshot(self, resolution: int | None = None) -> tuple[list[StepRecord], tuple | None]:
        """(records so far, decision grid at that same step or None), read atomically."""
        with self._lock:
            records = self.records
            if not resolution:
                return records, None
            if records:
                return records, self.decision_grid(resolution)
            grid = self._grids_at_zero.get(resolution)
            if grid is None:
                grid = self._grids_at_zero[resolution] = self.decision_grid(resolution)
            return records, grid

    def decision_grid(self, resolution: int = 80) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Class predicted by A and by B on a grid over the data (for the boundary charts).

        Each side is evaluated on the CPU in its own precision (B in float64 for the float64
        source, under bfloat16 autocast for the bfloat16 source), B mapped back to A's layout.
        """
        lo, hi = self.x64.min(0) - 0.1, self.x64.max(0) + 0.1
        gx, gy = np.meshgrid(np.linspace(lo[0], hi[0], resolution), np.linspace(lo[1], hi[1], resolution))
        pts = np.stack([gx.ravel(), gy.ravel()], axis=1)
        return gx.ravel(), gy.ravel(), *self._predict(pts)

    def full_accuracy(self) -> tuple[float, float]:
        """Accuracy of A and of B on the whole data set (each in its own precision, see decision_grid)."""
        pa, pb = self._predict(self.x64)
        return float((pa == self.y).mean()), float((pb == self.y).mean())

    def _predict(self, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        la, lb = self.logits(pts)
        return la.argmax(1).numpy(), lb.argmax(1).numpy()

    def logits(self, pts: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """A's and B's logits at the points ``pts`` (float64, rounded to each run's input format), on the
        CPU, each in its own precision (see decision_grid), B's classes in A's order."""
        x = torch.from_numpy(np.asarray(pts, dtype=np.float64))
        with self._lock, torch.no_grad():
            la = forward(self.a.params, x.to(self.a.x.dtype))
            lb = forward_as(self.b, self.b_params_in_a_layout(), x.to(self.b.x.dtype))
        return la, lb


def _permute(p, h1, h2, f):
    q = dict(p)
    if f is not None:
        q["w1"] = q["w1"][:, f]
    if h1 is not None:
        q["w1"], q["b1"], q["w2"] = q["w1"][h1], q["b1"][h1], q["w2"][:, h1]
    if h2 is not None:
        q["w2"], q["b2"], q["w3"] = q["w2"][h2], q["b2"][h2], q["w3"][:, h2]
    return q


def _unpermute(p, h1, h2, f):
    q = dict(p)
    if h2 is not None:
        inv = np.argsort(h2)
        q["w2"], q["b2"], q["w3"] = q["w2"][inv], q["b2"][inv], q["w3"][:, inv]
    if h1 is not None:
        inv = np.argsort(h1)
        q["w1"], q["b1"], q["w2"] = q["w1"][inv], q["b1"][inv], q["w2"][:, inv]
    if f is not None:
        q["w1"] = q["w1"][:, np.argsort(f)]
    return q
