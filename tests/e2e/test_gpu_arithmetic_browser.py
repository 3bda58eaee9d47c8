"""The GPU arithmetic page in a real browser: results, charts, the rounding picture, bad input, the CSV."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.conftest import (
    ARTIFACTS,
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    assert_no_legend_cut,
    download_table,
    fill_number,
    pick,
    screenshot,
    wait_for_app,
    wait_for_page_end,
)
from tests.e2e.test_summation_lab_browser import tables_fit


def test_gpu_arithmetic_page(server, page):
    page.goto(f"{server.url}/gpu_arithmetic?K=1024", timeout=120_000)
    wait_for_app(page, timeout=180_000)
    assert_healthy_page(page)
    expect(page.get_by_text("Exact dot product of the stored values", exact=False)).to_be_visible(timeout=RERUN)
    assert_charts_rendered(page, 3)  # errors, error against K, atomics
    # at least 2: results, buckets
    expect(page.locator('[data-testid="stDataFrame"]').nth(1)).to_be_attached(timeout=RERUN)
    screenshot(page, "gpu-arithmetic-default")

    lines = Path(download_table(page, "ga").path()).read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("# torch_version: ") for line in lines)  # provenance travels with the data
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in lines if not x.startswith("#")))))
    assert rows[0]["model"] == "Sequential, multiply then add"
    assert {r["origin"] for r in rows} == {"model", "live", "exact"}
    assert {r["within bound"] for r in rows} <= {"yes", "— (no finite bound)"}

    fill_number(page, "ga_k", 16)
    expect(page.get_by_text("Model, exact rational arithmetic: each rounding adds", exact=False)).to_be_visible(
        timeout=120_000)
    assert_charts_rendered(page, 4)  # now with the picture of every rounding
    assert_healthy_page(page)
    screenshot(page, "gpu-arithmetic-small-k")

    pick(page, "ga_acc", "float16")
    expect(page.get_by_text("would round the inputs themselves", exact=False)).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "gpu-arithmetic-bad-format")

    pick(page, "ga_acc", "float32")
    expect(page.get_by_text("Model, exact rational arithmetic: each rounding adds", exact=False)).to_be_visible(
        timeout=120_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for n, name in ((2, "gpu-arithmetic-trace"), (3, "gpu-arithmetic-atomics")):  # below the first 3200 pixels
        chart = page.locator('[data-testid="stVegaLiteChart"]').nth(n)
        chart.scroll_into_view_if_needed()
        chart.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def test_terms_legends_and_other_causes_at_1280(server, browser):
    """FMA and TF32 explained under the first numbers, every legend whole, and the section on causes other than
    a sum's order with its measured sentence, at the projector's width."""
    context = browser.new_context(viewport={"width": 1280, "height": 4000})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/gpu_arithmetic", timeout=120_000)
        wait_for_app(page, timeout=180_000)
        wait_for_page_end(page)
        assert_healthy_page(page)
        punch = page.locator(".st-key-punchline")
        expect(punch.get_by_text("FMA (fused multiply-add)", exact=False)).to_be_visible(timeout=RERUN)
        expect(punch.get_by_text("TF32: tensor cores cut", exact=False)).to_be_visible(timeout=RERUN)
        expect(page.get_by_text("Not every difference is a sum's order")).to_be_visible(timeout=RERUN)
        expect(page.get_by_text(re.compile(r"missed the correctly rounded result on some of the grid's [\d,]+ "
                                           r"arguments"))).to_be_visible(timeout=RERUN)
        assert_no_legend_cut(page, "GPU arithmetic at 1280 px")
        assert tables_fit(page) == []
        screenshot(page, "gpu-arithmetic-1280", full_page=True)
    finally:
        context.close()
