"""AppTest: the CPU vs GPU page without recordings, with a real (CPU) recording, and with broken ones."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from core.recordings.capture import capture
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
from core.recordings.store import TRAINING_PRESETS, load_recordings, write_recording
from tests.pages.conftest import FOLDED_KEYS, ROOT, TIMEOUT, all_text, shown
from ui.cpu_vs_gpu_view import CAPTURE_COMMAND, CHECK_COMMAND
from ui.render import WORD_JOINER

# The page's folded sections are made only once opened (ui.crowd.folded): these tests read them open
FOLDED = FOLDED_KEYS["cpu_vs_gpu"]


def opened(at: AppTest) -> AppTest:
    for key in FOLDED:
        at.session_state[key] = True
    return at


@pytest.fixture(scope="module")
def recording_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("recordings")
    write_recording(capture(quick=True, log=lambda *_: None), out)
    return out


def page(monkeypatch, directory) -> AppTest:
    monkeypatch.setenv("FP_RECORDINGS_DIR", str(directory))
    return opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()


def table(at):
    return next(d.value for d in at.dataframe if "origin" in d.value.columns)


def test_without_recordings_nothing_is_faked(monkeypatch, tmp_path):
    at = page(monkeypatch, tmp_path)
    assert not at.exception
    t = table(at)
    assert "recorded" not in set(t["origin"])
    assert {"live", "model", "exact"} <= set(t["origin"])
    text = all_text(at)
    assert "No recording for" in text and "unmeasured" in text
    assert "its match rate on a real GPU is unmeasured" in " ".join(t["note"])


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
    rec_rows = t[t["origin"] == "recorded"]
    assert len(rec_rows) == 1 and rec_rows.iloc[0]["note"].startswith("recorded on ")
    live_all = t[t["where"].str.startswith("CPU, ") & (t["origin"] == "live")].iloc[-1]
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
    assert "recorded" not in set(table(at)["origin"])


def test_bundled_machines_side_by_side_with_fingerprints(monkeypatch):
    monkeypatch.delenv("FP_RECORDINGS_DIR", raising=False)
    at = opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()
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


def test_gpu_text_matches_the_bundled_recordings_and_facts_are_folded():
    """The intro promised results "recorded on real GPUs" while data/recordings has CPU ones only; and it told
    visitors how to capture a GPU, which only a developer can act on (that stays in a collapsed section)."""
    from core.recordings.store import cached_recordings, recordings_dir

    at = opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()
    assert not at.exception
    recs, _ = cached_recordings(recordings_dir())
    status = next(c.value for c in at.caption if ("GPU" in c.value and "bundled" in c.value) or "Live on" in c.value)
    if any(r.is_gpu for r in recs):
        assert status.startswith("Recorded on real GPUs") or status.startswith("Live on")
    else:
        assert "No GPU recording is bundled" in status and "**model**" in status
    assert "python -m scripts" not in status and "FP_RECORDINGS_DIR" not in all_text(at)
    assert "recorded** on real GPUs" not in all_text(at)
    assert any(e.label.startswith("What this server has") for e in at.expander)
    own = next(e for e in at.expander if e.label.startswith("Bring your own GPU"))
    assert "python -m scripts.capture" in " ".join(m.value for m in own.markdown)


def test_the_first_screen_sets_the_cpu_against_a_gpu_order_and_the_exact_sum():
    """The page leads with the CPU against the GPU (the GPU's order as a labelled model when nothing better
    exists), and every figure of its sentence is the table's."""
    at = opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()
    assert not at.exception
    labels = [m.label for m in at.metric][:3]
    assert labels[0].startswith("CPU, live") and labels[1].startswith("GPU") and labels[2] == "Exact sum, rounded once"
    t = table(at)
    gpu_row = t[t["where"].str.startswith("CUDA model, SM count 132")].iloc[0] if labels[1].startswith(
        "GPU order, modelled") else None
    cpu_row = t[(t["origin"] == "live") & t["where"].str.startswith("CPU")].iloc[-1]
    assert at.metric[0].value == cpu_row["value"]
    if gpu_row is not None:
        assert at.metric[1].value == gpu_row["value"]
        assert f"{int(cpu_row['ULPs from the correctly rounded sum']):,} ULP from the exact sum" in all_text(at)
    assert "Neither device is the reference" in all_text(at)


