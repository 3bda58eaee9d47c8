"""A speaker's prepared view survives what happens on stage, in a real browser at 1280x720: a reload (F5)
keeps presenter mode, a round trip through another page keeps the Summation lab's n and Training
divergence's learning rate and step, and Back walks back to the previous page."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    assert_healthy_page,
    assert_sidebar_collapsed,
    button,
    expect_root_font_at_least,
    keyed,
    nav_link,
    open_sidebar,
    screenshot,
    share_box,
    unfold,
    wait_for_app,
    wait_for_page_end,
)

WIDTH, HEIGHT = 1280, 720
SLOW = 180_000
PRESENTER_PX = 20  # ui.talk.CSS: html { font-size: 20px }
BACK_PRESSES = 8  # at most this many Back presses from Training divergence to the Summation lab


def _number(page, key: str):
    return keyed(page, key).locator("input").first


def _set_number(page, key: str, value: str) -> None:
    box = _number(page, key)
    box.fill(value)
    box.press("Enter")
    wait_for_app(page)
    expect(box).to_have_value(value, timeout=RERUN)


def _sidebar_link(page, path: str) -> None:
    open_sidebar(page)
    nav_link(page, path).click()
    wait_for_app(page, timeout=SLOW)


def test_a_reload_keeps_presenter_mode(browser, server):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/summation_lab?talk=1")
        wait_for_app(page, timeout=SLOW)
        expect_root_font_at_least(page, PRESENTER_PX, "presenter type from the link")
        expect(page).to_have_url(re.compile(r"[?&]talk=1"), timeout=RERUN)  # the address keeps it
        page.reload()
        wait_for_app(page, timeout=SLOW)
        expect(page).to_have_url(re.compile(r"[?&]talk=1"), timeout=RERUN)
        expect_root_font_at_least(page, PRESENTER_PX, "presenter type after F5")
        assert_sidebar_collapsed(page, what="presenter mode folds the sidebar after a reload too")
        link = share_box(page).locator('[data-testid="stCode"]')
        unfold(page, share_box(page))
        expect(link).to_contain_text("talk=1", timeout=RERUN)  # the shared link keeps it
        # switched off, it leaves the address, and a reload keeps it off
        open_sidebar(page)
        keyed(page, "presenter").locator('[data-testid="stCheckbox"]').click()
        expect(page).not_to_have_url(re.compile(r"[?&]talk="), timeout=RERUN)
        page.reload()
        wait_for_app(page, timeout=SLOW)
        assert_sidebar_collapsed(page, collapsed=False, what="off after the speaker turned it off")
        assert_healthy_page(page)
    finally:
        context.close()


def test_a_round_trip_keeps_each_page_as_it_was_left(browser, server):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/summation_lab")
        wait_for_page_end(page, timeout=SLOW)
        _set_number(page, "sl_n", "16")
        expect(page.locator('[data-testid="stMetric"]').filter(has_text=re.compile(r"^n"))).to_contain_text(
            "16", timeout=SLOW)
        _sidebar_link(page, "training_divergence")
        wait_for_page_end(page, timeout=SLOW)
        _set_number(page, "td_lr", "0.3")
        steps = page.locator('[data-testid="stProgress"]')
        for k in range(1, 6):  # each press once the last one's steps are drawn (a busy machine draws late)
            button(page, "td_step10").click()
            expect(steps.first).to_contain_text(f"step {10 * k} of", timeout=SLOW)
            wait_for_app(page, timeout=SLOW)
        _sidebar_link(page, "summation_lab")
        expect(_number(page, "sl_n")).to_have_value("16", timeout=SLOW)
        expect(page).to_have_url(re.compile(r"[?&]n=16"), timeout=RERUN)
        _sidebar_link(page, "training_divergence")
        expect(_number(page, "td_lr")).to_have_value("0.3", timeout=SLOW)
        expect(steps.first).to_contain_text("step 50 of", timeout=SLOW)
        screenshot(page, "round-trip-training")
        # Back: Streamlit gives the addresses a page writes history entries of their own (some the same
        # address twice), so Back walks through this page's earlier views and then to the page before
        for _ in range(BACK_PRESSES):
            if "/summation_lab" in page.url:
                break
            page.go_back()
            wait_for_app(page, timeout=SLOW)
        expect(page).to_have_url(re.compile(r"/summation_lab(\?|$)"), timeout=RERUN)
        expect(page.locator("h1").first).to_have_text("Summation lab", timeout=SLOW)
        assert_healthy_page(page)
    finally:
        context.close()
