"""core.recordings.fingerprint and the machine facts of core.machines.devices: stable, comparable, and able
to tell machines apart."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import pathlib
import subprocess
import sys

import pytest
import torch

from core.machines.devices import machine_facts
from core.machines.globalstate import GlobalState, torch_threads
from core.recordings.fingerprint import (
    GROUPS,
    OPS,
    SHARED_OPS,
    _compute,
    compare_ops,
    fingerprint,
    first_differing_group,
    group_fingerprints,
    op_fingerprint,
)
from tests.machine import ONEMKL, ONEMKL_REASON

ROOT = pathlib.Path(__file__).resolve().parents[3]
SHARED_SCRIPT = ROOT.parent / "shared" / "recordings" / "op_fingerprint.py"


def test_every_operation_is_hashed_once_in_a_declared_group():
    ops = op_fingerprint()
    assert list(ops) == [op.name for op in OPS] and len(set(ops)) == len(OPS)
    assert {op.group for op in OPS} == set(GROUPS)
    assert all(len(h) == 16 and int(h, 16) >= 0 for h in ops.values())


def test_repeatable_in_one_process_and_leaves_global_state_alone():
    before = GlobalState.capture()
    first = _compute()
    assert _compute() == first
    assert GlobalState.capture() == before
    assert op_fingerprint() is op_fingerprint()  # computed once per process


@pytest.mark.skipif(not SHARED_SCRIPT.is_file(), reason="shared/recordings/op_fingerprint.py is not beside the repo")
def test_the_first_twelve_are_the_shared_scripts_operations():
    """An independent check: the script that other machines ran prints the same hashes here."""
    spec = importlib.util.spec_from_file_location("shared_op_fingerprint", SHARED_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), torch_threads(torch.get_num_threads()):
        module.main()
    printed = dict(line.split("  ", 1)[::-1] for line in out.getvalue().splitlines()[1:])
    ours = op_fingerprint()
    assert list(printed) == [op.name for op in SHARED_OPS]
    assert printed == {op.name: ours[op.name] for op in SHARED_OPS}


def test_fingerprint_changes_with_any_single_operation():
    ops = op_fingerprint()
    fp = fingerprint(ops)
    assert len(fp) == 12
    for name in ops:
        changed = dict(ops, **{name: "0" * 16 if ops[name] != "0" * 16 else "1" * 16})
        assert fingerprint(changed) != fp, name
        groups = group_fingerprints(changed)
        group = next(op.group for op in OPS if op.name == name)
        assert [g for g in GROUPS if groups[g] != group_fingerprints(ops)[g]] == [group]
    with pytest.raises(KeyError):
        fingerprint({})
    partial = {k: v for k, v in ops.items() if k in {op.name for op in SHARED_OPS}}
    assert group_fingerprints(partial)["training step"] is None
    assert group_fingerprints(partial)["reductions"] == group_fingerprints(ops)["reductions"]


def test_comparison_names_what_differs_and_what_was_not_recorded():
    ops = op_fingerprint()
    other = dict(ops)
    other["tanh backward 128x64"] = "f" * 16
    del other["exp 100000"]
    cmp = compare_ops(ops, other)
    verdicts = {c.name: c.verdict for c in cmp}
    assert verdicts["tanh backward 128x64"] == "other bits"
    assert verdicts["exp 100000"] == "not recorded on both"
    assert sum(v == "same bits" for v in verdicts.values()) == len(OPS) - 2
    assert first_differing_group(cmp) == "training step"
    assert first_differing_group(compare_ops(ops, ops)) is None


def test_machine_facts_are_plain_and_name_the_dispatch():
    facts = machine_facts()
    assert json.loads(json.dumps(facts)) == facts
    assert facts["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert facts["logical_cores"] == os.cpu_count() and facts["numpy_version"]
    for key in ("cpu_model", "cpu_vendor", "blas", "os", "architecture", "python_version"):
        assert key in facts


def _fingerprint_in_subprocess(env: dict[str, str]) -> dict[str, str]:
    code = "import json; from core.recordings.fingerprint import op_fingerprint; print(json.dumps(op_fingerprint()))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(str(torch.backends.cpu.get_cpu_capability()) == "DEFAULT", reason="already the generic kernels")
def test_a_fresh_process_reproduces_the_fingerprint_and_other_kernels_change_it():
    """The same machine in a new process gives the same hashes; forcing torch's generic (non-SIMD) kernels
    must change at least one operation, or the fingerprint could not tell machines apart."""
    assert _fingerprint_in_subprocess({}) == op_fingerprint()
    generic = _fingerprint_in_subprocess({"ATEN_CPU_CAPABILITY": "default"})
    differ = [c for c in compare_ops(op_fingerprint(), generic) if c.verdict == "other bits"]
    assert differ, "the generic kernels gave the same bits in every operation"
    if not ONEMKL:
        pytest.skip(f"the rest checks that matrix products are not torch's own kernels: {ONEMKL_REASON}")
    assert all(c.group != "matrix products" for c in differ)  # matrix products are oneMKL's, not ATen's kernels


def test_the_quick_fingerprint_script_compares_this_machine_with_each_recording(tmp_path, capsys):
    """`python -m scripts.fingerprint`: the command the CPU vs GPU page offers a visitor for their own machine."""
    from scripts import fingerprint as script

    ops = op_fingerprint()
    src = sorted((ROOT / "data" / "recordings").glob("*.json"))[0]
    data = json.loads(src.read_text())
    data["op_fingerprint"] = dict(ops, **{"exp 100000": "0" * 16 if ops["exp 100000"] != "0" * 16 else "1" * 16})
    (tmp_path / "other.json").write_text(json.dumps(data))
    (tmp_path / "broken.json").write_text("{}")
    assert script.main(["--recordings", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"fingerprint {fingerprint(ops)}" in out
    assert all(f"  {h}  {name}" in out for name, h in ops.items())
    assert f"other.json: {len(OPS) - 1} of {len(OPS)} operations with the same bits; other bits in: exp 100000" in out
    assert "not read: broken.json" in out
