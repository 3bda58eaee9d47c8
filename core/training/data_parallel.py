"""Data-parallel training of the Training divergence model, beside one process: what both ways of running it share.

Two engines train the same model on W shards of each global batch and compare with one process
training on the whole batch, step by step, with the same records as the Training divergence pair
(``core.training.pair.StepRecord``):

* core.training.gloo runs W real worker processes on a torch.distributed process group (gloo),
  and supervises them; core.training.gloo_worker is what each worker process runs;
* core.training.emulate is the one-process stand-in for many devices: the shard gradients
  computed batched, combined in a collective model's order (core.kernels.collectives). It is a
  model; the live run is the real engine.

Both use this module: the run's settings and limits, one replica of the model and its optimizer
(``_Replica``), the data and its strided shards (``shards``, DistributedSampler's split), the
record of one step, and weight digests to compare runs step by step (``first_divergence``).
"""

from __future__ import annotations

import hashlib

import numpy as np
import torch
import torch.nn.functional as F

from core.arith.formats import bits_of, differing_bits
from core.arith.metrics import relative_gap
from core.training import optim
from core.training.mlp import PARAM_NAMES, TrainSettings, batch_schedule, forward, init_params, make_optimizer, spirals
from core.training.pair import StepRecord, validate

# The run shown on the Many devices page and by scripts/data_parallel.py: the Training divergence
# model and data, with a global batch of 1,024 examples, so that 1, 2, 4 processes and 8, 64 and
# 1,024 emulated devices all split it into equal shards.
DP_SETTINGS = TrainSettings(source="none", batch=1024, n_points=2048, steps=200, lr=1.0)
WORLD_SIZES = (1, 2, 4)  # offered on the page
MAX_WORLD_SIZE = 8  # the most processes a run may start (the command line's limit too)
MAX_LIVE_STEPS = 2000
EMULATED_KS = (8, 64, 1024)
MAX_EMULATED_STEPS = 400

# ---------------------------------------------------------------------- the training


def _loss(params: dict[str, torch.Tensor], xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(forward(params, xb), yb)


class _Replica:
    """One copy of the model and its optimizer, from the pair's initial weights."""

    def __init__(self, settings: TrainSettings) -> None:
        dt = torch.float32 if settings.dtype == "float32" else torch.float64
        base = init_params(settings.hidden, settings.classes, settings.seed)
        self.params = {k: base[k].to(dt).clone().requires_grad_(True) for k in PARAM_NAMES}
        self.opt = make_optimizer(self.params, settings)  # the Training divergence pair's, built the same way
        self.sizes = [self.params[k].numel() for k in PARAM_NAMES]

    def measure(self, xb: torch.Tensor, yb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Loss and logits on a batch, with the weights as they are (nothing changes)."""
        with torch.no_grad():
            logits = forward(self.params, xb)
            return F.cross_entropy(logits, yb), logits

    def train_step(self, xb: torch.Tensor, yb: torch.Tensor) -> None:
        self.opt.zero_grad(set_to_none=True)
        _loss(self.params, xb, yb).backward()
        optim.step(self.opt)

    def local_gradient(self, xb: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        """The gradient of the mean loss over this batch, flattened in PARAM_NAMES order (a fresh tensor)."""
        self.opt.zero_grad(set_to_none=True)
        _loss(self.params, xb, yb).backward()
        return torch.cat([self.params[k].grad.reshape(-1) for k in PARAM_NAMES])

    def apply(self, flat: torch.Tensor) -> None:
        """Use ``flat`` as the gradient and take one optimizer step."""
        offset = 0
        for k, n in zip(PARAM_NAMES, self.sizes, strict=True):
            p = self.params[k]
            p.grad = flat[offset:offset + n].reshape(p.shape).clone()
            offset += n
        optim.step(self.opt)

    def flat(self) -> torch.Tensor:
        return torch.cat([self.params[k].detach().reshape(-1) for k in PARAM_NAMES])


def weights_digest(flat: torch.Tensor) -> str:
    """A short fingerprint of a replica's weights (equal bits, equal digest), to compare runs step by step."""
    return hashlib.blake2b(flat.numpy().tobytes(), digest_size=8).hexdigest()


def first_divergence(a: tuple[str, ...] | list[str], b: tuple[str, ...] | list[str]) -> int | None:
    """The first step (1-based) at which two runs' weights differ, over the steps both have; None: never."""
    return next((i + 1 for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)


def _record(step: int, loss_a: torch.Tensor, loss_b: torch.Tensor, logits_a: torch.Tensor,
            logits_b: torch.Tensor, yb: torch.Tensor, fa: torch.Tensor, fb: torch.Tensor) -> StepRecord:
    """The Training divergence pair's record of one step: A is one process, B the data-parallel replica."""
    la, lb = float(loss_a), float(loss_b)
    abs_diff = abs(la - lb)
    return StepRecord(
        step=step, loss_a=la, loss_b=lb, loss_a_bits=bits_of(loss_a.detach()), loss_b_bits=bits_of(loss_b.detach()),
        abs_diff=abs_diff, rel_diff=relative_gap(la, lb),
        param_distance=float(torch.linalg.vector_norm(fa.double() - fb.double())),
        differing_bits=int(differing_bits(fa, fb)), total_bits=fa.numel() * 8 * fa.element_size(),
        acc_a=float((logits_a.argmax(1) == yb).double().mean()),
        acc_b=float((logits_b.argmax(1) == yb).double().mean()),
    )


def _data(settings: TrainSettings, steps: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    x64, y = spirals(settings.n_points, settings.classes, settings.seed)
    schedule = batch_schedule(len(y), settings.batch, steps, settings.seed)
    dt = torch.float32 if settings.dtype == "float32" else torch.float64
    return torch.from_numpy(x64).to(dt), torch.from_numpy(y), schedule


def shards(idx: np.ndarray, k: int) -> list[np.ndarray]:
    """Rank r's examples of a global batch: positions r, r+k, r+2k, ... (DistributedSampler's split)."""
    return [idx[r::k] for r in range(k)]


def check_settings(settings: TrainSettings, world_size: int, steps: int, max_steps: int = MAX_LIVE_STEPS) -> None:
    """ValueError with a plain reason when a run cannot have these settings."""
    validate(settings)
    if settings.dtype != "float32":
        raise ValueError("the data-parallel runs train in float32")
    if not 1 <= world_size <= max(MAX_WORLD_SIZE, max(EMULATED_KS)):
        raise ValueError(f"the number of ranks must be between 1 and {max(EMULATED_KS):,}")
    if settings.batch % world_size:
        raise ValueError(f"the global batch of {settings.batch:,} examples does not split evenly over "
                         f"{world_size} ranks")
    if not 1 <= steps <= max_steps:
        raise ValueError(f"steps must be between 1 and {max_steps:,}")