def test_bundled_page_opens_on_the_most_different_machines_and_names_what_differs(monkeypatch):
    """The pair, the differing results, the parting steps and the library evidence are the ones
    core computes from the bundled files (nothing here is a constant of one machine)."""
    monkeypatch.delenv("FP_RECORDINGS_DIR", raising=False)
    at = opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()
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


# ------------------------------------------------------------------ a visitor's own capture file, uploaded

BUNDLED_FILES = sorted((ROOT / "data" / "recordings").glob("*.json"))
HOSTILE = "<img src=x onerror=alert(1)> **bold** [link](https://example.com) :material/lock: `tick`"


def bundled_page(monkeypatch) -> AppTest:
    monkeypatch.delenv("FP_RECORDINGS_DIR", raising=False)
    return opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    key = next(u.key for u in at.file_uploader if u.key.startswith("cg_upload_"))
    return at.file_uploader(key=key).upload(name, data, "application/json").run()


def markdown_sources(at: AppTest) -> list[str]:
    """Everything the page gave Streamlit's markdown renderer."""
    return [str(e.value) for kind in ("markdown", "caption", "error", "warning", "success", "info")
            for e in getattr(at, kind)]


def test_an_uploaded_recording_joins_the_page_labelled_as_yours_until_removed(monkeypatch):
    from core.recordings.store import UPLOADED, load_recordings
    from core.recordings.upload import recording_from_upload

    at = bundled_page(monkeypatch)
    assert not at.exception and not any(UPLOADED in s for s in markdown_sources(at))
    bundled, _ = load_recordings()
    src = BUNDLED_FILES[-1]
    mine = recording_from_upload("my-gpu.json", src.read_bytes())
    at = upload(at, "my-gpu.json", src.read_bytes())
    assert not at.exception
    card = next(i.value for i in at.info if UPLOADED in i.value)
    assert "my-gpu.json" in shown(card) and mine.device in shown(card) and mine.provenance.captured_at in shown(card)
    t = table(at)
    row = t[t["where"] == mine.machine]
    assert len(row) == 1 and row.iloc[0]["origin"] == "recorded" and row.iloc[0]["note"] == mine.label
    twin = t[t["where"] == mine.device]  # the same file, bundled: the same bits, told apart by its label
    assert row.iloc[0]["bits"] == twin.iloc[0]["bits"] and mine.label.startswith(UPLOADED)
    assert any(shown(m.value).startswith(f"**{mine.label}**: ") for m in at.markdown)  # the model against it
    assert at.selectbox(key="cg_left").value == len(bundled)  # the pair opens on it
    assert at.selectbox(key="cg_left").options[-1] == mine.label
    facts = next(d.value for d in at.dataframe if "fact" in d.value.columns and len(d.value.columns) == 3)
    assert f"{mine.machine} (my-gpu.json)" in facts.columns
    partings = next(df.value for df in at.dataframe if "capture" in df.value.columns)
    assert partings["machine"].tolist()[-1] == mine.machine
    fingerprints = next(df.value for df in at.dataframe if "operations compared" in df.value.columns)
    assert fingerprints["recording"].tolist()[-1] == mine.label
    # kept across reruns; a broken file is refused next to the uploader and the earlier upload stays
    at.selectbox(key="cg_dtype").select("float64").run()
    assert not at.exception and mine.machine in table(at)["where"].tolist()
    at = upload(at, "broken.json", b'{"format_version": 2, "provenance"')
    assert not at.exception
    assert any("broken.json is not JSON" in shown(e.value) for e in at.error)
    assert any(shown(c.value) == "Still using your earlier upload, my-gpu.json." for c in at.caption)
    assert mine.machine in table(at)["where"].tolist()
    # removed: the uploader is emptied and the pair opens on the bundled machines again
    at.button(key="cg_upload_remove").click().run()
    assert not at.exception
    assert mine.machine not in table(at)["where"].tolist() and not any(UPLOADED in s for s in markdown_sources(at))
    assert [u.key for u in at.file_uploader] == ["cg_upload_1"] and at.file_uploader[0].value is None
    assert (at.selectbox(key="cg_left").value, at.selectbox(key="cg_right").value) == default_pair(bundled)


