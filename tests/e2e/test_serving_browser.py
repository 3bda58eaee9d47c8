"""The Serving page in a real browser at 1280x720: the punchline (how many distinct completions) and the two
forked texts, the fork clearly marked, are in the first screen once the server has served, in normal and
presenter mode; the page at its defaults is at most three screens tall."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import assert_healthy_page, screenshot, until, wait_for_app, wait_for_page_end

WIDTH, HEIGHT = 1280, 720
MAX_HEIGHT = 3 * HEIGHT  # a story page: at most three screens at its defaults
SLOW = 300_000  # ms: the default workload served three ways on a busy 2-core machine
FORK = "span.sv-fork"  # ui.serving_view: the first character that departs from the request served alone
COMPLETION = "div.sv-completion"  # ui.serving_view: one labelled completion, the lone run's first
PAGE_HEIGHT = """() => document.querySelector('[data-testid="stMain"]').scrollHeight"""


@pytest.mark.parametrize("talk", ["0", "1"])
def test_the_punchline_and_the_forked_texts_are_in_the_first_screen(browser, server, talk):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/serving?talk={talk}")
        punch = page.locator(".st-key-punchline")
        # the headline counts the completions (ui.serving_view.headline): a number of requests, then the rest
        expect(punch.locator("h3")).to_contain_text(re.compile(r"^\d[\d,]* "), timeout=SLOW)
        wait_for_app(page)
        assert_healthy_page(page)

        def in_first_screen(b) -> bool:
            return b is not None and b["height"] > 10 and b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT

        box = until(punch.bounding_box, in_first_screen)  # the layout settles after the last element arrived
        assert in_first_screen(box) and box["height"] > 40, box
        lines = punch.locator(COMPLETION)
        expect(lines).to_have_count(2, timeout=SLOW)  # the lone run's text and the departing group's
        for i in range(2):
            assert in_first_screen(until(lines.nth(i).bounding_box, in_first_screen)), i
        distinct = punch.locator('[data-testid="stMetricValue"]').first  # the count of distinct completions
        expect(distinct).to_have_text(re.compile(r"^\d+$"), timeout=SLOW)
        if int(distinct.inner_text()) > 1:  # the default forks: its mark is solid and on screen
            mark = punch.locator(FORK).first
            assert in_first_screen(until(mark.bounding_box, in_first_screen))
            assert mark.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(194, 65, 12)"
            assert mark.evaluate("e => getComputedStyle(e).color") == "rgb(255, 255, 255)"
        screenshot(page, f"serving-1280x720-talk{talk}")
        wait_for_page_end(page, timeout=SLOW)
        height = until(lambda: page.evaluate(PAGE_HEIGHT), lambda h: h <= MAX_HEIGHT, timeout=10)
        assert height <= MAX_HEIGHT, f"Serving (talk={talk}) is {height} px tall at its defaults"
        shown = [e.inner_text() for e in page.get_by_text("python -m", exact=False).all() if e.is_visible()]
        assert shown == [], shown  # commands sit in a collapsed section
    finally:
        context.close()
