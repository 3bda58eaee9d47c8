"""What a person sees in a real browser against the real server.

Every page opens from the sidebar (and, in test_offline_browser, from its own URL; also as the
very first visit to a fresh server), each page reacts to its controls, and no exception box or "Page not
found" dialog ever appears. Screenshots land in artifacts/screenshots/.
"""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    Server,
    assert_healthy_page,
    assert_sidebar_collapsed,
    button,
    expect_root_font_at_least,
    folded_section,
    keyed,
    nav_link,
    open_folded,
    page_link,
    pick,
    press,
    screenshot,
    share_box,
    shown_loosely,
    unfold,
    wait_for_app,
)
from ui.navigation import PAGE_TABLE

PAGES = [("", "Same model, same seed, different numbers"),
         ("non_associativity", "Non-associativity: (a + b) + c ≠ a + (b + c)"),
         ("summation_lab", "Summation lab"),
         ("cpu_vs_gpu", "CPU vs GPU"),
         ("training_divergence", "Training divergence"),
         ("mitigations", "Mitigations and what they cost")]
SIDEBAR_LABELS = {"": "Overview", **{stem: title for stem, title, *_ in PAGE_TABLE}}  # every page, in table order
NAV = list(SIDEBAR_LABELS.values())


def expect_h1(page, title: str | re.Pattern) -> None:
    """The page's first heading reads ``title`` (waited for: it comes with the page's script run)."""
    expect(page.locator("h1").first).to_have_text(title, use_inner_text=True, timeout=RERUN)


def expect_sidebar_labels(page, labels: list[str]) -> None:
    """The sidebar lists exactly ``labels``, in order; each may follow its icon, a material-symbol ligature name
    ("swap_horiz") until the icon font draws it as a glyph."""
    items = page.locator('[data-testid="stSidebarNav"] [data-testid="stSidebarNavLink"]')
    patterns = [re.compile(rf"^\s*(?:[a-z_]+\s*)?{re.escape(label)}\s*$") for label in labels]
    expect(items).to_have_text(patterns, use_inner_text=True, timeout=RERUN)


def test_fresh_server_first_visit_by_deep_link(browser):
    """The first session of a new process must get app.py's navigation, not file names."""
    fresh = Server()
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1200})
        page = context.new_page()
        page.goto(f"{fresh.url}/non_associativity")
        wait_for_app(page)
        page.wait_for_timeout(1000)
        assert_healthy_page(page)
        expect_h1(page, PAGES[1][1])
        expect_sidebar_labels(page, NAV)
        screenshot(page, "fresh-server-deep-link")
        context.close()
    finally:
        fresh.stop()


FIRST_RUN = 180_000  # ms: a page's first run on a server where it has not run yet (Mitigations measures on open)


def test_every_page_opens_from_the_sidebar_with_no_outside_request(server, offline_page):
    """Every page of the sidebar, in order, then back home. Client-side page changes swap the favicon and the
    icons: still nothing is fetched from outside the server."""
    page = offline_page
    page.goto(server.url)
    wait_for_app(page)
    titles = dict(PAGES)
    for path in [*list(SIDEBAR_LABELS)[1:], ""]:  # every page, then back home
        nav_link(page, path).click()
        page.wait_for_url(re.compile(rf"{re.escape(server.url)}/{path}(\?.*)?$"))
        wait_for_app(page, timeout=FIRST_RUN)
        if path in titles:
            expect_h1(page, titles[path])
        else:
            expect(page.locator("h1").first).to_have_text(re.compile(r"\S"), use_inner_text=True, timeout=RERUN)
        assert_healthy_page(page)
    page.wait_for_timeout(1000)  # late requests: favicon, fonts, lazily loaded icons
    assert page.outside == [], page.outside


def test_home_link_opens_the_playground(server, page):
    page.goto(server.url)
    wait_for_app(page)
    # the story's first page, from the list of sections
    page_link(page, "non_associativity").click()
    page.wait_for_url(re.compile(r"/non_associativity(\?.*)?$"))
    wait_for_app(page)
    expect_h1(page, re.compile(r"^\s*Non-associativity"))
    assert_healthy_page(page)


def _verdict(page):
    return page.locator('.st-key-na_verdict [data-testid="stAlertContentInfo"]')


