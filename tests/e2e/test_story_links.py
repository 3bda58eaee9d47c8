"""Every page ends with a link to the next page of the story (the last one back to the overview)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, assert_healthy_page, wait_for_app
from ui.navigation import PAGE_TABLE

STEMS = [s for s, *_ in PAGE_TABLE]


@pytest.mark.parametrize("stem", [STEMS[0], STEMS[-1]])
def test_the_last_link_of_a_page_opens_the_next_page(server, page, stem):
    page.goto(f"{server.url}/{stem}")
    wait_for_app(page)
    assert_healthy_page(page)
    i = STEMS.index(stem)
    label = (f"Next: {PAGE_TABLE[i + 1][1]}") if i + 1 < len(STEMS) else "Back to the overview"
    link = page.locator('[data-testid="stPageLink"]').filter(has_text=label).last
    link.wait_for(timeout=RERUN)  # the page's last element: the script run sends it last
    link.scroll_into_view_if_needed()
    expect(link).to_be_visible(timeout=RERUN)
    link.click()
    wait_for_app(page)
    target = STEMS[i + 1] if i + 1 < len(STEMS) else ""
    expect(page).to_have_url(re.compile(rf"{re.escape(server.url)}/{target}(\?.*)?$"), timeout=RERUN)
    assert_healthy_page(page)


def test_every_page_ends_with_its_story_link():
    """Cheap source check that no page forgets the call (the browser test above clicks two of them)."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    for stem in STEMS:
        assert f'next_page_link("{stem}")' in (root / "pages" / f"{stem}.py").read_text(), stem
