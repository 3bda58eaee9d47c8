"""Data-parallel training on many devices, emulated in one process, and the order study.

``emulate_run`` is the one-process stand-in for k devices: k shards of each global batch, the
per-shard gradients computed batched (one backward pass through batched products) or one backward pass each (as a gloo
worker does), combined in a collective model's order (core.kernels.collectives), one optimizer
step, beside one process on the whole batch. It is a model; the live run (core.training.gloo) is
the real engine, and the gloo ring model replays it bit for bit. ``order_study`` compares the
all-reduce models on the first step's gradients for many k. The Many devices page's questions
(which k, which runs part first, every pair of runs) are answered here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from core.kernels import collectives
from core.machines.progress import OnProgress, report
from core.training.data_parallel import (
    DP_SETTINGS,
    EMULATED_KS,
    MAX_EMULATED_STEPS,
    _data,
    _record,
    _Replica,
    check_settings,
    first_divergence,
    shards,
    weights_digest,
)
from core.training.mlp import PARAM_NAMES, TrainSettings, forward
from core.training.pair import StepRecord
from core.training.seeds import DivergenceSummary, summarize

if TYPE_CHECKING:
    from core.training.gloo import DataParallelResult


def shard_gradients(params: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                    parts: list[np.ndarray]) -> np.ndarray:
    """Each shard's gradient of its mean loss, as rows of a float32 array (shards, parameters).

    Shards of equal size are computed together, in one backward pass: every shard gets its own copy
    of the weights, the forward pass runs through batched products, and the loss is the sum of the
    shards' mean losses, so each copy's gradient is its own shard's. (torch.func's grad would do the
    same but loads torch's compiler, about 68 MB of the server's memory, on first use.)
    """
    out = np.empty((len(parts), sum(v.numel() for v in params.values())), dtype=np.float32)
    by_size: dict[int, list[int]] = {}
    for r, part in enumerate(parts):
        by_size.setdefault(len(part), []).append(r)
    for rows in by_size.values():
        idx = torch.from_numpy(np.stack([parts[r] for r in rows]))
        # the gradient with respect to the expanded tensor (not its base) is per copy
        copies = [params[k].detach().requires_grad_(True).expand(len(rows), *params[k].shape)
                  for k in PARAM_NAMES]
        logits = forward(dict(zip(PARAM_NAMES, copies, strict=True)), x[idx])
        losses = F.cross_entropy(logits.flatten(0, 1), y[idx].flatten(), reduction="none")
        g = torch.autograd.grad(losses.view(len(rows), -1).mean(1).sum(), copies)
        consecutive = rows == list(range(rows[0], rows[0] + len(rows)))
        block = torch.from_numpy(out[rows[0]:rows[0] + len(rows)] if consecutive else out[rows])
        at = 0
        for gk in g:  # one copy each, straight into the rows (a weight's gradient comes transposed)
            n = gk[0].numel()
            block[:, at:at + n].view(gk.shape).copy_(gk)
            at += n
        if not consecutive:
            out[rows] = block.numpy()
    return out


@dataclass(frozen=True, kw_only=True)
class EmulatedRun:
    ranks: int
    model: str
    steps: int
    records: list[StepRecord] = field(repr=False)
    summary: DivergenceSummary
    digests: tuple[str, ...] = field(repr=False)  # the emulated replica's weights after every step


def emulate_run(ranks: int, model: str, steps: int, settings: TrainSettings = DP_SETTINGS,
                on_progress: OnProgress | None = None, every: int = 10,
                per_shard: str = "batched") -> EmulatedRun:
    """The data-parallel run on ``ranks`` emulated devices, in this process, beside one process.

    Every step: the gradient of each of the ``ranks`` shards, times 1/ranks (as DDP), summed in
    ``model``'s order (core.kernels.collectives), one optimizer step. ``on_progress`` gets the steps done
    every ``every`` steps and may raise to stop. ``per_shard="loop"`` computes each
    shard's gradient by its own backward pass, exactly as a worker does (slow for many shards);
    the default batches them (``shard_gradients``).
    """
    check_settings(settings, ranks, steps, MAX_EMULATED_STEPS)
    if model not in collectives.COLLECTIVE_MODELS:
        raise ValueError(f"unknown collective model {model!r}")
    if per_shard not in ("batched", "loop"):
        raise ValueError("per_shard is 'batched' or 'loop'")
    x, y, schedule = _data(settings, steps)
    one, dp = _Replica(settings), _Replica(settings)
    scale = np.float32(1.0 / ranks)
    records, digests = [], []
    for t in range(steps):
        idx = schedule[t]
        xb, yb = x[idx], y[idx]
        loss_a, logits_a = one.measure(xb, yb)
        loss_b, logits_b = dp.measure(xb, yb)
        parts = shards(idx, ranks)
        if per_shard == "loop":
            g = np.stack([dp.local_gradient(x[p], y[p]).numpy() for p in parts]) * scale
        else:
            g = shard_gradients(dp.params, x, y, parts) * scale
        dp.apply(torch.from_numpy(collectives.allreduce(g, model)))
        one.train_step(xb, yb)
        fb = dp.flat()
        records.append(_record(t + 1, loss_a, loss_b, logits_a, logits_b, yb, one.flat(), fb))
        digests.append(weights_digest(fb))
        if (t + 1) % every == 0 or t + 1 == steps:
            report(on_progress, done=t + 1, total=steps, what="steps")
    return EmulatedRun(
        ranks=ranks, model=model, steps=steps, records=records, summary=summarize(records), digests=tuple(digests)
    )


def rank_gradients(ranks: int, settings: TrainSettings = DP_SETTINGS) -> np.ndarray:
    """The vectors an all-reduce sums at the first step: every rank's shard gradient times 1/ranks."""
    if not 1 <= ranks <= settings.batch:
        raise ValueError(f"between 1 and {settings.batch:,} ranks (one example each at most)")
    x, y, schedule = _data(settings, 1)
    params = _Replica(settings).params
    g = shard_gradients(params, x, y, shards(schedule[0], ranks))
    return g * np.float32(1.0 / ranks)


