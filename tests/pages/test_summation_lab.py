"""AppTest: the Summation lab reacts to each control and explains bad input."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.arith.exact import exact_decimal, exact_sum_fraction
from core.arith.vectors import VectorSpec, generate
from core.machines.globalstate import PROCESS_THREADS
from tests.pages.conftest import TIMEOUT, all_text, reader, shown


@pytest.fixture
def lab() -> AppTest:
    return reader("summation_lab", TIMEOUT).run()


def table(at):
    """The full results table (every column), folded under the compact one."""
    return next(df.value for df in at.dataframe if "provenance" in df.value.columns)


def test_defaults_show_a_striking_difference(lab):
    assert not lab.exception
    t = table(lab)
    assert list(t["order"])[:2] == ["Sequential, left to right", "Pairwise tree"]
    assert set(t["within bound"]) == {"yes"}
    seq, corr = t.iloc[0], t[t["order"] == "Correctly rounded"].iloc[0]
    assert seq["bits"] != corr["bits"]  # 10^6 float32 values summed left to right are off by ~100 ULPs
    assert {"live", "model", "algorithm", "exact"} <= set(t["origin"])
    exact = exact_sum_fraction(generate(VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")).values)
    assert exact_decimal(exact) in all_text(lab)  # the exact sum, every digit
    provenance = " ".join(t["provenance"])  # this server's own thread count, whatever the machine has
    assert "1 thread" in provenance and f"{PROCESS_THREADS} thread" in provenance
    assert not lab.get("download_button")  # made only once a visitor opens their section
    assert any(e.label.startswith("Download the numbers") for e in lab.expander)


def test_n_and_storage_and_working_change_the_result(lab):
    first = table(lab)["value"].tolist()
    lab.number_input(key="sl_n").set_value(1000).run()
    assert not lab.exception and table(lab)["value"].tolist() != first
    lab.selectbox(key="sl_storage").select("float16").run()
    assert not lab.exception and set(table(lab)["bits"].str.len()) == {6}  # 0x + 4 hex digits
    lab.selectbox(key="sl_working").select("float64").run()
    assert not lab.exception and set(table(lab)["bits"].str.len()) == {18}
    assert "casts the float16 input to float64" in all_text(lab)


def test_generator_seed_orders_and_permutations(lab):
    lab.number_input(key="sl_n").set_value(20).run()
    lab.selectbox(key="sl_source").select("alternating").run()
    a = table(lab)["value"].tolist()
    lab.number_input(key="sl_seed").set_value(5).run()
    assert table(lab)["value"].tolist() != a
    lab.multiselect(key="sl_orders").set_value(["sequential", "kahan", "correct"]).run()
    assert table(lab)["order"].tolist() == ["Sequential, left to right", "Kahan compensated", "Correctly rounded"]
    lab.number_input(key="sl_k").set_value(50).run()
    assert "50 random permutations" in all_text(lab)
    lab.selectbox(key="sl_tree_order").select("pairwise").run()  # n = 20: the tree is drawn
    assert not lab.exception
    assert any("addition" in df.value.columns for df in lab.dataframe)


def test_ill_conditioned_shows_the_achieved_condition_number(lab):
    lab.number_input(key="sl_n").set_value(10_000).run()
    lab.selectbox(key="sl_source").select("ill_conditioned").run()
    lab.selectbox(key="sl_storage").select("float64").run()
    assert not lab.exception
    kappa = next(m.value for m in lab.metric if m.label.startswith("Condition number"))
    assert float(kappa) > 1e4


def test_too_large_n_is_refused_and_the_last_vector_kept(lab):
    lab.number_input(key="sl_n").set_value(20_000_000).run()
    assert not lab.exception
    assert any("more than this lab allows" in e.value for e in lab.error)
    assert "Showing the last valid vector" in lab.warning[0].value
    assert len(table(lab)) > 0


def test_pasted_numbers_and_their_errors(lab):
    lab.selectbox(key="sl_source").select("paste").run()
    assert not lab.exception
    assert table(lab).iloc[0]["order"] == "Sequential, left to right"
    assert any(df.value.columns[0] == "addition" for df in lab.dataframe)  # 6 numbers: a tree
    lab.text_area(key="sl_paste").set_value("1, 2, banana").run()
    assert any("banana" in e.value and "not a number" in e.value for e in lab.error)
    assert "Showing the last valid vector" in lab.warning[0].value
    lab.text_area(key="sl_paste").set_value("1, nan, 3").run()
    assert any("NaN or infinity" in e.value for e in lab.error)
    lab.text_area(key="sl_paste").set_value("").run()
    assert any("no numbers" in e.value for e in lab.error)
    lab.selectbox(key="sl_storage").select("float16").run()
    lab.text_area(key="sl_paste").set_value("70000 1").run()
    assert any("overflow float16" in e.value for e in lab.error)


def test_zero_sum_and_single_value(lab):
    lab.selectbox(key="sl_source").select("paste").run()
    lab.text_area(key="sl_paste").set_value("0 0 0").run()
    assert not lab.exception
    assert "relative errors are undefined" in all_text(lab)
    lab.text_area(key="sl_paste").set_value("42").run()
    assert not lab.exception and table(lab).iloc[0]["value"] == "42"


def test_upload_widget_without_a_file_keeps_the_last_vector(lab):
    lab.selectbox(key="sl_source").select("upload").run()
    assert not lab.exception
    assert "Upload a file" in all_text(lab)
    assert len(table(lab)) > 0  # the default vector's results stay


def _npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_uploads_good_and_bad(lab):
    lab.selectbox(key="sl_source").select("upload").run()
    lab.file_uploader(key="sl_upload").upload("v.npy", _npy(np.array([1e8, 1.0, -1e8], dtype=np.float32))).run()
    assert not lab.exception
    assert "v.npy: 3 values as float32" in shown(all_text(lab))  # the file name is shown as inert text
    assert table(lab)[table(lab)["order"] == "Correctly rounded"].iloc[0]["value"] == "1"
    lab.file_uploader(key="sl_upload").upload("bad.npy", b"\x93NUMPY garbage").run()
    assert any("not a readable .npy" in e.value for e in lab.error)
    assert "Showing the last valid vector (v.npy" in lab.warning[0].value
    lab.file_uploader(key="sl_upload").upload("two.npy", _npy(np.ones((2, 2)))).run()
    assert any("1-D array is needed" in e.value for e in lab.error)
    lab.file_uploader(key="sl_upload").upload("c.csv", b"value\n0.5\n0.25\n", "text/csv").run()
    assert not lab.exception and "c.csv: 2 numbers" in shown(all_text(lab))
    lab.file_uploader(key="sl_upload").upload("latin.csv", "x\n1,5\n\xe9".encode("latin-1"), "text/csv").run()
    assert any("UTF-8" in e.value for e in lab.error)


def test_bound_in_the_errors_unit_and_the_punchline_first(lab):
    t = table(lab)
    for _, row in t.iterrows():  # the bound in ULPs bounds the error in ULPs, as the absolute ones do
        assert abs(float(row["error (ULPs)"])) <= float(row["a-priori bound (ULPs)"].lstrip("±"))
    assert {"|error| (absolute)", "a-priori bound (absolute)"} <= set(t.columns)
    labels = [m.label for m in lab.metric]
    assert labels[:3] == ["Different results", "Smallest error", "Largest error"]  # the punchline, above the table
    text = all_text(lab)
    assert "What is the condition number κ?" in text and "What is the bound γ(n)?" in text
    assert "non_associativity#what-is-a-ulp" in text  # ULP links to its definition on the first page


def test_small_vectors_open_with_the_cpu_and_gpu_trees():
    at = reader("summation_lab", TIMEOUT)
    at.query_params.update({"n": "32", "tree": "pairwise", "permutations": "0"})
    at.run()
    assert not at.exception
    assert at.selectbox(key="sl_tree_order").value == "pairwise"
    captions = [c.value for c in at.caption]
    for side in ("CPU: result", "GPU (model): result"):
        assert any(c.startswith(side) for c in captions), side
    assert len(at.get("vega_lite_chart")) + len(at.get("arrow_vega_lite_chart")) >= 3  # two trees, error bars
    # both trees on one colour scale, leaves labelled by their values
    specs = [json.loads(c.proto.spec) for c in [*at.get("vega_lite_chart"), *at.get("arrow_vega_lite_chart")]]
    trees = [sp for sp in specs if any(layer.get("mark", {}).get("type") == "circle" for layer in sp.get("layer", []))]
    assert len(trees) == 2
    domains = [next(layer["encoding"]["color"]["scale"]["domain"] for layer in t["layer"]
                    if "color" in layer.get("encoding", {})) for t in trees]
    assert domains[0] == domains[1] and domains[0][1] > 0
    for t in trees:
        text = next(layer for layer in t["layer"] if layer.get("mark", {}).get("type") == "text")
        assert text["encoding"]["text"]["field"] == "short"


def test_a_capped_permutation_count_says_what_it_used_next_to_the_control(lab):
    """1,000 permutations asked at n = 10^6, 20 used, no word."""
    lab.number_input(key="sl_k").set_value(1000).run()
    assert not lab.exception
    notes = [c.value for c in lab.caption if "permutations asked for" in c.value]
    assert notes and "sums 20 of the 1,000 permutations asked for" in notes[0] and "A link keeps 1,000" in notes[0]
    assert "20 random permutations summed left to right" in all_text(lab)
    lab.number_input(key="sl_k").set_value(20).run()  # within the budget: nothing to say
    assert not [c.value for c in lab.caption if "permutations asked for" in c.value]


def test_cancellation_shows_absolute_and_relative_error_beside_ulps(lab):
    """1e8, 1, -1e8, 3, 4 in float32 gives 7 for 8: "-1.049e+06 ULP" alone says little."""
    lab.selectbox(key="sl_source").select("paste").run()
    lab.text_area(key="sl_paste").set_value("1e8, 1, -1e8, 3, 4").run()
    assert not lab.exception
    trees = [c.value for c in lab.caption if c.value.startswith(("CPU: result", "GPU (model): result"))]
    assert len(trees) == 2
    assert any("-1.049e+06 ULP" in t and "absolute error 1, relative error 0.125" in t for t in trees), trees


def test_error_metrics_are_short_and_come_with_absolute_and_relative_errors(lab):
    lab.selectbox(key="sl_source").select("ill_conditioned").run()
    lab.number_input(key="sl_n").set_value(1000).run()
    lab.select_slider(key="sl_cond").set_value(1e16).run()
    assert not lab.exception
    values = [m.value for m in lab.metric if m.label in ("Smallest error", "Largest error")]
    assert len(values) == 2 and all(len(v) <= 12 for v in values), values  # "-6.26e7 ULP" fits a metric
    assert sum("absolute error" in c.value and "relative error" in c.value for c in lab.caption) == 2


def test_the_gpu_block_tree_scenario_shows_two_trees_with_different_sums():
    from core.studies.sumlab import differing_tree_seed
    from core.studies.talk import scenarios

    params = next(p for title, _, p, _ in scenarios() if title == "GPU block tree")
    assert params["seed"] == str(differing_tree_seed(int(params["n"]), params["tree"]))
    at = reader("summation_lab", TIMEOUT)
    at.query_params.update(params)
    at.run()
    assert not at.exception
    results = [c.value.split(",")[0] for c in at.caption if c.value.startswith(("CPU: result", "GPU (model): result"))]
    assert len(results) == 2 and results[0].split("result ")[1] != results[1].split("result ")[1], results


def test_the_results_fit_and_the_error_chart_comes_first(lab):
    """Table columns ran off the page at 1280 px and the error chart sat three screens down."""
    compact = lab.dataframe[0].value
    assert list(compact.columns) == ["order", "origin", "value", "error (ULPs)", "a-priori bound (ULPs)",
                                     "within bound"]
    assert compact.equals(table(lab)[list(compact.columns)])
    charts = lab.get("arrow_vega_lite_chart") or lab.get("vega_lite_chart")
    assert charts  # the error bars: the page's first chart, under the first numbers


def test_permutation_counts_are_whole_and_each_order_has_its_own_row():
    import pandas as pd

    from ui.sumlab_view import permutation_histogram

    marks = pd.DataFrame({"label": ["exact sum", "a", "b"], "ulps": [0.0, 0.0, 0.0]})
    spec = permutation_histogram(pd.DataFrame({"ulps": [0.5, 1.5, 1.5]}), marks).to_dict()
    bars, dots = spec["layer"]
    axis = bars["encoding"]["y"]["axis"]
    assert axis["format"] == "d" and axis["tickMinStep"] == 1  # never 0.2 of a permutation
    assert dots["encoding"]["y"]["field"] == "label"  # one row per order: equal results no longer overlap
    assert bars["encoding"]["x"]["field"] == dots["encoding"]["x"]["field"] == "ulps"
    assert spec["resolve"]["scale"]["y"] == "independent"


def test_an_eight_bit_storage_opens_from_the_address_and_accumulates_in_float32():
    at = reader("summation_lab", TIMEOUT)
    at.query_params.update({"storage": "float8_e4m3fn", "n": "5000", "vector": "lognormal", "permutations": "0"})
    at.run()
    assert not at.exception
    assert at.session_state["sl_storage"] == "float8_e4m3fn"
    text = all_text(at)
    assert "float8_e4m3fn has no addition of its own: its sums accumulate in float32" in text
    v = generate(VectorSpec(kind="lognormal", n=5000, seed=0, storage="float8_e4m3fn"))
    assert v.values.dtype.name == "float8_e4m3fn"
    assert shown(exact_decimal(exact_sum_fraction(v.values))) in text  # the exact sum of the stored bytes
    assert "accumulating in float32" in text
