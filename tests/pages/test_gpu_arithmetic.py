"""AppTest: the GPU arithmetic page reacts to each control and explains bad input next to it."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.arith.exact import exact_decimal, exact_dot_fraction
from core.studies.gpu_arithmetic import DotSpec, make_pair
from tests.pages.conftest import ROOT, TIMEOUT, all_text, shown
from ui.render import ulps_short

PAGE = str(ROOT / "pages" / "gpu_arithmetic.py")


def open_page(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=max(TIMEOUT, 180))
    at.query_params.update({k: str(v) for k, v in params.items()})
    return at.run()


def frame_with(at, column: str):
    """The first table on the page with ``column`` (the compact tables come first, their full ones folded)."""
    return next(df.value for df in at.dataframe if column in df.value.columns)


def table(at):
    """The full results table (bits, format, provenance), folded under the compact one."""
    return frame_with(at, "provenance")


@pytest.fixture(scope="module")
def defaults() -> AppTest:
    return open_page()


def test_defaults_every_model_live_and_exact(defaults):
    at = defaults
    assert not at.exception
    t = table(at)
    names = list(t["model"])
    assert names[:2] == ["Sequential, multiply then add", "Sequential FMA"]
    assert "TF32 inputs (rna), float32 accumulation" in names
    assert {"torch.dot(x, y)", "torch.mm, M = 1 row", "torch.mm, M = 64 rows"} <= set(names)
    assert set(t["origin"]) == {"model", "live", "exact"}
    assert set(t["within bound"]) <= {"yes", "— (no finite bound)"}
    assert all(p.startswith("live: torch") for p in t[t["origin"] == "live"]["provenance"])
    assert all("model" in p for p in t[t["origin"] == "model"]["provenance"])
    pair = make_pair(DotSpec())
    assert exact_decimal(exact_dot_fraction(pair.x, pair.y)) in all_text(at)  # every digit of the exact result
    text = shown(all_text(at))
    assert "Batch dependence" in text and "No GPU on this server" in text
    assert "round_half_ulp_truncate" in text  # the TF32 conversion, cited
    assert len(at.get("vega_lite_chart")) >= 3 or len(at.get("arrow_vega_lite_chart")) >= 3
    assert not at.get("download_button")  # made only once a visitor opens their section
    assert any(e.label.startswith("Download the numbers") for e in at.expander)


def test_controls_change_the_results():
    at = open_page(K=256)
    first = list(table(at)["value"])
    at.number_input(key="ga_k").set_value(300).run()
    assert not at.exception and list(table(at)["value"]) != first
    at.number_input(key="ga_seed").set_value(3).run()
    at.selectbox(key="ga_storage").select("bfloat16").run()
    at.selectbox(key="ga_acc").select("float32").run()
    t = table(at)
    assert not at.exception and set(t[t["origin"] == "live"]["format"]) == {"bfloat16"}
    at.multiselect(key="ga_models").set_value(["fma", "tiles", "split_k"]).run()
    at.select_slider(key="ga_tile").set_value(4).run()
    at.number_input(key="ga_slices").set_value(3).run()
    names = list(table(at)["model"])
    assert names[:3] == ["Sequential FMA", "Tiles of width 4 in a chain",
                         "Split-K: 3 slices (tiles of 4) added at the end"]
    at.multiselect(key="ga_models").set_value(["tf32"]).run()
    at.selectbox(key="ga_storage").select("float32").run()
    at.selectbox(key="ga_tf32").select("rz").run()
    assert table(at)["model"][0] == "TF32 inputs (rz), float32 accumulation"


def test_bad_formats_and_sizes_get_a_message_not_a_traceback():
    at = open_page(K=40, inputs="float64", accumulate="float16")
    assert not at.exception
    assert any("at least as wide as float64" in shown(e.value) for e in at.error)
    assert not at.dataframe  # nothing computed from a refused pair
    at.selectbox(key="ga_acc").select("float64").run()
    t = table(at)
    tf32 = t[t["model"].str.startswith("TF32")].iloc[0]
    assert tf32["value"] == "does not apply" and "float32 inputs" in tf32["provenance"]
    at.number_input(key="ga_slices").set_value(64).run()
    assert any("slices get no terms" in shown(w.value) for w in at.warning)
    at.number_input(key="ga_values").set_value(1_000_000).run()
    at.number_input(key="ga_runs").set_value(10_000).run()
    assert not at.exception
    assert any("more than this page simulates" in shown(e.value) for e in at.error)
    at.multiselect(key="ga_models").set_value([]).run()
    assert any("at least one" in w.value for w in at.warning)


def test_small_k_draws_every_rounding():
    at = open_page(K=12, tile=4, slices=2)
    assert not at.exception
    steps = frame_with(at, "operation")
    assert list(steps["operation"])[:2] == ["round(x0·y0)", "round(x1·y1)"]  # multiply then add, first
    at.selectbox(key="ga_trace_model").select("split_k").run()
    steps = frame_with(at, "operation")
    assert not at.exception and steps["operation"].iloc[-1] == "partials 0…1"
    assert "Every rounding, for a small K" in all_text(at)


def test_ill_conditioned_vectors_and_atomics_settings():
    at = open_page(vectors="ill_conditioned_dot", K=2000, condition="1e+16", models="fma", buckets=2, values=500,
                   runs=50, atomic_format="float16")
    assert not at.exception
    assert "target condition 1e+16" in shown(all_text(at))
    atoms = frame_with(at, "bucket")
    assert list(atoms["bucket"]) == [0, 1] and atoms["values"].sum() == 500
    assert all(s.endswith("of 50") for s in atoms["different results (simulated runs)"])
    at.selectbox(key="ga_bucket").select(1).run()
    assert not at.exception


def test_reached_from_the_app_navigation():
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=max(TIMEOUT, 180)).run()
    assert any("GPU arithmetic" in str(getattr(p, "label", "")) for p in app.get("page_link"))
    app.switch_page("pages/gpu_arithmetic.py").run()
    assert not app.exception and app.title[0].value == "GPU arithmetic"


def test_the_numbers_come_first_and_the_terms_are_defined(defaults):
    """TF32's ~1.2e4 ULP and mm's batch dependence sat on the third screen."""
    from core.studies.gpu_arithmetic import DotLabSettings, batch_dependence

    at = defaults
    metrics = {m.label: m.value for m in at.metric}
    lab = DotLabSettings().run(make_pair(DotSpec()))
    rows = {r.key: r for r in lab.rows}
    assert metrics["Sequential FMA (model)"] == ulps_short(rows["fma"].metrics.ulps)
    tf32 = next(v for k, v in metrics.items() if k.startswith("TF32 inputs"))
    tf32_ulps = rows["tf32"].metrics.ulps
    assert tf32 == ulps_short(tf32_ulps) and abs(tf32_ulps) > 1000  # 10 mantissa bits: far off
    batch = batch_dependence(lab)
    assert metrics["torch.mm, 1 row vs 64 rows (live)"] == (
        "same bits" if batch.same_bits else f"{batch.ulps_apart:.4g} ULP apart")
    assert list(metrics)[:3] == ["Sequential FMA (model)", tf32_label(metrics), "torch.mm, 1 row vs 64 rows (live)"]
    text = all_text(at)
    for heading in ("What is split-K?", "What is rna?", "What is η?"):
        assert heading in text


def tf32_label(metrics: dict) -> str:
    return next(k for k in metrics if k.startswith("TF32 inputs"))


def test_wide_tables_show_columns_that_fit_and_fold_the_rest(defaults):
    """The results table's nine columns ran off the page at 1280 px: the first table shows six."""
    compact, full = defaults.dataframe[0].value, table(defaults)
    assert list(compact.columns) == ["model", "origin", "value", "error (ULPs)", "bound (ULPs)", "within bound"]
    assert compact.equals(full[list(compact.columns)])
    assert "bits" in full.columns and "provenance" in full.columns


