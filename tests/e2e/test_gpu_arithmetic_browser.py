"""The GPU arithmetic page in a real browser: results, charts, the rounding picture, bad input, the CSV."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.conftest import (
    ARTIFACTS,
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    choose,
    screenshot,
    set_number,
    wait_for_app,
)


def test_gpu_arithmetic_page(server, page):
    page.goto(f"{server.url}/gpu_arithmetic?K=1024", timeout=120_000)
    wait_for_app(page, timeout=180_000)
    assert_healthy_page(page)
    expect(page.get_by_text("Exact dot product of the stored values", exact=False)).to_be_visible(timeout=RERUN)
    assert_charts_rendered(page, 3)  # errors, error against K, atomics
    # at least 2: results, buckets
    expect(page.locator('[data-testid="stDataFrame"]').nth(1)).to_be_attached(timeout=RERUN)
    screenshot(page, "gpu-arithmetic-default")

    with page.expect_download() as dl:
        page.get_by_role("button", name="Download the table as CSV").click()
    lines = Path(dl.value.path()).read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("# torch_version: ") for line in lines)  # provenance travels with the data
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in lines if not x.startswith("#")))))
    assert rows[0]["model"] == "Sequential, multiply then add"
    assert {r["origin"] for r in rows} == {"model", "live", "exact"}
    assert {r["within bound"] for r in rows} <= {"yes", "— (no finite bound)"}

    set_number(page, "K, terms (1 to 65,536)", 16)
    expect(page.get_by_text("Model, exact rational arithmetic: each rounding adds", exact=False)).to_be_visible(
        timeout=120_000)
    assert_charts_rendered(page, 4)  # now with the picture of every rounding
    assert_healthy_page(page)
    screenshot(page, "gpu-arithmetic-small-k")

    choose(page, "Accumulate in", "float16")
    expect(page.get_by_text("would round the inputs themselves", exact=False)).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "gpu-arithmetic-bad-format")

    choose(page, "Accumulate in", "float32")
    expect(page.get_by_text("Model, exact rational arithmetic: each rounding adds", exact=False)).to_be_visible(
        timeout=120_000)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for n, name in ((2, "gpu-arithmetic-trace"), (3, "gpu-arithmetic-atomics")):  # below the first 3200 pixels
        chart = page.locator('[data-testid="stVegaLiteChart"]').nth(n)
        chart.scroll_into_view_if_needed()
        chart.screenshot(path=str(ARTIFACTS / f"{name}.png"))
