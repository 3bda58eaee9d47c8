"""Bundled examples for the mismatch diagnosis, each computed live on this machine.

Tensors: CPU torch.sum with one thread against all threads; ``mm(a[:1], b)`` against
``mm(a, b)[:1]``; a float32 product against the same product of bfloat16 inputs; against
TF32-rounded inputs (each rounded to 10 explicit mantissa bits, to nearest with ties to even,
then multiplied in float32 on the CPU: what a TF32 tensor core computes up to its own order of
additions and its input conversion, which in some libraries rounds ties away from zero or
truncates, within the same envelope); and a planted bug, one element changed by 1 %.

Loss logs: a small tanh network trained twice in float32 with NumPy, full batch, where run B
sees the examples in another order (so every gradient sum is reordered), and the same
pair where B's data loader flips labels from one step on (a planted bug).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from core.arith.vectors import VectorSpec, generate
from core.diagnose.loaders import LossLog
from core.diagnose.rounding import round_to
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.training.mlp import forward, init_params, spirals

EXAMPLES: dict[str, str] = {
    "threads": "CPU: torch.sum of 10⁶ float32 values with 1 thread vs all threads",
    "batch": "Batch size: mm(a[:1], b) vs mm(a, b)[:1]",
    "bfloat16": "float32 product vs the same product of bfloat16 inputs",
    "tf32": "float32 product vs the same product of TF32-rounded inputs",
    "bug": "A planted bug: one element changed by 1 %",
}
LOG_EXAMPLES: dict[str, str] = {
    "chaotic": "Two float32 trainings, the second sees each batch in another order",
    "jump": "The same pair, but the second run's data loader flips labels from step 120",
}
BUG_INDEX = (17, 42)
JUMP_STEP = 120


@dataclass(frozen=True, kw_only=True)
class Example:
    key: str
    title: str
    actual: torch.Tensor
    expected: torch.Tensor
    inputs: object  # (a, b) for a product, one tensor for a sum
    reduction_length: int
    code: str  # how the pair was made
    live_note: str  # what happened on this machine


def _factors(seed: int, m: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


def make_example(key: str) -> Example:
    """Compute one bundled example now (deterministic inputs; the results are this machine's)."""
    title = EXAMPLES[key]
    if key == "threads":
        x = torch.from_numpy(generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values.copy())
        with torch_threads(1):
            one = x.sum()
        with torch_threads(PROCESS_THREADS):
            many = x.sum()
        same = bool((one == many).item()) and one.view(torch.int32).item() == many.view(torch.int32).item()
        if PROCESS_THREADS == 1:
            note = ("This server runs torch with a single thread, so both sums used the same split and cannot "
                    "differ here; on a machine with more cores they usually do.")
        elif same:
            note = (f"On this server 1 and {PROCESS_THREADS} threads gave the same bits for this vector: no difference "
                    "to explain here. With more threads (or another vector) the split changes and the bits usually "
                    "do too.")
        else:
            note = f"On this server 1 and {PROCESS_THREADS} threads gave different bits for this vector."
        return Example(key=key, title=title, actual=one, expected=many, inputs=x, reduction_length=x.numel(),
                       code="x = 10⁶ N(0, 1) float32 values (the Summation lab's default vector)\n"
                       f"with 1 thread: actual = x.sum();  with {PROCESS_THREADS}: expected = x.sum()", live_note=note)
    if key == "batch":
        a, b = _factors(0, 64, 2048, 1024)
        one, batch = torch.mm(a[:1], b), torch.mm(a, b)[:1]
        differ = int((one != batch).sum())
        note = (f"On this CPU {differ:,} of {one.numel():,} outputs differ." if differ else
                "On this CPU the two give the same bits.")
        return Example(key=key, title=title, actual=one, expected=batch, inputs=(a[:1], b), reduction_length=2048,
                       code="a, b = randn(64, 2048), randn(2048, 1024) (seed 0; the Mitigations page's pair)\n"
                       "actual = torch.mm(a[:1], b);  expected = torch.mm(a, b)[:1]", live_note=note)
    a, b = _factors(1, 128, 512, 256)
    expected = a @ b
    if key == "bfloat16":
        actual = torch.mm(a.bfloat16(), b.bfloat16()).float()
        return Example(
            key=key,
            title=title,
            actual=actual,
            expected=expected,
            inputs=(a, b),
            reduction_length=512,
            code="a, b = randn(128, 512), randn(512, 256) (seed 1)\n"
            "actual = torch.mm(a.bfloat16(), b.bfloat16()).float();  expected = a @ b",
            live_note="Computed live with torch's bfloat16 matrix product on this CPU (float32 accumulation, "
            "bfloat16 result), as autocast would.",
        )
    if key == "tf32":
        ar = torch.from_numpy(round_to(a.double().numpy(), "tf32")).float()
        br = torch.from_numpy(round_to(b.double().numpy(), "tf32")).float()
        return Example(
            key=key,
            title=title,
            actual=ar @ br,
            expected=expected,
            inputs=(a, b),
            reduction_length=512,
            code="a, b = randn(128, 512), randn(512, 256) (seed 1)\n"
            "actual = tf32(a) @ tf32(b) in float32;  expected = a @ b",
            live_note="TF32 emulated on this CPU: each input rounded to 10 explicit mantissa bits (to nearest, "
            "ties to even), then multiplied in float32: what a TF32 tensor core computes, up to its own "
            "order of additions and its input conversion (some libraries round ties away from zero or "
            "truncate; the TF32 envelope covers both).",
        )
    if key == "bug":
        actual = expected.clone()
        actual[BUG_INDEX] *= 1.01
        return Example(key=key, title=title, actual=actual, expected=expected, inputs=(a, b), reduction_length=512,
                       code="a, b = randn(128, 512), randn(512, 256) (seed 1)\n"
                       f"actual = a @ b with element {BUG_INDEX} multiplied by 1.01;  expected = a @ b",
                       live_note="Everything else is bit-identical: both sides ran the same kernel.")
    raise KeyError(key)


# ------------------------------------------------------------------------- loss logs


def toy_training(order_seed: int | None = None, flip_from: int | None = None, steps: int = 300,
                 hidden: int = 32, lr: float = 1.0) -> np.ndarray:
    """Losses of the Training divergence page's network (core.training.mlp: 2-h-h-3 tanh, its
    spirals and its initial weights), trained by full-batch gradient descent in float32.

    ``order_seed`` permutes the examples (every sum over the batch is then added in another
    order: mathematically the same training); ``flip_from`` relabels a tenth of the examples
    from that step on (a data bug).
    """
    x64, y64 = spirals(256, 3, 0)
    perm = np.arange(y64.size) if order_seed is None else np.random.default_rng(order_seed).permutation(y64.size)
    x, y = torch.from_numpy(x64[perm]).float(), torch.from_numpy(y64[perm])
    flipped = y.clone()
    sel = torch.from_numpy(np.random.default_rng(2).permutation(y.numel())[: y.numel() // 10])
    flipped[sel] = (flipped[sel] + 1) % 3
    p = {k: v.float().requires_grad_() for k, v in init_params(hidden, 3, 1).items()}
    losses = np.empty(steps)
    for s in range(steps):
        labels = flipped if flip_from is not None and s + 1 >= flip_from else y
        loss = F.cross_entropy(forward(p, x), labels)
        grads = torch.autograd.grad(loss, list(p.values()))
        with torch.no_grad():
            for t, g in zip(p.values(), grads, strict=True):
                t -= lr * g
        losses[s] = float(loss.detach())
    return losses


def make_log_example(key: str) -> tuple[LossLog, LossLog, str]:
    """(log A, log B, how they were made), computed now."""
    a = toy_training()
    if key == "chaotic":
        b, how = toy_training(order_seed=3), "B trains on the same examples listed in another order"
    elif key == "jump":
        b, how = toy_training(flip_from=JUMP_STEP), f"B's data loader flips a tenth of the labels from step {JUMP_STEP}"
    else:
        raise KeyError(key)
    steps = np.arange(1, a.size + 1, dtype=np.int64)
    zero = np.zeros(a.size)
    return (LossLog(steps=steps, values=a, resolution=zero, source="run A (float32, NumPy, full batch)"),
            LossLog(steps=steps, values=b, resolution=zero, source=f"run B: {how}"), how)
