"""The model both runs train: a 2-64-64-3 MLP on noisy spirals, its settings, presets and one step.

TrainSettings (one frozen object for everything a run depends on), the spirals and the batch
schedule (seeded local generators), the initial weights, the forward pass and one optimizer step,
the presets the Training divergence page offers, and run A alone (benchmarks, fingerprints).

Everything random comes from local generators (numpy.random.Generator, torch.Generator);
the only process-global setting ever changed, torch's thread count, is changed inside
core.machines.globalstate.torch_threads (locked and restored).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from core.arith.vectors import check_seed
from core.machines.globalstate import torch_threads
from core.training import optim

# What B changes is a registry too: see DIFFERENCES below (SOURCES and STAND_IN are views of it).
OPTIMIZERS = ("sgd_momentum", "adam")
DTYPES = {"float32": torch.float32, "float64": torch.float64}
MAX_STEPS = 5000
FLUSH_EVERY = 64  # steps whose measurements are made together (bounds the snapshot memory)
MAX_HIDDEN = 256


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    source: str = "permute_hidden"
    dtype: str = "float32"
    optimizer: str = "sgd_momentum"
    lr: float = 0.5
    steps: int = 500
    seed: int = 0
    hidden: int = 64
    batch: int = 128
    n_points: int = 600
    classes: int = 3

    def validate(self) -> None:
        """ValueError with a plain reason for a value out of range. The difference source is checked
        against its registry by core.training.pair.validate, which builds on these settings and calls this."""
        if self.dtype not in DTYPES:
            raise ValueError("dtype must be float32 or float64")
        if self.source == "float64" and self.dtype == "float64":
            raise ValueError("“A in float32, B in float64” needs the format set to float32 (A is already float64).")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}")
        if not (0 <= self.lr <= 10 and math.isfinite(self.lr)):
            raise ValueError("the learning rate must be between 0 and 10")
        if not 1 <= self.steps <= MAX_STEPS:
            raise ValueError(f"steps must be between 1 and {MAX_STEPS:,}")
        if not 2 <= self.hidden <= MAX_HIDDEN:
            raise ValueError(f"hidden width must be between 2 and {MAX_HIDDEN}")
        if not 1 <= self.batch <= self.n_points <= 20_000:
            raise ValueError("need 1 <= batch <= points <= 20,000")
        if not 2 <= self.classes <= 8:
            raise ValueError("classes must be between 2 and 8")
        check_seed(self.seed, ValueError)


@dataclass(frozen=True)
class Preset:
    name: str
    settings: TrainSettings
    note: str


# ------------------------------------------------------------------------------- data


SPIRAL_TURN = 5.0  # radians each arm turns
SPIRAL_NOISE = 0.3  # radians of angular noise: the arms overlap, so the loss never reaches 0


def spirals(n: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points of interleaved noisy spirals in the plane, float64, from a seeded local generator.

    The first ``n % classes`` classes get one point more than the others, so there are exactly
    ``n`` points and every ``batch <= n`` that ``TrainSettings.validate`` accepts can be drawn.
    """
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for c in range(classes):
        per = n // classes + (c < n % classes)
        r = np.linspace(0.05, 1.0, per)
        start = c * 2 * np.pi / classes
        theta = np.linspace(start, start + SPIRAL_TURN, per) + rng.normal(0, SPIRAL_NOISE, per)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(per, c))
    return np.concatenate(xs), np.concatenate(ys)


def batch_schedule(n: int, batch: int, steps: int, seed: int) -> np.ndarray:
    """Indices of every step's batch (the same for A and B)."""
    rng = np.random.default_rng(seed + 1)
    return np.stack([rng.choice(n, size=batch, replace=False) for _ in range(steps)])


# ------------------------------------------------------------------------------ model


FEATURES = 2  # the spirals lie in the plane: two input features


PARAM_NAMES = ("w1", "b1", "w2", "b2", "w3", "b3")
# The architecture, written once: layer i is x @ w_i.T + b_i, then tanh where marked. forward and
# MLPModule (the same network as nn.Linear and nn.Tanh modules, for module paths in traces) both read it.
LAYERS = (("w1", "b1", True), ("w2", "b2", True), ("w3", "b3", False))


