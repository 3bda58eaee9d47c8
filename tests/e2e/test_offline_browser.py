"""Offline: every page renders completely with nothing reachable but the app's own server (finding 9).

At a conference without network, anything fetched from another host (an icon font, a favicon, a
script) is missing. The browser here may only reach the server: every other request is aborted and
recorded, and each page of the page table (ui.navigation.PAGE_TABLE) must attempt none.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from tests.e2e.conftest import assert_healthy_page, screenshot, wait_for_app
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
    page.wait_for_timeout(1500)  # late requests: favicon, fonts, lazily loaded icons
    assert_healthy_page(page)
    title = page.locator("h1").first
    assert title.is_visible() and title.inner_text().strip()
    assert page.outside == [], page.outside
    # the icon font is served by the app itself and loaded: icons draw as glyphs, not as their names
    statuses = page.evaluate(
        "Array.from(document.fonts).filter(f => f.family.includes('Material Symbols')).map(f => f.status)")
    assert "loaded" in statuses, statuses
    icons = page.locator('[data-testid="stIconMaterial"]')
    assert icons.count() > 0
    for i in range(icons.count()):
        box = icons.nth(i).bounding_box()
        if box:  # a glyph is about as wide as it is high; a ligature name ("swap_horiz") is several times wider
            assert box["width"] <= 1.6 * box["height"], (icons.nth(i).inner_text(), box)
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
