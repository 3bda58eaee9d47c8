"""Recordings, format version 2: declared schema, lossless upgrade, bundled machines, comparison, guarded replay."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

from core.arith.vectors import VectorSpec, generate
from core.machines.devices import cpu_device
from core.machines.globalstate import PROCESS_THREADS
from core.recordings.capture import capture, live_sum_bits
from core.recordings.compare import (
    INTEL_MKL_NOTE,
    compare_recordings,
    configuration_effects,
    machine_key,
    machine_partings,
    most_different_pair,
    pair_differences,
    real_machines,
    same_dispatch_differences,
)
from core.recordings.fingerprint import OPS, compare_ops, op_fingerprint
from core.recordings.store import (
    DEFAULT_DIR,
    Recording,
    RecordingError,
    decode_hex,
    load_recordings,
    upgrade_v1,
    validate,
    vector_sha256,
)

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED_V1 = ROOT.parent / "shared" / "recordings" / "v1-cpu-amd-epyc-2vcpu-20261130T081337.json"
RESULT_KEYS = ("sums", "matmuls", "training", "throughput")


@pytest.fixture(scope="module")
def quick() -> dict:
    return capture(quick=True, log=lambda *_: None)


@pytest.fixture(scope="module")
def bundled() -> list[Recording]:
    recs, problems = load_recordings(DEFAULT_DIR)
    assert not problems, problems
    return recs


def _broken(rec: dict, edit) -> dict:
    data = json.loads(json.dumps(rec))
    edit(data)
    return data


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d["sums"][0].update(n=-5), "sums[0].n"),
    (lambda d: d["sums"][1].update(generator="zipf"), "sums[1].generator"),
    (lambda d: d["sums"][2].update(sum_hex="3f80"), "sums[2].sum_hex"),
    (lambda d: d["training"][0].pop("loss_a_hex"), "training[0]"),
    (lambda d: d["training"][1]["loss_b_hex"].pop(), "training[1]"),
    (lambda d: d["throughput"][0].pop("size"), "throughput[0]"),
    (lambda d: d["provenance"].update(captured_at=1764490417), "provenance.captured_at"),
    (lambda d: d["provenance"].pop("cpu_model"), "provenance"),
    (lambda d: d["matmuls"][0].update(result_sha256="xyz"), "matmuls[0].result_sha256"),
    (lambda d: d["op_fingerprint"].update({"mm 128x2 @ 2x64": "nothex"}), "op_fingerprint"),
])
def test_schema_refuses_bad_fields_and_names_them(quick, tmp_path, edit, field):
    bad = _broken(quick, edit)
    with pytest.raises(RecordingError, match="field " + re.escape(field)):
        validate(bad)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    good, problems = load_recordings(tmp_path)
    assert not good and len(problems) == 1 and problems[0].startswith("bad.json: field ")


def test_typed_loading_keeps_every_bit(quick):
    rec = Recording.from_dict("q.json", quick)
    assert [e.sum_hex for e in rec.sums] == [e["sum_hex"] for e in quick["sums"]]
    assert rec.op_fingerprint == op_fingerprint() and len(rec.op_fingerprint) == len(OPS)
    t = rec.training[0]
    assert t.losses_a[0] == decode_hex(quick["training"][0]["loss_a_hex"][0])
    assert rec.provenance["cpu_capability"] and rec.provenance["threads"] == PROCESS_THREADS
    assert rec.machine in rec.label and rec.label.startswith("recorded on ")


def test_version_1_upgrades_losslessly_and_attached_facts_need_a_note(quick):
    v1 = json.loads(json.dumps(quick))
    v1["format_version"] = 1
    del v1["op_fingerprint"]
    for k in ("cpu_model", "cpu_capability", "blas"):
        del v1["provenance"][k]
    validate(v1)  # version 1 is still readable
    up = upgrade_v1(v1)
    assert all(up[k] == quick[k] for k in RESULT_KEYS)
    assert up["provenance"]["cpu_model"] is None and up["op_fingerprint"] == {}
    with pytest.raises(ValueError, match="note"):
        upgrade_v1(v1, facts={"cpu_model": "X"})
    attached = upgrade_v1(v1, facts={"cpu_model": "X"}, note="from its owner's notes")
    assert attached["provenance"]["cpu_model"] == "X" and attached["provenance"]["facts_note"]
    assert Recording.from_dict("v1.json", v1).format_version == 1


def test_bundled_recordings_come_from_at_least_three_machines_with_full_provenance(bundled):
    """Distinct by CPU model, vendor, family/model/stepping and capability, each with a plain capture
    (captures with numeric environment variables are the same hardware in another configuration)."""
    machines = {machine_key(r) for r in bundled if not r.provenance["environment"]}
    assert len(machines) >= 3 and len(real_machines(bundled)) == len(machines)
    assert any(key[2] == "GenuineIntel" for key in machines) and any("AMD" in key[1] for key in machines)
    for r in bundled:
        p = r.provenance
        assert p["cpu_model"] and p["cpu_capability"] and p["blas"] and p["numpy_version"] and p["logical_cores"]
        assert r.op_fingerprint and not p.get("quick")
        assert len(r.sums) == 80 and len(r.training) == 2 and all(t.steps == 500 for t in r.training)
        if p.get("facts_note"):  # facts attached after the capture say where they come from
            assert "attached" in p["facts_note"]


@pytest.mark.skipif(not SHARED_V1.is_file(), reason="shared/recordings is not beside the repo")
def test_the_bundled_amd_capture_is_the_shared_file_with_results_unchanged(bundled):
    v1 = json.loads(SHARED_V1.read_text())
    stamp = v1["provenance"]["captured_at"]
    rec = next(r for r in bundled if r.provenance["captured_at"] == stamp)
    stored = json.loads(pathlib.Path(rec.path).read_text())
    assert all(stored[k] == v1[k] for k in RESULT_KEYS)
    assert {k: v for k, v in stored["provenance"].items() if k in v1["provenance"]} == v1["provenance"]
    assert rec.provenance["cpu_capability"] == "AVX512" and rec.provenance["facts_note"]


def test_comparison_counts_agreements_and_finds_where_machines_part(quick):
    rec = Recording.from_dict("a.json", quick)
    same = compare_recordings(rec, rec)
    assert same.sums_identical == same.sums_compared == len(rec.sums)
    assert same.matmuls_identical == same.matmuls_compared == 3
    assert same.first_differing_group is None and not same.ops_differing
    assert all(t.first_step_machines_differ is None and t.left_1pct == t.right_1pct for t in same.training)

    def edit(d):
        d["sums"][3]["sum_hex"] = "0" * len(d["sums"][3]["sum_hex"])
        d["matmuls"][1]["result_sha256"] = "0" * 64
        d["training"][0]["loss_a_hex"][6] = "00000000"
        d["op_fingerprint"]["log_softmax 128x3"] = "0" * 16
        del d["op_fingerprint"]["exp 100000"]

    other = Recording.from_dict("b.json", _broken(quick, edit))
    cmp = compare_recordings(rec, other)
    assert cmp.sums_identical == cmp.sums_compared - 1 and len(cmp.sums_differing) == 1
    assert cmp.matmuls_identical == 2
    assert cmp.training[0].first_step_machines_differ == 7 and cmp.training[1].first_step_machines_differ is None
    assert cmp.ops_differing == ("log_softmax 128x3",) and cmp.first_differing_group == "elementwise"
    assert cmp.ops_compared == len(OPS) - 1


def test_recorded_one_percent_step_matches_core_summarize(quick):
    from dataclasses import replace

    from core.training.mlp import PRESETS
    from core.training.pair import PairedRun
    from core.training.seeds import summarize

    rec = Recording.from_dict("a.json", quick)
    for t in rec.training:
        live = summarize(PairedRun(replace(PRESETS[t.preset].settings, steps=t.steps)).run(t.steps))
        assert t.first_rel_1pct == live.first_rel_1pct  # same machine, same process: same definition, same bits


def test_replay_is_bit_exact_where_the_fingerprint_matches(bundled):
    """The one place a test relies on recorded bits: only on a machine whose fingerprint equals the recording's."""
    live = op_fingerprint()
    matching = [r for r in bundled if r.provenance["threads"] == PROCESS_THREADS and r.op_fingerprint
                and all(c.verdict == "same bits" for c in compare_ops(live, r.op_fingerprint)
                        if c.verdict != "not recorded on both")]
    if not matching:
        pytest.skip("no bundled recording has this machine's fingerprint: "
                    + ", ".join(f"{r.name}" for r in bundled))
    for r in matching:
        for e in r.sums:
            if e.n > 100_000:
                continue
            values = generate(VectorSpec(kind=e.generator, n=e.n, seed=e.seed, storage=e.dtype)).values
            assert vector_sha256(values) == e.vector_sha256
            assert live_sum_bits(values, cpu_device(), PROCESS_THREADS) == int(e.sum_hex, 16), (r.name, e.key)


