"""The CPU vs GPU page in a real browser (the server has no GPU and no bundled recording)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.e2e.conftest import assert_charts_rendered, assert_healthy_page, screenshot, wait_for_app


def test_cpu_vs_gpu_page(server, page):
    page.goto(f"{server.url}/cpu_vs_gpu")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(page.get_by_text("No GPU is visible to torch on this server", exact=False)).to_be_visible()
    expect(page.get_by_text("No recording for Normal, n = 1,000,000, float32", exact=False)).to_be_visible()
    assert_charts_rendered(page, 1)
    screenshot(page, "cpu-vs-gpu-default")
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Format").first.click()
    page.get_by_role("option", name="bfloat16", exact=True).click()
    expect(page.get_by_text("No recording for Normal, n = 1,000,000, bfloat16", exact=False)).to_be_visible()
    wait_for_app(page)
    assert_healthy_page(page)