STUDY_KS = (*range(2, 17), 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1000, 1024)


def order_study(ks: tuple[int, ...] = STUDY_KS, settings: TrainSettings = DP_SETTINGS,
                on_progress: OnProgress | None = None) -> tuple[collectives.Comparison, ...]:
    """collectives.compare for each k: the training pair's first-step gradients on k ranks.

    ``on_progress`` after each k (``what``: "k = 1,024"); it may raise to stop.
    """
    out = []
    for i, k in enumerate(ks):
        out.append(collectives.compare(rank_gradients(k, settings)))
        report(on_progress, done=i + 1, total=len(ks), what=f"k = {k:,}")
    return tuple(out)


# --------------------------------------------------------------------------- the page's questions


def study_ks(largest: int) -> tuple[int, ...]:
    """The numbers of ranks the order study covers, up to ``largest``."""
    return tuple(k for k in STUDY_KS if k <= largest)


@dataclass(frozen=True)
class EmulationSettings:
    """Emulated runs: the all-reduce model, the numbers of devices and the steps."""

    model: str = "ring_gloo"
    ks: tuple[int, ...] = EMULATED_KS
    steps: int = 100

    def keys(self) -> list[tuple[int, str, int]]:
        """One (ranks, model, steps) per chosen number of devices, fewest devices first."""
        return [(k, self.model, self.steps) for k in sorted(self.ks)]


class RunPair(NamedTuple):
    """Two runs and the first step where their weights differ (None: never in ``steps`` steps)."""

    run: str
    against: str
    first_difference: int | None
    steps: int


def run_pairs(runs: list[EmulatedRun], steps: int, live: DataParallelResult | None = None) -> list[RunPair]:
    """Every pair of emulated runs, and the live run against each when it trained as many steps."""
    out = [RunPair(f"{a.ranks:,} devices", f"{b.ranks:,} devices", first_divergence(a.digests, b.digests), steps)
           for i, a in enumerate(runs) for b in runs[i + 1:]]
    if live is not None and live.steps == steps:
        out += [RunPair(f"{live.world_size} live workers (gloo)", f"{r.ranks:,} devices",
                        first_divergence(live.digests, r.digests), steps) for r in runs]
    return out


def earliest_apart(runs: list[EmulatedRun]) -> EmulatedRun | None:
    """The run whose loss is first more than 1% from one process's (None if none gets there)."""
    return min((r for r in runs if r.summary.first_rel_1pct), key=lambda r: r.summary.first_rel_1pct, default=None)