def test_cached_loading_rereads_only_changed_folders(quick, tmp_path):
    from core.recordings.store import cached_recordings, write_recording

    assert cached_recordings(tmp_path) == ([], [])
    path = write_recording(quick, tmp_path)
    first, _ = cached_recordings(tmp_path)
    assert len(first) == 1 and cached_recordings(tmp_path)[0][0] is first[0]  # served from the cache
    path.write_text(path.read_text().replace('"quick": true', '"quick": false'))
    again, _ = cached_recordings(tmp_path)
    assert again[0] is not first[0] and again[0].provenance["quick"] is False


def test_recorded_outcomes_cite_each_recording(bundled):
    from core.recordings.store import recorded_outcomes

    name = bundled[0].training[0].preset
    rows = recorded_outcomes(bundled, name)
    assert len(rows) == sum(1 for r in bundled for t in r.training if t.preset == name)
    for (label, step, steps), r in zip(rows, [r for r in bundled if any(t.preset == name for t in r.training)],
                                       strict=True):
        assert label == r.label and steps == 500
        assert step == next(t for t in r.training if t.preset == name).first_rel_1pct
    assert recorded_outcomes(bundled, "no such preset") == []


def _other_vendor(vendor: str | None) -> str:
    """A CPU vendor this machine does not have (derived from its own facts, so on every CPU another one)."""
    return next(v for v in ("GenuineIntel", "AuthenticAMD", "HygonGenuine") if v != vendor)


