"""Judging a browser's report: an honest report passes with what it shows, and anything a client could forge is
refused with a reason, leaving nothing changed."""

from __future__ import annotations

import copy
import math
from fractions import Fraction

import numpy as np
import pytest

from core.arith.elementary import reference
from core.arith.formats import FORMATS, bits_of, bits_of_value, round_to_format, value_of_bits
from core.arith.vectors import VectorSpec, generate
from core.kernels import webgpu
from core.kernels.sums import sequential
from core.studies.your_gpu import (
    ELEMENTWISE,
    FUNCTIONS,
    ReportError,
    Unavailable,
    YourGpu,
    arguments,
    as_recording,
    browser_job,
    expected,
    judge,
    supported,
)

F32 = FORMATS["float32"]
SPEC = VectorSpec(kind="normal", n=50_000, seed=0, storage="float32")


@pytest.fixture(scope="module")
def exp():
    return expected(SPEC, generate(SPEC).values)


def honest(exp) -> dict:
    """What a correct GPU sends: the CPU's left-to-right bits, the model's tree, correctly rounded functions,
    IEEE additions and fused multiply-adds."""
    x = generate(exp.spec).values
    head = x[:768]
    fused = [bits_of_value(round_to_format(Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c)), F32), F32)
             for a, b, c in zip(head[0::3], head[1::3], head[2::3], strict=True)]
    report = {"status": "ok", "job": browser_job(exp.spec)["job"], "n": exp.spec.n, "digest": list(exp.digest),
              "adapter": {"vendor": "acme", "architecture": "tile-9"}, "browser": "Chrome 156",
              "sequential": bits_of(sequential(x)), "tree": bits_of(webgpu.workgroup_tree(x)),
              "subgroup": {"bits": bits_of(webgpu.workgroup_tree(x[::-1].copy())), "size": 32},
              "atomic": [bits_of(webgpu.workgroup_tree(x))] * (webgpu.ATOMIC_RUNS - 1) + [bits_of(sequential(x))],
              "add": [bits_of(v) for v in head[0:512:2] + head[1:512:2]], "mul_add": fused, "fma": fused,
              "first_ms": 300, "total_ms": 900}
    for name, args in arguments().items():
        report[name] = [bits_of_value(reference(name, float(a), F32), F32) for a in args]
    return report


def test_an_honest_report_shows_what_the_gpu_did(exp):
    r = judge(honest(exp), exp)
    assert isinstance(r, YourGpu)
    assert r.adapter == "acme tile-9" and r.subgroup_size == 32
    seq, tree = r.sums[0], r.sums[1]
    assert seq.matched and "same bits as this server's CPU" in seq.check
    assert tree.matched and tree.check == "the model matched your GPU bit for bit"
    assert r.distinct_atomic == 2 and "2 different sums in 8 runs" in r.sums[-1].check
    assert all(f.worst_ulps == 0 and f.beyond == 0 and f.exact_share == 1 for f in r.functions)
    assert r.add_matches == ELEMENTWISE
    assert r.mul_add["mul_add"][0] == ELEMENTWISE and r.mul_add["differ"] > 0  # the triples tell the two apart
    assert all(e.within_bound for s in r.sums for e in s.errors)


def test_a_model_miss_is_shown_not_refused(exp):
    report = honest(exp)
    report["tree"] = report["sequential"]  # another honest order: the model's prediction fails, nothing is refused
    r = judge(report, exp)
    assert not r.sums[1].matched and r.sums[1].check.startswith("the model missed")


def test_functions_beyond_the_wgsl_allowance_are_counted(exp):
    report = honest(exp)
    args = arguments()["exp"]
    i = int(np.argmin(np.abs(args)))  # |x| small: the allowance is about 3 ULPs
    report["exp"][i] += 40
    r = judge(report, exp)
    f = next(f for f in r.functions if f.name == "exp")
    assert f.worst_ulps == 40 and f.beyond == 1


@pytest.mark.parametrize("forge, message", [
    (lambda r: r.update(tree=bits_of(np.float32(1e6))), "impossible"),
    (lambda r: r["atomic"].__setitem__(0, bits_of(np.float32(-1e4))), "impossible"),
    (lambda r: r.update(sequential=bits_of(np.float32(np.inf))), "impossible"),
    (lambda r: r.update(sequential=2**32), "32-bit pattern"),
    (lambda r: r.update(sequential=True), "32-bit pattern"),
    (lambda r: r.update(sequential="0x447a0000"), "32-bit pattern"),
    (lambda r: r.update(atomic=[0] * 10_000), "must hold 8"),
    (lambda r: r.update(exp=r["exp"][:-1]), "must hold 256"),
    (lambda r: r.update(digest=[1, 2]), "other values"),
    (lambda r: r.update(job="v1-normal-999-0"), "another vector"),
    (lambda r: r.update(n=10), "another length"),
    (lambda r: r.update(status="bogus"), "no known status"),
    (lambda r: r.update(subgroup={"bits": r["tree"], "size": 48}), "power of two"),
    (lambda r: r.update(subgroup=[1, 2]), "not an object"),
    (lambda r: r["log"].__setitem__(3, bits_of(np.float32(np.nan))), "not finite"),
])
def test_a_forged_report_is_refused(exp, forge, message):
    report = honest(exp)
    forge(report)
    with pytest.raises(ReportError, match=message):
        judge(report, exp)


def test_not_an_object_is_refused(exp):
    for junk in (None, [], "ok", 3):
        with pytest.raises(ReportError):
            judge(junk, exp)


