"""Make a trace: build the run (core.traces.models), record it (core.traces.record), add the machine."""

from __future__ import annotations

import datetime as dt

import torch

from core.machines.devices import Device, cpu_device, device_info
from core.traces.files import FORMAT, VERSION
from core.traces.models import MODELS, RunSettings, batch_of, build, dropout_note, threads_context
from core.traces.record import DIGEST, MAX_OPS, TRACE_LOCK, run_traced


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
        bundled = MODELS.get(s.model)
        batch = s.batch if bundled is not None else batch_of(inputs)
        if s.follow_row is not None and s.follow_row >= batch:
            raise ValueError(f"--follow-row {s.follow_row}: the batch (the first input's leading dimension) "
                             f"has {batch} rows")
        follow = batch if (bundled is not None and bundled.follows_row) or s.follow_row is not None else 1
        with threads_context(s):
            threads = torch.get_num_threads()
            found: list[str] = []
            ops = run_traced(fn, root, inputs, follow, perturb, max_ops, s.follow_row or 0, notes=found)
    machine = {k: v for k, v in device_info(_device(s)).items()}
    machine["threads"] = threads if s.device == "cpu" else machine.get("threads")
    notes = [n for n in (dropout_note(root), *found) if n]
    settings = s.as_dict() | {"backward": backward, "threads_used": threads, "batch": batch, "notes": notes}
    return {"format": FORMAT, "version": VERSION, "digest": DIGEST,
            "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "settings": settings, "machine": machine, "ops": [o.to_dict() for o in ops]}
