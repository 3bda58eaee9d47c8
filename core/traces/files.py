"""The trace file: its declared JSON Schema, its size cap, writing, reading and uploads.

A trace is JSON (never a pickle): ``format`` "op-trace", ``version`` 2 (1 is read too: it lacks the
per-output fields of ops with several outputs, which are then judged by their first), when and with what
settings it was made, the machine (``core.machines.devices.device_info``: CPU, SIMD dispatch, BLAS,
threads, versions; for a GPU its name, compute capability, driver, CUDA and cuBLAS), and one
object per op (core.traces.record.OpRecord). Files are validated with ``jsonschema`` before
anything reads them; a file over ``MAX_TRACE_BYTES`` is refused before it is parsed.
"""

from __future__ import annotations

import json
import pathlib

import jsonschema

from core.arith.formats import FORMATS
from core.traces.bits import COMPONENTS
from core.traces.oprecord import OPTIONAL_FIELDS, OUTPUT_FIELDS, OpRecord
from core.traces.record import (
    MAX_ARG_TEXT,
    MAX_INPUTS,
    MAX_OPS,
    MAX_OUTPUTS,
    SAMPLE,
)
from core.traces.reductions import TermsKind

FORMAT = "op-trace"
VERSION = 2
READABLE_VERSIONS = (1, 2)
# how a file's digests were made (its "digest"; version 1 files: the first)
DIGESTS = ("blake2b-64", "sha256-64", "xxh3-64")
MAX_TRACE_BYTES = 8 * 1024 * 1024  # a trace file's cap (the bundled LM forward pass is ~0.2 MB)

MAX_DIM = 2**40  # a dimension, K, a flat index: far beyond any real tensor, small enough for exact floats
_SHAPE = {"type": "array", "maxItems": 16, "items": {"type": "integer", "minimum": 0, "maximum": MAX_DIM}}
_NUM_LIST = {"type": ["array", "null"], "maxItems": SAMPLE, "items": {"type": "number", "minimum": 0}}
_TEXT = {"type": "string", "maxLength": 300}
_OUTPUT_PROPERTIES = {
    "out_shape": _SHAPE,
    "full_shape": _SHAPE,
    "out_dtype": _TEXT,
    "out_digest": {"type": "string", "pattern": "^([0-9a-f]{16})?$"},
    "l1": {"type": ["number", "null"], "minimum": 0},
    "sample_index": {"type": "array", "maxItems": SAMPLE,
                     "items": {"type": "integer", "minimum": 0, "maximum": MAX_DIM}},
    "sample_hex": {"type": "array", "maxItems": SAMPLE, "items": {"type": "string", "maxLength": 40}},
    "k": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_DIM},
    "terms_kind": {"enum": [*(k.value for k in TermsKind), None]},
    "sum_abs": _NUM_LIST,
    "scale": _NUM_LIST,
    "total_abs": {"type": ["number", "null"], "minimum": 0},
}
OUTPUT = {"type": "object", "required": list(OUTPUT_FIELDS), "additionalProperties": False,
          "properties": _OUTPUT_PROPERTIES | {"scratch": {"type": "boolean"}}}  # a workspace: kept unjudged
OP = {
    "type": "object",
    "required": [f for f in OpRecord.__dataclass_fields__ if f not in OPTIONAL_FIELDS],
    "additionalProperties": False,
    "properties": {
        "outputs": {"type": "array", "maxItems": MAX_OUTPUTS, "items": OUTPUT},
        "mixes_rows": {"type": "boolean"},
        "not_batch_first": {"type": "boolean"},
        "index": {"type": "integer", "minimum": 1},
        "op": _TEXT,
        "module": _TEXT,
        "backward": {"type": "boolean"},
        "in_shapes": {"type": "array", "maxItems": MAX_INPUTS, "items": _SHAPE},
        "in_dtypes": {"type": "array", "maxItems": MAX_INPUTS, "items": _TEXT},
        "in_digests": {"type": "array", "maxItems": MAX_INPUTS,
                       "items": {"type": "string", "pattern": "^[0-9a-f]{16}$"}},
        "args": {"type": "string", "maxLength": MAX_ARG_TEXT},
        **_OUTPUT_PROPERTIES,
    },
}
TRACE = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format", "version", "created", "settings", "machine", "ops"],
    "properties": {
        "format": {"const": FORMAT},
        "version": {"enum": list(READABLE_VERSIONS)},
        "digest": {"enum": list(DIGESTS)},
        "created": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"},
        "settings": {"type": "object", "required": ["model"], "properties": {"model": _TEXT}},
        "machine": {"type": "object", "required": ["device_name", "device_kind", "torch_version"],
                    "properties": {"device_name": _TEXT, "device_kind": _TEXT, "torch_version": _TEXT},
                    "additionalProperties": {"type": ["string", "number", "boolean", "null"], "maxLength": 500}},
        "ops": {"type": "array", "maxItems": MAX_OPS, "items": OP},
    },
}
_VALIDATOR = jsonschema.Draft202012Validator(TRACE)


