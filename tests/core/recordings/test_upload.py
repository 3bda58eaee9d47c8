"""A visitor's uploaded capture file: bytes to a Recording validated exactly as a bundled file, or a clear reason."""

from __future__ import annotations

import contextlib
import json
import pathlib
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from core.arith.loader import MAX_UPLOAD_BYTES
from core.recordings.fidelity import model_fidelity
from core.recordings.store import DEFAULT_DIR, UPLOADED, Recording, RecordingError, load_recordings
from core.recordings.upload import (
    MAX_CAPTURE_BYTES,
    MAX_UPLOAD_THREADS,
    UploadError,
    recording_from_upload,
    suite_entries,
    upload_fidelity,
)

BUNDLED = sorted(DEFAULT_DIR.glob("*.json"))
ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED_V1 = ROOT.parent / "shared" / "recordings" / "v1-cpu-amd-epyc-2vcpu-20261130T081337.json"
HOSTILE = "<img src=x onerror=alert(1)> **bold** [link](https://example.com) :material/lock: `code` <script>"


@pytest.fixture(scope="module")
def sample() -> dict:
    return json.loads(BUNDLED[0].read_text())


def _bytes(data: dict) -> bytes:
    return json.dumps(data, indent=1).encode()


def test_the_cap_is_far_above_a_bundled_capture_and_below_the_servers_upload_limit():
    assert BUNDLED, "no bundled recordings"
    assert max(p.stat().st_size for p in BUNDLED) * 20 < MAX_CAPTURE_BYTES < MAX_UPLOAD_BYTES
    config = (ROOT / ".streamlit" / "config.toml").read_text()
    server_mb = int(next(line.split("=")[1] for line in config.splitlines() if line.startswith("maxUploadSize")))
    assert server_mb * 1024 * 1024 == MAX_UPLOAD_BYTES  # every page's limit is Streamlit's own


@pytest.mark.parametrize("path", BUNDLED, ids=[p.name for p in BUNDLED])
def test_a_bundled_file_uploaded_under_another_name_is_the_recording_loaded_from_disk(path):
    disk = next(r for r in load_recordings(DEFAULT_DIR)[0] if r.path == str(path))
    up = recording_from_upload("my-gpu.json", path.read_bytes())
    assert up.uploaded and not disk.uploaded
    assert up.name == "my-gpu.json"
    assert replace(up, path=disk.path, uploaded=False) == disk  # every result and fact, bit for bit
    assert up.label == f"{UPLOADED}: {disk.label}"
    assert up.machine.startswith(disk.machine) and up.machine.endswith("uploaded by you")
    assert up.device == disk.device == disk.machine


def test_a_version_1_file_is_upgraded_as_the_bundled_loader_does(sample, tmp_path):
    v1 = json.loads(SHARED_V1.read_text()) if SHARED_V1.is_file() else dict(
        {k: v for k, v in sample.items() if k != "op_fingerprint"}, format_version=1)
    (tmp_path / "v1.json").write_text(json.dumps(v1))
    disk = load_recordings(tmp_path)[0][0]
    up = recording_from_upload("v1.json", (tmp_path / "v1.json").read_bytes())
    assert up.format_version == 1 and replace(up, path=disk.path, uploaded=False) == disk


