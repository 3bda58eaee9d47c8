"""What a trace runs: the bundled models, a user's own ``make`` function, and the run settings.

Bundled models (``TRACE_MODELS``, one ``Bundled`` entry each: its builder, the formats it runs in, whether
``--batch`` applies, whether the trace follows request 0's rows), written as ``nn.Module`` trees so
every op has a module path:

- ``mlp-step``: one training step of the Training divergence MLP (2-64-64-3, tanh, the default
  preset's spirals, first batch of 128, its seeded initial weights; cross-entropy, backward, and
  SGD with momentum 0.9 at lr 0.5, as core.training.mlp), as core.training.mlp.MLPModule: the
  network of core.training.mlp.forward built from the same layer list as modules, with the same
  bits (tests/core/traces/test_models.py);
- ``tiny-lm``: a decode step of the serving page's language model, the server's own forward pass
  (core.serving.model.TinyLMModule, ``model.layers.<i>.attn`` ..., the bundled weights, torch's
  ordinary kernels; the module that the server runs and training differentiates): each request's
  prompt of ``LM_TOKENS`` characters but
  the last is prefilled alone (not traced), then the B requests' last characters go through the
  model as one batch (traced). Request 0 is ``LM_PROMPT``; the trace follows its rows
  (core.traces.record), so traces at batch 1 and 8 align op for op.

``dtype``: ``float32``, ``float64`` (not the LM), ``bfloat16`` and ``float16`` (the weights and data
in that format) or ``autocast-bfloat16`` (float32 weights, ``torch.autocast`` to bfloat16, as the
Training divergence page's bfloat16 preset). A format the device cannot compute in is refused.

A user's model (``load_factory``): ``path/to/file.py:make``; ``make(**args)`` with string values
returns ``(model, inputs)``, the inputs a tensor, a tuple of positional arguments or a dict of
keyword arguments (a Hugging Face model's ``input_ids`` and ``attention_mask``); the trace covers
``model(*inputs)`` or ``model(**inputs)`` and, with ``backward``, the backward pass of the sum of
the first floating output that has a gradient (a ``ModelOutput``'s logits). A ``dtype`` other than
float32 casts the model's floating parameters and buffers and the floating inputs (complex ones, token ids
and masks keep theirs: ``nn.Module.to`` would cast a complex parameter too, dropping its imaginary part).
``follow_row`` R: the batch is the first input's leading dimension (or the value of the make() argument that
``batch_arg`` names: a batch of graphs, whose nodes are the rows), and the trace keeps row R of every tensor
that derives from the inputs (core.traces.record), so a batch of 4 compares op for op with that row run alone.
The file is imported, i.e. run: this is for the command line on the user's own machine, never for the page
(which only reads trace files).
"""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import math
import pathlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.arith.formats import ARITHMETIC
from core.machines.globalstate import torch_threads
from core.serving import corpus
from core.serving.kernels import DEFAULT
from core.serving.model import ModelConfig, TinyLM, encode, load_params
from core.traces.modulepath import scope
from core.traces.record import tensors_of
from core.training import optim
from core.training.mlp import MLPModule, TrainSettings, batch_schedule, init_params, spirals

# the formats torch computes in (a model cannot run in a storage-only format), and bfloat16 autocast
DTYPES = (*ARITHMETIC, "autocast-bfloat16")
MAX_BATCH = 64
MAX_THREADS = 256
LM_TOKENS = 24
LM_PROMPT = "the baker painted a blue"  # request 0 (24 characters)
_TORCH_DTYPES = {**{name: f.torch_dtype for name, f in ARITHMETIC.items()}, "autocast-bfloat16": torch.float32}


