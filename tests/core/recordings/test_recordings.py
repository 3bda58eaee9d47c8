"""core.recordings.store and scripts.capture: format, bit-exact storage, replay checks, refusals."""

from __future__ import annotations

import json

import pytest
import torch

from core.arith.vectors import VectorSpec, generate
from core.machines.devices import available_devices, cpu_device, device_info
from core.machines.globalstate import GlobalState, cuda_tf32
from core.recordings.capture import capture, live_sum_bits
from core.recordings.fidelity import model_fidelity
from core.recordings.store import (
    DEFAULT_DIR,
    FORMAT_VERSION,
    REQUIRED_PROVENANCE,
    Provenance,
    Recording,
    RecordingError,
    load_recordings,
    validate,
    vector_sha256,
    write_recording,
)
from core.studies.cpu_vs_gpu import replay
from tests.machine import X86_SUM_KERNEL


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    out = tmp_path_factory.mktemp("rec")
    messages = []
    rec = capture(quick=True, log=messages.append)
    path = write_recording(rec, out)
    return rec, path, messages


def test_capture_format_and_provenance(recorded):
    rec, path, messages = recorded
    assert rec["format_version"] == FORMAT_VERSION
    prov = rec["provenance"]
    assert all(k in prov for k in REQUIRED_PROVENANCE)
    assert prov["device_kind"] == ("cpu" if len(available_devices()) == 1 else prov["device_kind"])
    if prov["device_kind"] == "cpu":
        assert any("No GPU found: capturing the CPU instead" in m for m in messages)
    assert len(rec["sums"]) == 4 * 2 * 4 and len(rec["matmuls"]) == 3 and len(rec["training"]) == 2
    assert [t["op"] for t in rec["throughput"]] == ["matmul", "sum"]
    assert all(t["rate_float32"] > 0 and t["rate_float64"] > 0 for t in rec["throughput"])
    assert json.loads(path.read_text()) == rec
    validate(rec)


def test_provenance_is_typed_and_keeps_every_fact_the_capture_writes(recorded):
    rec, path, _ = recorded
    loaded = Recording.from_dict(str(path), rec)
    p = loaded.provenance
    assert isinstance(p, Provenance)
    assert p.as_dict() == {**{k: None for k in p.as_dict()}, **rec["provenance"]}  # every key the capture wrote
    assert p.device_kind == rec["provenance"]["device_kind"] and p.threads == rec["provenance"]["threads"]
    assert p["cpu_capability"] == p.cpu_capability and p.get("facts_note") is None and p.get("no such") is None
    with pytest.raises(KeyError):
        p["no such"]
    with pytest.raises(AttributeError):
        p.threads = 99  # frozen
    p.as_dict()["environment"]["X"] = "1"  # a copy
    assert "X" not in (p.environment or {})
    assert p.is_gpu == loaded.is_gpu == (p.device_kind in ("cuda", "mps"))


def test_provenance_ignores_keys_it_has_no_field_for_and_defaults_optional_ones():
    p = Provenance.from_dict({"device_name": "cpu", "device_kind": "cpu", "torch_version": "2.0",
                              "captured_at": "2026-01-01T00:00:00", "someday_a_new_fact": 1})
    assert p.sm_count is None and p.environment is None and not p.is_gpu
    assert "someday_a_new_fact" not in p.as_dict()


def test_bundled_provenance_keys_are_all_fields():
    for path in sorted(DEFAULT_DIR.glob("*.json")):
        stored = json.loads(path.read_text())["provenance"]
        assert stored.keys() <= Provenance.__dataclass_fields__.keys(), path.name
        assert {k: v for k, v in Provenance.from_dict(stored).as_dict().items() if k in stored} == stored


def test_recorded_sums_are_the_bits_of_real_torch_sums(recorded):
    rec, _, _ = recorded
    threads = rec["provenance"]["threads"]
    for e in rec["sums"]:
        values = generate(VectorSpec(kind=e["generator"], n=e["n"], seed=e["seed"], storage=e["dtype"])).values
        assert vector_sha256(values) == e["vector_sha256"]
        assert int(e["sum_hex"], 16) == live_sum_bits(values, cpu_device(), threads)
        assert len(e["sum_hex"]) == values.dtype.itemsize * 2  # hex of the bits, not a decimal string