def test_playground_reacts_like_a_person_expects(server, page):
    page.goto(f"{server.url}/non_associativity")
    wait_for_app(page)
    expect(_verdict(page)).to_contain_text("0.6000000000000001 versus 0.6", use_inner_text=True, timeout=RERUN)
    screenshot(page, "non-associativity-default")

    pick(page, "na_preset", "2048 + 1 + 1 (float16)")
    expect(_verdict(page)).to_contain_text("2048 versus 2050", timeout=RERUN)
    expect(keyed(page, "na_a").locator("input")).to_have_value("2048", timeout=RERUN)
    screenshot(page, "non-associativity-float16")

    box = keyed(page, "na_b").locator("input")
    box.fill("one")
    box.press("Enter")
    wait_for_app(page)
    refused = page.locator('[data-testid="stAlertContentError"]').first  # beside the input it could not read
    expect(refused).to_contain_text(shown_loosely("“one”"), use_inner_text=True, timeout=RERUN)
    warning = page.locator('[data-testid="stAlertContentWarning"]').first
    expect(warning).to_contain_text("last valid numbers: 2048, 1, 1 in float16", use_inner_text=True, timeout=RERUN)
    expect(_verdict(page)).to_contain_text("2048 versus 2050", use_inner_text=True)  # the last good result stays
    assert_healthy_page(page)
    screenshot(page, "non-associativity-bad-input")

    box.fill("1")
    box.press("Enter")
    wait_for_app(page)
    expect(page.locator('[data-testid="stAlertContentWarning"]')).to_have_count(0, timeout=RERUN)

    pick(page, "na_fmt", "float32")
    open_folded(page, "na_open_search")  # a collapsed section below the story's evidence
    section = folded_section(page, "na_open_search")
    press(page, section.locator('[data-testid="stFormSubmitButton"] button:visible').first)
    expect(section).to_contain_text(re.compile(r"float32 triples .* give different bits"), timeout=RERUN)
    press(page, button(page, "na_load_example"))  # found one: load it
    expect(_verdict(page)).to_contain_text("The groupings differ in float32", timeout=RERUN)
    # what loading did is said beside the button, not only at the top of the page
    expect(section.locator('[data-testid="stAlertContentSuccess"]')).to_be_visible(timeout=RERUN)
    wait_for_app(page)
    assert_healthy_page(page)
    screenshot(page, "non-associativity-counterexample")


def test_a_shared_link_reopens_the_same_view(server, page):
    page.goto(f"{server.url}/summation_lab?n=1000&storage=float16&orders=sequential,kahan&permutations=0")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(keyed(page, "sl_n").locator("input")).to_have_value("1000", timeout=RERUN)
    expect(keyed(page, "sl_storage").locator("input")).to_have_value("float16", timeout=RERUN)
    unfold(page, share_box(page))
    code = share_box(page).locator('[data-testid="stCode"]')
    expect(code).to_contain_text("n=1000", timeout=RERUN)
    expect(code).to_contain_text("storage=float16")
    page.goto(f"{server.url}/summation_lab?n=banana")
    wait_for_app(page)
    expect(page.locator('[data-testid="stCaptionContainer"]').filter(has_text=shown_loosely("n=banana"))).to_be_visible(
        timeout=RERUN)  # the note says which part of the link was not used
    assert_healthy_page(page)


def test_talk_mode_on_a_1280x720_projector(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    page.goto(f"{server.url}/?talk=1")
    wait_for_app(page)
    expect_root_font_at_least(page, 20)
    screenshot(page, "talk-home-1280x720")
    page_link(page, "training_divergence", with_settings=True).click()  # the talk's scenario
    wait_for_app(page)
    expect(keyed(page, "td_numbers").locator('[data-testid="stAlert"]')).to_be_visible(timeout=RERUN)  # no step yet
    # the settings folded into one expander, the sidebar folded away
    settings = page.locator('[data-testid="stExpander"]:has(.st-key-td_preset)')
    expect(settings).to_have_count(1, timeout=RERUN)
    expect(settings.locator("details").first).not_to_have_attribute("open", re.compile(".*"), timeout=RERUN)
    assert_sidebar_collapsed(page)
    assert_healthy_page(page)
    screenshot(page, "talk-training-1280x720")
    context.close()
