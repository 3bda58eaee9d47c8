"""Offline: every page renders completely with nothing reachable but the app's own server.

At a conference without network, anything fetched from another host (an icon font, a favicon, a
script) is missing. The browser here may only reach the server: every other request is aborted and
recorded, and each page of the page table (ui.navigation.PAGE_TABLE) must attempt none. Each page,
drawn in full at its defaults, is also checked for legends cut off at their chart's edge.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    assert_healthy_page,
    assert_no_legend_cut,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)
from ui.navigation import PAGE_TABLE

LOCAL_HOSTS = {"127.0.0.1", "localhost"}
PATHS = ["", *(stem for stem, *_ in PAGE_TABLE)]


@pytest.fixture
def offline_page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 3200})
    outside: list[str] = []

    def handle(route):
        url = route.request.url
        scheme, host = urlsplit(url).scheme, urlsplit(url).hostname or ""
        if scheme in ("data", "blob") or host in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(url)
            route.abort("internetdisconnected")

    context.route("**/*", handle)
    page = context.new_page()
    page.outside = outside
    yield page
    context.close()


@pytest.mark.parametrize("path", PATHS, ids=[p or "home" for p in PATHS])
def test_every_page_renders_with_no_outside_request(server, offline_page, path):
    page = offline_page
    page.goto(f"{server.url}/{path}")
    wait_for_app(page, timeout=180_000)
    if path:  # every icon of the page has arrived before they are counted (the overview has no story link)
        wait_for_page_end(page, timeout=180_000)
    page.wait_for_timeout(1500)  # late requests: favicon, fonts, lazily loaded icons
    assert_healthy_page(page)
    title = page.locator("h1").first
    expect(title).to_be_visible(timeout=RERUN)
    expect(title).to_have_text(re.compile(r"\S"), use_inner_text=True, timeout=RERUN)  # not empty
    assert page.outside == [], page.outside
    # the icon font is served by the app itself and loaded: icons draw as glyphs, not as their names
    statuses = until(lambda: page.evaluate(
        "Array.from(document.fonts).filter(f => f.family.includes('Material Symbols')).map(f => f.status)"),
        lambda v: "loaded" in v)
    assert "loaded" in statuses, statuses
    icons = page.locator('[data-testid="stIconMaterial"]')
    expect(icons.first).to_be_attached(timeout=RERUN)  # at least one
    for i in range(icons.count()):
        # a glyph is about as wide as it is high; a ligature name ("swap_horiz") is several times wider, until
        # the font has been applied to it
        box = until(icons.nth(i).bounding_box, lambda b: not b or b["width"] <= 1.6 * b["height"])
        if box and box["width"] > 1.6 * box["height"]:  # the icon's text names which one
            pytest.fail(f"icon {icons.nth(i).inner_text()!r} is drawn as its name: {box}")
    assert_no_legend_cut(page, path or "home")  # every page at its defaults, in normal mode
    screenshot(page, f"offline-{path or 'home'}")


def test_moving_between_pages_stays_offline(server, offline_page):
    """Client-side page changes (the sidebar) swap the favicon and icons: still nothing from outside."""
    page = offline_page
    page.goto(server.url)
    wait_for_app(page)
    for _, title, *_ in PAGE_TABLE:
        page.locator('[data-testid="stSidebarNav"] [data-testid="stSidebarNavLink"]').filter(has_text=title).click()
        wait_for_app(page, timeout=180_000)
        assert_healthy_page(page)
    page.wait_for_timeout(1000)
    assert page.outside == [], page.outside