def _variant(quick: dict, ops: dict | None = None, **prov) -> Recording:
    d = json.loads(json.dumps(quick))
    d["provenance"].update(prov)
    d["op_fingerprint"].update(ops or {})
    return Recording.from_dict(f"{len(prov)}-{sorted(prov)}.json", d)


def _another_machine(quick: dict, ops: dict | None = None) -> Recording:
    """The same results with the CPU facts of a machine that is not this one: another vendor and model."""
    p = quick["provenance"]
    return _variant(quick, ops, cpu_vendor=_other_vendor(p["cpu_vendor"]), cpu_model=f"not {p['cpu_model']}",
                    cpu_family_model_stepping="0/0/0" if p["cpu_family_model_stepping"] != "0/0/0" else "1/1/1")


def _other_bits(quick: dict, *names: str) -> dict[str, str]:
    return {n: ("0" * 16 if quick["op_fingerprint"][n] != "0" * 16 else "1" * 16) for n in names}


def test_default_pair_is_the_two_real_machines_that_differ_most(quick):
    """A capture called "another machine" was this machine with capability AVX512, which is this machine on an
    AVX512 CPU. Now it is derived from this machine's facts (another vendor and model), on every CPU."""
    from core.recordings.compare import default_pair

    here = _variant(quick)
    tuned = _variant(quick, _other_bits(quick, *[op.name for op in OPS]), environment={"MKL_CBWR": "COMPATIBLE"})
    near = _another_machine(quick, _other_bits(quick, "tanh 100000"))
    far = _variant(quick, _other_bits(quick, "tanh 100000", "exp 100000"),
                   cpu_vendor=_other_vendor(quick["provenance"]["cpu_vendor"]), cpu_model="a third CPU")
    assert machine_key(near) != machine_key(here) != machine_key(far) != machine_key(near)
    # the configuration capture differs in every operation but is this machine: never a machine of its own
    assert default_pair([here, tuned, near]) == (0, 2)
    assert default_pair([here, tuned, near, far]) == (0, 3)  # 2 operations apart beat 1
    assert default_pair([near, here, far]) == (1, 2)
    assert default_pair([tuned, here]) == (0, 1)  # no two real machines: the first two
    assert default_pair([here, _variant(quick)]) == (0, 1)  # one machine twice is one machine
    assert default_pair([here]) == (0, 0)


def test_configuration_captures_join_their_machine(quick):
    here = _variant(quick)
    tuned = _variant(quick, environment={"MKL_CBWR": "COMPATIBLE"})
    generic = _variant(quick, environment={"ATEN_CPU_CAPABILITY": "default"}, cpu_capability="DEFAULT")
    stray = _variant(quick, environment={"MKL_CBWR": "AVX2"}, cpu_capability="not this one")
    other = _another_machine(quick)
    machines = real_machines([tuned, here, generic, stray, other])
    assert [m.plain for m in machines] == [here, other]
    # a forced capability is still this machine; a capability the variable did not force is not
    assert machines[0].configurations == (tuned, generic) and machines[1].configurations == ()
    assert machines[0].name == here.machine