def test_terms_are_explained_where_the_first_numbers_use_them(defaults):
    from ui.gpu_arithmetic_view import PUNCH_CLAUSES

    captions = " ".join(c.value for c in defaults.caption)
    assert PUNCH_CLAUSES["fma"] in captions and PUNCH_CLAUSES["tf32"] in captions
    intro = defaults.markdown[0].value  # above the controls, whose models and slices name split-K
    assert "**split-K** (the K terms cut into slices" in intro


def test_float16_accumulation_is_not_said_to_be_always_float32(defaults):
    text = shown(all_text(defaults))
    assert "accumulate in float16" in text and "allow_fp16_reduced_precision_reduction" in text
    assert "parallel-thread-execution" in text and "reduced-precision-reduction-in-fp16-gemms" in text


def test_other_causes_are_shown_in_full(defaults):
    from core.studies.elementwise import OTHER_CAUSES, cached_other_causes, headline

    text = shown(all_text(defaults))
    assert "Not every difference is a sum's order" in text
    assert headline(cached_other_causes()) in text
    for name, _, url in OTHER_CAUSES:
        assert name in text and url in text
    assert any("torch ≠ NumPy" in df.value.columns for df in defaults.dataframe)


def test_fp8_inputs_open_from_the_address_with_the_tensor_core_models_and_their_source():
    at = open_page(inputs="float8_e4m3fn", K=1024)
    assert not at.exception
    assert at.session_state["ga_storage"] == "float8_e4m3fn"
    assert "float8_e4m3fn" not in at.selectbox(key="ga_acc").options  # stored, never added in
    t = table(at)
    names = set(t["model"])
    assert {"FP8 tensor cores, 14-bit accumulation", "FP8 tensor cores, promoted to float32 every 128",
            "torch._scaled_mm, M = 1 row"} <= names
    fp8_rows = t[t["model"].str.startswith("FP8 tensor cores")]
    assert set(fp8_rows["origin"]) == {"model"} and set(fp8_rows["format"]) == {"float32"}
    text = shown(all_text(at))
    assert "arxiv.org/abs/2412.19437" in text and "per-tensor scales, powers of two" in text
    pair = make_pair(DotSpec(storage="float8_e4m3fn", k=1024))
    assert exact_decimal(exact_dot_fraction(pair.x, pair.y)) in all_text(at)
