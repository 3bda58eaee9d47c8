"""AppTest: the Mitigations page measures, explains, and reacts to its controls."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.training.divergence import DEFAULT_SEEDS, SEED_RULE
from tests.pages.conftest import FOLDED_KEYS, ROOT, TIMEOUT, all_text, shown

FOLDED = FOLDED_KEYS["mitigations"]


def _page(opened: bool = True) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / "mitigations.py"), default_timeout=TIMEOUT)
    for key in FOLDED if opened else ():
        at.session_state[key] = True  # as a click on the section's label does
    return at


@pytest.fixture
def mi() -> AppTest:
    return _page().run()


def test_folded_sections_are_made_only_once_opened():
    """A room opening the page pays for its first screen: the float64 lab sums, the determinism runs and the
    order-independent table are not made until their section is opened; the summary's costs are there either way."""
    at = _page(opened=False).run()
    assert not at.exception
    assert all(not e.proto.expanded for e in at.expander)  # depth is folded away
    text = all_text(at)
    assert "the order-independent sum gave" not in text and "Not measured since this server started" not in text
    assert "results in" not in " ".join(m.label for m in at.metric)
    assert len(_summary(at)) == 5
    at.session_state["mi_open_order"] = True
    at.run()
    assert "the order-independent sum gave **1 value**" in all_text(at)


def _summary(at: AppTest):
    return next(t.value for t in at.table if t.value.index.name == "mitigation")


def test_every_section_renders_with_measured_numbers(mi):
    assert not mi.exception
    text = all_text(mi)
    labels = [e.label for e in mi.expander]
    for heading in ("Compute in float64", "Accumulate in a wider format", "Deterministic is not the same",
                    "An order-independent sum", "Accept the divergence"):
        assert any(heading in label for label in labels), (heading, labels)
    assert "live on this server" in text and "cited" in text
    assert "the order-independent sum gave **1 value**" in text
    assert "Not measured since this server started" in text  # no throughput timing while the page loads


def test_the_count_is_true_and_every_cost_is_in_one_unit(mi):
    """"Five mitigations" over five numbered sections and five summary rows; every cost × the default's time (a
    speed ratio never appears); the summary is a wrapping table, so its cost column is on the screen."""
    assert not mi.exception
    text = all_text(mi)
    assert "Five mitigations" in text and "Three ways" not in text and "plus a fourth" not in text
    numbered = [e.label for e in mi.expander if e.label[:1].isdigit()]
    assert [label.split(" · ")[0] for label in numbered] == ["1", "2", "3", "4", "5"]
    table = _summary(mi)
    assert len(table) == 5 and [i.split(" · ")[0] for i in table.index] == ["1", "2", "3", "4", "5"]
    costs = table["cost, × the default's time"].tolist()
    assert all("×" in c or c.startswith("not measured") for c in costs), costs
    assert not any("speed" in c for c in costs), costs
    assert "× the default's time (1.0× = as fast" in text


def test_the_float64_table_says_without_tensor_cores_and_gives_the_tensor_core_cost(mi):
    from core.studies.peak_rates import float64_peak

    vendor = next(t.value for t in mi.table if t.value.index.name == "hardware")
    assert "FP64 : FP32, no tensor cores" in vendor.columns
    a100 = float64_peak("NVIDIA A100")
    assert vendor.loc["NVIDIA A100", "FP64 : FP32, no tensor cores"] == "1 : 2"
    assert vendor.loc["NVIDIA A100"].iloc[2] == f"{a100.tensor_cost[0]:.1f}× – {a100.tensor_cost[1]:.0f}×" == (
        "8.0× – 16×")
    text = shown(all_text(mi))  # addresses are shown as plain text, never as live links
    for address in ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf", "https://www.nvidia.com/en-us/data-center/h100/",
                    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf",
                    "https://www.nvidia.com/en-us/data-center/tesla-t4/"):
        assert address in text, address
    assert "A100, H100: matmuls 1.0× vs the default float32 (FP64 tensor cores), 2× off them, 7–16× vs TF32" in (
        _summary(mi).loc["1 · float64 everywhere", "cost, × the default's time"])


def test_the_kernel_path_is_inferred_not_stated_and_the_wider_copy_is_sized(mi):
    text = all_text(mi)
    assert "One row goes through a matrix-vector kernel" not in text
    assert "differ in **" not in text or ("likely a matrix-vector kernel" in text and "not documented" in text)
    assert "a full copy, here 8 MB for the 1,000,000 values beside their own 4 MB" in text
    mi.selectbox(key="mi_storage").select("bfloat16").run()
    text = all_text(mi)
    assert "does the same one step up" not in text
    assert "What dtype=float32 adds is a result, and per-thread partial sums, no longer rounded to 16 bits" in text
    assert "a full copy, here 4 MB for the 1,000,000 values beside their own 2 MB" in text


def test_is_my_mismatch_normal_is_answered_with_the_diagnose_verdict(mi):
    from core.studies.mitigations import mismatch_check

    check = mismatch_check()
    text = all_text(mi)
    assert "**Is my mismatch normal or a bug?**" in text
    assert f"verdict “{check.normal_verdict}”, normal" in text and "verdict “too large”" in text
    assert "Diagnose your own mismatch" in text  # the link's label (a caption where the page runs on its own)


