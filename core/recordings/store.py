"""Recordings of real-device results: what one holds, stored bit-exactly, validated, loaded and upgraded.

A recording is one JSON file (format version 2, declared in core.recordings.schema) with a
``provenance`` object that names the machine in detail (CPU model and SIMD capability,
BLAS and oneDNN builds, thread count, NumPy, OS; for a GPU its compute capability, SM
count, driver and cuBLAS), results stored as hexadecimal bit patterns, and a per-operation
fingerprint (core.recordings.fingerprint). Every summed vector is identified by generator, seed, n
and storage format, and carries a SHA-256 of its bytes, so a replay can regenerate it on
the CPU and refuse to compare against a recording of some other vector. The fixed suite a
recording holds is declared here; core.recordings.capture runs it, core.recordings.fidelity
replays it through the models.

Files are validated against the schema with ``jsonschema`` and loaded once into typed,
frozen objects; version-1 files are upgraded in memory (their missing facts are ``None``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import pathlib
from dataclasses import dataclass, fields

import jsonschema
import numpy as np

from core.arith.hexbits import decode_hex
from core.arith.metrics import relative_gap
from core.recordings.schema import RECORDING
from core.training.seeds import first_apart

FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_DIR = ROOT / "data" / "recordings"
MAX_RECORDING_BYTES = 20 * 1024 * 1024
MAX_RECORDING_FILES = 20
SUITE_GENERATORS = ("normal", "uniform", "lognormal", "alternating")
SUITE_SIZES = (1_000, 10_000, 100_000, 1_000_000, 10_000_000)
QUICK_SIZES = (1_000, 100_000)
SUITE_DTYPES = ("float16", "bfloat16", "float32", "float64")
WIDER = {"float16": "float32", "bfloat16": "float32", "float32": "float64", "float64": None}
MATMUL_SHAPES = ((1, 2048, 1024), (64, 2048, 1024), (512, 512, 512))
TRAINING_PRESETS = ("Hidden units reordered (SGD, lr 0.5)", "Butterfly: one weight moved by one ULP")
REQUIRED_PROVENANCE = tuple(RECORDING["properties"]["provenance"]["required"])
_VALIDATOR = jsonschema.Draft202012Validator(RECORDING)
UPLOADED = "uploaded by you, not verified by this server"  # how a visitor's own recording is labelled


class RecordingError(ValueError):
    """A recording that cannot be used; the message says why (and which field)."""


def recordings_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("FP_RECORDINGS_DIR", DEFAULT_DIR))


def vector_sha256(values: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()


def write_recording(rec: dict, out_dir: pathlib.Path) -> pathlib.Path:
    validate(rec)
    out_dir.mkdir(parents=True, exist_ok=True)
    prov = rec["provenance"]
    stamp = prov["captured_at"].replace(":", "").replace("-", "")[:15]
    who = prov["device_name"]
    if prov["device_kind"] == "cpu":
        env = " ".join(f"{k} {v}" for k, v in sorted((prov.get("environment") or {}).items()))
        who = f"cpu {prov.get('cpu_model') or ''} {prov.get('cpu_capability') or ''} {env}"
    kind = "-".join("".join(c if c.isalnum() else " " for c in who.lower()).split())[:60]
    path = out_dir / f"v{rec['format_version']}-{kind}-{stamp}.json"
    path.write_text(json.dumps(rec, indent=1))
    return path


# ------------------------------------------------------------------------------ loading


def upgrade_v1(data: dict, facts: dict | None = None, ops: dict[str, str] | None = None,
               note: str | None = None) -> dict:
    """A version-1 recording as version 2: every result unchanged, bit for bit.

    The machine facts and operation hashes that version 1 did not record are ``None`` / empty
    unless they are supplied (``facts``, ``ops``), in which case ``note`` must say where they
    came from, since they were attached after the capture.
    """
    if (facts or ops) and not note:
        raise ValueError("facts attached after a capture need a note saying where they come from")
    out = json.loads(json.dumps(data))  # a deep copy of plain JSON
    out["format_version"] = 2
    prov = out.get("provenance")
    if isinstance(prov, dict):
        for key in REQUIRED_PROVENANCE:
            prov.setdefault(key, None)
        prov.update(facts or {})
        prov["facts_note"] = note
        prov.setdefault("environment", {})
    out.setdefault("op_fingerprint", dict(ops or {}))
    return out


def _field_path(err: jsonschema.ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
    return path.lstrip(".") or "the top level"


def validate(data: dict) -> None:
    """Refuse a recording that does not follow the declared schema; the message names the field."""
    if not isinstance(data, dict) or data.get("format_version") not in READABLE_VERSIONS:
        raise RecordingError(f"not a recording of format version {' or '.join(map(str, READABLE_VERSIONS))}")
    if data["format_version"] == 1:
        data = upgrade_v1(data)
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if err is not None:
        raise RecordingError(f"field {_field_path(err)}: {err.message[:200]}")
    for i, t in enumerate(data["training"]):
        if len(t["loss_a_hex"]) != t["steps"] or len(t["loss_b_hex"]) != t["steps"]:
            raise RecordingError(f"field training[{i}]: {t['steps']} steps but "
                                 f"{len(t['loss_a_hex'])} and {len(t['loss_b_hex'])} losses")


@dataclass(frozen=True, kw_only=True)
class SumEntry:
    generator: str
    seed: int
    n: int
    dtype: str
    vector_sha256: str
    sum_hex: str
    wider_hex: str | None  # torch.sum(x, dtype=WIDER[dtype]), where recorded

    @property
    def key(self) -> tuple[str, int, int, str]:
        return self.generator, self.seed, self.n, self.dtype


@dataclass(frozen=True, kw_only=True)
class MatmulEntry:
    shape: tuple[int, int, int]
    seed: int
    result_sha256: str
    first_row_hex: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class TrainingEntry:
    preset: str
    steps: int
    note: str
    loss_a_hex: tuple[str, ...]
    loss_b_hex: tuple[str, ...]

    # a loaded recording is shared by every viewer: its losses are decoded once, not on every view
    @functools.cached_property
    def losses_a(self) -> tuple[float, ...]:
        return tuple(decode_hex(h) for h in self.loss_a_hex)

    @functools.cached_property
    def losses_b(self) -> tuple[float, ...]:
        return tuple(decode_hex(h) for h in self.loss_b_hex)

    @property
    def first_difference(self) -> int | None:
        """First step at which the two runs' losses have other bits."""
        return next((i + 1 for i, (a, b) in enumerate(zip(self.loss_a_hex, self.loss_b_hex, strict=True))
                     if a != b), None)

    @functools.cached_property
    def first_rel_1pct(self) -> int | None:
        """First step with |loss A - loss B| / |loss A| > 1% (as core.training.seeds.summarize defines it)."""
        return first_apart(relative_gap(np.array(self.losses_a), np.array(self.losses_b)))


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Where a recording was made: the ``provenance`` object of the JSON file, one typed field per key.

    The required keys of the schema (core.recordings.schema) come first; every other key the capture
    writes is optional (``None`` when a file does not carry it, as version-1 files do not). A field
    is also readable by its JSON name (``p["cpu_model"]``, ``p.get("facts_note")``), which is how
    the facts tables walk them; keys the file carries that no field names are ignored.
    """

    device_name: str
    device_kind: str  # "cpu", "cuda", "mps", or "webgpu" (a visitor's GPU, through their browser)
    torch_version: str
    captured_at: str  # ISO 8601, UTC
    sm_count: int | None = None
    cuda_version: str | None = None
    driver: str | None = None
    threads: int | None = None
    cpu_model: str | None = None
    cpu_capability: str | None = None
    logical_cores: int | None = None
    blas: str | None = None
    numpy_version: str | None = None
    os: str | None = None
    architecture: str | None = None
    host: str | None = None
    quick: bool | None = None
    cpu_vendor: str | None = None
    cpu_family_model_stepping: str | None = None
    cpu_simd_flags: str | None = None
    onednn: str | None = None
    python_version: str | None = None
    compute_capability: str | None = None
    cublas_version: str | None = None
    build_capability: str | None = None
    platform: str | None = None
    tf32_matmul: bool | None = None
    deterministic_algorithms: bool | None = None
    environment: dict[str, str] | None = None  # numeric environment variables set at capture
    facts_note: str | None = None  # where facts attached after the capture come from
    browser: str | None = None  # a WebGPU recording: the browser that ran the kernels

    @staticmethod
    def from_dict(data: dict) -> Provenance:
        """The typed provenance of a validated recording's ``provenance`` object."""
        known = {f.name for f in fields(Provenance)}
        values = {k: v for k, v in data.items() if k in known}
        if values.get("environment") is not None:
            values["environment"] = dict(values["environment"])
        return Provenance(**values)

    def as_dict(self) -> dict:
        """Every field by its JSON name (a copy: changing it changes nothing here)."""
        return {f.name: (dict(v) if isinstance(v := getattr(self, f.name), dict) else v) for f in fields(self)}

    def __getitem__(self, key: str):
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default=None):
        """A field by its JSON name, or ``default`` for a name that is no field."""
        return getattr(self, key) if key in self.__dataclass_fields__ else default

    @property
    def is_gpu(self) -> bool:
        return self.device_kind in ("cuda", "mps", "webgpu")


