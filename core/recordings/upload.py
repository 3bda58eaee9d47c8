"""A visitor's own capture file, uploaded to a page: bytes to a validated Recording, or the reason not.

The bytes are measured against MAX_CAPTURE_BYTES before anything is decoded, decoded as UTF-8 and
parsed with ``json`` only (never pickle or eval; NaN and infinities, which standard JSON has not,
are refused), then validated and loaded exactly as the bundled files are: ``Recording.from_dict``
checks the schema of core.recordings.schema and upgrades a version-1 file in memory. One limit
more than the schema's guards the shared server: a recording may claim at most MAX_UPLOAD_THREADS
threads (the CPU model of core.kernels keeps one slot per thread). The Recording comes back
marked ``uploaded``, so its label says that this server has not verified it; every text in it stays
exactly the file's (pages show it inert).

``upload_fidelity`` measures the models against an upload over the fixed suite's vectors only, as
many as a bundled file holds, however many sums the file lists.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from core.arith.loader import MAX_UPLOAD_BYTES, clip
from core.recordings.fidelity import Fidelity, model_fidelity
from core.recordings.store import (
    SUITE_DTYPES,
    SUITE_GENERATORS,
    SUITE_SIZES,
    UPLOADED,
    Recording,
    RecordingError,
)

# A capture is about 55 kB. The cap sits below every page's MAX_UPLOAD_BYTES (Streamlit's own limit), so a file
# between the two gets this module's message, which says what a capture is, rather than the uploader's
# (store.MAX_RECORDING_BYTES is the cap on a file in the server's own recordings folder).
MAX_CAPTURE_BYTES = MAX_UPLOAD_BYTES - 1024 * 1024
MAX_CAPTURE_MB = MAX_CAPTURE_BYTES // (1024 * 1024)
MAX_UPLOAD_THREADS = 4096
MAX_NAME_CHARS = 80
JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean", type(None): "null"}
HOW = "upload the .json file that python -m scripts.capture wrote"
__all__ = ["MAX_CAPTURE_BYTES", "MAX_CAPTURE_MB", "MAX_UPLOAD_THREADS", "UPLOADED", "UploadError",
           "recording_from_upload", "upload_fidelity"]


class UploadError(RecordingError):
    """An uploaded file that cannot be used; ``str(err)`` is the message for the visitor (it may quote
    the file's name or content: show it inert)."""


def _who(name: str) -> str:
    return clip(str(name) or "the file", MAX_NAME_CHARS)


def _no_constant(token: str):
    raise ValueError(f"{token} is not a number in standard JSON")


def _finite(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"{token[:20]} is too large for a float64")
    return value


def parse_upload(name: str, data: bytes) -> dict:
    """The JSON object of an uploaded file, checked for size before it is decoded; UploadError otherwise."""
    who = _who(name)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise UploadError(f"{who}: no file content.")
    size = len(data)
    if size == 0:
        raise UploadError(f"{who} is empty: {HOW}.")
    if size > MAX_CAPTURE_BYTES:
        raise UploadError(f"{who} is {size:,} bytes; at most {MAX_CAPTURE_BYTES:,} bytes ({MAX_CAPTURE_MB} MB) are "
                          "accepted, and a capture is about 55 kB.")
    try:
        text = bytes(data).decode("utf-8")
    except UnicodeDecodeError as err:
        raise UploadError(f"{who} is not UTF-8 text (byte {err.start:,} cannot be decoded): {HOW}.") from None
    try:
        parsed = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as err:
        raise UploadError(f"{who} is not JSON (line {err.lineno}, column {err.colno}: {err.msg}): {HOW}.") from None
    except RecursionError:
        raise UploadError(f"{who} is nested too deeply to be a recording: {HOW}.") from None
    except ValueError as err:  # NaN, an infinity, a float64 overflow, an integer of too many digits
        raise UploadError(f"{who} is not standard JSON ({str(err)[:120]}): {HOW}.") from None
    if not isinstance(parsed, dict):
        kind = JSON_KINDS.get(type(parsed), "value")
        raise UploadError(f"{who} holds a JSON {kind}, not the object of a recording: {HOW}.")
    return parsed


def recording_from_upload(name: str, data: bytes) -> Recording:
    """The uploaded file as a Recording marked ``uploaded`` (``path`` is its name, clipped), validated
    exactly as a bundled file is; UploadError with the reason otherwise."""
    who = _who(name)
    parsed = parse_upload(name, data)
    try:
        rec = Recording.from_dict(who, parsed)
    except RecordingError as err:
        raise UploadError(f"{who} is not a recording this page can use: {err}.") from None
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:  # never a traceback
        raise UploadError(f"{who} could not be read as a recording ({type(err).__name__}): {HOW}.") from None
    threads = rec.provenance.threads
    if threads is not None and threads > MAX_UPLOAD_THREADS:
        raise UploadError(f"{who} is not a recording this page can use: field provenance.threads: {threads:,} "
                          f"threads; an upload may claim at most {MAX_UPLOAD_THREADS:,}.")
    return replace(rec, uploaded=True)


def suite_entries(rec: Recording) -> Recording:
    """``rec`` with only the sums of the fixed suite (seed 0, the suite's generators, sizes and formats), the
    first of each: the sums a bundled capture holds, and as many to regenerate as a bundled file costs."""
    seen, keep = set(), []
    for e in rec.sums:
        if (e.seed == 0 and e.generator in SUITE_GENERATORS and e.n in SUITE_SIZES and e.dtype in SUITE_DTYPES
                and e.key not in seen):
            seen.add(e.key)
            keep.append(e)
    return replace(rec, sums=tuple(keep))


def upload_fidelity(rec: Recording, max_n: int = 100_000) -> Fidelity:
    """``model_fidelity`` of an uploaded recording over the suite's sums up to ``max_n`` values."""
    return model_fidelity(suite_entries(rec), max_n=max_n)
