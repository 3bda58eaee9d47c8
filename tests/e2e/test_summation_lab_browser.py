"""The Summation lab in a real browser: defaults, controls, bad input, an upload, the CSV."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    download_table,
    fill_number,
    folded_section,
    keyed,
    open_folded,
    pick,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)


def test_lab_defaults_controls_and_download(server, page, tmp_path):
    page.goto(f"{server.url}/summation_lab")
    wait_for_app(page)
    assert_healthy_page(page)
    assert_charts_rendered(page, 3)  # errors, permutations, running error
    expect(page.get_by_text("Trees are drawn for n ≤ 32")).to_have_count(1, timeout=RERUN)
    screenshot(page, "summation-lab-default")

    lines = Path(download_table(page, "sl").path()).read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("# torch_version: ") for line in lines)  # provenance travels with the data
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in lines if not x.startswith("#")))))
    assert [r["order"] for r in rows][:2] == ["Sequential, left to right", "Pairwise tree"]
    assert {r["within bound"] for r in rows} == {"yes"}
    assert rows[0]["bits"] != rows[-1]["bits"]  # sequential vs correctly rounded

    fill_number(page, "sl_n", 20)
    expect(page.get_by_text("Trees are drawn for n ≤ 32")).to_have_count(0, timeout=RERUN)
    assert_charts_rendered(page, 4)  # now with the tree
    open_folded(page, "sl_open_additions")  # the exact table of every addition, made once opened
    expect(folded_section(page, "sl_open_additions").locator('[data-testid="stDataFrame"]')).to_be_visible(
        timeout=RERUN)
    wait_for_app(page)
    assert_healthy_page(page)
    screenshot(page, "summation-lab-tree")

    pick(page, "sl_source", "Your numbers: paste them")
    area = keyed(page, "sl_paste").locator("textarea")
    area.fill("1, 2, banana")
    area.press("Control+Enter")
    wait_for_app(page)
    # inert() puts an invisible word joiner after ":" (so nothing visitor-made can become a link or an icon)
    expect(page.get_by_text(re.compile("The pasted text:\u2060? “banana” is not a number\\."))).to_be_visible(
        timeout=RERUN)
    expect(page.get_by_text("Showing the last valid vector")).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "summation-lab-bad-paste")

    pick(page, "sl_source", "Your numbers: upload a .csv or .npy file")
    path = tmp_path / "cancel.npy"
    np.save(path, np.array([1e8, 1.0, -1e8], dtype=np.float32))
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    wait_for_app(page)
    expect(page.get_by_text(re.compile("cancel\\.npy:\u2060? 3 values as float32"))).to_be_visible(timeout=60_000)
    assert_healthy_page(page)
    screenshot(page, "summation-lab-upload")


# each shown table's scroller: [content width, visible width] (Glide's grid scrolls sideways when columns overflow)
TABLE_WIDTHS = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]'))
    .filter(d => d.offsetParent !== null)
    .map(d => { const s = d.querySelector('.dvn-scroller'); return s ? [s.scrollWidth, s.clientWidth] : null; })"""


def tables_fit(page) -> list:
    """The drawn tables whose columns run past their visible width (a table folded in a closed expander has no
    scroller yet and is not measured)."""
    widths = until(lambda: page.evaluate(TABLE_WIDTHS), lambda w: any(x is not None for x in w))
    assert any(x is not None for x in widths), "no table was drawn"
    return [w for w in widths if w is not None and w[0] > w[1] + 1]


@pytest.mark.parametrize("query", ["", "?talk=1"], ids=["normal", "talk"])
def test_tables_fit_and_the_error_chart_is_on_the_first_two_screens(server, browser, query):
    """At 1280x720 the results table ran off to the right and the error chart sat three screens down."""
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/summation_lab{query}")
        wait_for_app(page, timeout=180_000)
        wait_for_page_end(page)
        assert_healthy_page(page)
        assert tables_fit(page) == []
        chart = page.locator('[data-testid="stVegaLiteChart"]').first
        expect(chart).to_be_attached(timeout=RERUN)
        box = until(chart.bounding_box, lambda b: b is not None and b["height"] > 50)
        assert box is not None and box["y"] < 2 * 720, box  # the page opens at its top
    finally:
        context.close()
