"""The Summation lab in a real browser: defaults, controls, bad input, an upload, the CSV."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    choose,
    screenshot,
    set_number,
    wait_for_app,
)


def test_lab_defaults_controls_and_download(server, page, tmp_path):
    page.goto(f"{server.url}/summation_lab")
    wait_for_app(page)
    assert_healthy_page(page)
    assert_charts_rendered(page, 3)  # errors, permutations, running error
    expect(page.get_by_text("Trees are drawn for n ≤ 32")).to_have_count(1, timeout=RERUN)
    screenshot(page, "summation-lab-default")

    with page.expect_download() as dl:
        page.get_by_role("button", name="Download the table as CSV").click()
    lines = Path(dl.value.path()).read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("# torch_version: ") for line in lines)  # provenance travels with the data
    rows = list(csv.DictReader(io.StringIO("\n".join(x for x in lines if not x.startswith("#")))))
    assert [r["order"] for r in rows][:2] == ["Sequential, left to right", "Pairwise tree"]
    assert {r["within bound"] for r in rows} == {"yes"}
    assert rows[0]["bits"] != rows[-1]["bits"]  # sequential vs correctly rounded

    set_number(page, "n (1 to 10,000,000)", 20)
    expect(page.get_by_text("Each addition of the CPU order: the exact sum of its two rounded inputs")).to_be_visible(
        timeout=RERUN)
    expect(page.get_by_text("Trees are drawn for n ≤ 32")).to_have_count(0, timeout=RERUN)
    assert_charts_rendered(page, 4)  # now with the tree
    assert_healthy_page(page)
    screenshot(page, "summation-lab-tree")

    choose(page, "Vector", "Your numbers: paste them")
    area = page.locator("textarea")
    area.fill("1, 2, banana")
    area.press("Control+Enter")
    wait_for_app(page)
    # inert() puts an invisible word joiner after ":" (so nothing visitor-made can become a link or an icon)
    expect(page.get_by_text(re.compile("The pasted text:\u2060? “banana” is not a number\\."))).to_be_visible(
        timeout=RERUN)
    expect(page.get_by_text("Showing the last valid vector")).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
    screenshot(page, "summation-lab-bad-paste")

    choose(page, "Vector", "Your numbers: upload a .csv or .npy file")
    path = tmp_path / "cancel.npy"
    np.save(path, np.array([1e8, 1.0, -1e8], dtype=np.float32))
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(path))
    wait_for_app(page)
    expect(page.get_by_text(re.compile("cancel\\.npy:\u2060? 3 values as float32"))).to_be_visible(timeout=60_000)
    assert_healthy_page(page)
    screenshot(page, "summation-lab-upload")