@dataclass(frozen=True, kw_only=True)
class RunSettings:
    """Everything a trace of a bundled model depends on."""

    model: str = "mlp-step"
    threads: int | None = None  # None: the process's own count
    batch: int = 1  # a bundled model that takes a batch: its requests (see Bundled.fixed_batch)
    dtype: str = "float32"
    device: str = "cpu"
    perturb_op: int | None = None  # plant a difference: multiply this op's output by (1 + perturb_size)
    perturb_size: float = 2.0 ** -10
    args: tuple[tuple[str, str], ...] = field(default=())  # a module file's make(**args)
    follow_row: int | None = None  # a module's batch: trace this row of it (None: the whole batch)
    # the make() argument whose value is the batch size (None: the first input's leading dimension)
    batch_arg: str | None = None

    def validate(self) -> None:
        bundled = TRACE_MODELS.get(self.model)
        if bundled is None and ":" not in self.model:
            raise ValueError(f"unknown model {self.model!r}: one of {', '.join(TRACE_MODELS)}, or path/to/file.py:make")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}")
        if bundled is not None and self.dtype not in bundled.dtypes:
            raise ValueError(f"{bundled.name} runs in {or_list(bundled.dtypes)}")
        if not 1 <= self.batch <= MAX_BATCH:
            raise ValueError(f"batch must be between 1 and {MAX_BATCH}")
        if bundled is not None and bundled.fixed_batch is not None and self.batch != 1:
            raise ValueError(f"{bundled.fixed_batch}; --batch is for {or_list(batched_models())}")
        if self.threads is not None and not 1 <= self.threads <= MAX_THREADS:
            raise ValueError(f"threads must be between 1 and {MAX_THREADS}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError("device must be cpu or cuda")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("this machine has no CUDA device")
        if self.follow_row is not None and (bundled is not None or not 0 <= self.follow_row < 2**31):
            followers = "".join(f" ({m.name} already follows request 0)" for m in TRACE_MODELS.values()
                                if m.follows_row)
            raise ValueError(f"--follow-row takes a row number from 0, for a --module{followers}")
        if self.perturb_op is not None and self.perturb_op < 1:
            raise ValueError("the perturbed op is counted from 1")
        if self.batch_arg is not None and (bundled is not None or not self.batch_arg.isidentifier()):
            raise ValueError("--batch-arg names an argument of a --module's make() (its --arg key)")
        if not (math.isfinite(self.perturb_size) and 0 < self.perturb_size < 1):
            raise ValueError("the perturbation is a relative size between 0 and 1")

    def as_dict(self) -> dict:
        return {"model": self.model, "threads": self.threads, "batch": self.batch, "dtype": self.dtype,
                "device": self.device, "perturb_op": self.perturb_op,
                "perturb_size": self.perturb_size if self.perturb_op is not None else None,
                "args": {k: v for k, v in self.args}, "follow_row": self.follow_row, "batch_arg": self.batch_arg}


# ------------------------------------------------------------------------------ the MLP step


def mlp_step(s: RunSettings) -> tuple[nn.Module, tuple[torch.Tensor, ...], Callable[[], object]]:
    cfg = TrainSettings()
    dt = _TORCH_DTYPES[s.dtype]
    x64, y = spirals(cfg.n_points, cfg.classes, cfg.seed)
    idx = batch_schedule(len(y), cfg.batch, 1, cfg.seed)[0]
    model = MLPModule(init_params(cfg.hidden, cfg.classes, cfg.seed)).to(dt).to(s.device)
    xb = torch.from_numpy(x64[idx]).to(dt).to(s.device)
    yb = torch.from_numpy(y[idx]).to(s.device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=0.9, foreach=False)

    def step():
        opt.zero_grad(set_to_none=True)
        with _autocast(s):
            logits = model(xb)
        loss = F.cross_entropy(logits.to(dt), yb)
        loss.backward()
        with scope("optimizer"):
            optim.step(opt)
        return loss

    return model, (xb,), step


# --------------------------------------------------------------------------- the tiny LM


def lm_prompts(batch: int) -> list[str]:
    """Request 0 is ``LM_PROMPT``; the others are corpus sentences cut to the same length."""
    rng = random.Random(corpus.DEFAULT_SEED + 1)
    out = [LM_PROMPT]
    while len(out) < batch:
        s = corpus.sentence(rng)
        if len(s) >= LM_TOKENS:
            out.append(s[:LM_TOKENS])
    return out


def tiny_lm(s: RunSettings) -> tuple[nn.Module, tuple[torch.Tensor, ...], Callable[[], object]]:
    """One decode step, as the server runs it (core.serving.model.TinyLM, torch's ordinary kernels):
    every request's prompt but its last character is prefilled alone (untraced), then the last
    characters of the B requests go through the model's forward pass as one batch (traced): B rows in
    every matrix product, as in a serving engine's decode step."""
    weights = _TORCH_DTYPES[s.dtype]  # autocast runs float32 weights
    served = TinyLM(load_params(), ModelConfig(), weights, s.device)
    prompts = [encode(p) for p in lm_prompts(s.batch)]
    caches = [served.new_cache() for _ in prompts]
    with torch.no_grad(), _autocast(s):
        for p, c in zip(prompts, caches, strict=True):
            served.forward(DEFAULT, [p[:-1]], [c])
    step = served.step([[p[-1]] for p in prompts], caches)

    def forward():
        with torch.no_grad(), _autocast(s):
            return served.module(DEFAULT, step)

    return served.module, step.tensors(), forward


def tiny_lm_prefill(batch: int, tokens: int) -> tuple[nn.Module, tuple[torch.Tensor, ...], Callable[[], object]]:
    """The model's forward pass over ``batch`` corpus passages of ``tokens`` characters from position 0
    (a prefill, as the server runs it; benchmarks/bench_trace.py times it traced and untraced)."""
    if not (1 <= batch <= MAX_BATCH and 1 <= tokens <= ModelConfig().context):
        raise ValueError(f"batch 1 to {MAX_BATCH}, tokens 1 to {ModelConfig().context}")
    text = corpus.generate(batch * tokens + 100).replace("\n", " ")
    served = TinyLM(load_params(), ModelConfig())
    step = served.step([encode(text[i * tokens:(i + 1) * tokens]) for i in range(batch)],
                       [served.new_cache() for _ in range(batch)])

    def forward():
        with torch.no_grad():
            return served.module(DEFAULT, step)

    return served.module, step.tensors(), forward


# ------------------------------------------------------------------- the bundled models' registry


@dataclass(frozen=True, kw_only=True)
class Bundled:
    """A bundled model: one entry of ``TRACE_MODELS``. ``RunSettings.validate``, ``build``, core.traces.run and
    ``python -m scripts.trace`` read the entry; adding a model is adding one entry."""

    key: str  # --model's value
    name: str  # in messages: "the tiny language model"
    description: str  # --model's help
    build: Callable[[RunSettings], tuple[nn.Module, tuple[torch.Tensor, ...], Callable[[], object]]]
    dtypes: tuple[str, ...]  # the formats it runs in (from DTYPES)
    fixed_batch: str | None = None  # why --batch does not apply to it; None: --batch B runs a batch of B requests
    follows_row: bool = False  # the trace follows request 0's rows, so its batches align op for op


TRACE_MODELS: dict[str, Bundled] = {
    m.key: m
    for m in [
        Bundled(
            key="mlp-step",
            name="the MLP step",
            description="one training step of the Training divergence MLP (forward, cross-entropy, backward, SGD step)",
            build=mlp_step,
            dtypes=DTYPES,
            fixed_batch="the MLP step's batch is the preset's 128 examples",
        ),
        Bundled(
            key="tiny-lm",
            name="the tiny language model",
            description="a decode step (forward pass) of the serving page's tiny language model, request 0 of a batch",
            build=tiny_lm,
            dtypes=tuple(d for d in DTYPES if d != "float64"),
            follows_row=True,
        ),
    ]
}


def batched_models() -> tuple[str, ...]:
    """The bundled models that take ``--batch``."""
    return tuple(k for k, m in TRACE_MODELS.items() if m.fixed_batch is None)


def or_list(items) -> str:
    """"a", "a or b", "a, b or c"."""
    items = list(items)
    return ", ".join(items[:-1]) + " or " + items[-1] if len(items) > 1 else "".join(items)


# ------------------------------------------------------------------------ a user's module


def load_factory(spec: str) -> Callable[..., tuple]:
    """``path/to/file.py:make`` -> the function ``make`` of that file (the file is run to get it)."""
    path_text, sep, func = spec.rpartition(":")
    if not sep or not func.isidentifier():
        raise ValueError("give the module as path/to/file.py:function")
    path = pathlib.Path(path_text)
    if path.suffix != ".py" or not path.is_file():
        raise ValueError(f"no Python file at {path_text}")
    mod_spec = importlib.util.spec_from_file_location(f"_traced_{path.stem}", path)
    if mod_spec is None or mod_spec.loader is None:
        raise ValueError(f"cannot import {path_text}")
    module = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(module)
    make = getattr(module, func, None)
    if not callable(make):
        raise ValueError(f"{path_text} has no function {func}")
    return make


def _cast(obj, dt: torch.dtype, device: str):
    """Floating tensors in nested tuples, lists and dicts to ``dt`` (others keep their dtype), on ``device``."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device=device, dtype=dt if obj.is_floating_point() else obj.dtype)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cast(x, dt, device) for x in obj)
    if isinstance(obj, dict):
        return {k: _cast(v, dt, device) for k, v in obj.items()}
    return obj


def _loss_tensor(out) -> torch.Tensor:
    """What ``--backward`` differentiates: the first floating output with a gradient."""
    for t in tensors_of(out, []):
        if t.is_floating_point() and t.requires_grad:
            return t
    raise ValueError("--backward needs an output with a gradient: the model's outputs are all integer or "
                     "detached (is the forward pass under torch.no_grad?)")


def dropout_note(model) -> str | None:
    """A sentence when the model is in training mode with active dropout: two runs then draw other masks."""
    if not isinstance(model, nn.Module) or not model.training:
        return None
    p = max((m.p for m in model.modules() if isinstance(m, nn.modules.dropout._DropoutNd)), default=0.0)
    if p <= 0:
        return None
    return ("the model is in training mode with dropout: each run draws its own random masks, so two runs differ "
            "at the first dropout; call model.eval() in make() to compare the arithmetic")


def batch_of(inputs) -> int:
    """The batch size: the first input tensor's leading dimension (1 for a scalar or no tensor)."""
    first = next((t for t in tensors_of(inputs, []) if t.dim()), None)
    return int(first.shape[0]) if first is not None else 1


def named_batch(make: Callable[..., tuple], s: RunSettings) -> int | None:
    """The batch that ``--batch-arg NAME`` names: make()'s argument NAME, its ``--arg`` value or its default, a
    whole number from 1 (None without ``--batch-arg``)."""
    if s.batch_arg is None:
        return None
    given = dict(s.args)
    if s.batch_arg in given:
        value = given[s.batch_arg]
    else:
        param = inspect.signature(make).parameters.get(s.batch_arg)
        if param is None or param.default is inspect.Parameter.empty:
            raise ValueError(f"--batch-arg {s.batch_arg}: make() has no argument {s.batch_arg} with a default; give "
                             f"it with --arg {s.batch_arg}=N")
        value = param.default
    try:
        batch = int(str(value))
    except ValueError:
        batch = 0
    if batch < 1:
        raise ValueError(f"--batch-arg {s.batch_arg}: its value {value!r} is not a whole number from 1")
    return batch


def user_model(spec: str, s: RunSettings, backward: bool):
    make = load_factory(spec)
    batch = named_batch(make, s)
    model, inputs = make(**dict(s.args))
    if not isinstance(model, nn.Module) and not callable(model):
        raise ValueError("make() must return (model, inputs) with a callable model")
    if isinstance(inputs, dict):
        args, kwargs = (), dict(inputs)
    else:
        args, kwargs = (tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)), {}
    dt = _TORCH_DTYPES[s.dtype]
    if isinstance(model, nn.Module) and (dt != torch.float32 or s.device != "cpu"):
        # floating tensors only: Module.to(dtype) would also cast complex ones, dropping their imaginary parts
        model = model._apply(lambda t: t.to(device=s.device, dtype=dt if t.is_floating_point() else t.dtype))
    if dt != torch.float32 or s.device != "cpu":
        args, kwargs = _cast(args, dt, s.device), _cast(kwargs, dt, s.device)

    def run():
        with _autocast(s):
            out = model(*args, **kwargs)
        if backward:
            _loss_tensor(out).float().sum().backward()
        return out

    run.batch = batch  # the batch --batch-arg names (None: the first input's leading dimension)
    return model if isinstance(model, nn.Module) else None, tuple(tensors_of([args, kwargs], [])), run