def network_name(settings: TrainSettings) -> str:
    """The network as the page names it, read from LAYERS and the settings ("2-64-64-3 tanh MLP")."""
    sizes = [FEATURES, *(settings.hidden for _, _, tanh in LAYERS if tanh), settings.classes]
    return f"{'-'.join(map(str, sizes))} tanh MLP"


def init_params(hidden: int, classes: int, seed: int) -> dict[str, torch.Tensor]:
    """He-style initialization in float64 from a local torch.Generator."""
    g = torch.Generator().manual_seed(seed)

    def u(shape, fan_in):
        bound = math.sqrt(6 / fan_in)
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * bound

    return {
        "w1": u((hidden, FEATURES), FEATURES), "b1": torch.zeros(hidden, dtype=torch.float64),
        "w2": u((hidden, hidden), hidden), "b2": torch.zeros(hidden, dtype=torch.float64),
        "w3": u((classes, hidden), hidden), "b3": torch.zeros(classes, dtype=torch.float64),
    }


def _linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if w.dim() == 2:
        return F.linear(x, w, b)
    # Weights with a leading dimension are one copy per shard (x: shards, examples, features),
    # multiplied through batched products: see shard_gradients in core.training.emulate.
    return torch.baddbmm(b.unsqueeze(-2), x, w.transpose(-1, -2))


def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """The MLP's logits; with weights stacked per shard (a leading dimension), each shard's own."""
    for w, b, tanh in LAYERS:
        x = _linear(x, p[w], p[b])
        if tanh:
            x = torch.tanh(x)
    return x


