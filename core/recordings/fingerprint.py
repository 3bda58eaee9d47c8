"""What machine computed a number, and a short fingerprint of the bits it produces.

Two x86-64 CPUs with the same torch wheel and the same thread count can still give
other bits: torch dispatches its vectorized kernels by the CPU's SIMD capability, and
oneMKL picks its matrix-product code path by the CPU it finds. So a recording names its
machine in detail (core.machines.devices.machine_facts), and every machine can be summarized by the
bits of a fixed set of single operations on fixed inputs (:func:`op_fingerprint`).

The first twelve operations are exactly those of ``shared/recordings/op_fingerprint.py``
(same generator, same draws in the same order), so their hashes can be compared with the
ones that script printed on other machines. The rest follow one training step of the
Training divergence page piece by piece (linear layers, tanh and cross-entropy forward
and backward, the optimizer updates, whole steps), so two machines whose training runs
part can see in which operation they part.

Only core.machines.globalstate changes a process-global setting (the thread count, locked and
restored); every input comes from a local ``numpy.random.Generator``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.training import optim
from core.training.mlp import TrainSettings, train_params

HASH_DIGITS = 16
FINGERPRINT_DIGITS = 12


# ------------------------------------------------------------------------ the operations


@dataclass(frozen=True)
class Op:
    name: str
    group: str  # "matrix products", "elementwise", "reductions", "training step"
    run: Callable[[Callable[..., torch.Tensor]], torch.Tensor]  # takes r(*shape) -> float32 tensor


def _grad_of(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x), x)
    return g


def _mlp_grads(r) -> torch.Tensor:
    """One step's gradients of the page's 2-64-64-3 MLP on a batch of 128 (all six tensors)."""
    p = {"w1": r(64, 2), "b1": r(64), "w2": r(64, 64) / 8, "b2": r(64), "w3": r(3, 64) / 8, "b3": r(3)}
    x, y = r(128, 2), torch.from_numpy(np.arange(128) % 3)
    ps = {k: v.requires_grad_(True) for k, v in p.items()}
    h = torch.tanh(F.linear(x, ps["w1"], ps["b1"]))
    h = torch.tanh(F.linear(h, ps["w2"], ps["b2"]))
    loss = F.cross_entropy(F.linear(h, ps["w3"], ps["b3"]), y)
    grads = torch.autograd.grad(loss, list(ps.values()))
    return torch.cat([loss.reshape(1), *(g.reshape(-1) for g in grads)])


def _optimizer_steps(kind: str, r) -> torch.Tensor:
    """Two updates of a 64x64 weight by the page's optimizer (foreach=False, as the page runs it)."""
    w = r(64, 64).requires_grad_(True)
    opt = (torch.optim.SGD([w], lr=0.5, momentum=0.9, foreach=False) if kind == "sgd"
           else torch.optim.Adam([w], lr=0.1, foreach=False))
    for _ in range(2):
        w.grad = r(64, 64)
        optim.step(opt)
    return w.detach()


def _training(steps: int, optimizer: str = "sgd_momentum", lr: float = 0.5) -> torch.Tensor:
    s = TrainSettings(source="none", optimizer=optimizer, lr=lr, steps=steps)
    p = train_params(s)
    return torch.cat([v.detach().reshape(-1) for v in p.values()])


# The first twelve: shared/recordings/op_fingerprint.py, same inputs in the same order.
SHARED_OPS: tuple[Op, ...] = (
    Op("mm 128x2 @ 2x64", "matrix products", lambda r: torch.mm(r.x, r.w1)),
    Op("mm 128x64 @ 64x64", "matrix products", lambda r: torch.mm(r.h1, r.w2)),
    Op("mm 128x64 @ 64x3", "matrix products", lambda r: torch.mm(r.h1, r.w3)),
    Op("mm 64x128 @ 128x64 (a weight gradient)", "matrix products", lambda r: torch.mm(r.h1.t(), r.h1)),
    Op("mm 1x2048 @ 2048x1024", "matrix products", lambda r: torch.mm(r(1, 2048), r(2048, 1024))),
    Op("mm 64x2048 @ 2048x1024", "matrix products", lambda r: torch.mm(r(64, 2048), r(2048, 1024))),
    Op("addmm 128x64 + bias", "matrix products", lambda r: torch.addmm(r(64), r.h1, r.w2)),
    Op("tanh 100000", "elementwise", lambda r: torch.tanh(r.v)),
    Op("exp 100000", "elementwise", lambda r: torch.exp(r.v)),
    Op("log_softmax 128x3", "elementwise", lambda r: torch.log_softmax(r(128, 3), dim=1)),
    Op("sum 100000", "reductions", lambda r: r.v.sum().reshape(1)),
    Op("mean over rows 128x64", "reductions", lambda r: r.h1.mean(0)),
)
# One training step of the Training divergence page, piece by piece (inputs from seed 1).
STEP_OPS: tuple[Op, ...] = (
    Op("linear 128x2 -> 64 (x @ W.T + b)", "training step", lambda r: F.linear(r(128, 2), r(64, 2), r(64))),
    Op("linear 128x64 -> 64 (x @ W.T + b)", "training step", lambda r: F.linear(r(128, 64), r(64, 64), r(64))),
    Op("linear 128x64 -> 3 (x @ W.T + b)", "training step", lambda r: F.linear(r(128, 64), r(3, 64), r(3))),
    Op("tanh backward 128x64", "training step", lambda r: _grad_of(lambda t: (torch.tanh(t) * r.c).sum(), r(128, 64))),
    Op("cross_entropy 128x3 (mean)", "training step",
       lambda r: F.cross_entropy(r(128, 3), torch.from_numpy(np.arange(128) % 3)).reshape(1)),
    Op("cross_entropy backward 128x3", "training step",
       lambda r: _grad_of(lambda t: F.cross_entropy(t, torch.from_numpy(np.arange(128) % 3)), r(128, 3))),
    Op("linear backward: grad of W, 64x128 @ 128x64", "training step",
       lambda r: _grad_of(lambda w: (F.linear(r.h2, w) * r.c).sum(), r(64, 64))),
    Op("linear backward: grad of x, 128x64 @ 64x64", "training step",
       lambda r: _grad_of(lambda x: (F.linear(x, r.w64) * r.c).sum(), r(128, 64))),
    Op("linear backward: grad of b (sum over 128 rows)", "training step",
       lambda r: _grad_of(lambda b: (F.linear(r.h2, r.w64, b) * r.c).sum(), r(64))),
    Op("MLP 2-64-64-3 gradients, batch 128", "training step", _mlp_grads),
    Op("SGD momentum update (2 steps, 64x64)", "training step", lambda r: _optimizer_steps("sgd", r)),
    Op("Adam update (2 steps, 64x64)", "training step", lambda r: _optimizer_steps("adam", r)),
    Op("training: 10 steps, SGD lr 0.5 (all parameters)", "training step", lambda r: _training(10)),
    Op("training: 100 steps, SGD lr 0.5 (all parameters)", "training step", lambda r: _training(100)),
    Op("training: 100 steps, Adam lr 0.1 (all parameters)", "training step", lambda r: _training(100, "adam", 0.1)),
)
OPS: tuple[Op, ...] = SHARED_OPS + STEP_OPS
GROUPS: tuple[str, ...] = ("reductions", "matrix products", "elementwise", "training step")


