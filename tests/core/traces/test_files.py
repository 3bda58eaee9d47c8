"""core.traces.files: the trace file's round trip, and what an upload is refused for (in one sentence)."""

from __future__ import annotations

import copy
import json

import pytest

from core.traces import files
from core.traces.compare import compare
from core.traces.files import MAX_TRACE_BYTES, TraceFileError, dumps, from_bytes, ops_of, read, write
from core.traces.models import RunSettings
from core.traces.run import make_trace


@pytest.fixture(scope="module")
def trace() -> dict:
    return make_trace(RunSettings())


def _refused(raw: bytes, *words: str) -> str:
    with pytest.raises(TraceFileError) as e:
        from_bytes(raw, "upload.json")
    msg = str(e.value)
    assert "\n" not in msg and 10 < len(msg) <= 300 and "Traceback" not in msg, msg  # one readable sentence
    for w in words:
        assert w in msg, msg
    return msg


def _raw(t: dict) -> bytes:
    return json.dumps(t).encode()


def test_write_read_round_trip(trace, tmp_path):
    path = write(trace, tmp_path / "sub" / "a.json")
    back = read(path)
    assert back == trace
    assert ops_of(back) == ops_of(trace)
    assert from_bytes(path.read_bytes()) == trace
    assert compare(back, trace).line == f"first difference: none in {len(trace['ops'])} ops"
    assert len(path.read_bytes()) < MAX_TRACE_BYTES and dumps(trace) == path.read_text()


def test_the_trace_says_how_it_was_made(trace):
    assert trace["format"] == files.FORMAT and trace["version"] == files.VERSION
    assert trace["settings"]["model"] == "mlp-step" and trace["settings"]["threads_used"] >= 1
    assert {"device_name", "device_kind", "torch_version"} <= set(trace["machine"])


def test_empty_and_oversize_are_refused_before_parsing(tmp_path):
    _refused(b"", "empty")
    # not UTF-8 and not JSON either: the size is what it is refused for, so nothing was decoded
    _refused(b"\xff" * (MAX_TRACE_BYTES + 1), "at most 8 MB")
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(MAX_TRACE_BYTES + 1)
    with pytest.raises(TraceFileError, match="at most 8 MB"):
        read(big)


def test_not_text_not_json():
    _refused(b"\xff\xfe{\x00", "not UTF-8")
    _refused(b"{not json", "not JSON", "line 1")
    _refused(b"[1, 2, 3]", "not a valid trace file")


def _broken(trace: dict, change) -> bytes:
    t = copy.deepcopy(trace)
    change(t)
    return _raw(t)


def test_schema_violations(trace):
    def drop_field(t):
        del t["ops"][0]["l1"]

    def wrong_format(t):
        t["format"] = "op-trace-2"

    def renumber(t):
        t["ops"][1]["index"] = 5

    def swap(t):
        t["ops"][0]["index"], t["ops"][1]["index"] = 2, 1

    def bad_digest(t):
        t["ops"][0]["in_digests"][0] = "not-a-hex-digest"

    def bad_out_digest(t):
        t["ops"][2]["out_digest"] = "ABCDEF0123456789"

    def extra_field(t):
        t["ops"][0]["note"] = "hi"

    def negative_l1(t):
        t["ops"][0]["l1"] = -1.0

    def no_machine(t):
        del t["machine"]

    assert "l1" in _refused(_broken(trace, drop_field), "ops/0")
    _refused(_broken(trace, wrong_format), "format")
    _refused(_broken(trace, renumber), "numbered 1, 2, 3")
    _refused(_broken(trace, swap), "numbered 1, 2, 3")
    _refused(_broken(trace, bad_digest), "ops/0/in_digests/0")
    _refused(_broken(trace, bad_out_digest), "ops/2/out_digest")
    _refused(_broken(trace, extra_field), "ops/0")
    _refused(_broken(trace, negative_l1), "ops/0/l1")
    _refused(_broken(trace, no_machine), "machine")
    with pytest.raises(TraceFileError):
        dumps(json.loads(_broken(trace, renumber)))  # nothing invalid is written either


def test_markup_in_a_module_name_is_kept_as_plain_text(trace):
    markup = "<script>alert(1)</script> **bold** [link](https://example.com) <b>x</b>"

    def plant(t):
        t["ops"][0]["module"] = markup
        t["settings"]["model"] = "<img src=x onerror=alert(1)>"

    back = from_bytes(_broken(trace, plant))
    assert back["ops"][0]["module"] == markup and ops_of(back)[0].module == markup
    line = compare(back, back).line
    assert line.startswith("first difference: none")
    c = compare(trace, back)  # the module differs, so op 1 pairs by op and shape, still the same bits
    assert c.line == f"first difference: none in {len(trace['ops'])} ops"


def test_a_long_string_is_refused(trace):
    def long_module(t):
        t["ops"][0]["module"] = "m" * 10_000

    msg = _refused(_broken(trace, long_module), "ops/0/module")
    assert "m" * 250 not in msg  # the message quotes at most a bounded part of the value


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_numbers_are_refused(constant):
    with pytest.raises(TraceFileError, match=f"not standard JSON: it holds {constant}"):
        from_bytes(b'{"format": "op-trace", "version": 1, "ops": [{"l1": ' + constant.encode() + b"}]}", "x.json")


def test_traces_whose_digests_are_made_otherwise_are_not_compared():
    from core.traces.record import DIGEST

    trace = make_trace(RunSettings())
    assert trace["digest"] == DIGEST and DIGEST in files.DIGESTS
    old = dict(trace)
    del old["digest"]  # a version 1 file: its digests are BLAKE2b's
    files.validate(old)
    with pytest.raises(files.TraceFileError, match="blake2b-64 against xxh3-64"):
        compare(old, trace)
