"""AppTest: the Mitigations page measures, explains, and reacts to its controls."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT, all_text


@pytest.fixture
def mi() -> AppTest:
    return AppTest.from_file(str(ROOT / "pages" / "mitigations.py"), default_timeout=TIMEOUT).run()


def test_every_section_renders_with_measured_numbers(mi):
    assert not mi.exception
    text = all_text(mi)
    for heading in ("Compute in float64", "Accumulate in a wider format", "Deterministic is not the same",
                    "An order-independent sum", "Accept the divergence", "Summary"):
        assert heading in text
    assert "measured live on this server" in text and "cited" in text
    assert "the order-independent sum gave **1 value**" in text
    assert "Not measured since this server started" in text  # no throughput timing while the page loads


def test_throughput_is_measured_on_demand_per_value_with_its_spread(monkeypatch, mi):
    import functools

    import core.machines.timing

    small = functools.partial(core.machines.timing.measure_throughput, matmul_n=128, sum_n=100_000, repeats=3)
    monkeypatch.setattr(core.machines.timing, "measure_throughput", small)
    mi.button(key="mi_measure").click().run()
    assert not mi.exception
    tp = next(d.value for d in mi.dataframe if "what it means" in d.value.columns)
    assert list(tp["operation"].str.split().str[0]) == ["matmul", "sum"]
    ratio = tp["float64 speed / float32 speed, per value (quartiles)"]
    assert ratio.str.fullmatch(r"\d+\.\d\d \(\d+\.\d\d–\d+\.\d\d\)").all(), list(ratio)
    for r, meaning in zip(ratio, tp["what it means"], strict=True):  # above 1 is explained, never bare
        if float(r.split()[0]) > 1:
            assert "noise" in meaning
    assert "min ago" in all_text(mi)
    mi.run()  # shared with later visitors and reruns: still shown
    assert any("what it means" in d.value.columns for d in mi.dataframe)


def test_storage_format_changes_the_wider_accumulation_table(mi):
    def table(at):
        return next(d.value for d in at.dataframe if "torch.sum accumulates in" in d.value.columns)

    before = table(mi)
    mi.selectbox(key="mi_storage").select("bfloat16").run()
    assert not mi.exception
    after = table(mi)
    assert set(after["torch.sum accumulates in"]) == {"bfloat16", "float32"}
    assert not before.equals(after)


def test_seed_study_button(mi):
    mi.number_input(key="mi_k").set_value(2).run()
    mi.button(key="mi_seeds").click().run()
    assert not mi.exception
    labels = [m.label for m in mi.metric]
    assert "Seed-to-seed spread of final loss (std, A)" in labels


def test_recorded_throughput_is_shown_with_its_provenance(monkeypatch, tmp_path):
    from core.recordings.store import capture, write_recording

    write_recording(capture(quick=True, log=lambda *_: None), tmp_path)
    monkeypatch.setenv("FP_RECORDINGS_DIR", str(tmp_path))
    at = AppTest.from_file(str(ROOT / "pages" / "mitigations.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "Recorded with `python -m scripts.capture`" in all_text(at)
    rec_table = next(d.value for d in at.dataframe if d.value.columns[0] == "device"
                     and d.value["device"].astype(str).str.startswith("recorded on ").any())
    assert rec_table["device"].str.contains("recorded on ").all()


def test_the_order_independent_sum_says_which_path_this_cpu_takes(monkeypatch, mi):
    import core.kernels.reprosum

    assert "one compiled pass (numba)" in all_text(mi) and "could not be imported" not in all_text(mi)
    monkeypatch.setattr(core.kernels.reprosum, "_widesum", lambda: None)  # as where numba cannot be imported
    at = AppTest.from_file(str(ROOT / "pages" / "mitigations.py"), default_timeout=TIMEOUT).run()
    assert not at.exception
    assert "could not be imported on this server" in all_text(at) and "the order-independent sum gave **1 value**" in (
        all_text(at))
