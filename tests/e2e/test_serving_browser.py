"""The Serving page in a real browser at 1280x720: the punchline (how many distinct completions) is text in
the first screen once the server has served, in normal and presenter mode."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import assert_healthy_page, screenshot, until, wait_for_app

WIDTH, HEIGHT = 1280, 720
SLOW = 300_000  # ms: the default workload served three ways on a busy 2-core machine


@pytest.mark.parametrize("talk", ["0", "1"])
def test_the_punchline_is_in_the_first_screen(browser, server, talk):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/serving?talk={talk}")
        punch = page.locator(".st-key-punchline")
        expect(punch).to_contain_text(re.compile(r"\d+ identical requests at temperature 0 gave \d+ different "
                                                 r"completions?"), timeout=SLOW)
        wait_for_app(page)
        assert_healthy_page(page)
        def in_first_screen(b) -> bool:
            return b is not None and b["height"] > 40 and b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT

        box = until(punch.bounding_box, in_first_screen)  # the layout settles after the last element arrived
        assert in_first_screen(box), box
        screenshot(page, f"serving-1280x720-talk{talk}")
    finally:
        context.close()