def test_throughput_is_measured_on_demand_per_value_with_its_spread(monkeypatch, mi):
    import functools

    import core.machines.timing

    small = functools.partial(core.machines.timing.measure_throughput, matmul_n=128, sum_n=100_000, repeats=3)
    monkeypatch.setattr(core.machines.timing, "measure_throughput", small)
    mi.button(key="mi_measure").click().run()
    assert not mi.exception
    tp = next(t.value for t in mi.table if "what it means" in t.value.columns)
    assert list(tp.index.str.split().str[0]) == ["matmul", "sum"]
    cost = tp["float64 cost, × float32's time (quartiles)"]
    assert cost.str.fullmatch(r"\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d×\)").all(), list(cost)
    for c, meaning in zip(cost, tp["what it means"], strict=True):  # faster in float64 is explained, never bare
        if float(c.split("×")[0]) < 1:
            assert "noise" in meaning
    assert "min ago" in all_text(mi)
    mi.run()  # shared with later visitors and reruns: still shown
    assert any("what it means" in t.value.columns for t in mi.table)


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
    assert "Seed spread of loss" in labels
    text = all_text(mi)
    assert "**Verdict (2 seeds per side):**" in text and SEED_RULE in text  # the Training page's rule, stated


def test_seed_study_defaults_to_the_training_pages_number_of_seeds(mi):
    assert mi.number_input(key="mi_k").value == DEFAULT_SEEDS


def test_no_internal_wording(mi):
    assert "brief" not in all_text(mi)


def test_recorded_throughput_is_shown_with_its_provenance(monkeypatch, tmp_path):
    from core.recordings.capture import capture
    from core.recordings.store import write_recording

    write_recording(capture(quick=True, log=lambda *_: None), tmp_path)
    monkeypatch.setenv("FP_RECORDINGS_DIR", str(tmp_path))
    at = _page().run()
    assert not at.exception
    assert "Recorded on other machines with `python -m scripts.capture`" in all_text(at)
    rec_table = next(d.value for d in at.dataframe if d.value.columns[0] == "device"
                     and d.value["device"].astype(str).str.startswith("recorded on ").any())
    assert rec_table["device"].str.contains("recorded on ").all()


def test_the_order_independent_sum_says_which_path_this_cpu_takes(monkeypatch, mi):
    import core.kernels.reprosum

    assert "one compiled pass (numba)" in all_text(mi) and "could not be imported" not in all_text(mi)
    monkeypatch.setattr(core.kernels.reprosum, "_widesum", lambda: None)  # as where numba cannot be imported
    at = _page().run()
    assert not at.exception
    assert "could not be imported on this server" in all_text(at) and "the order-independent sum gave **1 value**" in (
        all_text(at))


def test_the_summary_costs_what_make_my_runs_reproducible_measured(monkeypatch):
    """One figure in one place: the summary's cost of deterministic mode is the reproducible page's live measurement
    (it said "not measured" while that page showed a measured cost), and the section says the switch is timed."""
    import core.studies.reproducible_costs
    from core.studies.reproducible import live_costs

    # one measurement period for the page and the test: the costs are measured again when a new one starts
    monkeypatch.setattr(core.studies.reproducible_costs, "_period", lambda: -1)
    mi = _page().run()
    assert not mi.exception
    live = live_costs().rows
    costs = _summary(mi)["cost, × the default's time"]
    assert costs["1 · float64 everywhere"].startswith(f"{live['float64'].text} here (a 256×256 matmul")
    assert costs["3 · deterministic algorithms"].startswith(f"{live['deterministic_cpu'].text} on this CPU")
    # the sums' costs too are the figures the Overview and Make my runs reproducible show
    assert costs["2 · wider accumulation"].startswith(f"{live['wider'].text} a plain torch.sum")
    assert costs["4 · order-independent sum"].startswith(f"{live['reprosum'].text} torch.sum")
    assert "explains it instead of toggling it" not in all_text(mi)


def test_what_to_set_names_the_settings_the_checklist_gives(mi):
    """The story answers "what do I set" on this page, in the words of Make my runs reproducible's own snippet."""
    import re

    from core.studies.reproducible_rules import Choice, answer

    text = all_text(mi)
    assert "**What to set.**" in text
    snippet = answer(Choice("eager", "gpu", "run_to_run")).snippet()
    calls = ["CUBLAS_WORKSPACE_CONFIG", "torch.use_deterministic_algorithms(True)",
             "torch.backends.cudnn.benchmark = False", "torch.manual_seed(0)", "worker_init_fn"]
    assert all(c in snippet for c in calls)
    said = re.search(r"\*\*What to set\.\*\*(.*?)Make my runs reproducible", text, re.S).group(1)
    assert all(c in said for c in calls[:4]) and ":4096:8" in snippet and ":4096:8" in said


def test_a_loss_is_judged_against_the_seed_spread_not_the_rounding_envelope(mi):
    text = all_text(mi)
    assert "**Is my mismatch normal or a bug?**" in text
    assert "A loss after many training steps is another matter" in text and "spread between seeds" in text
