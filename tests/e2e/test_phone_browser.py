"""The room's phones: the talk's links opened on a phone, Back, and the speaker's link and QR code for the room.

In real headless Chromium as a 390x844 touch phone (a phone's user agent: Streamlit folds its sidebar after a
pick only when navigator.userAgent names a phone), the overview and every link of ``core.studies.talk.scenarios()`` open
with no exception and the sidebar folded; there and again at 360x800, nothing is wider than the screen, the
title and the page's insight (the first text of its ``st.container(key="punchline")``) lie on the first screen
and its evidence (a metric, a chart, a table, or a bold number of the punchline) within two.

Back goes back one page visit at a time, each visit's entry with its own settings: reruns (a training step
written into the address) add none, and a talk link clicked at the bottom of the overview opens at its top.
At 1280x720 in presenter mode the talk's links lie on the overview's first screen, with the room's link and
QR code (the code is checked to encode that link), and Back from a talk link returns to ``/?talk=1``, not to
the overview with the page's settings; the room's link opens the same view on a phone, in normal type.
"""

from __future__ import annotations

import base64
import re
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
import segno
from playwright.sync_api import expect

from core.crowd.querystate import query_string
from core.studies.talk import scenarios
from tests.e2e.conftest import (
    LOCAL_HOSTS,
    RERUN,
    assert_healthy_page,
    assert_sidebar_collapsed,
    button,
    nav_link,
    open_sidebar,
    page_link,
    press,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)
from tests.e2e.test_talk import SLOW
from ui.talk import ROOM_KEY

PHONE = {"width": 390, "height": 844}
SMALL_PHONE = (360, 800)
PHONE_AGENT = ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
               "Chrome/130.0.0.0 Mobile Safari/537.36")
LINKS = [("Overview", ""), *((title, page.removeprefix("pages/").removesuffix(".py") + (f"?{urlencode(params)}"
                                                                                       if params else ""))
                            for title, page, params, _ in scenarios())]

# Where a phone page puts its parts (px from the top of the page, which is at its top) and what overflows.
# An element counts as wider than the screen unless a box of its own that fits the screen scrolls or clips it
# (a code block scrolls its long line inside itself).
PHONE_LAYOUT = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const shown = e => e.offsetParent !== null && e.getBoundingClientRect().height > 0;
  const title = document.querySelector('h1');
  const punch = document.querySelector('.st-key-punchline');
  const insight = punch && Array.from(punch.querySelectorAll(
      '[data-testid="stMarkdownContainer"], [data-testid="stAlert"], [data-testid="stMetric"]'))
    .find(e => shown(e) && e.innerText.trim());
  const evidence = Array.from(main.querySelectorAll(['[data-testid="stMetric"]', '[data-testid="stVegaLiteChart"]',
      '[data-testid="stDataFrame"]', '[data-testid="stTable"]', '.st-key-punchline strong'].join(', ')))
    .find(e => shown(e) && (e.tagName !== 'STRONG' || /\\d/.test(e.innerText)));
  const clipped = e => { for (let a = e.parentElement; a && a !== main; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o !== 'visible' && a.getBoundingClientRect().right <= innerWidth + 1) return true; } return false; };
  const wide = Array.from(main.querySelectorAll('*'))
    .filter(e => shown(e) && e.getBoundingClientRect().right > innerWidth + 1 && !clipped(e))
    .map(e => `${e.dataset.testid || e.tagName}: ${(e.innerText || e.textContent || '').slice(0, 40)}`)
    .slice(0, 5);
  const box = e => e ? [Math.round(e.getBoundingClientRect().top), Math.round(e.getBoundingClientRect().bottom)]
                     : null;
  return {sideways: Math.max(document.scrollingElement.scrollWidth, main.scrollWidth) - innerWidth, wide,
          title: box(title), insight: box(insight), evidence: box(evidence),
          evidenceKind: evidence ? (evidence.dataset.testid || evidence.tagName) : null};
}"""

# The main area's scroll offset and the title's top, sampled every frame from now on (a page drawn scrolled
# down shows its title above the screen for a few frames before a later jump to the top).
WATCH_TITLE = """() => { window.__fpTitles = [];
  const sample = () => { const h = document.querySelector('h1');
    window.__fpTitles.push([h ? h.innerText.slice(0, 40) : '', h ? Math.round(h.getBoundingClientRect().top) : 0]);
    if (window.__fpTitles.length < 5000) requestAnimationFrame(sample); };
  requestAnimationFrame(sample); }"""


def phone_context(browser, width: int, height: int):
    return browser.new_context(viewport={"width": width, "height": height}, is_mobile=True, has_touch=True,
                               device_scale_factor=2, user_agent=PHONE_AGENT)


@pytest.fixture(scope="module")
def phone(browser):
    context = phone_context(browser, PHONE["width"], PHONE["height"])
    yield context
    context.close()


@pytest.fixture(scope="module")
def small_phone(browser):
    context = phone_context(browser, *SMALL_PHONE)
    yield context
    context.close()


def phone_problems(m: dict, height: int) -> list[str]:
    """What the measured layout (PHONE_LAYOUT) does wrong on a phone's screen ``height`` px tall."""
    wrong = []
    if m["sideways"] > 0 or m["wide"]:
        wrong.append(f"wider than the screen by {m['sideways']} px: {m['wide']}")
    if m["title"] is None or m["title"][0] < 0 or m["title"][1] > height:
        wrong.append(f"the title is not on the first screen: {m['title']}")
    if m["insight"] is None or m["insight"][1] > height:
        wrong.append(f"the insight is not on the first screen: {m['insight']}")
    if m["evidence"] is None or m["evidence"][0] > 2 * height - 40:  # at least its first line within two
        wrong.append(f"no evidence within two screens: {m['evidence']}")
    return wrong


