"""The whole talk, as a speaker gives it: one session at 1280x720 on a fresh server.

Presenter mode is switched on with one click; every scenario of ``core.studies.talk.scenarios()`` is opened
from the home page's links, in order and again in reverse (so a page opened a second time by
another scenario's link must take that link's settings); for each one its settings are checked on
its widgets, its punchline (``st.container(key="punchline")``) must lie inside the first screen with
the page scrolled to the top, no exception box and no empty chart. The training scenario is played,
reset and played again. A screenshot of each scenario's first screen is kept under
artifacts/screenshots/talk-*.png.
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from core.arith.vectors import GENERATORS
from core.kernels.trees import TREE_ORDERS
from core.studies.talk import scenarios
from core.training.mlp import PRESETS
from tests.e2e.conftest import (
    RERUN,
    Server,
    assert_sidebar_collapsed,
    button,
    close_sidebar,
    drawn,
    expect_root_font_at_least,
    keyed,
    nav_link,
    open_sidebar,
    page_link,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)

WIDTH, HEIGHT = 1280, 720
TRAINING = "pages/training_divergence.py"
SLOW = 240_000  # ms: a scenario's first visit computes its numbers on a busy 2-core machine


@pytest.fixture(scope="module")
def fresh_server():
    """A server no session has seen yet: the first click on Presenter mode broke only there."""
    s = Server()
    yield s
    s.stop()


def selectbox_text(page, key: str) -> str:
    """The select box's label and its shown value (the value may sit in the box's input)."""
    box = page.locator(f'.st-key-{key} [data-testid="stSelectbox"]').first
    values = box.locator("input").evaluate_all("els => els.map(e => e.value + ' ' + (e.placeholder || ''))")
    return " ".join([box.text_content() or "", *values])


def assert_selectbox_shows(page, key: str, text: str) -> None:
    """The select box made with ``key`` shows ``text`` (waited for: the link's settings reach the widget with the
    page's script run)."""
    shown = until(lambda: selectbox_text(page, key), lambda t: text in t)
    assert text in shown, (key, text, shown)


def expect_number_value(page, key: str, value: str) -> None:
    expect(keyed(page, key).locator("input")).to_have_value(value, timeout=RERUN)


def check_settings(page, path: str, params: dict) -> None:
    """The scenario's link settings (the page at ``path`` with ``params``), read back from the page's own widgets."""
    if path == "pages/non_associativity.py":
        assert_selectbox_shows(page, "na_preset", params["preset"])
        for k, v in zip("abc", ["0.1", "0.2", "0.3"], strict=True):
            expect_number_value(page, f"na_{k}", v)
        assert_selectbox_shows(page, "na_fmt", "float64")
    elif path == "pages/summation_lab.py":
        expect_number_value(page, "sl_n", params["n"])
        assert_selectbox_shows(page, "sl_storage", params.get("storage", "float32"))
        if "tree" in params:
            assert_selectbox_shows(page, "sl_tree_order", TREE_ORDERS[params["tree"]])
        else:  # a link that names no tree order leaves the default, and no tree is drawn for 10^6 values
            expect(page.get_by_text("Trees are drawn for n ≤")).to_have_count(1, timeout=RERUN)
    elif path == "pages/cpu_vs_gpu.py":
        assert_selectbox_shows(page, "cg_gen", GENERATORS[params["vector"]])
        assert_selectbox_shows(page, "cg_n", f"{int(params['n']):,}")
        assert_selectbox_shows(page, "cg_dtype", params["format"])
        if params.get("room") == "on":  # the speaker's tally of the room's GPUs, on the first screen
            expect(page.locator(".st-key-the_room")).to_contain_text("answered", timeout=RERUN)
    elif path == TRAINING:
        assert_selectbox_shows(page, "td_preset", params["preset"])
        preset = PRESETS[params["preset"]].settings
        assert_selectbox_shows(page, "td_dtype", preset.dtype)
    elif path in ("pages/mitigations.py", "pages/serving.py"):
        assert params == {}  # the page's defaults: nothing to apply
    else:
        raise AssertionError(f"no settings check for a scenario of {path!r}: add one")


def assert_punchline_in_first_screen(page, title: str) -> None:
    punch = page.locator(".st-key-punchline")
    expect(punch).to_have_count(1, timeout=RERUN)
    # the main area's scroll containers (the punchline's ancestors) sit at the top
    scrolled = until(lambda: punch.evaluate("""p => { const out = [];
        for (let e = p.parentElement; e; e = e.parentElement) {
            if (e.scrollTop > 0) out.push((e.dataset.testid || e.className) + ' ' + e.scrollTop); }
        return out; }"""), lambda v: v == [])
    assert scrolled == [], f"{title}: the page opened scrolled: {scrolled}"

    def in_first_screen(box) -> bool:
        return box is not None and box["height"] > 40 and box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT

    box = until(punch.bounding_box, in_first_screen)  # the layout settles after the page's last element
    assert box is not None and box["height"] > 40, (title, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= HEIGHT, (title, box)
    expect(punch, title).to_have_text(re.compile(r"\S"), use_inner_text=True, timeout=RERUN)  # not empty


def assert_no_empty_chart(page, title: str, minimum: int = 0) -> int:
    """No chart of the page is empty axes; how many charts it has (at least ``minimum``, waited for)."""
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    if minimum:  # the charts of a script run arrive one by one
        expect(charts.nth(minimum - 1), f"{title}: fewer than {minimum} charts").to_be_attached(timeout=RERUN)
    for i in range(charts.count()):
        chart = charts.nth(i)
        chart.locator("canvas, svg").first.wait_for(timeout=60_000)
        assert drawn(chart) > 50, f"{title}: chart {i} drew no marks"  # vega draws on a later animation frame
    return charts.count()


def assert_healthy(page, title: str) -> None:
    """No exception box (passes at once when there is none; one left from the previous script run gets the time a
    rerun takes to replace it)."""
    errors = page.locator('[data-testid="stException"]')
    try:
        expect(errors).to_have_count(0, timeout=RERUN)
    except AssertionError as err:
        raise AssertionError(f"{title}: {errors.first.inner_text()}") from err


def open_scenario(page, path: str, params: dict) -> None:
    """Back to the overview through the sidebar (same session), then the scenario's link: the page at ``path``
    with ``params``, found by its address."""
    open_sidebar(page)  # presenter mode folds it away
    nav_link(page, "").click()
    wait_for_app(page, timeout=SLOW)
    stem = path.removeprefix("pages/").removesuffix(".py")
    page_link(page, stem + (f"?{urlencode(params)}" if params else "")).click()
    wait_for_app(page, timeout=SLOW)
    wait_for_page_end(page, timeout=SLOW)  # the checks that follow count the page's charts
    close_sidebar(page)  # the speaker folds it away again: the slide gets the whole width


def slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def play_to_the_end(page) -> None:
    button(page, "td_play").click()
    expect(button(page, "td_play")).to_be_disabled(timeout=SLOW)
    wait_for_app(page, timeout=SLOW)


def test_the_whole_talk(fresh_server, browser):
    context = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
    page = context.new_page()
    page.goto(fresh_server.url)
    wait_for_app(page, timeout=SLOW)

    keyed(page, "presenter").locator('[data-testid="stCheckbox"]').click()
    wait_for_app(page)
    expect(keyed(page, "presenter").get_by_role("switch")).to_be_checked(timeout=RERUN)
    expect_root_font_at_least(page, 20)
    page.wait_for_timeout(500)
    assert_sidebar_collapsed(page, what="presenter mode leaves the sidebar open")
    screenshot(page, "talk-0-home")

    order = list(range(len(scenarios())))
    for visit, i in enumerate(order + order[::-1]):
        title, path, params, _ = scenarios()[i]
        open_scenario(page, path, params)
        assert_healthy(page, title)
        check_settings(page, path, params)
        assert_punchline_in_first_screen(page, title)
        drawn = assert_no_empty_chart(page, title)
        if visit < len(order):
            screenshot(page, f"talk-{i + 1}-{slug(title)}")
        if path == TRAINING:
            # a scenario opens ready to play, also the second time (it showed the old run)
            expect(button(page, "td_play")).to_be_enabled(timeout=RERUN)
            if visit >= len(order):
                continue  # played, reset and played again on the first visit
            play_to_the_end(page)
            # the key numbers beside the charts, where the gap first passes 1% among them (the third)
            expect(page.locator('.st-key-td_numbers [data-testid="stMetric"]').nth(2)).to_be_visible(timeout=RERUN)
            assert_punchline_in_first_screen(page, title)
            # loss, "How far apart", bits: none empty
            assert assert_no_empty_chart(page, title, minimum=drawn + 3) >= drawn + 3
            assert_healthy(page, title)
            screenshot(page, f"talk-{i + 1}-{slug(title)}-played")
            button(page, "td_reset").click()
            wait_for_app(page, timeout=SLOW)
            expect(button(page, "td_play")).to_be_enabled(timeout=RERUN)
            expect(button(page, "td_step")).to_be_enabled(timeout=RERUN)
            play_to_the_end(page)
            assert_healthy(page, title)
            assert_no_empty_chart(page, title)
    # presenter type reached what the room reads: code, bits and metric values, none cut short
    sizes = until(lambda: page.evaluate("""() => ['code', '.fp-bits', '[data-testid="stMetricValue"]'].map(s => {
        const e = document.querySelector(s); return e ? parseFloat(getComputedStyle(e).fontSize) : null; })"""),
        lambda v: all(s is None or s >= 19 for s in v))
    assert all(s is None or s >= 19 for s in sizes), sizes
    cut = until(lambda: page.evaluate("""() => Array.from(document.querySelectorAll(
        '[data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *'))
        .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""), lambda v: v == [])
    assert cut == [], cut
    context.close()
