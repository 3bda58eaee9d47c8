"""Diagnose a mismatch in a real browser: every bundled example and both bundled loss-log pairs."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core.diagnose.examples import EXAMPLES, LOG_EXAMPLES
from core.diagnose.verdict import VERDICT_HEADS
from tests.e2e.conftest import RERUN, assert_charts_rendered, assert_healthy_page, screenshot, wait_for_app

# verdicts that do not depend on the machine (the thread-count and batch-size pairs are computed live)
KNOWN = {"bfloat16": "reduced_precision", "tf32": "reduced_precision", "bug": "too_large"}


def pick(page, label: str, option: str) -> None:
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_app(page)


def test_every_bundled_example_and_log_pair(server, page):
    page.goto(f"{server.url}/diagnose")
    wait_for_app(page, timeout=120_000)
    assert_healthy_page(page)
    expect(page.get_by_role("heading", name="Diagnose a mismatch")).to_be_visible(timeout=RERUN)
    for key, title in EXAMPLES.items():
        pick(page, "Bundled example", title)
        expect(page.get_by_text("Computed live on this server.", exact=False)).to_be_visible(timeout=120_000)
        wait_for_app(page, timeout=120_000)
        assert_healthy_page(page)
        verdict = page.locator('[data-testid="stAlert"]').first
        if key in KNOWN:
            expect(verdict, key).to_contain_text(VERDICT_HEADS[KNOWN[key]], use_inner_text=True, timeout=RERUN)
        else:
            any_head = re.compile("|".join(re.escape(t) for t in VERDICT_HEADS.values()))
            expect(verdict, key).to_contain_text(any_head, use_inner_text=True, timeout=RERUN)
        if key == "bug":
            expect(page.get_by_text("What to check next")).to_be_visible(timeout=RERUN)
        else:
            expect(page.get_by_text("torch.testing.assert_close(actual, expected, rtol=").first).to_be_visible(
                timeout=RERUN)
        assert_charts_rendered(page, 1)
        expect(page).to_have_url(re.compile(re.escape(f"example={key}")), timeout=RERUN)
        screenshot(page, f"diagnose-{key}", full_page=True)

    page.get_by_text("Two training loss logs", exact=True).click()
    wait_for_app(page, timeout=120_000)
    for key, title in LOG_EXAMPLES.items():
        pick(page, "Bundled pair", title)
        expect(page.get_by_text("Computed live: the Training divergence page", exact=False)).to_be_visible(
            timeout=RERUN)
        wait_for_app(page)
        assert_healthy_page(page)
        verdict = page.locator('[data-testid="stAlert"]').first
        if key == "jump":
            expect(verdict, key).to_contain_text("A jump", use_inner_text=True, timeout=RERUN)
        else:
            expect(verdict, key).not_to_contain_text("A jump", use_inner_text=True, timeout=RERUN)
        assert_charts_rendered(page, 2)
        screenshot(page, f"diagnose-logs-{key}", full_page=True)