def assert_fits_the_phone(context, url: str, title: str) -> None:
    """Open ``url`` in a new tab of the phone ``context``, as a phone opens a link (text sizes follow the width)."""
    page = context.new_page()
    try:
        width, height = page.viewport_size["width"], page.viewport_size["height"]
        page.goto(url)
        wait_for_app(page, timeout=SLOW)
        wait_for_page_end(page, timeout=SLOW)
        assert_healthy_page(page)
        assert_sidebar_collapsed(page, what=f"{title}: the sidebar covers the {width} px phone's screen")
        layout = until(lambda: page.evaluate(PHONE_LAYOUT), lambda m: not phone_problems(m, height))
        print(f"\n{title} on a {width}x{height} phone: {layout}")
        assert not phone_problems(layout, height), (title, width, phone_problems(layout, height))
        screenshot(page, f"phone-{width}-{re.sub(r'[^a-z0-9]+', '-', title.lower()).strip('-')}")
    finally:
        page.close()


@pytest.mark.parametrize(("title", "path"), LINKS, ids=[title for title, _ in LINKS])
def test_a_talk_link_opens_as_a_phone_page(server, phone, small_phone, title, path):
    for context in (phone, small_phone):
        assert_fits_the_phone(context, f"{server.url}/{path}", title)


def history_length(page) -> int:
    return page.evaluate("history.length")


def expect_entries(page, n: int, what: str) -> None:
    """The tab's history holds ``n`` entries (waited for: a run's address writes land after its elements)."""
    length = until(lambda: history_length(page), lambda v: v == n, timeout=RERUN / 1000)
    assert length == n, f"{what}: {length} history entries, not {n}"


def pick_in_sidebar(page, path: str) -> None:
    open_sidebar(page)
    nav_link(page, path).click()
    wait_for_app(page, timeout=SLOW)


def test_back_returns_through_the_pages_visited_by_the_sidebar(server, phone):
    page = phone.new_page()
    try:
        page.goto(server.url)
        wait_for_app(page, timeout=SLOW)
        start = history_length(page)
        pick_in_sidebar(page, "non_associativity")
        expect(page.locator("h1").first).to_contain_text("Non-associativity", timeout=RERUN)
        expect(page).to_have_url(re.compile(r"/non_associativity\?.*format="), timeout=RERUN)  # its settings
        entry = page.url
        expect_entries(page, start + 1, "one visit")
        pick_in_sidebar(page, "cpu_vs_gpu")
        expect(page.locator("h1").first).to_contain_text("CPU vs GPU", timeout=RERUN)
        expect(page).to_have_url(re.compile(r"/cpu_vs_gpu\?.*vector="), timeout=RERUN)
        expect_entries(page, start + 2, "two visits")
        page.go_back()
        expect(page).to_have_url(entry, timeout=RERUN)
        expect(page.locator("h1").first).to_contain_text("Non-associativity", timeout=RERUN)
        assert_healthy_page(page)
        page.go_back()
        expect(page).to_have_url(f"{server.url}/", timeout=RERUN)
        expect(page.locator("h1").first).to_contain_text("Same model, same seed", timeout=RERUN)
        assert_healthy_page(page)
    finally:
        page.close()