def test_replay_checks_the_vector_and_refuses_a_mismatch(recorded):
    rec, path, _ = recorded
    r = Recording.from_dict(str(path), rec)
    ok = replay(r, "normal", 0, 1000, "float32")
    assert ok is not None and ok.vector_matches and ok.recorded_wider_bits is not None
    assert replay(r, "normal", 0, 12345, "float32") is None  # no recording for that setting
    tampered = json.loads(json.dumps(rec))
    tampered["sums"][0]["vector_sha256"] = "0" * 64
    e = tampered["sums"][0]
    bad = replay(Recording.from_dict("x", tampered), e["generator"], e["seed"], e["n"], e["dtype"])
    assert bad is not None and not bad.vector_matches and bad.model_bits is None


def test_load_refuses_broken_files(recorded, tmp_path):
    rec, path, _ = recorded
    (tmp_path / "good.json").write_text(path.read_text())
    (tmp_path / "garbage.json").write_text("{not json")
    old = dict(rec, format_version=0)
    (tmp_path / "old.json").write_text(json.dumps(old))
    no_prov = {k: v for k, v in rec.items() if k != "provenance"}
    (tmp_path / "noprov.json").write_text(json.dumps(no_prov))
    bad_hex = json.loads(json.dumps(rec))
    bad_hex["sums"][0]["sum_hex"] = "1.5"
    (tmp_path / "badhex.json").write_text(json.dumps(bad_hex))
    good, problems = load_recordings(tmp_path)
    assert [g.path.endswith("good.json") for g in good] == [True]
    assert len(problems) == 4 and any("provenance" in p for p in problems)
    assert load_recordings(tmp_path / "missing") == ([], [])
    with pytest.raises(RecordingError):
        validate({"format_version": FORMAT_VERSION, "provenance": {}})


def test_model_fidelity_on_a_cpu_recording(recorded):
    rec, path, _ = recorded
    fid = model_fidelity(Recording.from_dict(str(path), rec))
    assert fid.compared == len(rec["sums"])
    if rec["provenance"]["device_kind"] == "cpu" and X86_SUM_KERNEL:  # where the CPU model is established
        assert fid.matched == fid.compared and not fid.mismatches  # the CPU cascade model is bit-exact here
    assert fid.above_max_n == 0


def test_model_fidelity_counts_the_sums_it_leaves_out(recorded):
    """No silent caps: sums above max_n are counted, so the page can say so."""
    rec, path, _ = recorded
    largest = max(e["n"] for e in rec["sums"])
    fid = model_fidelity(Recording.from_dict(str(path), rec), max_n=largest - 1)
    above = sum(e["n"] > largest - 1 for e in rec["sums"])
    assert fid.above_max_n == above >= 1 and fid.max_n == largest - 1
    assert fid.compared == len(rec["sums"]) - above


def test_device_layer_on_the_cpu():
    info = device_info(cpu_device())
    assert info["device_kind"] == "cpu" and info["torch_version"] == torch.__version__
    assert info["threads"] == torch.get_num_threads() and info["sm_count"] is None
    assert available_devices()[0].kind == "cpu"
    mps = [d for d in available_devices() if d.kind == "mps"]
    for d in mps:
        assert not d.supports(torch.float64)


def test_tf32_switch_is_locked_and_restored():
    before = (GlobalState.capture(), torch.backends.cuda.matmul.allow_tf32)
    with cuda_tf32(True):
        assert torch.backends.cuda.matmul.allow_tf32
    with pytest.raises(RuntimeError), cuda_tf32(False):
        raise RuntimeError("boom")
    assert (GlobalState.capture(), torch.backends.cuda.matmul.allow_tf32) == before


def test_capture_script_end_to_end(tmp_path, capsys):
    from scripts import capture as script

    assert script.main(["--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "wrote" in out and "model fidelity" in out
    files = list(tmp_path.glob("v2-*.json"))
    assert len(files) == 1
    good, problems = load_recordings(tmp_path)
    assert len(good) == 1 and not problems
