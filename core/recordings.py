"""Recordings of real-device results: capture, store bit-exactly, load, verify, replay.

A recording is one JSON file with a top-level ``provenance`` object and results stored
as hexadecimal bit patterns. Every summed vector is identified by generator, seed, n
and storage format, and carries a SHA-256 of its bytes, so a replay can regenerate it
on the CPU and refuse to compare against a recording of some other vector.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import pathlib
import platform
from dataclasses import dataclass

import numpy as np
import torch

from core.cuda_model import cuda_config_for, cuda_sum_model
from core.devices import Device, available_devices, cpu_device, device_info
from core.globalstate import torch_threads
from core.metrics import bits_of_scalar
from core.vectors import NUMPY_DTYPES, VectorSpec, generate

FORMAT_VERSION = 1
ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "data" / "recordings"
MAX_RECORDING_BYTES = 20 * 1024 * 1024
SUITE_GENERATORS = ("normal", "uniform", "lognormal", "alternating")
SUITE_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000, 100_000)
SUITE_DTYPES = ("float16", "bfloat16", "float32", "float64")
WIDER = {"float16": "float32", "bfloat16": "float32", "float32": "float64", "float64": None}
MATMUL_SHAPES = ((1, 2048, 1024), (64, 2048, 1024), (512, 512, 512))
TRAINING_PRESETS = ("Hidden units reordered (SGD, lr 0.5)", "Butterfly: one weight moved by one ULP")


class RecordingError(ValueError):
    """A recording that cannot be used; the message says why."""


def recordings_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FP_RECORDINGS_DIR", DEFAULT_DIR))


def vector_sha256(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def _hex(v: np.generic) -> str:
    arr = np.asarray(v).reshape(1)
    return f"{bits_of_scalar(arr[0]):0{arr.dtype.itemsize * 2}x}"


def _to_np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(NUMPY_DTYPES["bfloat16"])
    return t.numpy()


def _tensor(values: np.ndarray, device: str) -> torch.Tensor:
    if values.dtype == NUMPY_DTYPES["bfloat16"]:
        t = torch.from_numpy(values.view(np.int16).copy()).view(torch.bfloat16)
    else:
        t = torch.from_numpy(values.copy())
    return t.to(device)


# ---------------------------------------------------------------------------- capture


def capture(device: Device | None = None, quick: bool = False, log=print) -> dict:
    """Run the fixed suite on ``device`` (the first GPU, else the CPU) and return the recording."""
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
                values = generate(VectorSpec(gen, n, 0, dtype)).values
                t = _tensor(values, device.torch_device)
                entry = {"generator": gen, "seed": 0, "n": n, "dtype": dtype, "vector_sha256": vector_sha256(values)}
                for acc in (None, WIDER[dtype]):
                    if acc is None and "sum_hex" in entry:
                        continue
                    r = t.sum() if acc is None else t.sum(dtype=getattr(torch, acc))
                    key = "sum_hex" if acc is None else f"sum_dtype_{acc}_hex"
                    entry[key] = _hex(_to_np(r).reshape(()))
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
                        "first_row_hex": [f"{int(v) & 0xFFFFFFFF:08x}" for v in out[0, :8].view(torch.int32)]})
    log("  matmuls done")
    training = _capture_training(device, steps=100 if quick else 500)
    log("  training done")
    from core.mitigations import measure_throughput

    throughput = [
        {"op": t.op, "size": t.size, "seconds_float32": t.seconds32, "seconds_float64": t.seconds64,
         "rate_float32": t.rate32, "rate_float64": t.rate64, "unit": t.unit}
        for t in measure_throughput(device, matmul_n=256 if quick else 4096, sum_n=100_000 if quick else 100_000_000)
    ]
    log("  float32 vs float64 throughput done")
    return {
        "format_version": FORMAT_VERSION,
        "provenance": {**info, "captured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                       "host": platform.node() or "unknown", "quick": quick},
        "sums": sums, "matmuls": matmuls, "training": training, "throughput": throughput,
    }


def _capture_training(device: Device, steps: int) -> list[dict]:
    from dataclasses import replace

    from core.training import PRESETS, PairedRun

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
        fmt = "08x"
        out.append({"preset": name, "steps": steps, "note": note,
                    "loss_a_hex": [format(r.loss_a_bits, fmt) for r in recs],
                    "loss_b_hex": [format(r.loss_b_bits, fmt) for r in recs]})
    return out


def write_recording(rec: dict, out_dir: pathlib.Path) -> pathlib.Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    prov = rec["provenance"]
    stamp = prov["captured_at"].replace(":", "").replace("-", "")[:15]
    kind = "".join(c if c.isalnum() else "-" for c in prov["device_name"].lower()).strip("-")[:40]
    path = out_dir / f"v{rec['format_version']}-{kind}-{stamp}.json"
    path.write_text(json.dumps(rec, indent=1))
    return path


# ------------------------------------------------------------------------------ loading

REQUIRED_PROVENANCE = ("device_name", "device_kind", "sm_count", "torch_version", "cuda_version", "driver",
                       "captured_at")


@dataclass(frozen=True)
class Recording:
    path: str
    data: dict

    @property
    def provenance(self) -> dict:
        return self.data["provenance"]

    @property
    def is_gpu(self) -> bool:
        return self.provenance["device_kind"] in ("cuda", "mps")

    @property
    def label(self) -> str:
        p = self.provenance
        return f"recorded on {p['device_name']} with torch {p['torch_version']} on {p['captured_at'][:10]}"

    def find_sum(self, generator: str, seed: int, n: int, dtype: str) -> dict | None:
        for e in self.data["sums"]:
            if (e["generator"], e["seed"], e["n"], e["dtype"]) == (generator, seed, n, dtype):
                return e
        return None


def validate(data: dict) -> None:
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        raise RecordingError(f"not a version-{FORMAT_VERSION} recording")
    prov = data.get("provenance")
    if not isinstance(prov, dict) or any(k not in prov for k in REQUIRED_PROVENANCE):
        raise RecordingError("the provenance object is missing fields: " + ", ".join(
            k for k in REQUIRED_PROVENANCE if not isinstance(prov, dict) or k not in prov))
    if not isinstance(data.get("sums"), list):
        raise RecordingError("the recording has no list of sums")
    for e in data["sums"]:
        if not isinstance(e, dict):
            raise RecordingError("a sum entry is not an object")
        for k in ("generator", "seed", "n", "dtype", "vector_sha256", "sum_hex"):
            if k not in e:
                raise RecordingError(f"a sum entry lacks {k!r}")
        if e["dtype"] not in NUMPY_DTYPES or not isinstance(e["n"], int) or not isinstance(e["seed"], int):
            raise RecordingError(f"a sum entry has a bad dtype, n or seed ({e['dtype']!r}, {e['n']!r})")
        wider = WIDER[e["dtype"]]
        for key, dtype in (("sum_hex", e["dtype"]), (f"sum_dtype_{wider}_hex", wider)):
            if dtype is None or key not in e:
                continue
            width = NUMPY_DTYPES[dtype].itemsize * 2
            value = e[key]
            if not isinstance(value, str) or len(value) != width or any(c not in "0123456789abcdef" for c in value):
                raise RecordingError(f"{key} {str(value)[:30]!r} is not {width} hex digits")


def load_recordings(directory: pathlib.Path | None = None) -> tuple[list[Recording], list[str]]:
    """Every valid recording in the directory, and a message for each file refused."""
    directory = directory or recordings_dir()
    good, problems = [], []
    if not directory.is_dir():
        return good, problems
    for path in sorted(directory.glob("*.json")):
        try:
            if path.stat().st_size > MAX_RECORDING_BYTES:
                raise RecordingError(f"larger than {MAX_RECORDING_BYTES:,} bytes")
            data = json.loads(path.read_text())
            validate(data)
            good.append(Recording(str(path), data))
        except (OSError, ValueError) as err:
            problems.append(f"{path.name}: {err}")
    return good, problems


# ------------------------------------------------------------------------------- replay


@dataclass(frozen=True)
class Replay:
    recording: Recording
    entry: dict
    vector_matches: bool
    recorded_bits: int
    recorded_wider_bits: int | None
    model_bits: int | None  # the CUDA model's prediction for this device's SM count (GPU recordings)


def replay(rec: Recording, generator: str, seed: int, n: int, dtype: str) -> Replay | None:
    """The recorded result for a setting, after checking the vector regenerates bit-identically."""
    entry = rec.find_sum(generator, seed, n, dtype)
    if entry is None:
        return None
    values = generate(VectorSpec(generator, n, seed, dtype)).values
    matches = vector_sha256(values) == entry["vector_sha256"]
    wider = WIDER[dtype]
    wider_hex = entry.get(f"sum_dtype_{wider}_hex") if wider else None
    model = None
    if matches and rec.is_gpu and rec.provenance["device_kind"] == "cuda":
        cfg = cuda_config_for(n, values.dtype, sm_count=int(rec.provenance["sm_count"]))
        model = bits_of_scalar(cuda_sum_model(values, cfg))
    return Replay(rec, entry, matches, int(entry["sum_hex"], 16), int(wider_hex, 16) if wider_hex else None, model)


@dataclass(frozen=True)
class Fidelity:
    compared: int
    matched: int
    mismatches: tuple[tuple[str, int, str, int], ...]  # (generator, n, dtype, ulps apart)
    conditions: str


def model_fidelity(rec: Recording, max_n: int = 10_000_000) -> Fidelity:
    """Bit-for-bit comparison of the CUDA model (or, for CPU recordings, the CPU model) with the recording."""
    from core.formats import FORMATS, ulp_distance
    from core.torch_cpu_model import torch_cpu_sum_model

    compared = matched = 0
    mismatches = []
    sizes, dtypes = set(), set()
    for e in rec.data["sums"]:
        if e["n"] > max_n:
            continue
        values = generate(VectorSpec(e["generator"], e["n"], e["seed"], e["dtype"])).values
        if vector_sha256(values) != e["vector_sha256"]:
            continue
        if rec.provenance["device_kind"] == "cuda":
            cfg = cuda_config_for(e["n"], values.dtype, sm_count=int(rec.provenance["sm_count"]))
            pred = bits_of_scalar(cuda_sum_model(values, cfg))
        else:
            pred = bits_of_scalar(torch_cpu_sum_model(values, threads=int(rec.provenance.get("threads", 1))))
        got = int(e["sum_hex"], 16)
        compared += 1
        sizes.add(e["n"])
        dtypes.add(e["dtype"])
        if pred == got:
            matched += 1
        else:
            mismatches.append((e["generator"], e["n"], e["dtype"], ulp_distance(pred, got, FORMATS[e["dtype"]])))
    p = rec.provenance
    if p["device_kind"] == "cuda":
        which = f"CUDA block-reduction model vs {p['device_name']} (SM count {p['sm_count']})"
    else:
        which = f"CPU cascade-sum model ({p.get('threads')} threads) vs {p['device_name']}"
    cond = (f"{which}; sizes "
            f"{', '.join(f'{s:,}' for s in sorted(sizes))}; {', '.join(sorted(dtypes))}")
    return Fidelity(compared, matched, tuple(mismatches), cond)


def live_sum_bits(values: np.ndarray, device: Device, threads: int | None = None) -> int:
    """torch.sum of the values on a device (CPU with a thread count, inside the lock)."""
    t = _tensor(values, device.torch_device)
    if device.kind == "cpu" and threads is not None:
        with torch_threads(threads):
            return bits_of_scalar(_to_np(t.sum()).reshape(())[()])
    return bits_of_scalar(_to_np(t.sum()).reshape(())[()])