def test_bad_uploads_get_a_message_next_to_the_uploader_and_the_page_stays(monkeypatch):
    from core.recordings.store import UPLOADED
    from core.recordings.upload import MAX_CAPTURE_BYTES

    at = bundled_page(monkeypatch)
    before = table(at)["where"].tolist()
    schema_broken = json.loads(BUNDLED_FILES[0].read_text())
    schema_broken["provenance"]["device_kind"] = "tpu"
    cases = [
        ("empty.json", b"", "empty.json is empty"),
        ("text.json", b"hello", "text.json is not JSON (line 1, column 1"),
        ("latin1.json", '{"cpu": "caf\u00e9"}'.encode("latin-1"), "latin1.json is not UTF-8 text"),
        ("schema.json", json.dumps(schema_broken).encode(), "schema.json is not a recording this page can use: "
                                                            "field provenance.device_kind"),
        ("huge.json", b" " * (MAX_CAPTURE_BYTES + 1), f"at most {MAX_CAPTURE_BYTES:,} bytes (4 MB) are accepted"),
    ]
    for name, data, says in cases:
        at = upload(at, name, data)
        assert not at.exception, name
        errors = [shown(e.value) for e in at.error]
        assert any(says in e for e in errors), (name, errors)
        assert table(at)["where"].tolist() == before  # nothing joined, nothing lost
        assert not any(UPLOADED in s for s in markdown_sources(at))
        assert any(e.label.startswith("Bring your own GPU") for e in at.expander)
    help_text = at.file_uploader[0].help
    assert "At most 4 MB" in help_text and f"{MAX_CAPTURE_BYTES:,} bytes" in help_text


def test_markup_in_an_uploaded_recording_is_shown_as_text(monkeypatch):
    data = json.loads(BUNDLED_FILES[0].read_text())
    data["provenance"]["cpu_model"] = HOSTILE
    data["provenance"]["environment"] = {}
    at = upload(bundled_page(monkeypatch), f"{HOSTILE}.json", json.dumps(data).encode())
    assert not at.exception
    sources = markdown_sources(at)
    quoting = [s for s in sources if HOSTILE in shown(s)]
    assert len(quoting) >= 3  # the card, the model's line, the pair's verdict
    for s in sources:  # what reaches the markdown renderer is escaped: no tag, link, icon or code span
        live = re.sub(r"\\[!-/:-@\[-`{-~]", "", s).replace(WORD_JOINER, " ")  # the source's unescaped part
        assert "<img" not in live and "](https" not in live and "`tick`" not in live, s
        assert ":material/lock:" not in live and "**bold**" not in live, s
    assert any(HOSTILE in w for w in table(at)["where"])  # table cells are plain text already


def test_other_causes_than_a_sums_order_are_taught_where_the_story_asks_why_devices_differ():
    """exp, tanh, log and sigmoid are not correctly rounded and libraries differ: measured here against mpmath,
    folded on the story's CPU vs GPU page, with the causes that are no sum's order named."""
    at = opened(AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT)).run()
    assert not at.exception
    section = next(e for e in at.expander if e.label.startswith("Not every difference is a sum's order"))
    text = " ".join(m.value for m in section.markdown) + " ".join(c.value for c in section.caption)
    assert "mpmath" in text
    for cause in ("FMA contraction", "cuDNN's TF32 default for convolutions", "Fusion by compilers"):
        assert cause in text, cause
    assert any("exp" in d.value.to_string() for d in section.dataframe)


def test_folded_sections_cost_nothing_until_opened():
    """A room opening the link pays for the first screen only: closed, the folded sections hold nothing."""
    at = AppTest.from_file(str(ROOT / "pages" / "cpu_vs_gpu.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    for label in ("Two real machines side by side", "The training pair on a GPU", "How faithful is the GPU model?"):
        section = next(e for e in at.expander if e.label == label)
        assert not section.markdown and not section.dataframe and not section.get("vega_lite_chart"), label
    assert not at.get("vega_lite_chart")[1:]  # only the first screen's stages chart is drawn
