"""Every page in a real browser, its sections open: each address shown is a link whose text has no invisible
character, and a setting or code shown holds none either, so what a visitor copies pastes as it is."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, assert_healthy_page, wait_for_app
from ui.navigation import PAGE_TABLE

# Text nodes that show an address outside a link, and links, code or settings holding a character no one sees
READ = r"""() => {
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


@pytest.mark.parametrize("stem", [p[0] for p in PAGE_TABLE])
def test_every_address_is_a_link_and_nothing_copied_hides_a_character(server, page, stem):
    page.goto(f"{server.url}/{stem}")
    wait_for_app(page, timeout=120_000)
    closed = page.locator('[data-testid="stMain"] [data-testid="stExpander"] details:not([open]) > summary')
    for _ in range(40):  # each folded section is made once opened (some hold others): open all, as a reader would
        if closed.count() == 0:
            break
        closed.first.click()
        wait_for_app(page, timeout=120_000)
    expect(closed).to_have_count(0, timeout=RERUN)
    assert_healthy_page(page)
    found = page.evaluate(READ)
    assert found == [], f"{stem}: {found[:5]}"