@pytest.mark.parametrize(("data", "says"), [
    (b"", "is empty"),
    (b"{not json", "is not JSON (line 1, column 2"),
    (b"\xff\xfe{}", "is not UTF-8 text (byte 0"),
    ("{}".encode("utf-16"), "is not UTF-8 text"),
    (b"[1, 2, 3]", "holds a JSON array, not the object of a recording"),
    (b"null", "holds a JSON null"),
    (b'"a string"', "holds a JSON string"),
    (b"{}", "not a recording of format version 1 or 2"),
    (b'{"format_version": 2, "x": NaN}', "not standard JSON (NaN"),
    (b'{"format_version": 2, "x": 1e999}', "not standard JSON"),
    (b'{"format_version": 2, "x": ' + b"9" * 5000 + b"}", "not standard JSON"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
])
def test_bad_bytes_get_a_clear_reason(data, says):
    with pytest.raises(UploadError) as err:
        recording_from_upload("mine.json", data)
    assert says in str(err.value) and str(err.value).startswith("mine.json")


def test_oversize_is_refused_before_it_is_parsed(monkeypatch):
    import core.recordings.upload as upload

    def never(*_args, **_kwargs):
        raise AssertionError("parsed an oversize file")

    monkeypatch.setattr(upload.json, "loads", never)
    big = b" " * (MAX_CAPTURE_BYTES + 1)
    with pytest.raises(UploadError, match=r"is 4,194,305 bytes; at most 4,194,304 bytes \(4 MB\)"):
        recording_from_upload("big.json", big)


def test_schema_violations_name_the_field(sample):
    bad = json.loads(json.dumps(sample))
    bad["provenance"]["device_kind"] = "tpu"
    with pytest.raises(UploadError, match=r"not a recording this page can use: field provenance.device_kind"):
        recording_from_upload("mine.json", _bytes(bad))
    bad = json.loads(json.dumps(sample))
    bad["sums"][0]["sum_hex"] = "zz"
    with pytest.raises(UploadError, match=r"field sums\[0\]"):
        recording_from_upload("mine.json", _bytes(bad))
    bad = json.loads(json.dumps(sample))
    bad["training"][0]["loss_a_hex"].pop()
    with pytest.raises(UploadError, match=r"field training\[0\]"):
        recording_from_upload("mine.json", _bytes(bad))


def test_a_thread_count_no_machine_has_is_refused(sample):
    data = json.loads(json.dumps(sample))
    data["provenance"]["threads"] = MAX_UPLOAD_THREADS + 1
    with pytest.raises(UploadError, match="at most 4,096"):
        recording_from_upload("mine.json", _bytes(data))
    data["provenance"]["threads"] = MAX_UPLOAD_THREADS
    assert recording_from_upload("mine.json", _bytes(data)).provenance.threads == MAX_UPLOAD_THREADS


def test_markup_in_the_file_is_kept_as_plain_text(sample):
    data = json.loads(json.dumps(sample))
    data["provenance"]["cpu_model"] = HOSTILE
    data["provenance"]["device_name"] = HOSTILE
    data["provenance"]["environment"] = {"MKL_CBWR": HOSTILE[:200]}
    rec = recording_from_upload(f"{HOSTILE}.json", _bytes(data))
    assert rec.provenance.cpu_model == HOSTILE and rec.provenance.device_name == HOSTILE  # the text, unchanged
    assert HOSTILE in rec.machine and HOSTILE in rec.label and rec.label.startswith(UPLOADED)
    assert rec.provenance.environment == {"MKL_CBWR": HOSTILE[:200]}


def test_a_long_file_name_is_clipped():
    with pytest.raises(UploadError) as err:
        recording_from_upload("x" * 500 + ".json", b"")
    assert len(str(err.value).split(" is empty")[0]) == 80


def test_fidelity_of_an_upload_covers_the_suite_once(sample):
    rec = recording_from_upload("mine.json", _bytes(sample))
    assert upload_fidelity(rec) == model_fidelity(rec, max_n=100_000)  # a bundled capture holds the suite only
    noisy = json.loads(json.dumps(sample))
    extra = dict(noisy["sums"][0], seed=7)
    noisy["sums"] = noisy["sums"] * 3 + [extra] * 50  # duplicates and vectors outside the suite
    big = recording_from_upload("mine.json", _bytes(noisy))
    assert suite_entries(big).sums == rec.sums
    assert upload_fidelity(big) == upload_fidelity(rec)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
@example(b"\x00")
@example(b'{"format_version": 1}')
@example(b'{"format_version": 1, "provenance": 3}')
@example(b'{"format_version": 2, "provenance": {}, "sums": 1}')
def test_any_bytes_give_a_recording_or_an_upload_error(data):
    with contextlib.suppress(UploadError):  # anything else (a traceback) fails the test
        recording_from_upload("any.json", data)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:3]):
            yield from _paths(v, (*prefix, i))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_capture_with_any_one_value_replaced_loads_or_is_refused_never_crashes(sample, data):
    """One node of a real capture replaced by any JSON value: the upload is a Recording (marked uploaded)
    or an UploadError; a bundled-style load of the same bytes agrees on which."""
    doc = json.loads(json.dumps(sample))
    where = data.draw(st.sampled_from([p for p in _paths(doc) if p]))
    value = data.draw(json_values)
    node = doc
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    raw = _bytes(doc)
    try:
        disk = Recording.from_dict("x.json", json.loads(raw))
    except RecordingError:
        disk = None
    try:
        up = recording_from_upload("x.json", raw)
    except UploadError as err:
        assert disk is None or "threads" in str(err), err
        return
    assert disk is not None and up.uploaded and replace(up, uploaded=False) == disk
