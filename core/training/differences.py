"""What B changes: the difference sources of a paired run, one ``Difference`` each.

B differs from A by exactly one chosen source: nothing (the control), the thread count, the order
of a reduction (hidden units, input features or examples permuted, the weights permuted to match,
so the network is mathematically the same function), the precision, a one-ULP nudge of one initial
weight, or a real GPU when one is present. Each source's ``apply`` sets up B's ``BPlan``;
core.training.pair builds the two runs from it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from core.machines.devices import available_devices
from core.machines.globalstate import PROCESS_THREADS
from core.training.mlp import TrainSettings


@dataclass(kw_only=True)
class BPlan:
    """How B departs from A, as a difference source's ``apply`` sets it up (defaults: B == A)."""

    params: dict[str, torch.Tensor]  # B's initial parameters, in A's layout (before any permutation)
    dtype: torch.dtype
    device: str = "cpu"
    device_name: str = "CPU"
    hidden_perms: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
    feature_perm: np.ndarray | None = None
    autocast_bf16: bool = False
    threads_a: int | None = None  # None: leave torch's setting alone
    threads_b: int | None = None
    batch_perm: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class Difference:
    """One difference source: ``apply(settings, rng, plan)`` changes B's plan (rng: local, seeded)."""

    key: str
    label: str
    apply: Callable[[TrainSettings, np.random.Generator, BPlan], None]
    plain: str = ""  # the difference as one plain English sentence, for the page's first screen
    stand_in: bool = False  # a reordering that stands in for another device


def _no_difference(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    pass


def _permute_hidden(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    plan.hidden_perms = (rng.permutation(s.hidden), rng.permutation(s.hidden))


def _permute_batch(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    plan.batch_perm = rng.permutation(s.batch)


def _permute_features(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    plan.feature_perm = np.array([1, 0])


def _threads(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    plan.threads_a, plan.threads_b = PROCESS_THREADS, 1


def _float64(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    # B starts from A's float32 weights and sees A's float32 data, widened exactly, so
    # the precision of the arithmetic is the only difference (not the rounding of the inputs)
    plan.dtype = torch.float64
    plan.params = {k: v.to(torch.float64) for k, v in plan.params.items()}


def _bfloat16(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    plan.autocast_bf16 = True


def _nudge(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    w = plan.params["w2"]
    w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(math.inf, dtype=w.dtype))


def _device(s: TrainSettings, rng: np.random.Generator, plan: BPlan) -> None:
    gpus = [d for d in available_devices() if d.kind != "cpu" and d.supports(plan.dtype)]
    if not gpus:
        raise ValueError("No GPU is visible to torch here, so B cannot run on one.")
    plan.device, plan.device_name = gpus[0].torch_device, gpus[0].name


DIFFERENCES: dict[str, Difference] = {
    d.key: d
    for d in [
        Difference(key="none", label="Nothing (control): B repeats A exactly", apply=_no_difference,
                   plain="Nothing: run B repeats run A exactly"),
        Difference(
            key="permute_hidden",
            label="Reduction order: hidden units permuted (weights permuted to match)",
            apply=_permute_hidden,
            plain="Run B stores its hidden units in another order (weights permuted to match), so its sums add "
                  "up in another order",
            stand_in=True,
        ),
        Difference(
            key="permute_batch",
            label="Reduction order: examples shuffled inside each batch",
            apply=_permute_batch,
            plain="Run B adds up the examples of each batch in another order",
            stand_in=True,
        ),
        Difference(
            key="permute_features",
            label="Reduction order: the two input features swapped",
            apply=_permute_features,
            plain="Run B has its two input features swapped (weights swapped to match)",
            stand_in=True,
        ),
        Difference(key="threads", label="CPU threads: run B uses 1, run A all of them", apply=_threads,
                   plain="Run B uses 1 CPU thread, run A all of them"),
        Difference(key="float64", label="Precision: A in float32, B in float64", apply=_float64,
                   plain="Run A computes in float32, run B in float64"),
        Difference(key="bfloat16", label="Precision: B's forward pass under bfloat16 autocast", apply=_bfloat16,
                   plain="Run B computes its forward pass in bfloat16 (autocast)"),
        Difference(key="nudge", label="Butterfly: one initial weight of B moved by one ULP", apply=_nudge,
                   plain="One initial weight of run B is moved by one ULP (its last bit)"),
        Difference(key="device", label="A real GPU: B runs on the GPU, A on the CPU", apply=_device,
                   plain="Run B runs on the GPU, run A on the CPU"),
    ]
}
SOURCES: dict[str, str] = {k: d.label for k, d in DIFFERENCES.items()}
PLAIN: dict[str, str] = {k: d.plain for k, d in DIFFERENCES.items()}
STAND_IN = {k for k, d in DIFFERENCES.items() if d.stand_in}