def _op_problem(op: dict) -> str | None:
    """What the schema cannot say of one op: lists that go together have one length, and a float
    output's samples are hex of its width (integers' are decimal text)."""
    n = len(op["sample_index"])
    if len(op["sample_hex"]) != n:
        return "sample_hex and sample_index differ in length"
    for key in ("sum_abs", "scale"):
        if op[key] is not None and len(op[key]) != n:
            return f"{key} and sample_index differ in length"
    if not len(op["in_digests"]) == len(op["in_shapes"]) == len(op["in_dtypes"]):
        return "in_digests, in_shapes and in_dtypes differ in length"
    numel = 1
    for d in op["out_shape"]:
        numel *= d
    if numel > MAX_DIM or any(i >= numel for i in op["sample_index"]):
        return "a sampled position lies outside the output"
    fmt = FORMATS.get(op["out_dtype"]) or FORMATS.get(COMPONENTS.get(op["out_dtype"], ""))
    # hex digits of one value (a complex value's: its two parts')
    width = fmt.width // 4 * (2 if op["out_dtype"] in COMPONENTS else 1) if fmt is not None else None
    for h in op["sample_hex"]:
        if width is not None:
            if len(h) != width or any(c not in "0123456789abcdef" for c in h):
                return f"a sample of a {op['out_dtype']} output is not {width} hex digits"
        elif op["out_dtype"].startswith(("int", "uint", "bool", "qint", "quint")) and not h.lstrip("-").isdigit():
            return f"a sample of a {op['out_dtype']} output is not an integer"
    for i, out in enumerate(op.get("outputs") or []):
        problem = _op_problem(out | {"in_digests": [], "in_shapes": [], "in_dtypes": []})
        if problem:
            return f"output {i + 1}: {problem}"
    return None


class TraceFileError(ValueError):
    """A file that is not a valid trace; the message says why, in a sentence."""


def validate(data, name: str = "the trace") -> None:
    err = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(data))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "the top level"
        raise TraceFileError(f"{name} is not a valid trace file: at {where}: {err.message[:200]}")
    indices = [op["index"] for op in data["ops"]]
    if indices != list(range(1, len(indices) + 1)):
        raise TraceFileError(f"{name} is not a valid trace file: its ops are not numbered 1, 2, 3, ...")
    for op in data["ops"]:
        problem = _op_problem(op)
        if problem:
            raise TraceFileError(f"{name} is not a valid trace file: at ops/{op['index'] - 1}: {problem}")


class _Constant(ValueError):
    pass


def _no_constant(text: str):
    raise _Constant(text)


def from_bytes(raw: bytes, name: str = "the file") -> dict:
    """Parse and validate a trace from bytes (an upload): size cap first, then UTF-8, JSON (NaN and
    Infinity refused: they are not JSON, and a NaN would pass a schema minimum), then the schema."""
    if len(raw) == 0:
        raise TraceFileError(f"{name} is empty")
    if len(raw) > MAX_TRACE_BYTES:
        raise TraceFileError(f"{name} is {len(raw) / 2**20:.1f} MB; a trace file may be at most "
                             f"{MAX_TRACE_BYTES // 2**20} MB")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except _Constant as e:
        raise TraceFileError(f"{name} is not standard JSON: it holds {e.args[0]}") from None
    except UnicodeDecodeError:
        raise TraceFileError(f"{name} is not UTF-8 text (a trace file is JSON)") from None
    except json.JSONDecodeError as e:
        raise TraceFileError(f"{name} is not JSON: {e.msg} at line {e.lineno}") from None
    except (ValueError, RecursionError):  # an integer of thousands of digits, nesting too deep to read
        raise TraceFileError(f"{name} is not a trace file: it holds a number or a nesting too large to read") \
            from None
    validate(data, name)
    return data


def read(path: pathlib.Path) -> dict:
    path = pathlib.Path(path)
    size = path.stat().st_size
    if size > MAX_TRACE_BYTES:
        raise TraceFileError(f"{path.name} is {size / 2**20:.1f} MB; a trace file may be at most "
                             f"{MAX_TRACE_BYTES // 2**20} MB")
    return from_bytes(path.read_bytes(), path.name)


def dumps(trace: dict) -> str:
    validate(trace)
    text = json.dumps(trace, separators=(",", ":"), allow_nan=False)
    if len(text.encode()) > MAX_TRACE_BYTES:
        raise TraceFileError(f"the trace is {len(text) / 2**20:.1f} MB, over the {MAX_TRACE_BYTES // 2**20} MB cap")
    return text


def write(trace: dict, path: pathlib.Path) -> pathlib.Path:
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(trace))
    return path


def digest_of(trace: dict) -> str:
    return trace.get("digest", DIGESTS[0])


def ops_of(trace: dict) -> list[OpRecord]:
    return [OpRecord.from_dict(o) for o in trace["ops"]]
