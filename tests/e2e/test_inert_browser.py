"""Hostile links, pastes and file names in a real browser: nothing from outside comes out live.

The issue's reproductions: `/mitigations?seeds=[Sign in again](https://example.com)` rendered a live link,
and `/non_associativity?a=![t](https://example.com/t.png)` made every viewer's browser fetch that image.
Here the real frontend renders them; the DOM must hold no link or image to the host, no request may go to
it, and the visitor must still see the text they sent.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import assert_healthy_page, screenshot, wait_for_app

HOST = "example.com"
LINK = f"[Sign in again](https://{HOST})"
IMAGE = f"![t](https://{HOST}/t.png)"
HTML = f"<img src=https://{HOST}/h.png>"
BARE = f"https://{HOST}/x"


def _watch(page) -> list[str]:
    """Abort and record every request to HOST."""
    attempted: list[str] = []

    def handle(route):
        if (urlsplit(route.request.url).hostname or "").endswith(HOST):
            attempted.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", handle)
    return attempted


def _assert_inert(page, attempted: list[str]) -> None:
    assert_healthy_page(page)
    assert page.locator(f'a[href*="{HOST}"]').count() == 0, page.locator(f'a[href*="{HOST}"]').first.evaluate(
        "e => e.outerHTML")
    assert page.locator(f'img[src*="{HOST}"]').count() == 0
    assert page.locator(f'[src*="{HOST}"], [srcset*="{HOST}"], [style*="{HOST}"]').count() == 0
    assert attempted == []


@pytest.mark.parametrize(
    ("path", "params", "visible"),
    [
        ("non_associativity", {"a": IMAGE, "b": HTML, "c": BARE}, [IMAGE, HTML, BARE]),
        ("summation_lab", {"vector": "paste", "numbers": f"1 2 <img/src=https://{HOST}/h.png>", "n": LINK, LINK: "1"},
         [f"<img/src=https://{HOST}/h", LINK]),  # a pasted token is quoted up to 30 characters
        ("mitigations", {"seeds": LINK, IMAGE: "1"}, [LINK, IMAGE]),
    ],
    ids=["non_associativity", "summation_lab", "mitigations"],
)
def test_hostile_link_renders_as_text(server, page, path, params, visible):
    attempted = _watch(page)
    page.goto(f"{server.url}/{path}?{urlencode(params, quote_via=quote)}")
    wait_for_app(page, timeout=180_000)
    _assert_inert(page, attempted)
    body = page.locator('[data-testid="stMain"]').inner_text().replace("\u2060", "")
    for text in visible:  # what was sent is quoted back, as text
        assert text in body, (text, body[:2000])
    screenshot(page, f"inert-{path}")


def test_hostile_file_name_renders_as_text(server, page):
    attempted = _watch(page)
    page.goto(f"{server.url}/summation_lab?vector=upload")
    wait_for_app(page)
    name = f"{IMAGE}.csv"
    page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
        files=[{"name": name, "mimeType": "text/csv", "buffer": b"value\n0.5\n0.25\n"}])
    wait_for_app(page)
    expect(page.get_by_text("2 numbers rounded to float32").first).to_be_visible(timeout=60_000)
    _assert_inert(page, attempted)
    assert name in page.locator('[data-testid="stMain"]').inner_text().replace("\u2060", "")