class MLPModule(nn.Module):
    """``forward`` as modules (fc1, act1, fc2, act2, fc3: nn.Linear calls F.linear, nn.Tanh torch.tanh, so
    the bits are forward's), holding a copy of ``p`` in its own dtype."""

    def __init__(self, p: dict[str, torch.Tensor]) -> None:
        super().__init__()
        for i, (w, b, tanh) in enumerate(LAYERS, start=1):
            out_features, in_features = p[w].shape
            # in the weights' own format: float32 layers would round float64 weights before a float64 run
            fc = nn.Linear(in_features, out_features, dtype=p[w].dtype)
            with torch.no_grad():
                fc.weight.copy_(p[w])
                fc.bias.copy_(p[b])
            self.add_module(f"fc{i}", fc)
            if tanh:
                self.add_module(f"act{i}", nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, (_, _, tanh) in enumerate(LAYERS, start=1):
            x = getattr(self, f"fc{i}")(x)
            if tanh:
                x = getattr(self, f"act{i}")(x)
        return x


@dataclass(kw_only=True)
class Run:
    params: dict[str, torch.Tensor]
    opt: torch.optim.Optimizer
    x: torch.Tensor
    y: torch.Tensor
    device: str = "cpu"
    autocast_bf16: bool = False
    threads: int | None = None  # None: leave torch's setting alone
    batch_perm: np.ndarray | None = None  # applied to each batch (examples reordered)


def make_optimizer(params: dict[str, torch.Tensor], settings: TrainSettings) -> torch.optim.Optimizer:
    ps = [params[k] for k in PARAM_NAMES]
    if settings.optimizer == "adam":
        return torch.optim.Adam(ps, lr=settings.lr, foreach=False)
    return torch.optim.SGD(ps, lr=settings.lr, momentum=0.9, foreach=False)


def forward_as(run: Run, p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """``forward`` computed the way ``run`` computes it; the logits come back in ``x``'s dtype."""
    if not run.autocast_bf16:
        return forward(p, x)
    # CPU autocast leaves float64 tensors alone, so a float64 run reaches bfloat16 through
    # float32 (``.float()`` is the identity on a float32 run, which therefore is unchanged).
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = forward({k: v.float() for k, v in p.items()}, x.float())
    return logits.to(x.dtype)


def _one_step(run: Run, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    if run.batch_perm is not None:
        idx = idx[run.batch_perm]
    xb, yb = run.x[idx], run.y[idx]
    run.opt.zero_grad(set_to_none=True)
    logits = forward_as(run, run.params, xb)
    loss = F.cross_entropy(logits, yb)
    loss.backward()
    optim.step(run.opt)
    return loss.detach(), logits.detach()


def train_step(run: Run, idx: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """One SGD step of ``run`` on the examples ``idx`` (with the run's own thread count, if it has one):
    the loss and the logits, detached."""
    if run.threads is None:
        return _one_step(run, idx)
    with torch_threads(run.threads):
        return _one_step(run, idx)


# --------------------------------------------------------------------- bare baseline


def _plain_run(settings: TrainSettings) -> tuple[Run, np.ndarray]:
    x64, y = spirals(settings.n_points, settings.classes, settings.seed)
    schedule = batch_schedule(len(y), settings.batch, settings.steps, settings.seed)
    dt = DTYPES[settings.dtype]
    p = {k: v.to(dt).requires_grad_(True) for k, v in init_params(settings.hidden, settings.classes,
                                                                  settings.seed).items()}
    return Run(
        params=p, opt=make_optimizer(p, settings), x=torch.from_numpy(x64).to(dt), y=torch.from_numpy(y)
    ), schedule


def bare_training_loop(settings: TrainSettings) -> float:
    """One plain training loop of the same model and batches, nothing recorded (benchmarks)."""
    run, schedule = _plain_run(settings)
    loss = None
    for idx in schedule:
        loss, _ = _one_step(run, idx)
    return float(loss)


def train_params(settings: TrainSettings) -> dict[str, torch.Tensor]:
    """Run A alone for ``settings.steps`` steps and return its parameters (machine fingerprints)."""
    run, schedule = _plain_run(settings)
    for idx in schedule:
        _one_step(run, idx)
    return {k: v.detach() for k, v in run.params.items()}


# --------------------------------------------------------------------------- presets
# The notes say what each preset changes, never at which step the pair parts: that step depends on
# the machine's bits (two x86-64 CPUs with the same torch wheel give other steps), so the page
# shows it live for this server and cites recordings, with their provenance, for other machines.
PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset("Hidden units reordered (SGD, lr 0.5)", TrainSettings(),
               "The same network with its hidden units permuted: only the order of the sums changes, so the "
               "weights differ from the first step (the rounded loss may stay bit-identical a few steps longer) "
               "and the gap then grows step by step."),
        Preset("Butterfly: one weight moved by one ULP", TrainSettings(source="nudge"),
               "One of 4,547 initial weights is changed in its last bit; everything else is identical."),
        Preset("Examples reordered inside each batch", TrainSettings(source="permute_batch"),
               "Same examples, another order in the batch reductions."),
        Preset("bfloat16 autocast", TrainSettings(source="bfloat16"),
               "B's forward pass runs in bfloat16 (8 significant bits), so its roundings are about 65,000 times "
               "coarser than float32's: the pair parts far sooner than with a reordering."),
        Preset("Adam, hidden units reordered (lr 0.1)", TrainSettings(optimizer="adam", lr=0.1),
               "Adam instead of SGD with momentum, hidden units reordered."),
        Preset("Small steps: hidden units reordered (SGD, lr 0.1)", TrainSettings(lr=0.1),
               "The default reordering with a five times smaller learning rate: whether a difference grows "
               "depends on the step size, so compare this pair's gap with the default's."),
        Preset("Fast chaos (SGD, lr 0.8)", TrainSettings(lr=0.8),
               "A larger step size makes the dynamics more unstable, so the gap grows faster."),
        Preset("Control: nothing differs", TrainSettings(source="none"),
               "A and B are the same computation: they stay bit-identical at every step."),
        Preset("One thread vs all threads", TrainSettings(source="threads"),
               "B runs with 1 thread, A with all: the pair stays bit-identical exactly when torch does not "
               "split this model's small operations across threads on this machine."),
    ]
}
DEFAULT_PRESET = next(iter(PRESETS))