def test_pair_differences_name_every_differing_result_with_its_group(quick):
    rec = Recording.from_dict("a.json", quick)
    assert pair_differences(compare_recordings(rec, rec)).differing == ()

    def edit(d):
        d["sums"][0]["sum_hex"] = "0" * len(d["sums"][0]["sum_hex"])
        wide = next(e for e in d["sums"] if "sum_dtype_float64_hex" in e)
        wide["sum_dtype_float64_hex"] = "0" * 16
        d["matmuls"][2]["result_sha256"] = "0" * 64
        d["op_fingerprint"].update(_other_bits(quick, "exp 100000", "Adam update (2 steps, 64x64)"))
        d["training"][1]["loss_a_hex"][40] = "00000000"

    diff = pair_differences(compare_recordings(rec, Recording.from_dict("b.json", _broken(quick, edit))))
    assert [d.group for d in diff.differing] == ["sums", "sums", "matrix products", "fingerprint operations",
                                                 "fingerprint operations", "training"]
    e0 = quick["sums"][0]
    assert diff.in_group("sums")[0].name == f"torch.sum: {e0['generator']}, n = {e0['n']:,}, {e0['dtype']}"
    assert diff.in_group("sums")[1].name.startswith("torch.sum(dtype=float64): ")
    m, k, n = quick["matmuls"][2]["shape"]
    assert diff.in_group("matrix products")[0].name == f"{m}x{k} @ {k}x{n}"
    assert [(d.name, d.detail) for d in diff.in_group("fingerprint operations")] == [
        ("exp 100000", "elementwise"), ("Adam update (2 steps, 64x64)", "training step")]
    assert diff.in_group("training")[0].detail == "run A has other bits from step 41"
    assert diff.count == 5 and diff.compared == diff.comparison.sums_compared + diff.comparison.wider_compared + 3 \
        + len(OPS)


def test_machine_partings_list_each_machine_then_its_configurations(quick):
    here = _variant(quick)
    tuned = _variant(quick, environment={"MKL_CBWR": "COMPATIBLE"})
    other = _another_machine(quick)
    preset = quick["training"][0]["preset"]
    rows = machine_partings([tuned, here, other], preset)
    assert [r.label for r in rows] == [here.label, other.label, tuned.label]
    assert [r.configuration for r in rows] == [None, None, "MKL_CBWR=COMPATIBLE"]
    assert all(r.step == here.training[0].first_rel_1pct and r.steps == here.training[0].steps for r in rows)
    assert machine_partings([here], "no such preset") == ()


def test_configuration_effects_say_what_a_variable_changed_and_which_library_it_steers(quick):
    here = _variant(quick)
    tuned = _variant(quick, _other_bits(quick, "mm 128x64 @ 64x64"), environment={"MKL_CBWR": "COMPATIBLE"})
    (effect,) = configuration_effects([here, tuned])
    assert effect.setting == "MKL_CBWR=COMPATIBLE" and effect.library == "oneMKL"
    assert [d.name for d in effect.changed.differing] == ["mm 128x64 @ 64x64"]
    assert effect.machine.plain is here and effect.configuration is tuned


def test_same_dispatch_differences_need_the_same_torch_dispatch(quick):
    here = _variant(quick)
    same_dispatch = _another_machine(quick, _other_bits(quick, "tanh 100000"))
    other_dispatch = _variant(quick, _other_bits(quick, "exp 100000"), cpu_model="a third CPU",
                              cpu_capability=f"not {quick['provenance']['cpu_capability']}")
    twin = _variant(quick, cpu_model="a fourth CPU")  # same dispatch, same bits: nothing to show
    found = same_dispatch_differences([here, same_dispatch, other_dispatch, twin])
    # here and twin give the same bits; other_dispatch differs, but torch dispatched other kernels there
    assert [(d.comparison.left, d.comparison.right) for d in found] == [(here, same_dispatch), (same_dispatch, twin)]
    assert all([x.name for x in d.differing] == ["tanh 100000"] for d in found)


def test_bundled_machines_named_most_different_and_library_evidence(bundled):
    """What the page says is computed from the bundled files; these are invariants of that computation
    (which pair, ops and steps the files give is in docs/portability.md, not asserted here as a constant)."""
    most = most_different_pair(bundled)
    machines = real_machines(bundled)
    assert most is not None and most.machines == len(machines) >= 3
    for a in machines:
        for b in machines:
            if a is not b:
                assert pair_differences(compare_recordings(a.plain, b.plain)).count <= most.differences.count
    assert {bundled[most.left].provenance.cpu_vendor, bundled[most.right].provenance.cpu_vendor} >= {"GenuineIntel"}
    effects = configuration_effects(bundled)
    assert {e.setting for e in effects} >= {"MKL_CBWR=COMPATIBLE", "ATEN_CPU_CAPABILITY=default"}
    for e in effects:
        assert e.machine.plain.provenance.cpu_vendor == "AuthenticAMD" and e.changed.count > 0
    # the notes' operations are ones that the bundled Intel and AMD AVX512 captures really differ in
    intel = next(m.plain for m in machines if m.plain.provenance.cpu_vendor == "GenuineIntel")
    amd512 = next(m.plain for m in machines if m.plain.provenance.cpu_model == "AMD EPYC"
                  and m.plain.provenance.cpu_capability == "AVX512")
    differ = {d.name for d in pair_differences(compare_recordings(intel, amd512)).in_group("fingerprint operations")}
    assert set(INTEL_MKL_NOTE.operations) <= differ <= {op.name for op in OPS}
    assert any(intel in (d.comparison.left, d.comparison.right) for d in same_dispatch_differences(bundled))
