"""AppTest: the CPU vs GPU page without recordings, with a real (CPU) recording, and with broken ones."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from core.recordings.compare import (
    INTEL_MKL_NOTE,
    compare_recordings,
    configuration_effects,
    default_pair,
    machine_key,
    machine_partings,
    most_different_pair,
    pair_differences,
)
from core.recordings.fingerprint import fingerprint, op_fingerprint
from core.recordings.store import TRAINING_PRESETS, capture, load_recordings, write_recording
from tests.pages.conftest import ROOT, TIMEOUT, all_text, shown
from ui.cpu_vs_gpu_view import CAPTURE_COMMAND, CHECK_COMMAND


@pytest.fixture(scope="module")
def recording_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("recordings")
    write_recording(capture(quick=True, log=lambda *_: None), out)
    return out


def page(monkeypatch, directory) -> AppTest:
    monkeypatch.setenv("FP_RECORDINGS_DIR", str(directory))
    return AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT).run()


def table(at):
    return next(d.value for d in at.dataframe if "tier" in d.value.columns)


def test_without_recordings_nothing_is_faked(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path)
    assert not at.exception
    t = table(at)
    assert "recorded" not in set(t["tier"])
    assert {"live", "model", "exact"} <= set(t["tier"])
    text = all_text(at)
    assert "No recording for" in text and "unmeasured" in text
    assert "not yet checked against a real GPU" in " ".join(t["note"])


def test_controls_change_the_vector(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path)
    first = table(at)["bits"].tolist()
    at.selectbox(key="cg_dtype").select("float64").run()
    assert not at.exception and table(at)["bits"].tolist() != first
    assert all(len(b) == 18 for b in table(at)["bits"])
    t = table(at)
    # different bits read differently, with the fewest digits that do it (the same count for every row)
    assert t.groupby("bits")["value"].nunique().eq(1).all() and t["value"].nunique() == t["bits"].nunique()
    at.selectbox(key="cg_gen").select("alternating").run()
    at.selectbox(key="cg_n").select(1000).run()
    assert not at.exception


def test_with_a_recording_it_is_replayed_and_labelled(monkeypatch, recording_dir):
    at = page(monkeypatch, recording_dir)
    at.selectbox(key="cg_n").select(100_000).run()
    assert not at.exception
    t = table(at)
    rec_rows = t[t["tier"] == "recorded"]
    assert len(rec_rows) == 1 and rec_rows.iloc[0]["note"].startswith("recorded on ")
    live_all = t[t["where"].str.startswith("CPU, ") & (t["tier"] == "live")].iloc[-1]
    assert rec_rows.iloc[0]["bits"] == live_all["bits"]  # same machine, same threads: same bits
    assert "32 of 32 sums bit-identical" in all_text(at)


def test_tampered_and_broken_recordings_are_refused(monkeypatch, recording_dir, tmp_path):
    src = next(recording_dir.glob("*.json"))
    data = json.loads(src.read_text())
    for e in data["sums"]:
        e["vector_sha256"] = "f" * 64
    (tmp_path / "tampered.json").write_text(json.dumps(data))
    (tmp_path / "broken.json").write_text("[]")
    at = page(monkeypatch, tmp_path)
    at.selectbox(key="cg_n").select(100_000).run()
    assert not at.exception
    assert any("SHA-256 differs" in e.value for e in at.error)
    assert any("Recording refused: broken.json" in w.value for w in at.warning)
    assert "recorded" not in set(table(at)["tier"])


def test_bundled_machines_side_by_side_with_fingerprints(monkeypatch):
    monkeypatch.delenv("FP_RECORDINGS_DIR", raising=False)
    at = AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    text = all_text(at)
    ops = op_fingerprint()
    assert f"Fingerprint of this server: **`{fingerprint(ops)}`**" in text
    recs, _ = load_recordings()
    first, second = default_pair(recs)
    left, right = recs[first], recs[second]
    assert machine_key(left) != machine_key(right)  # two machines, not one twice
    assert not left.provenance.environment and not right.provenance.environment  # each in its plain configuration
    cmp = compare_recordings(left, right)
    summary = next(d.value for d in at.dataframe if "results" in d.value.columns)
    assert summary["compared"].tolist()[:4] == [cmp.sums_compared, cmp.wider_compared, cmp.matmuls_compared,
                                                cmp.ops_compared]
    assert summary["bit-identical"].tolist()[0] == cmp.sums_identical
    assert any("part" in m.value or "same bits in every result" in m.value for m in at.markdown)
    facts = next(d.value for d in at.dataframe if "fact" in d.value.columns and len(d.value.columns) == 3)
    assert "torch CPU capability (kernel dispatch)" in facts["fact"].tolist()
    # the same comparison the other way round, picked with the selectboxes
    at.selectbox(key="cg_left").select(second).run()
    at.selectbox(key="cg_right").select(first).run()
    assert not at.exception


def test_bundled_page_opens_on_the_most_different_machines_and_names_what_differs(monkeypatch):
    """Issue 25: the pair, the differing results, the parting steps and the library evidence are the ones
    core computes from the bundled files (nothing here is a constant of one machine)."""
    monkeypatch.delenv("FP_RECORDINGS_DIR", raising=False)
    at = AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    recs, _ = load_recordings()
    most = most_different_pair(recs)
    assert (at.selectbox(key="cg_left").value, at.selectbox(key="cg_right").value) == (most.left, most.right)
    text = shown(all_text(at))
    assert (f"Of the **{most.machines} real machines**" in text and f"{recs[most.left].machine}** and "
            f"**{recs[most.right].machine}** differ most: {most.differences.count} of the "
            f"{most.differences.compared}" in text)
    diff = pair_differences(compare_recordings(recs[most.left], recs[most.right]))
    listing = shown(next(m.value for m in at.markdown if m.value.startswith("What gives other bits")))
    for d in diff.differing:  # every differing result is named, in its group's line
        line = next(x for x in listing.splitlines() if x.startswith(f"- **{d.group}**"))
        assert d.name in line, (d.group, d.name)
    # the parting steps: one row per recorded machine, each cell the recorded step
    table = next(df.value for df in at.dataframe if "capture" in df.value.columns)
    for preset in TRAINING_PRESETS:
        rows = machine_partings(recs, preset)
        assert table["machine"].tolist() == [r.machine for r in rows]
        assert table[preset].tolist() == [f"step {r.step}" if r.step else f"never within {r.steps}" for r in rows]
    # which library chose: each configuration capture against its machine, and the cited notes
    effects = next(df.value for df in at.dataframe if "steers" in df.value.columns)
    assert sorted(set(effects["setting"])) == sorted({e.setting for e in configuration_effects(recs)})
    for e in configuration_effects(recs):
        mine = effects[effects["setting"] == e.setting]
        for _, row in mine.iterrows():
            names = [x.name for x in e.changed.in_group(row["group"])]
            assert row["which"] == (", ".join(names) or "none")
    assert INTEL_MKL_NOTE.text in text and INTEL_MKL_NOTE.source in text
    assert any(c.value == f"{CHECK_COMMAND}\n{CAPTURE_COMMAND}" for c in at.code)
