"""Every page's insight on its first screen: at 1280x720, in normal and in presenter mode
(``?talk=1``), for the Overview and every page of ``ui.navigation.PAGE_TABLE``, the page's
``st.container(key="punchline")`` holds text and lies inside the first screen with the page at its
top, no exception box is shown, no metric value, metric label or page link is cut (``scrollWidth <=
clientWidth``), no text
shows raw markdown (a literal ``**``, outside code) once the page has ended, and every chart shown
has a plotting area at least MIN_PLOT px tall (Streamlit fits a chart's axes, titles and legends into
its height, which squeezed some plots to strips).

In presenter mode each page also has presenter type (a root font of at least 20 px), the sidebar
folded away (it stayed open once), every chart drawn at least MIN_CHART_HEIGHT tall (charts folded
inside a closed expander are not drawn, so not measured; charts once shrank to strips), and every legend
inside its chart's box. These checks ride on the same load of the page as the first-screen checks.

A screenshot of each first screen is kept under artifacts/screenshots/first-<mode>-<page>.png.
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import (
    assert_no_legend_cut,
    assert_sidebar_collapsed,
    expect_root_font_at_least,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)
from tests.e2e.test_talk import HEIGHT, SLOW, WIDTH, assert_healthy, assert_punchline_in_first_screen
from ui.navigation import PAGE_TABLE, STORY

PAGES = [("", "Overview"), *((stem, title) for stem, title, *_ in PAGE_TABLE)]
STORY_PAGES = {"", *(stem for stem, *_, section in PAGE_TABLE if section == STORY)}
STORY_MAX_HEIGHT = 3 * 720  # px: a story page is read in three screens at most, at its defaults

# the height of the page's content: Streamlit scrolls its main block inside its own container
PAGE_HEIGHT = """() => { const m = document.querySelector('[data-testid="stMain"]');
    const b = m.querySelector('[data-testid="stMainBlockContainer"]') || m; return Math.round(b.scrollHeight); }"""

# steps only a developer or a server's operator can take; a visitor meets them only inside a collapsed section
DEVELOPER_TEXT = re.compile(r"python -m scripts|FP_RECORDINGS_DIR|pip install|make run|git clone")
MIN_PLOT = 80  # px: a plotting area below this reads as a strip on a projector
MIN_CHART_HEIGHT = 150  # px: a whole chart below this is a strip on a projector (about 60 px)

# The height of each shown chart's plotting area: the background of vega's root frame (SVG); -1 for a
# chart not drawn yet (or drawn on a canvas, which has no frame to measure).
PLOT_HEIGHTS = """() => Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'))
    .filter(c => c.offsetParent !== null)
    .map(c => { const bg = c.querySelector('g.mark-group.role-frame.root path.background');
                return bg ? Math.round(bg.getBoundingClientRect().height) : -1; })"""

# metric values and labels and page links are one line each, cut with an ellipsis where their column ends
CUT_METRICS = """() => Array.from(document.querySelectorAll(['[data-testid="stMetricValue"]',
    '[data-testid="stMetricValue"] *', '[data-testid="stMetricLabel"] *', '[data-testid="stPageLink"] *'].join(', ')))
    .filter(e => e.scrollWidth > e.clientWidth + 1 && e.innerText).map(e => e.innerText)"""

RAW_MARKUP = """() => Array.from(document.querySelectorAll('[data-testid="stMarkdownContainer"]'))
    .map(e => { const c = e.cloneNode(true); c.querySelectorAll('code, pre').forEach(x => x.remove());
                return c.innerText; })
    .filter(t => t.includes('**'))"""


@pytest.fixture(scope="module")
def contexts(browser):
    made = {mode: browser.new_context(viewport={"width": WIDTH, "height": HEIGHT}) for mode in ("normal", "talk")}
    yield made
    for c in made.values():
        c.close()


@pytest.mark.parametrize("mode", ["normal", "talk"])
@pytest.mark.parametrize(("stem", "title"), PAGES, ids=[s or "overview" for s, _ in PAGES])
def test_punchline_in_first_screen(server, contexts, mode, stem, title):
    page = contexts[mode].new_page()
    try:
        page.goto(f"{server.url}/{stem}" + ("?talk=1" if mode == "talk" else ""))
        wait_for_app(page, timeout=SLOW)
        screenshot(page, f"first-{mode}-{stem or 'overview'}")
        assert_healthy(page, title)
        assert_punchline_in_first_screen(page, f"{title} ({mode})")
        if stem:  # every page of the story ends with its link to the next one: then all its text is there
            wait_for_page_end(page, timeout=SLOW)
        cut = until(lambda: page.evaluate(CUT_METRICS), lambda c: c == [])  # values take their width late
        assert cut == [], f"{title} ({mode}): metric values, metric labels or links cut: {cut}"
        raw = until(lambda: page.evaluate(RAW_MARKUP), lambda r: r == [])
        assert raw == [], f"{title} ({mode}): raw markdown shown: {raw}"
        plots = until(lambda: page.evaluate(PLOT_HEIGHTS), lambda h: all(x >= MIN_PLOT for x in h))
        assert all(x >= MIN_PLOT for x in plots), f"{title} ({mode}): plotting areas {plots} px, under {MIN_PLOT}"
        # innerText leaves out what a closed expander holds: what a visitor sees without opening anything
        seen = until(lambda: DEVELOPER_TEXT.findall(page.locator('[data-testid="stMain"]').inner_text()),
                     lambda found: found == [])
        assert seen == [], f"{title} ({mode}): developer instructions in open view: {seen}"
        if stem in STORY_PAGES:  # three screens at the defaults, in presenter type too (its settings fold away)
            height = until(lambda: page.evaluate(PAGE_HEIGHT), lambda h: h <= STORY_MAX_HEIGHT)
            print(f"\n{title} ({mode}): {height} px tall")
            assert height <= STORY_MAX_HEIGHT, f"{title} ({mode}): {height} px, over three screens"
        if mode == "talk":
            assert_presenter_layout(page, title)
    finally:
        page.close()


def assert_presenter_layout(page, title: str) -> None:
    """Presenter type, the sidebar folded away, every drawn chart tall and its legend inside it."""
    expect_root_font_at_least(page, 20, title)
    page.wait_for_timeout(500)  # the sidebar must stay folded, not only start so
    assert_sidebar_collapsed(page, what=f"{title}: the sidebar is open in presenter mode")
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    heights = []
    for i in range(charts.count()):
        chart = charts.nth(i)
        if not chart.is_visible():
            continue
        drawing = chart.locator("canvas, svg").first
        drawing.wait_for(timeout=60_000)
        # vega sizes its canvas to the container after a frame or two, late on a busy machine
        box = until(drawing.bounding_box, lambda b: b is not None and b["height"] >= MIN_CHART_HEIGHT)
        assert box is not None, f"{title}: chart {i} has no box"
        heights.append(round(box["height"]))
        assert box["height"] >= MIN_CHART_HEIGHT, f"{title}: chart {i} is {box['height']:.0f} px tall"
    assert_no_legend_cut(page, title)
    print(f"\n{title}: chart heights in presenter mode (px): {heights}")