@dataclass(frozen=True, kw_only=True)
class ThroughputEntry:
    op: str
    size: int
    seconds_float32: float
    seconds_float64: float
    rate_float32: float
    rate_float64: float
    unit: str

    @property
    def ratio(self) -> float:
        """float64 speed as a fraction of float32's, per value (as core.machines.timing.Throughput.ratio)."""
        return self.seconds_float32 / self.seconds_float64


@dataclass(frozen=True, kw_only=True)
class Recording:
    path: str
    format_version: int  # as stored in the file (version 1 is upgraded when loaded)
    provenance: Provenance
    sums: tuple[SumEntry, ...]
    matmuls: tuple[MatmulEntry, ...]
    training: tuple[TrainingEntry, ...]
    throughput: tuple[ThroughputEntry, ...]
    op_fingerprint: dict[str, str]
    uploaded: bool = False  # a visitor's own file (core.recordings.upload): ``path`` is its name, nothing verified

    @staticmethod
    def from_dict(path: str, data: dict) -> Recording:
        """A validated recording (version 1 or 2) as typed objects."""
        validate(data)
        stored = data["format_version"]
        if stored == 1:
            data = upgrade_v1(data)
        sums = tuple(
            SumEntry(
                generator=e["generator"],
                seed=e["seed"],
                n=e["n"],
                dtype=e["dtype"],
                vector_sha256=e["vector_sha256"],
                sum_hex=e["sum_hex"],
                wider_hex=e.get(f"sum_dtype_{WIDER[e['dtype']]}_hex") if WIDER[e["dtype"]] else None,
            )
            for e in data["sums"]
        )
        matmuls = tuple(MatmulEntry(shape=tuple(m["shape"]), seed=m["seed"], result_sha256=m["result_sha256"],
                                    first_row_hex=tuple(m["first_row_hex"])) for m in data["matmuls"])
        training = tuple(TrainingEntry(preset=t["preset"], steps=t["steps"], note=t["note"],
                                       loss_a_hex=tuple(t["loss_a_hex"]), loss_b_hex=tuple(t["loss_b_hex"]))
                         for t in data["training"])
        throughput = tuple(ThroughputEntry(**{k: t[k] for k in ThroughputEntry.__dataclass_fields__})
                           for t in data["throughput"])
        return Recording(path=path, format_version=stored, provenance=Provenance.from_dict(data["provenance"]),
                         sums=sums, matmuls=matmuls, training=training, throughput=throughput,
                         op_fingerprint=dict(data["op_fingerprint"]))

    @property
    def name(self) -> str:
        return pathlib.Path(self.path).name

    @property
    def is_gpu(self) -> bool:
        return self.provenance.is_gpu

    @property
    def machine(self) -> str:
        """The device in words: a GPU's name, or a CPU's model, SIMD capability and threads (and, for an
        upload, that a visitor brought it)."""
        return self.device + (", uploaded by you" if self.uploaded else "")

    @property
    def device(self) -> str:
        """The device in words, as the file names it."""
        p = self.provenance
        if self.is_gpu:
            return str(p.device_name)
        cpu = p.cpu_model or p.device_name
        cap = p.cpu_capability
        threads = p.threads
        env = p.environment or {}
        parts = [str(cpu)] + ([str(cap)] if cap else []) + ([f"{threads} threads"] if threads else [])
        text = f"{parts[0]} ({', '.join(parts[1:])})" if len(parts) > 1 else parts[0]
        if env:
            text += " with " + ", ".join(f"{k}={v}" for k, v in sorted(env.items()))
        return text

    @property
    def label(self) -> str:
        p = self.provenance
        text = (f"recorded through WebGPU in {p.browser} on {self.device} on {p.captured_at[:10]}"
                if p.device_kind == "webgpu" else
                f"recorded on {self.device} with torch {p.torch_version} on {p.captured_at[:10]}")
        return f"{UPLOADED}: {text}" if self.uploaded else text

    def find_sum(self, generator: str, seed: int, n: int, dtype: str) -> SumEntry | None:
        return next((e for e in self.sums if e.key == (generator, seed, n, dtype)), None)


