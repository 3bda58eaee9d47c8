"""Capture: run the fixed suite (core.recordings.store says what it holds) on a device of this machine and
return the recording, bit for bit as the device computed it; and one live sum, the same way.

Every summed vector is regenerated from its generator, seed, n and storage format, and its SHA-256 kept
with the sum, so a replay elsewhere compares like with like. The training pairs run the Training divergence
presets with B on the GPU (the CPU only where there is none).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import platform
from dataclasses import replace

import numpy as np
import torch

from core.arith.formats import FLOAT32, bit_view, bits_of, format_of, to_torch
from core.arith.hexbits import hex_bits, hex_digits
from core.arith.vectors import VectorSpec, generate
from core.machines.devices import Device, available_devices, cpu_device, device_info
from core.machines.globalstate import torch_threads
from core.machines.timing import measure_throughput
from core.recordings.fingerprint import op_fingerprint
from core.recordings.store import (
    FORMAT_VERSION,
    MATMUL_SHAPES,
    QUICK_SIZES,
    SUITE_DTYPES,
    SUITE_GENERATORS,
    SUITE_SIZES,
    TRAINING_PRESETS,
    WIDER,
    vector_sha256,
)
from core.training.mlp import PRESETS
from core.training.pair import PairedRun

# Environment variables that change which numeric code paths torch, oneMKL and oneDNN take.
NUMERIC_ENVIRONMENT = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "MKL_DEBUG_CPU_TYPE",
                       "ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                       "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG",
                       "NVIDIA_TF32_OVERRIDE")


def _hex(v) -> str:
    """The bit pattern of one value (a tensor or NumPy scalar) as hex digits of its format's width."""
    return hex_bits(bits_of(v), format_of(v.dtype), prefix="")


def _tensor(values: np.ndarray, device: str) -> torch.Tensor:
    return to_torch(values, copy=True).to(device)


def numeric_environment() -> dict[str, str]:
    """The environment variables set in this process that steer numeric code paths."""
    return {k: os.environ[k][:200] for k in NUMERIC_ENVIRONMENT if k in os.environ}


def capture(device: Device | None = None, quick: bool = False, log=print, throughput: bool = True) -> dict:
    """Run the fixed suite on ``device`` (the first GPU, else the CPU) and return the recording.

    ``throughput=False`` leaves the timings out (an empty list), for a capture whose point is only
    its bits (the same hardware in another numeric configuration).
    """
    if device is None:
        gpus = [d for d in available_devices() if d.kind != "cpu"]
        device = gpus[0] if gpus else cpu_device()
    info = device_info(device)
    if device.kind == "cpu":
        log("No GPU found: capturing the CPU instead (this tests the format and the pipeline; it is not a GPU "
            "recording).")
    sizes = QUICK_SIZES if quick else SUITE_SIZES
    sums = []
    for gen in SUITE_GENERATORS:
        for n in sizes:
            for dtype in SUITE_DTYPES:
                if not device.supports(torch.float64 if dtype == "float64" else torch.float32):
                    continue
                values = generate(VectorSpec(kind=gen, n=n, seed=0, storage=dtype)).values
                t = _tensor(values, device.torch_device)
                entry = {"generator": gen, "seed": 0, "n": n, "dtype": dtype, "vector_sha256": vector_sha256(values),
                         "sum_hex": _hex(t.sum())}
                if WIDER[dtype] is not None:
                    wide = t.sum(dtype=getattr(torch, WIDER[dtype]))
                    entry[f"sum_dtype_{WIDER[dtype]}_hex"] = _hex(wide)
                sums.append(entry)
        log(f"  sums: {gen} done")
    matmuls = []
    g = torch.Generator().manual_seed(0)
    for m, k, n in MATMUL_SHAPES:
        a = torch.randn(m, k, generator=g)
        b = torch.randn(k, n, generator=g)
        out = (a.to(device.torch_device) @ b.to(device.torch_device)).cpu()
        digest = hashlib.sha256(out.numpy().tobytes()).hexdigest()
        matmuls.append({"shape": [m, k, n], "seed": 0, "result_sha256": digest,
                        "first_row_hex": hex_digits(bit_view(out[0, :8]), FLOAT32)})
    log("  matmuls done")
    training = _capture_training(device, steps=100 if quick else 500)
    log("  training done")
    timings = [
        {"op": t.op, "size": t.size, "seconds_float32": t.seconds32, "seconds_float64": t.seconds64,
         "rate_float32": t.rate32, "rate_float64": t.rate64, "unit": t.unit}
        for t in measure_throughput(device, matmul_n=256 if quick else 4096, sum_n=100_000 if quick else 100_000_000)
    ] if throughput else []
    log("  float32 vs float64 throughput done" if throughput else "  throughput skipped")
    ops = op_fingerprint()
    log("  per-operation fingerprint done (CPU)")
    return {
        "format_version": FORMAT_VERSION,
        "provenance": {**info, "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       "host": platform.node() or "unknown", "quick": quick, "environment": numeric_environment(),
                       "facts_note": None},
        "sums": sums, "matmuls": matmuls, "training": training, "throughput": timings,
        "op_fingerprint": ops,
    }


def _capture_training(device: Device, steps: int) -> list[dict]:
    out = []
    for name in TRAINING_PRESETS:
        base = replace(PRESETS[name].settings, steps=steps)
        if device.kind != "cpu":
            run = PairedRun(replace(base, source="device"))  # A on the CPU, B on the GPU
            note = f"A on the CPU, B on {device.name}"
        else:
            run = PairedRun(base)
            note = "captured on a CPU: A and B as in the preset (no GPU)"
        recs = run.run(steps)
        out.append({"preset": name, "steps": steps, "note": note,
                    "loss_a_hex": [hex_bits(r.loss_a_bits, FLOAT32, prefix="") for r in recs],
                    "loss_b_hex": [hex_bits(r.loss_b_bits, FLOAT32, prefix="") for r in recs]})
    return out


def live_sum_bits(values: np.ndarray, device: Device, threads: int | None = None) -> int:
    """torch.sum of the values on a device (CPU with a thread count, inside the lock)."""
    t = _tensor(values, device.torch_device)
    if device.kind == "cpu" and threads is not None:
        with torch_threads(threads):
            return bits_of(t.sum())
    return bits_of(t.sum())
