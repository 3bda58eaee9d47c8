"""The Mitigations page in a real browser: measured tables, a control, the seed study."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, assert_charts_rendered, assert_healthy_page, screenshot, wait_for_app

SLOW = 300_000  # ms: a cold first run, a measurement or a seed study on a busy 2-core machine


def test_mitigations_page(server, page):
    page.goto(f"{server.url}/mitigations")
    wait_for_app(page, timeout=SLOW)
    assert_healthy_page(page)
    expect(page.get_by_text("the order-independent sum gave 1 value", exact=False)).to_be_visible(timeout=RERUN)
    expect(page.get_by_text("Batch size changes the kernel", exact=False)).to_be_visible(timeout=RERUN)
    expect(page.locator('[data-testid="stDataFrame"]').nth(4)).to_be_attached(timeout=RERUN)  # at least 5 tables
    screenshot(page, "mitigations-default")

    page.get_by_role("button", name="Measure float32 against float64 on this server").click()  # on demand
    expect(page.get_by_text("Measured on this server", exact=False).first).to_be_visible(timeout=SLOW)
    wait_for_app(page)

    page.locator('[data-testid="stSelectbox"]').filter(has_text="Stored format").first.click()
    page.get_by_role("option", name="bfloat16", exact=True).click()
    expect(page.get_by_text("10⁶ normal values stored as bfloat16", exact=False)).to_be_visible(timeout=RERUN)
    wait_for_app(page)

    page.get_by_role("button", name="Train the seeds (300 steps each, both sides)").click()
    expect(page.get_by_text("Seed spread of final loss (larger std)")).to_be_visible(timeout=SLOW)
    expect(page.get_by_text(re.compile(r"Verdict \(\d+ seeds per side\)"))).to_be_visible(
        timeout=RERUN)  # the same seed-verdict rule on both pages
    wait_for_app(page)
    assert_charts_rendered(page, 0)
    assert_healthy_page(page)
    screenshot(page, "mitigations-seeds")