def load_recordings(directory: pathlib.Path | None = None) -> tuple[list[Recording], list[str]]:
    """Every valid recording in the directory (at most MAX_RECORDING_FILES), and a message for each refused."""
    directory = directory or recordings_dir()
    good, problems = [], []
    if not directory.is_dir():
        return good, problems
    paths = sorted(directory.glob("*.json"))
    for path in paths[MAX_RECORDING_FILES:]:
        problems.append(f"{path.name}: not read (at most {MAX_RECORDING_FILES} recordings are loaded)")
    for path in paths[:MAX_RECORDING_FILES]:
        try:
            if path.stat().st_size > MAX_RECORDING_BYTES:
                raise RecordingError(f"larger than {MAX_RECORDING_BYTES:,} bytes")
            good.append(Recording.from_dict(str(path), json.loads(path.read_text())))
        except (OSError, ValueError) as err:
            problems.append(f"{path.name}: {err}")
    return good, problems


def _signature(directory: pathlib.Path) -> tuple:
    if not directory.is_dir():
        return ()
    return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in sorted(directory.glob("*.json")))


@functools.lru_cache(maxsize=4)
def _load_cached(directory: str, signature: tuple) -> tuple[tuple[Recording, ...], tuple[str, ...]]:
    good, problems = load_recordings(pathlib.Path(directory))
    return tuple(good), tuple(problems)


def cached_recordings(directory: pathlib.Path | None = None) -> tuple[list[Recording], list[str]]:
    """``load_recordings``, read again only when a file in the folder changes (a few entries per process)."""
    directory = directory or recordings_dir()
    good, problems = _load_cached(str(directory), _signature(directory))
    return list(good), list(problems)


def recorded_outcomes(recs: list[Recording], preset: str) -> list[tuple[str, int | None, int]]:
    """(recording label, first step more than 1% apart or None, steps recorded) for a training preset."""
    return [(r.label, t.first_rel_1pct, t.steps) for r in recs for t in r.training if t.preset == preset]
