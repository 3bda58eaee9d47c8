"""Make a trace: build the run (core.traces.models), record it (core.traces.record), add the machine.

A run that fails is refused in one line that names its module and the op that raised (``failure_line``), and
says so plainly where it failed in a format the run was cast to; PyTorch's own internal-check wording
("INTERNAL ASSERT FAILED ... please report a bug") is not passed on as if it were the reason.
"""

from __future__ import annotations

import datetime as dt
import re

import torch

from core.machines.devices import Device, cpu_device, device_info
from core.traces.files import FORMAT, VERSION
from core.traces.models import TRACE_MODELS, RunSettings, batch_of, build, dropout_note, threads_context
from core.traces.record import DIGEST, MAX_OPS, TRACE_LOCK, OpFailed, run_traced

_INTERNAL = re.compile(r"\s*INTERNAL ASSERT FAILED at .*?please report a bug to PyTorch\.?\s*")


def failure_line(e: OpFailed, s: RunSettings) -> str:
    """One line on a run that failed in an op: where, and the error's first line."""
    first = (str(e.error).strip().splitlines() or [""])[0]
    if (m := _INTERNAL.search(first)) is not None:  # the condition PyTorch checked, and what it added after
        first = f"PyTorch's internal check failed ({first[:m.start()].strip()}) {first[m.end():]}".strip()
    where = f"{f'at {e.op} in' if e.op else 'in'} {e.module} ({type(e.error).__name__}: {first})"
    if s.dtype not in ("float32", "float64"):
        return (f"the model does not run in {s.dtype} on this {s.device}: it failed {where}; an op without a "
                f"{s.dtype} kernel (quantized layers, the CPU's FFT) runs in float32 only")
    return f"the run failed {where}"


def _device(s: RunSettings) -> Device:
    if s.device == "cuda":
        return Device("cuda", 0, torch.cuda.get_device_name(0))
    return cpu_device()


def make_trace(s: RunSettings, backward: bool = False, max_ops: int = MAX_OPS) -> dict:
    """The trace of one run of ``s`` (a dict that core.traces.files validates and writes)."""
    perturb = (s.perturb_op, s.perturb_size) if s.perturb_op is not None else None
    # building runs modules too (the LM's prefill): under the trace lock, so no other trace's module
    # tracker sees them
    with TRACE_LOCK:
        root, inputs, fn = build(s, backward)
        # a module's batch is its first input's leading dimension; a bundled model's is its setting
        bundled = TRACE_MODELS.get(s.model)
        named = getattr(fn, "batch", None)  # --batch-arg's
        batch = s.batch if bundled is not None else named or batch_of(inputs)
        if s.follow_row is not None and s.follow_row >= batch:
            what = f"make()'s {s.batch_arg}" if named else "the first input's leading dimension"
            raise ValueError(f"--follow-row {s.follow_row}: the batch ({what}) has {batch} rows")
        follow = batch if (bundled is not None and bundled.follows_row) or s.follow_row is not None else 1
        with threads_context(s):
            threads = torch.get_num_threads()
            found: list[str] = []
            try:
                ops = run_traced(fn, root, inputs, follow, perturb, max_ops, s.follow_row or 0, notes=found)
            except OpFailed as e:
                raise ValueError(failure_line(e, s)) from e.error
    machine = {k: v for k, v in device_info(_device(s)).items()}
    machine["threads"] = threads if s.device == "cpu" else machine.get("threads")
    notes = [n for n in (dropout_note(root), *found) if n]
    settings = s.as_dict() | {"backward": backward, "threads_used": threads, "batch": batch, "notes": notes}
    return {"format": FORMAT, "version": VERSION, "digest": DIGEST,
            "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "settings": settings, "machine": machine, "ops": [o.to_dict() for o in ops]}
