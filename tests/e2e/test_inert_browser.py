"""Hostile links, pastes and file names in a real browser: nothing from outside comes out live.

Two links once injected content: `/mitigations?seeds=[Sign in again](https://example.com)` rendered a live
link, and `/non_associativity?a=![t](https://example.com/t.png)` made every viewer's browser fetch that image.
Here the real frontend renders them; the DOM must hold no link or image to the host, no request may go to
it, and the visitor must still see the text they sent.
"""

from __future__ import annotations

from urllib.parse import quote, urlencode, urlsplit

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, assert_healthy_page, screenshot, shown_loosely, wait_for_app

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
    """No link, image or style pointing at HOST and no request to it (called once the page shows what was sent,
    so that these absences are checked on the rendered page)."""
    assert_healthy_page(page)
    links = page.locator(f'a[href*="{HOST}"]')
    try:
        expect(links).to_have_count(0, timeout=RERUN)
    except AssertionError as err:
        raise AssertionError(links.first.evaluate("e => e.outerHTML")) from err
    expect(page.locator(f'img[src*="{HOST}"]')).to_have_count(0, timeout=RERUN)
    expect(page.locator(f'[src*="{HOST}"], [srcset*="{HOST}"], [style*="{HOST}"]')).to_have_count(0, timeout=RERUN)
    assert attempted == []


@pytest.mark.parametrize(
    ("path", "params", "visible"),
    [
        ("non_associativity", {"a": IMAGE, "b": HTML, "c": BARE}, [IMAGE, HTML, BARE]),
        ("summation_lab", {"vector": "paste", "numbers": f"1 2 <img/src=https://{HOST}/h.png>", "n": LINK, LINK: "1"},
         [f"<img/src=https://{HOST}/…", LINK]),  # a pasted token is quoted up to 29 characters and "…"
        ("mitigations", {"seeds": LINK, IMAGE: "1"}, [LINK, IMAGE]),
    ],
    ids=["non_associativity", "summation_lab", "mitigations"],
)
def test_hostile_link_renders_as_text(server, page, path, params, visible):
    attempted = _watch(page)
    page.goto(f"{server.url}/{path}?{urlencode(params, quote_via=quote)}")
    wait_for_app(page, timeout=180_000)
    main = page.locator('[data-testid="stMain"]')
    for text in visible:  # what was sent is quoted back, as text
        expect(main, text).to_contain_text(shown_loosely(text), use_inner_text=True, timeout=RERUN)
    _assert_inert(page, attempted)
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
    expect(page.locator('[data-testid="stMain"]')).to_contain_text(shown_loosely(name), use_inner_text=True,
                                                                    timeout=RERUN)
    _assert_inert(page, attempted)
