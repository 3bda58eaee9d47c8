"""Bundled examples for the mismatch diagnosis, each computed live on this machine.

Tensors: CPU torch.sum with one thread against all threads; ``mm(a[:1], b)`` against
``mm(a, b)[:1]``; a float32 product against the same product of bfloat16 inputs; against
TF32-rounded inputs (each rounded to 10 explicit mantissa bits, to nearest with ties to even,
then multiplied in float32 on the CPU: what a TF32 tensor core computes up to its own order of
additions and its input conversion, which in some libraries rounds ties away from zero or
truncates, within the same envelope); a planted bug, one element changed by 1 %; and rows of
same-sign values added left to right against the same rows in the order of PyTorch's CUDA block
reduction (core.kernels.cuda_model, a model of the GPU's order run on this CPU), where the exact sums
show the tree the more accurate of the two.

Loss logs: the Training divergence page's network (core.training.mlp, at that page's default
width, read from TrainSettings) trained twice in float32 with torch, full batch, where run B
sees the examples in another order (so every gradient sum is reordered), and the same
pair where B's data loader flips labels from one step on (a planted bug).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from core.arith.formats import same_bits
from core.arith.vectors import VectorSpec, generate
from core.diagnose.loaders import LossLog
from core.diagnose.logs import LogDiagnosis, LogVerdict, diagnose_logs
from core.diagnose.results import Diagnosis
from core.diagnose.rounding import round_to
from core.diagnose.verdict import diagnose
from core.kernels.cuda_model import cuda_config_for, cuda_sum_model
from core.kernels.sums import sequential
from core.machines.globalstate import PROCESS_THREADS, torch_threads
from core.training.mlp import TrainSettings, forward, init_params, spirals

EXAMPLES: dict[str, str] = {
    "threads": "CPU: torch.sum of 10⁶ float32 values with 1 thread vs all threads",
    "batch": "Batch size: mm(a[:1], b) vs mm(a, b)[:1]",
    "bfloat16": "float32 product vs the same product of bfloat16 inputs",
    "tf32": "float32 product vs the same product of TF32-rounded inputs",
    "bug": "A planted bug: one element changed by 1 %",
    "tree": "A left-to-right loop vs a GPU-style tree sum",
}
LOG_EXAMPLES: dict[str, str] = {
    "reordered": "Two float32 trainings, the second lists the examples in another order",
    "jump": "The same pair, but the second run's data loader flips labels from step 120",
}
BUG_INDEX = (17, 42)
JUMP_STEP = 120
TREE_ROWS, TREE_LENGTH = 32, 65_536  # the loop-against-tree example: rows of same-sign values
LOG_STEPS, LOG_POINTS, LOG_LR = 300, 256, 1.2  # the loss-log pair: full-batch gradient descent


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


@dataclass(frozen=True, kw_only=True)
class DiagnosedExample:
    """A bundled example diagnosed: the code it shows, what was computed live, and the diagnosis."""

    code: str
    live_note: str
    diagnosis: Diagnosis


def diagnosed_example(key: str, reduced_precision: str = "any") -> DiagnosedExample:
    """The bundled example ``key``, computed live and diagnosed as the page shows it."""
    ex = make_example(key)
    d = diagnose(ex.actual, ex.expected, inputs=ex.inputs, reduction_length=ex.reduction_length,
                 reduced_precision=reduced_precision)
    return DiagnosedExample(code=ex.code, live_note=ex.live_note, diagnosis=d)


def _factors(seed: int, m: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)


def _threads_example(key: str, title: str) -> Example:
    x = torch.from_numpy(generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values.copy())
    with torch_threads(1):
        one = x.sum()
    with torch_threads(PROCESS_THREADS):
        many = x.sum()
    same = bool((one == many).item()) and same_bits(one, many)
    if PROCESS_THREADS == 1:
        note = ("This server runs torch with a single thread, so both sums used the same split and cannot "
                "differ here; on a machine with more cores they often do.")
    elif same:
        note = (f"On this server 1 and {PROCESS_THREADS} threads gave the same bits for this vector: no difference "
                "to explain here. With more threads (or another vector) the split changes and the bits usually "
                "do too.")
    else:
        note = f"On this server 1 and {PROCESS_THREADS} threads gave different bits for this vector."
    return Example(key=key, title=title, actual=one, expected=many, inputs=x, reduction_length=x.numel(),
                   code="x = 10⁶ N(0, 1) float32 values (the Summation lab's default vector)\n"
                   f"with 1 thread: result_a = x.sum();  with {PROCESS_THREADS}: result_b = x.sum()",
                   live_note=note)


def _batch_example(key: str, title: str) -> Example:
    a, b = _factors(0, 64, 2048, 1024)
    one, batch = torch.mm(a[:1], b), torch.mm(a, b)[:1]
    differ = int((one != batch).sum())
    note = (f"On this CPU {differ:,} of {one.numel():,} outputs differ." if differ else
            "On this CPU the two give the same bits.")
    return Example(key=key, title=title, actual=one, expected=batch, inputs=(a[:1], b), reduction_length=2048,
                   code="a, b = randn(64, 2048), randn(2048, 1024) (seed 0; the Mitigations page's pair)\n"
                   "result_a = torch.mm(a[:1], b);  result_b = torch.mm(a, b)[:1]", live_note=note)


# the bfloat16, TF32 and planted-bug examples change one side of this product
_PRODUCT = "a, b = randn(128, 512), randn(512, 256) (seed 1)\n"


def _product() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    a, b = _factors(1, 128, 512, 256)
    return a, b, a @ b


def _bfloat16_example(key: str, title: str) -> Example:
    a, b, expected = _product()
    actual = torch.mm(a.bfloat16(), b.bfloat16()).float()
    return Example(
        key=key,
        title=title,
        actual=actual,
        expected=expected,
        inputs=(a, b),
        reduction_length=512,
        code=_PRODUCT + "result_a = torch.mm(a.bfloat16(), b.bfloat16()).float();  result_b = a @ b",
        live_note="Computed live with torch's bfloat16 matrix product on this CPU (float32 accumulation, "
        "bfloat16 result), as autocast would.",
    )


def _tf32_example(key: str, title: str) -> Example:
    a, b, expected = _product()
    ar = torch.from_numpy(round_to(a.double().numpy(), "tf32")).float()
    br = torch.from_numpy(round_to(b.double().numpy(), "tf32")).float()
    return Example(
        key=key,
        title=title,
        actual=ar @ br,
        expected=expected,
        inputs=(a, b),
        reduction_length=512,
        code=_PRODUCT + "result_a = tf32(a) @ tf32(b) in float32;  result_b = a @ b",
        live_note="TF32 emulated on this CPU: each input rounded to 10 explicit mantissa bits (to nearest, "
        "ties to even), then multiplied in float32: what a TF32 tensor core computes, up to its own "
        "order of additions and its input conversion (some libraries round ties away from zero or "
        "truncate; the TF32 envelope covers both).",
    )


def _bug_example(key: str, title: str) -> Example:
    a, b, expected = _product()
    actual = expected.clone()
    actual[BUG_INDEX] *= 1.01
    return Example(key=key, title=title, actual=actual, expected=expected, inputs=(a, b), reduction_length=512,
                   code=_PRODUCT + f"result_a = a @ b with element {BUG_INDEX} multiplied by 1.01;  result_b = a @ b",
                   live_note="Everything else is bit-identical: both sides ran the same kernel.")


def _tree_example(key: str, title: str) -> Example:
    x = generate(VectorSpec(kind="uniform", n=TREE_ROWS * TREE_LENGTH, seed=0, storage="float32")).values
    x = x.reshape(TREE_ROWS, TREE_LENGTH)
    cfg = cuda_config_for(TREE_LENGTH, x.dtype)
    loop = torch.from_numpy(np.array([sequential(row) for row in x], dtype=np.float32))
    tree = torch.from_numpy(np.array([cuda_sum_model(row, cfg) for row in x], dtype=np.float32))
    return Example(key=key, title=title, actual=loop, expected=tree, inputs=torch.from_numpy(x.copy()),
                   reduction_length=TREE_LENGTH,
                   code=f"x = {TREE_ROWS} rows of {TREE_LENGTH:,} uniform [0, 1) float32 values (seed 0)\n"
                   "result A = each row added left to right in float32 (a plain loop)\n"
                   "result B = each row in the order of PyTorch's CUDA sum (a model of it)",
                   live_note="Both orders computed in float32 on this server's CPU: B reproduces the order of "
                   f"additions PyTorch's source gives a {cfg.sm_count}-SM GPU (H100/H200-like); it is not a GPU "
                   "run. Neither is the reference: the exact sums of the rows judge both.")


# how each bundled example is computed, by its key in EXAMPLES
_MAKERS: dict[str, Callable[[str, str], Example]] = {
    "threads": _threads_example, "batch": _batch_example, "bfloat16": _bfloat16_example, "tf32": _tf32_example,
    "bug": _bug_example, "tree": _tree_example,
}


def make_example(key: str) -> Example:
    """Compute one bundled example now (deterministic inputs; the results are this machine's)."""
    return _MAKERS[key](key, EXAMPLES[key])


# ------------------------------------------------------------------------- loss logs


def log_network(hidden: int | None = None) -> str:
    """The trained network's layer widths as "2-64-64-3", read from the weights ``init_params`` makes."""
    s = TrainSettings()
    p = init_params(hidden or s.hidden, s.classes, 1)
    widths = [p["w1"].shape[1], *(p[w].shape[0] for w in ("w1", "w2", "w3"))]
    return "-".join(str(int(w)) for w in widths)


def toy_training(order_seed: int | None = None, flip_from: int | None = None, steps: int = LOG_STEPS,
                 hidden: int | None = None, lr: float = LOG_LR) -> np.ndarray:
    """Losses of the Training divergence page's network (core.training.mlp: its tanh MLP at the
    page's default width unless ``hidden`` is given, its spirals and its initial weights), trained by
    full-batch gradient descent in float32.

    ``order_seed`` permutes the examples (every sum over the batch is then added in another
    order: mathematically the same training); ``flip_from`` relabels a tenth of the examples
    from that step on (a data bug).
    """
    defaults = TrainSettings()
    hidden = hidden or defaults.hidden
    x64, y64 = spirals(LOG_POINTS, defaults.classes, 0)
    perm = np.arange(y64.size) if order_seed is None else np.random.default_rng(order_seed).permutation(y64.size)
    x, y = torch.from_numpy(x64[perm]).float(), torch.from_numpy(y64[perm])
    flipped = y.clone()
    sel = torch.from_numpy(np.random.default_rng(2).permutation(y.numel())[: y.numel() // 10])
    flipped[sel] = (flipped[sel] + 1) % defaults.classes
    p = {k: v.float().requires_grad_() for k, v in init_params(hidden, defaults.classes, 1).items()}
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


CALM_LR = TrainSettings().lr  # the Training divergence page's default learning rate, at which the pair stays close


def make_log_example(key: str, lr: float = LOG_LR) -> tuple[LossLog, LossLog, str]:
    """(log A, log B, how they were made), computed now, at learning rate ``lr``."""
    a = toy_training(lr=lr)
    if key == "reordered":
        b, how = toy_training(order_seed=3, lr=lr), "B trains on the same examples listed in another order"
    elif key == "jump":
        b, how = (toy_training(flip_from=JUMP_STEP, lr=lr),
                  f"B's data loader flips a tenth of the labels from step {JUMP_STEP}")
    else:
        raise KeyError(key)
    steps = np.arange(1, a.size + 1, dtype=np.int64)
    zero = np.zeros(a.size)
    return (LossLog(steps=steps, values=a, resolution=zero, source="run A (float32, torch, full batch)"),
            LossLog(steps=steps, values=b, resolution=zero, source=f"run B: {how}"), how)


@dataclass(frozen=True, kw_only=True)
class DiagnosedLogs:
    """A bundled pair of loss logs diagnosed: how run B differs, and the diagnosis."""

    how: str
    diagnosis: LogDiagnosis


def diagnosed_log_example(key: str, fmt: str = "float32") -> DiagnosedLogs:
    """The bundled loss-log pair ``key``, trained live and diagnosed in ``fmt``."""
    a, b, how = make_log_example(key)
    return DiagnosedLogs(how=how, diagnosis=diagnose_logs(a, b, fmt))


def at_calm_lr(fmt: str = "float32") -> str:
    """What the reordered pair does at ``CALM_LR``, in words ("stays rounding-sized for all 300 steps ..."):
    whether training amplifies a rounding difference depends on the learning rate, shown live."""
    a, b, _ = make_log_example("reordered", lr=CALM_LR)
    d = diagnose_logs(a, b, fmt)
    if d.verdict == LogVerdict.IDENTICAL:
        return f"stays identical for all {a.values.size:,} steps"
    if d.verdict == LogVerdict.TINY:
        return (f"stays rounding-sized for all {a.values.size:,} steps (at most {float(np.max(d.rel_gap)):.2g} "
                "relative)")
    return "parts as well" + (f", doubling every {d.doubling_steps:,.3g} steps" if d.doubling_steps else "")
