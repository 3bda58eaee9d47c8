"""The declared JSON Schema of a recording (format version 2), checked with ``jsonschema``.

Version-1 files (no machine facts, no operation fingerprint) are upgraded in memory by
core.recordings.store before they are checked against this schema, so one schema serves both.
"""

from __future__ import annotations

HEX16 = {"type": "string", "pattern": "^[0-9a-f]{4}$"}
HEX32 = {"type": "string", "pattern": "^[0-9a-f]{8}$"}
HEX64 = {"type": "string", "pattern": "^[0-9a-f]{16}$"}
SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
OPT_STR = {"type": ["string", "null"], "maxLength": 500}
OPT_INT = {"type": ["integer", "null"], "minimum": 0}
DTYPE = {"enum": ["float16", "bfloat16", "float32", "float64"]}
GENERATOR = {"enum": ["normal", "uniform", "lognormal", "alternating"]}
TIMESTAMP = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"}


def _hex_by_dtype(key: str, dtype: str, pattern: dict) -> dict:
    return {"if": {"properties": {"dtype": {"const": dtype}}}, "then": {"properties": {key: pattern}}}


SUM = {
    "type": "object",
    "required": ["generator", "seed", "n", "dtype", "vector_sha256", "sum_hex"],
    "properties": {
        "generator": GENERATOR,
        "seed": {"type": "integer", "minimum": 0},
        "n": {"type": "integer", "minimum": 1, "maximum": 100_000_000},
        "dtype": DTYPE,
        "vector_sha256": SHA256,
        "sum_hex": {"type": "string"},
        "sum_dtype_float32_hex": HEX32,
        "sum_dtype_float64_hex": HEX64,
    },
    "allOf": [
        _hex_by_dtype("sum_hex", "float16", HEX16),
        _hex_by_dtype("sum_hex", "bfloat16", HEX16),
        _hex_by_dtype("sum_hex", "float32", HEX32),
        _hex_by_dtype("sum_hex", "float64", HEX64),
    ],
}
MATMUL = {
    "type": "object",
    "required": ["shape", "seed", "result_sha256", "first_row_hex"],
    "properties": {
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 3, "maxItems": 3},
        "seed": {"type": "integer", "minimum": 0},
        "result_sha256": SHA256,
        "first_row_hex": {"type": "array", "items": HEX32, "maxItems": 64},
    },
}
TRAINING = {
    "type": "object",
    "required": ["preset", "steps", "note", "loss_a_hex", "loss_b_hex"],
    "properties": {
        "preset": {"type": "string", "maxLength": 200},
        "steps": {"type": "integer", "minimum": 1, "maximum": 5000},
        "note": {"type": "string", "maxLength": 500},
        "loss_a_hex": {"type": "array", "items": {"anyOf": [HEX32, HEX64]}, "maxItems": 5000},
        "loss_b_hex": {"type": "array", "items": {"anyOf": [HEX32, HEX64]}, "maxItems": 5000},
    },
}
POSITIVE = {"type": "number", "exclusiveMinimum": 0}
THROUGHPUT = {
    "type": "object",
    "required": ["op", "size", "seconds_float32", "seconds_float64", "rate_float32", "rate_float64", "unit"],
    "properties": {
        "op": {"enum": ["matmul", "sum"]},
        "size": {"type": "integer", "minimum": 1},
        "seconds_float32": POSITIVE, "seconds_float64": POSITIVE,
        "rate_float32": POSITIVE, "rate_float64": POSITIVE,
        "unit": {"enum": ["GFLOP/s", "GB/s"]},
    },
}
PROVENANCE = {
    "type": "object",
    "required": ["device_name", "device_kind", "sm_count", "torch_version", "cuda_version", "driver", "captured_at",
                 "threads", "cpu_model", "cpu_capability", "logical_cores", "blas", "numpy_version", "os",
                 "architecture"],
    "properties": {
        "device_name": {"type": "string", "minLength": 1, "maxLength": 200},
        "device_kind": {"enum": ["cpu", "cuda", "mps", "webgpu"]},
        "sm_count": OPT_INT,
        "torch_version": {"type": "string", "minLength": 1, "maxLength": 100},
        "cuda_version": OPT_STR,
        "driver": OPT_STR,
        "captured_at": TIMESTAMP,
        "threads": OPT_INT,
        "host": OPT_STR,
        "quick": {"type": "boolean"},
        "cpu_model": OPT_STR,
        "cpu_vendor": OPT_STR,
        "cpu_family_model_stepping": OPT_STR,
        "cpu_simd_flags": OPT_STR,
        "logical_cores": OPT_INT,
        "cpu_capability": OPT_STR,
        "blas": OPT_STR,
        "onednn": OPT_STR,
        "numpy_version": OPT_STR,
        "python_version": OPT_STR,
        "os": OPT_STR,
        "architecture": OPT_STR,
        "compute_capability": OPT_STR,
        "cublas_version": OPT_STR,
        "environment": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 200},
                        "maxProperties": 20},
        "facts_note": OPT_STR,
        "browser": OPT_STR,  # a WebGPU recording: the browser that ran the kernels
    },
}
RECORDING = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["format_version", "provenance", "sums", "matmuls", "training", "throughput", "op_fingerprint"],
    "properties": {
        "format_version": {"const": 2},
        "provenance": PROVENANCE,
        "sums": {"type": "array", "items": SUM, "maxItems": 10_000},
        "matmuls": {"type": "array", "items": MATMUL, "maxItems": 100},
        "training": {"type": "array", "items": TRAINING, "maxItems": 50},
        "throughput": {"type": "array", "items": THROUGHPUT, "maxItems": 20},
        "op_fingerprint": {"type": "object", "additionalProperties": HEX64, "maxProperties": 200},
    },
}
