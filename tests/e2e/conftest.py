"""Real-server, real-browser fixtures: `streamlit run app.py` and Debian's Chromium.

The server starts with the same flags as the Docker image's ENTRYPOINT
(--server.port, --server.address=0.0.0.0) on a free port; tests wait for
/_stcore/health to answer "ok" and for the app to report that its script finished.
"""

from __future__ import annotations

import contextlib
import pathlib
import re
import time
from collections.abc import Callable, Iterator
from typing import TypeVar
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
from playwright.sync_api import expect

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, ROOT, Server, free_port, wait_for_app  # noqa: F401

ARTIFACTS = ROOT / "artifacts" / "screenshots"
VIEWPORT = {"width": 1400, "height": 3200}  # tall: Streamlit scrolls inside its own container
RERUN = 30_000  # ms: how long a check waits for what a server rerun shows, on a busy 2-core machine
T = TypeVar("T")


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test`, which installs Debian's "
                    "chromium-headless-shell.")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_instance):
    b = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    yield pg
    context.close()


LOCAL_HOSTS = {"127.0.0.1", "localhost"}


@pytest.fixture
def offline_page(browser):
    """A page whose browser may reach only the app's server: every other request is aborted and its URL
    kept in ``page.outside`` (at a conference without network, anything fetched elsewhere is missing). The
    viewport is tall, so a page is drawn in full at its defaults."""
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


def assert_healthy_page(page) -> None:
    """No exception box and no "Page not found" dialog. Both checks pass at once when there is none; one left
    from the previous script run gets the time a rerun takes to replace it."""
    errors = page.locator('[data-testid="stException"]')
    try:
        expect(errors).to_have_count(0, timeout=RERUN)
    except AssertionError as err:
        raise AssertionError(errors.first.inner_text()) from err
    expect(page.locator("html")).not_to_contain_text(re.compile("page not found", re.IGNORECASE), timeout=RERUN)


def until(read: Callable[[], T], ok: Callable[[T], bool], timeout: float = 30) -> T:
    """``read()`` again every quarter second until ``ok`` holds for its value or ``timeout`` seconds have passed,
    and the last value read: the caller asserts on it, so a failure shows what the page had. For what
    Playwright's expect cannot wait for (boxes, pixels, computed styles), which settle late on a busy machine."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.25)


def shown_loosely(text: str) -> re.Pattern:
    """``text`` as the page shows it: inert() may put an invisible word joiner (U+2060) between any two
    characters of what a visitor or a file sent."""
    return re.compile("\u2060*".join(re.escape(c) for c in text))


def expect_root_font_at_least(page, px: float, what: str = "", timeout: float = RERUN) -> None:
    """Presenter type: the root font grows to ``px`` once the app's style for it has been applied."""
    size = until(lambda: page.evaluate("parseFloat(getComputedStyle(document.documentElement).fontSize)"),
                 lambda v: v >= px, timeout=timeout / 1000)
    assert size >= px, (what, size)


def wait_for_page_end(page, timeout: float = RERUN) -> None:
    """Wait for the page's last element, its link to the next page of the story (ui.navigation.next_page_link ends
    every page of PAGE_TABLE at its default settings): a script run sends its elements in order, so everything
    above it has arrived. wait_for_app alone can return before a first run has started on a busy machine."""
    story = page.locator('[data-testid="stPageLink"]').filter(has_text=re.compile("Next: |Back to the overview"))
    story.last.wait_for(state="attached", timeout=timeout)


def screenshot(page, name: str, full_page: bool = False) -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


# every legend of a shown chart inside the chart's own box (Streamlit's container cuts off what runs past it)
CUT_LEGENDS = """() => Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'))
    .filter(c => c.offsetParent !== null)
    .flatMap((c, i) => { const box = c.getBoundingClientRect();
        return Array.from(c.querySelectorAll('g.role-legend')).filter(l => { const r = l.getBoundingClientRect();
            return r.height > 0 && (r.bottom > box.bottom + 1 || r.right > box.right + 1); })
            .map(l => `chart ${i}: ${l.textContent.slice(0, 60)}`); })"""


def assert_no_legend_cut(page, what: str) -> None:
    """No legend of a shown chart runs past the chart's box (waited for: charts are drawn and resized late)."""
    cut = until(lambda: page.evaluate(CUT_LEGENDS), lambda found: not found)
    assert not cut, f"{what}: legends run past their chart's box and are cut off: {cut}"


def assert_charts_rendered(page, minimum: int) -> None:
    """Every Altair chart drew something: vega-embed puts a canvas (or svg) of real size."""
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    if minimum:  # at least ``minimum`` of them; the page's charts arrive one by one
        expect(charts.nth(minimum - 1)).to_be_attached(timeout=RERUN)
    for i in range(charts.count()):
        drawn = charts.nth(i).locator("canvas, svg").first
        drawn.wait_for(timeout=30_000)
        box = until(drawn.bounding_box, lambda b: b is not None and b["height"] > 50 and b["width"] > 100)
        assert box is not None and box["height"] > 50 and box["width"] > 100, (i, box)


def pick(page, key: str, option: str) -> None:
    """Pick ``option`` (as the box shows it) in the select box made with ``key``. A click that only focuses the box
    (as one can after the page scrolled to it) is followed by another, as a person would, within RERUN."""
    box = page.locator(f'.st-key-{key} [data-testid="stSelectbox"]').first
    target = page.get_by_role("option", name=option, exact=True)
    deadline = time.monotonic() + RERUN / 1000
    while True:
        box.click()
        try:
            target.wait_for(timeout=5_000)
            break
        except PlaywrightTimeoutError:
            if time.monotonic() > deadline:
                raise
    target.click()
    wait_for_app(page)


# Records whether the app's script starts running after this point: a click that reached the server starts a
# run, however short (the attribute passes through "running" even when the run ends within a frame).
_WATCH_RUNS = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  window.__fpRan = false;
  if (window.__fpRuns) window.__fpRuns.disconnect();
  window.__fpRuns = new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__fpRan = true;
  });
  window.__fpRuns.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
}"""


def press(page, button, started: float = 15, settle: bool = True) -> None:
    """Click ``button`` as a person would: once the page has settled, then wait for the run it starts to end
    (``settle=False``: only for it to start, for a run a test watches while it goes on, such as Play).

    On a loaded machine a click can land while the browser re-lays the page out and never reach the server
    (no run starts); a person would click again, and so does this, once. A click that started a run is never
    repeated, so a button that needs two clicks to act still fails its test."""
    wait_for_app(page)
    page.evaluate(_WATCH_RUNS)
    button.click()
    if not until(lambda: page.evaluate("window.__fpRan"), bool, timeout=started):
        button.click()
    if settle:
        wait_for_app(page)


def fill_number(page, key: str, value: float) -> None:
    """Type ``value`` into the number input made with ``key`` and press Enter, as a person would."""
    box = page.locator(f".st-key-{key} input").first
    box.fill(str(value))
    box.press("Enter")
    wait_for_app(page)


# How much a chart drew of its data: on a canvas, the clearly coloured pixels (marks, not white, grey text or
# grid lines); in an SVG, the items of its data marks (vega's "role-mark" groups, not axes or legends;
# a text mark inside the plotting area, such as a chart's "nothing to draw yet" message, counts).
DRAWN = """
el => {
  const c = el.querySelector('canvas');
  if (!c) { return el.querySelectorAll(
    'g.role-mark > path, g.role-mark > line, g.role-mark > rect, g.role-mark > text').length * 100; }
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const mx = Math.max(d[i], d[i + 1], d[i + 2]), mn = Math.min(d[i], d[i + 1], d[i + 2]);
    if (d[i + 3] > 0 && mx - mn > 60) n++;
  }
  return n;
}
"""

# A chart's canvas as a short signature (a hash of its pixels): two samples differ when it was redrawn
# with other data. An SVG chart signs its markup.
CANVAS_SIGNATURE = """
el => {
  const c = el.querySelector('canvas');
  const text = c ? null : (el.querySelector('svg') || el).outerHTML;
  let h = 2166136261 >>> 0;
  if (c) {
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    for (let i = 0; i < d.length; i += 4) { h = Math.imul(h ^ (d[i] + 7 * d[i + 1] + 13 * d[i + 2]), 16777619) >>> 0; }
  } else { for (let i = 0; i < text.length; i++) { h = Math.imul(h ^ text.charCodeAt(i), 16777619) >>> 0; } }
  return h;
}
"""

# How much of a chart is drawn in one colour: on a canvas, the pixels near it (each channel within 40); in an
# SVG, over the data-mark items (not legend or axes) of that colour, the length of each stroked one (a line
# grows as steps are drawn) and the area of each filled one. Vega-Lite in Streamlit draws a chart of up to
# 2,000 points per datum as SVG and larger ones on a canvas, so one chart can be either.
PIXELS_NEAR = """
([el, rgb]) => {
  const c = el.querySelector('canvas');
  if (!c) {
    const hex = '#' + rgb.map(v => v.toString(16).padStart(2, '0')).join('');
    const want = new Set([hex, `rgb(${rgb[0]}, ${rgb[1]}, ${rgb[2]})`]);
    const is = (e, attr) => want.has((e.getAttribute(attr) || '').toLowerCase());
    let n = 0;
    for (const e of el.querySelectorAll('g.role-mark > *')) {
      const box = e.getBBox();
      if (is(e, 'stroke')) n += e.getTotalLength ? e.getTotalLength() : Math.hypot(box.width, box.height);
      else if (is(e, 'fill')) n += box.width * box.height;
    }
    return Math.round(n);
  }
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] > 200 && Math.abs(d[i] - rgb[0]) < 40 && Math.abs(d[i + 1] - rgb[1]) < 40
        && Math.abs(d[i + 2] - rgb[2]) < 40) n++;
  }
  return n;
}
"""


def drawn(chart, minimum: int = 50, timeout: float = 20) -> int:
    """How much the chart drew (DRAWN), waiting up to ``timeout`` seconds for it to reach ``minimum``
    (vega draws on a later animation frame, late on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        n = chart.evaluate(DRAWN)
        if n > minimum or time.monotonic() > deadline:
            return n
        time.sleep(0.25)


def sidebar_collapsed(page) -> bool:
    """The sidebar is folded away: Streamlit marks it collapsed and it takes no width of the screen."""
    bar = page.locator('[data-testid="stSidebar"]')
    state = bar.evaluate("e => [e.dataset.collapsed, e.getBoundingClientRect().right]")
    return state[0] == "true" and state[1] <= 1


def assert_sidebar_collapsed(page, collapsed: bool = True, what: str = "", timeout: float = RERUN) -> None:
    """Wait until the sidebar is folded away (or, with ``collapsed=False``, is not): presenter mode folds it
    after the page's first render, and the slide takes a moment on a busy machine."""
    state = until(lambda: sidebar_collapsed(page), lambda v: v == collapsed, timeout=timeout / 1000)
    assert state == collapsed, what or f"the sidebar is {'open' if collapsed else 'collapsed'}"


def open_sidebar(page) -> None:
    """Unfold the sidebar when presenter mode folded it (its arrow, top left)."""
    if sidebar_collapsed(page):
        page.locator('[data-testid="stExpandSidebarButton"]').click()
        page.wait_for_function(
            "() => document.querySelector('[data-testid=\"stSidebar\"]').dataset.collapsed !== 'true'")
        page.wait_for_timeout(400)  # the slide-in animation


def close_sidebar(page) -> None:
    """Fold the sidebar away again, as a presenter does after using it (its arrow shows on hover)."""
    if sidebar_collapsed(page):
        return
    page.locator('[data-testid="stSidebar"]').hover()
    arrow = '[data-testid="stSidebarCollapseButton"] button, [data-testid="stSidebarCollapseButton"]'
    page.locator(arrow).first.click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=\"stSidebar\"]').dataset.collapsed === 'true'")
    page.wait_for_timeout(400)  # the slide-out animation


def keyed(page, key: str):
    """What the widget or container made with ``key`` draws: Streamlit marks it with the CSS class st-key-<key>.
    Tests find what they click or read by key, not by its words, so that a copy edit breaks no test."""
    return page.locator(f".st-key-{key}")


def button(page, key: str):
    """The button made with ``key`` (the one shown: Streamlit draws a button that has a tooltip twice, one copy
    hidden)."""
    return page.locator(f".st-key-{key} button:visible").first


def nav_link(page, path: str):
    """The sidebar's link to the page at ``path`` (its file stem; "" for the overview), found by its address."""
    return page.locator(f'[data-testid="stSidebarNav"] a[href="{_origin(page)}/{path}"]')


def page_link(page, path: str, with_settings: bool = False):
    """The first shown link in the page's main area to the page at ``path`` (its file stem), found by its address
    (Streamlit writes it relative); ``with_settings``: one whose address carries settings (a talk scenario's)."""
    at = f'a[href^="{path}?"]' if with_settings else f'a[href="{path}"]'
    return page.locator(f'[data-testid="stMain"] [data-testid="stPageLink"] {at}:visible').first


def _origin(page) -> str:
    parts = urlsplit(page.url)
    return f"{parts.scheme}://{parts.netloc}"


# A section's own parts (Streamlit: the section's element holds <details>, whose <summary> is the label); a
# section can hold sections, whose parts these leave out
OWN_DETAILS, OWN_LABEL = ":scope > details", ":scope > details > summary"


def section_with_icon(page, icon: str):
    """The first collapsible section whose label starts with the Material icon ``icon`` (its name, as in
    ``:material/upload_file:``): how a test finds a section made without a key. Streamlit shows the unfold arrow
    in the icon's place while the pointer is on the label: ``open_section_with_icon`` unfolds it."""
    symbol = page.locator(f'{OWN_LABEL} [data-testid="stExpanderIcon"]', has_text=re.compile(rf"^{re.escape(icon)}$"))
    return page.locator('[data-testid="stExpander"]').filter(has=symbol).first


def open_section_with_icon(page, icon: str):
    """Unfold ``section_with_icon(page, icon)`` with a click on its label, move the pointer off it (so the icon that
    finds it is shown again), and return it once open."""
    section = section_with_icon(page, icon)
    section.locator(OWN_LABEL).click()
    page.mouse.move(0, 0)
    expect(section.locator(OWN_DETAILS)).to_have_attribute("open", re.compile(".*"), timeout=RERUN)
    return section


def share_box(page):
    """The page's "link to this view" box (ui.urlstate.share_box): the section whose code block is an address."""
    address = page.locator('[data-testid="stCode"]', has_text=re.compile(r"^\s*https?://"))
    return page.locator('[data-testid="stExpander"]').filter(has=address).last  # not a section holding it


def folded_section(page, key: str):
    """The collapsible section made with ``key`` (ui.crowd.folded), or the one holding the widget made with ``key``
    (a section made without a key of its own)."""
    # sections can hold sections: the one made with the key, not one inside it; the innermost holding the widget
    section = '[data-testid="stExpander"]'
    own = f".st-key-{key} {section}:not(.st-key-{key} {section} {section})"
    holding = f"{section}:has(.st-key-{key}):not(:has({section} .st-key-{key}))"
    return page.locator(f"{own}, {holding}").first


def open_folded(page, key: str) -> None:
    """``unfold`` the section ``folded_section(page, key)``."""
    unfold(page, folded_section(page, key))


def unfold(page, section) -> None:
    """Unfold the collapsed ``section``, with a click on its label as a person would (it stays open across
    reruns); a section already open is left open."""
    section.wait_for(timeout=RERUN)
    details = section.locator(OWN_DETAILS)
    deadline = time.monotonic() + RERUN / 1000
    # Opening a section reruns the page; a click that lands while an earlier rerun redraws the page can be
    # lost, as a person's would be, who then clicks again: so wait for the page to be idle, and click again
    # while the section stays closed.
    while details.get_attribute("open") is None and time.monotonic() < deadline:
        wait_for_app(page, timeout=RERUN)
        if details.get_attribute("open") is None:
            section.locator(OWN_LABEL).click()
        with contextlib.suppress(AssertionError):
            expect(details).to_have_attribute("open", re.compile(".*"), timeout=5_000)
    expect(details).to_have_attribute("open", re.compile(".*"), timeout=RERUN)


def download_table(page, key: str, file: str = "csv"):
    """Open a page's download section (ui.export.download_buttons with ``key``: its files are made once it is
    open), click the button for ``file`` ("csv" or "json") and return the Download."""
    open_folded(page, f"{key}_downloads")
    target = button(page, f"{key}_{file}")
    expect(target).to_be_visible(timeout=RERUN)
    with page.expect_download() as dl:
        target.click()
    return dl.value
