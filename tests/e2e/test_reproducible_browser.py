"""Make my runs reproducible in a real browser: three visitors' setups, each with its snippet in the first screen
(screenshots kept under artifacts/screenshots/reproducible-*.png), a choice that changes the snippet and the
link, the tolerance following its control, and the costs table opened."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from core.studies.reproducible import suggest_tolerance
from core.studies.reproducible_rules import WORKLOADS
from tests.e2e.conftest import (
    RERUN,
    assert_healthy_page,
    open_folded,
    open_section_with_icon,
    pick,
    screenshot,
    wait_for_app,
    wait_for_page_end,
)
from tests.e2e.test_talk import assert_punchline_in_first_screen

SLOW = 300_000  # ms: the first visit measures the costs (and compiles the order-independent sum) on a busy machine
WIDTH, HEIGHT, TALL = 1280, 720, 4400

SETUPS = [
    ("pytorch-gpu-run-to-run", "run=eager&on=gpu&match=run_to_run", "CUBLAS_WORKSPACE_CONFIG", None),
    ("vllm-gpu-batch", "run=vllm&on=gpu&match=batch", "VLLM_BATCH_INVARIANT", None),
    ("pytorch-cpu-vs-gpu", "run=eager&on=cpu&match=cpu_gpu", "order-independent sum", "cannot be had"),
]


@pytest.mark.parametrize(("name", "query", "snippet", "warning"), SETUPS, ids=[s[0] for s in SETUPS])
def test_three_setups(browser, server, name, query, snippet, warning):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/reproducible?{query}")
        punch = page.locator(".st-key-punchline")
        expect(punch).to_contain_text(snippet, timeout=SLOW)
        wait_for_app(page, timeout=SLOW)
        wait_for_page_end(page, timeout=SLOW)
        assert_healthy_page(page)
        assert_punchline_in_first_screen(page, name)
        if warning:
            expect(page.locator('[data-testid="stAlert"]').filter(has_text=warning)).to_be_visible(timeout=RERUN)
        screenshot(page, f"reproducible-{name}-1280x720")
        page.set_viewport_size({"width": WIDTH, "height": TALL})  # the whole page, for a person to look at
        page.wait_for_timeout(500)
        screenshot(page, f"reproducible-{name}")
    finally:
        context.close()


def test_presenter_mode_keeps_the_answer_in_the_first_screen(browser, server):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/reproducible?talk=1")
        expect(page.locator(".st-key-punchline")).to_contain_text("torch.use_deterministic_algorithms", timeout=SLOW)
        wait_for_app(page, timeout=SLOW)
        assert_healthy_page(page)
        assert_punchline_in_first_screen(page, "presenter")
        screenshot(page, "reproducible-talk-1280x720")
    finally:
        context.close()


def test_a_visitor_changes_the_setup_and_the_tolerance(server, page):
    page.goto(f"{server.url}/reproducible")
    wait_for_app(page, timeout=SLOW)
    wait_for_page_end(page, timeout=SLOW)
    assert_healthy_page(page)
    punch = page.locator(".st-key-punchline")
    pick(page, "rp_run", WORKLOADS["sglang"])
    expect(punch).to_contain_text("--enable-deterministic-inference", timeout=RERUN)
    expect(page).to_have_url(re.compile(r"run=sglang"), timeout=RERUN)
    pick(page, "rp_dtype", "float64")
    tol = suggest_tolerance("float64", 4096)
    rtol, atol = (v.split("=")[1] for v in tol.line.split())
    expect(page.locator('[data-testid="stCode"]').filter(has_text=f"rtol={rtol}, atol={atol}")).to_be_visible(
        timeout=RERUN)
    costs = open_section_with_icon(page, "speed")  # every cost in one table
    expect(costs.locator('[data-testid="stTable"]').filter(has_text="Order-independent sum")).to_be_visible(
        timeout=RERUN)
    open_folded(page, "rp_open_generations")  # made once opened: a rerun
    wait_for_app(page)
    expect(page.get_by_text("A100", exact=True).first).to_be_visible(timeout=RERUN)
    assert_healthy_page(page)
