"""One step's gap between runs A and B: the ``StepRecord`` of it, the ``Snapshot`` a step leaves, and
``measure``, which turns consecutive snapshots into records, many at once.

A snapshot is taken in microseconds while the pair steps; measuring (distances, differing bits,
accuracies, the losses' bit patterns) comes later, many snapshots at once. core.training.pair makes
the snapshots and the ``Yardstick`` of a pair.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from core.arith.formats import bit_view, differing_bits
from core.arith.metrics import relative_gap


@dataclass(frozen=True, kw_only=True)
class StepRecord:
    step: int  # 1-based: the update just applied
    loss_a: float
    loss_b: float
    loss_a_bits: int
    loss_b_bits: int
    abs_diff: float
    rel_diff: float
    param_distance: float  # ||theta_A - theta_B|| (B mapped back to A's layout, in float64)
    differing_bits: int  # across all parameters, B rounded to A's dtype and mapped back
    total_bits: int
    acc_a: float  # on this step's batch
    acc_b: float


@dataclass(frozen=True, eq=False, kw_only=True)
class Snapshot:
    """What one step leaves for measuring: both runs' flat parameters (B in its own layout, on
    the CPU), losses and logits. Taken in microseconds; measured later, many at once."""

    step: int  # 1-based
    params_a: torch.Tensor
    params_b: torch.Tensor
    loss_a: torch.Tensor
    loss_b: torch.Tensor
    logits_a: torch.Tensor
    logits_b: torch.Tensor


@dataclass(frozen=True, eq=False, kw_only=True)
class Yardstick:
    """What measuring needs besides the snapshots, fixed for a pair."""

    to_a: torch.Tensor | None  # core.training.pair.Layout.flat_index
    total_bits: int
    labels_a: torch.Tensor  # every step's batch labels, as A sees them
    labels_b: torch.Tensor  # and as B sees them (reordered for permute_batch), on B's device
    batch: int


def measure(snapshots: Sequence[Snapshot], ys: Yardstick) -> list[StepRecord]:
    """The records of consecutive snapshots, computed together: distances, differing bits,
    accuracies, losses and their bit patterns. Pure: reads its arguments, changes nothing."""
    if not snapshots:
        return []
    first = snapshots[0].step
    fa = torch.stack([sn.params_a for sn in snapshots])
    fb = torch.stack([sn.params_b for sn in snapshots])
    if ys.to_a is not None:
        fb = fb[:, ys.to_a]
    fb_a = fb if fb.dtype == fa.dtype else fb.to(fa.dtype)
    differing = differing_bits(fa, fb_a, axis=1).tolist()
    dist = torch.linalg.vector_norm(fa.double() - fb.double(), dim=1).tolist()  # in float64
    la, lb = torch.stack([sn.loss_a for sn in snapshots]), torch.stack([sn.loss_b for sn in snapshots])
    losses_a, losses_b = la.tolist(), lb.tolist()
    bits_a, bits_b = bit_view(la).tolist(), bit_view(lb).tolist()
    steps = slice(first - 1, first - 1 + len(snapshots))
    ca = (torch.stack([sn.logits_a for sn in snapshots]).argmax(2) == ys.labels_a[steps]).sum(1).tolist()
    cb = (torch.stack([sn.logits_b for sn in snapshots]).argmax(2) == ys.labels_b[steps]).sum(1).cpu().tolist()
    out = []
    for i, sn in enumerate(snapshots):
        a_, b_ = losses_a[i], losses_b[i]
        abs_diff = abs(a_ - b_)
        out.append(StepRecord(
            step=sn.step, loss_a=a_, loss_b=b_, loss_a_bits=int(bits_a[i]), loss_b_bits=int(bits_b[i]),
            abs_diff=abs_diff, rel_diff=relative_gap(a_, b_),
            param_distance=dist[i], differing_bits=int(differing[i]), total_bits=ys.total_bits,
            acc_a=ca[i] / ys.batch, acc_b=cb[i] / ys.batch,
        ))
    return out