def test_a_talk_link_low_on_the_overview_opens_at_the_top_and_back_leaves_it(server, phone):
    page = phone.new_page()
    try:
        page.goto(server.url)
        wait_for_app(page, timeout=SLOW)
        start = history_length(page)
        link = page_link(page, "training_divergence", with_settings=True)  # the talk's scenario
        link.scroll_into_view_if_needed()  # the overview scrolled down to its talk links
        page.evaluate(WATCH_TITLE)
        link.click()
        wait_for_app(page, timeout=SLOW)
        wait_for_page_end(page, timeout=SLOW)
        expect(page.locator("h1").first).to_contain_text("Training divergence", timeout=RERUN)
        frames = page.evaluate("window.__fpTitles")
        above = [top for text, top in frames if text.startswith("Training divergence") and top < 0]
        assert not above, f"the page was drawn scrolled down: its title at {above[:5]} px"
        expect_entries(page, start + 1, "the talk link")
        for done in (1, 2):  # reruns that write the step reached into the address
            press(page, button(page, "td_step"))
            expect(page).to_have_url(re.compile(rf"[?&]step={done}(&|$)"), timeout=RERUN)
        expect_entries(page, start + 1, "two steps")
        page.go_back()
        expect(page).to_have_url(f"{server.url}/", timeout=RERUN)
        expect(page.locator("h1").first).to_contain_text("Same model, same seed", timeout=RERUN)
    finally:
        page.close()


def assert_room_link(page, address: str) -> None:
    """The room block holds ``address`` and a QR code of exactly that address (the code's modules, drawn by segno,
    compared with the ones segno draws for the address)."""
    room = page.locator(f".st-key-{ROOM_KEY}").first
    expect(room.locator('[data-testid="stMarkdownContainer"] code')).to_have_text(address, timeout=RERUN)
    source = room.locator("img").first.get_attribute("src", timeout=RERUN) or ""
    assert source.startswith("data:image/svg+xml;base64,"), source[:60]
    drawn = base64.b64decode(source.split(",", 1)[1]).decode()
    want = segno.make_qr(address, error="m").svg_inline(omitsize=True, border=4)
    modules = re.search(r' d="([^"]+)"', want).group(1)
    assert f' d="{modules}"' in drawn, "the QR code does not encode the room's link"
    box = until(room.locator("img").first.bounding_box, lambda b: b is not None and b["width"] >= 150)
    assert box is not None and box["width"] >= 150, box


def test_the_speakers_view_gives_the_room_its_link_and_back_leaves_the_talk_link(server, browser):
    speaker = browser.new_context(viewport={"width": 1280, "height": 720})
    outside: list[str] = []  # the room's code is drawn by the server: nothing comes from elsewhere

    def only_the_server(route):
        url = urlsplit(route.request.url)
        if url.scheme in ("data", "blob") or url.hostname in LOCAL_HOSTS:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    speaker.route("**/*", only_the_server)
    page = speaker.new_page()
    try:
        page.goto(f"{server.url}/?talk=1")
        wait_for_app(page, timeout=SLOW)
        main_links = page.locator('[data-testid="stMain"] [data-testid="stPageLink"]')
        links = [main_links.filter(has_text=title).first for title, *_ in scenarios()]
        expect(links[-1]).to_be_visible(timeout=RERUN)
        bottoms = until(lambda: [b["y"] + b["height"] for b in (link.bounding_box() for link in links) if b],
                        lambda v: len(v) == len(scenarios()) and max(v) <= 720)
        assert len(bottoms) == len(scenarios()) and max(bottoms) <= 720, f"talk links below the first screen: {bottoms}"
        assert_room_link(page, f"{server.url}/")
        screenshot(page, "phone-speaker-overview")
        start = history_length(page)
        links[0].click()  # 0.1 + 0.2 + 0.3
        wait_for_app(page, timeout=SLOW)
        expect(page).to_have_url(re.compile(r"/non_associativity\?.*format=float64.*talk=1"), timeout=RERUN)
        expect_entries(page, start + 1, "the talk link in presenter mode")
        settings = {k: v for k, v in parse_qsl(urlsplit(page.url).query) if k != "talk"}
        room = f"{server.url}/non_associativity?{query_string(settings)}"  # without presenter mode
        open_sidebar(page)
        assert_room_link(page, room)
        page.go_back()
        expect(page).to_have_url(f"{server.url}/?talk=1", timeout=RERUN)
        expect(page.locator("h1").first).to_contain_text("Same model, same seed", timeout=RERUN)
        assert outside == [], f"fetched from outside the server: {outside}"
    finally:
        speaker.close()
    # the room's phone opens the same view, in normal type
    phone = phone_context(browser, PHONE["width"], PHONE["height"])
    try:
        page = phone.new_page()
        page.goto(room)
        wait_for_app(page, timeout=SLOW)
        assert_healthy_page(page)
        expect(page.locator('[data-testid="stMetricValue"]').first).to_have_text("0.6000000000000001",
                                                                               timeout=RERUN)
        assert_sidebar_collapsed(page, what="the room's link opened the sidebar on a phone")
        assert page.evaluate("parseFloat(getComputedStyle(document.documentElement).fontSize)") < 20
    finally:
        phone.close()
