"""Every page opens from its own URL, complete, with nothing reachable but the app's own server.

At a conference without network, anything fetched from another host (an icon font, a favicon, a
script) is missing. The browser here may only reach the server (the ``offline_page`` fixture): every
other request is aborted and recorded, and the Overview and each page of the page table
(ui.navigation.PAGE_TABLE) must attempt none. Each page, opened by its URL and drawn in full at its
defaults, shows its heading (word for word for the pages of ``test_browser.PAGES``), the sidebar lists
every page in order, its icons draw as glyphs, and no legend is cut off at its chart's edge. One load
of each page serves all of these checks: a page load is the costly part of a browser test. Then every folded
section is opened, as a thorough reader would: still nothing is fetched from outside, each address shown is a link,
and no link, code or VAR=value setting holds a character no one sees (what a visitor copies pastes as it is).
"""

from __future__ import annotations

import re

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
from tests.e2e.test_browser import NAV, PAGES, expect_h1, expect_sidebar_labels
from ui.navigation import PAGE_TABLE

# Text nodes that show an address outside a link, and links, code or settings holding a character no one sees
COPYABLE = r"""() => {
  const invisible = /[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]/;
  const main = document.querySelector('[data-testid="stMain"]');
  const out = [];
  const walker = document.createTreeWalker(main, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const t = n.textContent;
    const inLink = n.parentElement.closest('a');
    const inCode = n.parentElement.closest('code, pre');
    const bare = t.replace(new RegExp(invisible.source, 'g'), '');
    if (/https?:\/\//.test(bare) && !inLink && !inCode) out.push('not a link: ' + t.slice(0, 120));
    if ((inLink || inCode) && invisible.test(t)) out.push('invisible: ' + t.slice(0, 120));
    for (const setting of t.match(/[A-Z][A-Z0-9_]{2,}=\S+/g) || []) {
      if (invisible.test(setting)) out.push('invisible in a setting: ' + setting);
    }
  }
  return out;
}"""


PATHS = ["", *(stem for stem, *_ in PAGE_TABLE)]
TITLES = dict(PAGES)  # the pages whose first heading is checked word for word


@pytest.mark.parametrize("path", PATHS, ids=[p or "home" for p in PATHS])
def test_every_page_opens_from_its_url_with_no_outside_request(server, offline_page, path):
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
    if path in TITLES:
        expect_h1(page, TITLES[path])
    expect_sidebar_labels(page, NAV)
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
    screenshot(page, f"url-{path or 'home'}")
    closed = page.locator('[data-testid="stMain"] [data-testid="stExpander"] details:not([open]) > summary')
    for _ in range(40):  # each folded section is made once opened (some hold others)
        if closed.count() == 0:
            break
        closed.first.click()
        wait_for_app(page, timeout=180_000)
    expect(closed).to_have_count(0, timeout=RERUN)
    assert_healthy_page(page)
    assert page.evaluate(COPYABLE) == [], path
    assert page.outside == [], page.outside