def test_names_are_kept_short_and_printable(exp):
    report = honest(exp)
    report["adapter"] = {"vendor": "x" * 10_000, "architecture": "a\u202eb\x00c"}
    r = judge(report, exp)
    assert len(r.vendor) == 120 and r.architecture == "abc"


def test_no_webgpu_is_a_reason_not_an_error(exp):
    r = judge({"status": "unavailable", "reason": "the browser offers WebGPU but gave no GPU adapter"}, exp)
    assert isinstance(r, Unavailable) and "no GPU adapter" in r.reason


def test_the_job_is_small_for_any_n():
    import json

    big = VectorSpec(kind="normal", n=10_000_000, seed=0, storage="float32")
    assert len(json.dumps(browser_job(big))) < 40_000  # kilobytes, not the 40 MB of the vector
    assert len(browser_job(big)["args"]) == len(FUNCTIONS) * ELEMENTWISE


def test_which_vectors_run_on_your_gpu():
    assert supported(SPEC)
    assert not supported(VectorSpec(kind="normal", n=1_000, storage="float64"))
    assert not supported(VectorSpec(kind="normal", n=100, storage="float32"))  # the multiply-adds need 768


def test_the_exact_reference_of_the_arguments():
    x = float(arguments()["exp"][0])
    assert value_of_bits(bits_of_value(reference("exp", x, F32), F32), F32) == reference("exp", x, F32)
    assert math.isclose(float(reference("exp", x, F32)), math.exp(x), rel_tol=1e-7)


def test_a_report_judged_twice_is_judged_alike(exp):
    report = honest(exp)
    assert judge(copy.deepcopy(report), exp) == judge(report, exp)


def test_a_recording_of_your_gpu_round_trips_through_the_upload():
    import json

    from core.recordings.upload import recording_from_upload, upload_fidelity

    spec = VectorSpec(kind="uniform", n=10_000, seed=0, storage="float32")  # a vector of the recorded suite
    e = expected(spec, generate(spec).values)
    r = judge(honest(e), e)
    data = json.dumps(as_recording(r, "2026-12-06T02:30:00Z")).encode()
    rec = recording_from_upload("webgpu-acme.json", data)
    assert rec.uploaded and rec.is_gpu and rec.provenance.device_kind == "webgpu"
    assert rec.label.endswith("recorded through WebGPU in Chrome 156 on acme tile-9 on 2026-12-06")
    assert rec.find_sum("uniform", 0, 10_000, "float32").sum_hex == f"{r.sums[1].bits[0]:08x}"
    fid = upload_fidelity(rec)
    assert (fid.compared, fid.matched) == (1, 1) and "WebGPU workgroup-tree model" in fid.conditions


def test_the_room_keeps_one_entry_per_session_bounded_and_resettable(exp, tmp_path):
    from core.crowd.room import Room
    from core.studies.your_gpu import room_entry, room_summary

    room = Room(tmp_path / "room.db", max_entries=3, min_interval_s=5)
    good = judge(honest(exp), exp)
    assert room.add("a", room_entry(good), now=100) is None
    assert "one send every 5 s" in room.add("a", room_entry(good), now=101)
    assert room.add("a", room_entry(good), now=106) is None  # replaced, not added
    other = honest(exp)
    other["tree"] = other["sequential"]
    other["adapter"] = {"vendor": "bolt", "architecture": ""}
    assert room.add("b", room_entry(judge(other, exp)), now=100) is None
    assert room.add("c", room_entry(good), now=100) is None
    assert "full" in room.add("d", room_entry(good), now=100)
    s = room_summary(room.entries(), exp.spec)
    assert s.gpus == 3 and s.model_matches == 2 and s.cpu_matches == 3
    assert dict((k, d) for k, _, d in s.kernels)["workgroup tree (modelled)"] == 2
    assert s.adapters == (("acme tile-9", 2), ("bolt", 1))
    assert room_summary(room.entries(), VectorSpec(kind="uniform", n=50_000, storage="float32")).other_vectors == 3
    Room(tmp_path / "room.db").reset()  # another process's handle on the same file
    assert room.entries() == []


def test_a_room_is_shared_by_processes(exp, tmp_path):
    import subprocess
    import sys

    from core.crowd.room import Room
    from core.studies.your_gpu import room_entry

    path = tmp_path / "shared.db"
    Room(path).add("here", room_entry(judge(honest(exp), exp)))
    code = ("import sys; from core.crowd.room import Room; r = Room(sys.argv[1]); print(len(r.entries()), "
            "r.entries()[0].vendor)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "acme"]


def test_three_numbers_on_a_gpu_are_judged_against_the_cpu():
    from core.studies.your_gpu import TripleOnGpu, judge_triple, triple_job

    stored = (bits_of(np.float32(1e8)), bits_of(np.float32(-1e8)), bits_of(np.float32(1.0)))
    cpu = (bits_of(np.float32(1.0)), bits_of(np.float32(0.0)))
    job = triple_job(stored)["job"]
    ok = judge_triple({"status": "ok", "job": job, "groupings": list(cpu), "adapter": {"vendor": "acme"}}, stored, cpu)
    assert isinstance(ok, TripleOnGpu) and ok.same_as_cpu and ok.adapter == "acme"
    other = judge_triple({"status": "ok", "job": job, "groupings": [cpu[1], cpu[1]]}, stored, cpu)
    assert not other.same_as_cpu
    for bad in ({"status": "ok", "job": job, "groupings": [1]}, {"status": "ok", "job": "x", "groupings": list(cpu)},
                {"status": "ok", "job": job, "groupings": [-1, 2]}):
        with pytest.raises(ReportError):
            judge_triple(bad, stored, cpu)
