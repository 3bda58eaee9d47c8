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
FORK = 'span[title="first character that departs from the request served alone"]'
PAGE_HEIGHT = """() => document.querySelector('[data-testid="stMain"]').scrollHeight"""


@pytest.mark.parametrize("talk", ["0", "1"])
def test_the_punchline_and_the_forked_texts_are_in_the_first_screen(browser, server, talk):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/serving?talk={talk}")
        punch = page.locator(".st-key-punchline")
        expect(punch).to_contain_text(re.compile(r"\d+ identical requests at temperature 0 (gave \d+ different "
                                                 r"completions|came back all identical)"), timeout=SLOW)
        wait_for_app(page)
        assert_healthy_page(page)

        def in_first_screen(b) -> bool:
            return b is not None and b["height"] > 10 and b["y"] >= 0 and b["y"] + b["height"] <= HEIGHT

        box = until(punch.bounding_box, in_first_screen)  # the layout settles after the last element arrived
        assert in_first_screen(box) and box["height"] > 40, box
        for line in ("Served alone:", "batched:"):  # the lone run's text and the departing group's
            text = punch.get_by_text(line, exact=False).first
            expect(text).to_be_visible(timeout=SLOW)
            assert in_first_screen(until(text.bounding_box, in_first_screen)), line
        if "different completions" in punch.inner_text():  # the default forks: its mark is solid and on screen
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