def check_format(s: RunSettings) -> None:
    """Refuse a format the device cannot compute in (a matrix product and a sum of it, as a probe)."""
    dt = _TORCH_DTYPES[s.dtype]
    if s.device == "cuda" and dt == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise ValueError(f"{torch.cuda.get_device_name(0)} has no bfloat16 arithmetic")
    try:
        x = torch.ones(2, 2, dtype=dt, device=s.device)
        (x @ x).sum().item()
    except (RuntimeError, TypeError) as e:
        first = (str(e).strip().splitlines() or [""])[0]
        raise ValueError(f"this {s.device} cannot compute in {s.dtype}: {first}") from None


# ------------------------------------------------------------------------------- helpers


def _autocast(s: RunSettings):
    if s.dtype != "autocast-bfloat16":
        return contextlib.nullcontext()
    return torch.autocast(s.device, dtype=torch.bfloat16)


def build(s: RunSettings, backward: bool = False):
    """(root module or None, input tensors, the function to trace) for these settings."""
    s.validate()
    check_format(s)
    bundled = TRACE_MODELS.get(s.model)
    return bundled.build(s) if bundled is not None else user_model(s.model, s, backward)


def threads_context(s: RunSettings):
    """The thread count the run needs, set under the process-wide lock and restored after it."""
    return torch_threads(s.threads) if s.threads is not None else contextlib.nullcontext()
