"""Training divergence in a real browser: step, play live, watch the charts fill in, pause."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from tests.e2e.conftest import assert_charts_rendered, assert_healthy_page, screenshot, wait_for_app


def test_step_then_play_and_watch_it_update(server, page):
    page.goto(f"{server.url}/training_divergence")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(page.get_by_text("Press Play to train both runs live")).to_be_visible()

    page.get_by_role("button", name="Step", exact=True).click()
    expect(page.get_by_text(re.compile(r"After step 1 · B differs by"))).to_be_visible()
    wait_for_app(page)
    assert_charts_rendered(page, 5)
    screenshot(page, "training-step-1")

    page.get_by_role("button", name="Play").click()
    seen = set()
    deadline = time.monotonic() + 120
    progress = page.locator('[data-testid="stProgress"]')
    while time.monotonic() < deadline:
        text = progress.inner_text() if progress.count() else ""
        m = re.search(r"step ([\d,]+) of 500", text)
        if m:
            seen.add(int(m.group(1).replace(",", "")))
        if 500 in seen:
            break
        page.wait_for_timeout(50)
    assert 500 in seen, seen
    wait_for_app(page)
    expect(page.get_by_text(re.compile(r"After step 500 · B differs by"))).to_be_visible()
    gap = page.locator('[data-testid="stMetric"]').filter(has_text="Loss gap above 1% from step")
    expect(gap).to_contain_text("113")
    assert_charts_rendered(page, 5)
    assert_healthy_page(page)
    screenshot(page, "training-played")
    assert len(seen) >= 2, f"the page never showed an intermediate step: {sorted(seen)}"


def test_float64_mitigation_in_the_browser(server, page):
    page.goto(f"{server.url}/training_divergence")
    wait_for_app(page)
    page.get_by_role("button", name="Run the float32 and float64 pairs").click()
    expect(page.get_by_text(re.compile(r"float64 pair: not within 500 steps"))).to_be_visible(timeout=60_000)
    wait_for_app(page)
    assert_charts_rendered(page, 1)
    assert_healthy_page(page)
    screenshot(page, "training-float64")