class _Inputs:
    """``r(*shape)`` draws float32 standard normals; named attributes are drawn once, on first use."""

    def __init__(self, seed: int, named: dict[str, tuple[int, ...]]):
        self._rng = np.random.default_rng(seed)
        self._named = {k: self(*shape) for k, shape in named.items()}

    def __call__(self, *shape: int) -> torch.Tensor:
        return torch.from_numpy(self._rng.standard_normal(shape).astype(np.float32))

    def __getattr__(self, name: str) -> torch.Tensor:
        try:
            return self.__dict__["_named"][name]
        except KeyError:
            raise AttributeError(name) from None


def _digest(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    return hashlib.sha256(t.numpy().tobytes()).hexdigest()[:HASH_DIGITS]


def _compute() -> dict[str, str]:
    out = {}
    # the shared script draws x, w1, w2, w3, h1, v first, then the rest in row order
    r = _Inputs(0, {"x": (128, 2), "w1": (2, 64), "w2": (64, 64), "w3": (64, 3), "h1": (128, 64), "v": (100_000,)})
    for op in SHARED_OPS:
        out[op.name] = _digest(op.run(r))
    r = _Inputs(1, {"c": (128, 64), "h2": (128, 64), "w64": (64, 64)})
    for op in STEP_OPS:
        out[op.name] = _digest(op.run(r))
    return out


@functools.cache
def op_fingerprint() -> dict[str, str]:
    """Operation name -> first 16 hex digits of the SHA-256 of its result bits, on this CPU.

    Computed once per process with the process's configured thread count (about a second).
    """
    with torch_threads(PROCESS_THREADS):
        return _compute()


def fingerprint(ops: dict[str, str], names: tuple[str, ...] | None = None) -> str:
    """A short hash of the given operations' hashes (all of ``OPS`` by default, in their order)."""
    names = names or tuple(op.name for op in OPS)
    missing = [n for n in names if n not in ops]
    if missing:
        raise KeyError(f"no hash for {missing[0]!r}")
    joined = "\n".join(f"{n}={ops[n]}" for n in names)
    return hashlib.sha256(joined.encode()).hexdigest()[:FINGERPRINT_DIGITS]


def group_fingerprints(ops: dict[str, str]) -> dict[str, str | None]:
    """One short hash per group of operations (None where a group's hashes are incomplete)."""
    out: dict[str, str | None] = {}
    for g in GROUPS:
        names = tuple(op.name for op in OPS if op.group == g)
        out[g] = fingerprint(ops, names) if all(n in ops for n in names) else None
    return out


SAME_BITS, OTHER_BITS, NOT_ON_BOTH = "same bits", "other bits", "not recorded on both"  # OpComparison.verdict


@dataclass(frozen=True, kw_only=True)
class OpComparison:
    name: str
    group: str
    left: str | None
    right: str | None

    @property
    def verdict(self) -> str:
        if self.left is None or self.right is None:
            return NOT_ON_BOTH
        return SAME_BITS if self.left == self.right else OTHER_BITS


def compare_ops(left: dict[str, str], right: dict[str, str]) -> list[OpComparison]:
    """Operation by operation: the same bits on both machines, other bits, or not recorded on both."""
    return [OpComparison(name=op.name, group=op.group, left=left.get(op.name), right=right.get(op.name)) for op in OPS]


def first_differing_group(comparisons: list[OpComparison]) -> str | None:
    """The first group, in GROUPS order, with an operation that gives other bits (None: none does)."""
    for g in GROUPS:
        if any(c.group == g and c.verdict == OTHER_BITS for c in comparisons):
            return g
    return None
