"""Training divergence in a real browser: step, play live, watch the charts fill in, pause; the
same session driven by fast clicks, which must never advance one pair from two script runs; and a
room pressing Play on one link at once, every session shown the same curves."""

from __future__ import annotations

import os
import pathlib
import re
import threading
import time
import urllib.request
from urllib.parse import quote, urlencode

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import expect

from core.crowd.budget import training_cost
from core.training.differences import PLAIN
from core.training.mlp import DEFAULT_PRESET, PRESETS, TrainSettings, network_name
from core.training.pair import PairedRun
from core.training.seeds import summarize
from tests.e2e.conftest import (
    CANVAS_SIGNATURE,
    PIXELS_NEAR,
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    assert_sidebar_collapsed,
    button,
    drawn,
    fill_number,
    folded_section,
    keyed,
    nav_link,
    open_folded,
    page_link,
    press,
    screenshot,
    until,
    wait_for_app,
    wait_for_page_end,
)

CLOCK = os.sysconf("SC_CLK_TCK")


def details(page):
    """What the page shows of the pair below its first screen (the step reached, the losses, the gaps)."""
    return keyed(page, "td_details")


def after_step(n: int | None = None) -> re.Pattern:
    """The details' heading for step ``n`` (any step: its number in group 1)."""
    number = r"\d+" if n is None else str(n)
    return re.compile(f"After step ({number}) · ")


def before_a_first_step(page):
    """What the key numbers' place holds before a first step: a note (press Play, or where the pair parts)."""
    return keyed(page, "td_numbers").locator('[data-testid="stAlert"]')


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK


def shown_step_and_bits(page) -> tuple[int, str, str]:
    """The step the page says it ran and the hex bit patterns of the losses it shows, read once the page shows
    both and two readings a quarter second apart agree (no script run is still repainting it)."""
    head = details(page).locator('[data-testid="stMarkdown"]').filter(has_text=after_step()).first
    bits = details(page).locator(".fp-bits")
    expect(head).to_be_visible(timeout=RERUN)
    expect(bits).to_have_count(2, timeout=RERUN)
    previous: list = [None]

    def same_as_before(reading) -> bool:
        same, previous[0] = reading == previous[0], reading
        return same

    text, titles = until(lambda: (head.inner_text(), bits.evaluate_all("els => els.map(e => e.getAttribute('title'))")),
                         same_as_before)
    step = int(after_step().search(text).group(1))
    hexes = [t.split()[-1] for t in titles]
    assert len(hexes) == 2, titles
    return step, hexes[0], hexes[1]


def clean_bits(settings: TrainSettings, steps: int) -> tuple[str, str]:
    last = PairedRun(settings).run(steps)[-1]
    return f"0x{last.loss_a_bits:08x}", f"0x{last.loss_b_bits:08x}"


def assert_server_alive(server) -> None:
    assert server.proc.poll() is None, f"the server died:\n{server.log.read_text()[-3000:]}"
    with urllib.request.urlopen(f"{server.url}/_stcore/health", timeout=5) as r:
        assert r.read().decode().strip() == "ok"


class HealthPoller:
    """Asks /_stcore/health every 0.2 s in a thread and keeps the slowest answer's time.

    A viewer's fast clicks must not starve the server's event loop for everyone else: Streamlit's
    full gc.collect(2) after each of forty short script runs once held the GIL back to back and
    the health check stopped answering for 5-6 s (now off in .streamlit/config.toml).
    """

    def __init__(self, server) -> None:
        self.url, self.slowest, self.errors = f"{server.url}/_stcore/health", 0.0, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=30) as r:
                    r.read()
            except OSError as err:
                self.errors.append(repr(err))
            self.slowest = max(self.slowest, time.monotonic() - asked)
            self._stop.wait(0.2)

    def __enter__(self) -> HealthPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=35)


def test_step_then_play_and_watch_it_update(server, page):
    page.goto(f"{server.url}/training_divergence")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(before_a_first_step(page)).to_be_visible(timeout=RERUN)

    press(page, button(page, "td_step"))
    expect(details(page)).to_contain_text(after_step(1), timeout=60_000)
    wait_for_app(page)
    assert_charts_rendered(page, 4)
    screenshot(page, "training-step-1")

    press(page, button(page, "td_play"), settle=False)
    seen = set()
    deadline = time.monotonic() + 300  # 500 steps take about 10 s alone; a loaded machine, minutes
    progress = page.locator('[data-testid="stProgress"]')
    while time.monotonic() < deadline:
        text = progress.inner_text() if progress.count() else ""
        m = re.search(r"step ([\d,]+) of 500", text)
        if m:
            seen.add(int(m.group(1).replace(",", "")))
        if 500 in seen:
            break
        page.wait_for_timeout(50)
    assert 500 in seen, seen
    wait_for_app(page)
    expect(details(page)).to_contain_text(after_step(500), timeout=60_000)
    expected = summarize(PairedRun(TrainSettings()).run(500)).first_rel_1pct  # computed here, not measured once
    expect(key_number(page, "gap")).to_contain_text(str(expected), timeout=RERUN)
    expect(button(page, "td_play")).to_be_disabled(timeout=RERUN)
    assert_charts_rendered(page, 5)
    assert_healthy_page(page)
    screenshot(page, "training-played")
    assert len(seen) >= 2, f"the page never showed an intermediate step: {sorted(seen)}"

    press(page, button(page, "td_reset"))  # one Reset enables Play and Step again
    expect(before_a_first_step(page)).to_be_visible(timeout=RERUN)
    expect(button(page, "td_play")).to_be_enabled(timeout=RERUN)
    expect(button(page, "td_step")).to_be_enabled(timeout=RERUN)


FAST_CLICKS = 40


@pytest.mark.timeout(300)
def test_fast_clicks_never_overlap_on_one_pair(server, page):
    """Fast reruns advanced one PairedRun from two script threads at once
    (inplace-modification errors, wrong losses, and a segfault that took every viewer down).

    Clicks "+10 steps" FAST_CLICKS times with no wait, then Play / Pause / Play; the page must show
    no exception, the server must live, and the losses shown must be bit for bit a clean run's
    for the step the page says it reached.
    """
    started = time.monotonic()
    page.goto(f"{server.url}/training_divergence?steps=5000")
    wait_for_app(page)
    plus10 = button(page, "td_step10")
    with HealthPoller(server) as health:
        clicking = time.monotonic()
        for _ in range(FAST_CLICKS):
            # force: a person clicking fast does not wait for the button to stop moving as the rerun redraws
            plus10.click(no_wait_after=True, force=True, timeout=10_000)
        clicked = time.monotonic()
        wait_for_app(page, timeout=240_000)  # every click asks for 10 steps: the server has 400 to apply
    assert not health.errors, health.errors
    assert health.slowest < 3, f"the health check took {health.slowest:.1f} s to answer during the clicks"
    assert_healthy_page(page)
    assert_server_alive(server)
    step, a_hex, b_hex = shown_step_and_bits(page)
    settled = time.monotonic()
    assert 10 <= step <= 10 * FAST_CLICKS and step % 10 == 0, step
    settings = TrainSettings(steps=5000)
    assert (a_hex, b_hex) == clean_bits(settings, step)
    screenshot(page, "training-fast-clicks")

    # Play, then Pause and Play in quick succession, then Pause: whatever interleaving, a clean run
    play, pause = button(page, "td_play"), button(page, "td_pause")
    play.click()
    for _ in range(4):
        page.wait_for_timeout(150)
        pause.click(no_wait_after=True)
        play.click(no_wait_after=True)
    page.wait_for_timeout(400)
    pause.click()
    wait_for_app(page, timeout=240_000)
    assert_healthy_page(page)
    assert_server_alive(server)
    step2, a_hex, b_hex = shown_step_and_bits(page)
    assert step2 >= step, (step, step2)
    assert (a_hex, b_hex) == clean_bits(settings, step2)
    print(f"\n{FAST_CLICKS} fast clicks in {clicked - clicking:.1f} s reached step {step} "
          f"({settled - clicked:.1f} s to settle, health answered within {health.slowest:.2f} s), "
          f"Play/Pause reached step {step2}: bit-identical to clean runs; "
          f"{time.monotonic() - started:.1f} s in all")


def test_a_preset_link_sets_its_settings_in_the_browser(server, page):
    """The link showed the preset's name but ran the default difference."""
    name = "One thread vs all threads"
    page.goto(f"{server.url}/training_divergence?preset={quote(name)}")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(keyed(page, "td_preset").locator("input")).to_have_value(name, timeout=RERUN)
    expect(page.get_by_text(PRESETS[name].note)).to_be_visible(timeout=RERUN)
    press(page, button(page, "td_step10"))
    said = after_step(10).pattern + re.escape(PLAIN[PRESETS[name].settings.source])  # what differs, in its words
    expect(details(page)).to_contain_text(re.compile(said), timeout=60_000)
    for which in ("loss", "weights"):
        expect(key_number(page, which)).to_contain_text("not yet", timeout=RERUN)
    assert PRESETS[name].settings != PRESETS[DEFAULT_PRESET].settings


def test_float64_mitigation_in_the_browser(server, page):
    page.goto(f"{server.url}/training_divergence")
    wait_for_app(page)
    open_folded(page, "td_open_float64")  # made once opened: opening reruns the page
    press(page, button(page, "td_f64"), settle=False)
    section = folded_section(page, "td_open_float64")
    expect(section).to_contain_text(re.compile(r"float64 pair: not within 500 steps"), timeout=240_000)
    # the prediction from the float32 pair's doubling time, and what the float64 pair showed
    expect(section).to_contain_text(re.compile(r"29 × [\d.]+ ≈ \d+ steps more"), timeout=RERUN)
    expect(section).to_contain_text(re.compile(r"The float64 pair is not 1% apart within 500 steps"), timeout=RERUN)
    wait_for_app(page)
    assert_charts_rendered(page, 1)
    assert_healthy_page(page)
    screenshot(page, "training-float64")


def _start_seed_study(server, page) -> int:
    """Start the largest seed study the page accepts at 5000 steps (core.crowd.budget decides); return k."""
    k = max(k for k in range(2, 17) if training_cost(5000, k).fits)
    page.goto(f"{server.url}/training_divergence?steps=5000")
    wait_for_app(page)
    open_folded(page, "td_open_equal")
    fill_number(page, "td_k", k)
    button(page, "td_seeds").click(timeout=60_000)
    bar = folded_section(page, "td_open_equal").locator('[data-testid="stProgress"]')
    expect(bar).to_contain_text(re.compile(rf"[1-9][\d,]* of {k * 5000:,} steps"), timeout=60_000)
    return k


def test_the_seed_study_shows_progress_and_stops_when_a_setting_changes(server, page):
    """A seed study ran to the end whatever the visitor did."""
    _start_seed_study(server, page)
    screenshot(page, "training-seeds-progress")
    button(page, "td_step").click()
    # A study that ignored the change would hold the step back for minutes; a busy machine may take seconds.
    expect(details(page)).to_contain_text(after_step(1), timeout=RERUN)
    wait_for_app(page, timeout=RERUN)
    expect(folded_section(page, "td_open_equal").locator('[data-testid="stProgress"]')).to_have_count(
        0, timeout=RERUN)
    page.wait_for_timeout(1000)
    before = cpu_seconds(server.proc.pid)
    page.wait_for_timeout(3000)
    spent = cpu_seconds(server.proc.pid) - before
    print(f"\nCPU seconds of the server in the 3 s after a setting change stopped the study: {spent:.2f}")
    assert spent < 0.5, spent


def test_the_seed_study_stops_when_its_tab_closes(server, browser):
    """Two closed tabs kept training and burned 332 CPU-seconds."""
    context = browser.new_context(viewport={"width": 1400, "height": 1600})
    page = context.new_page()
    _start_seed_study(server, page)
    at_close = cpu_seconds(server.proc.pid)
    context.close()
    samples = []
    for _ in range(20):  # 5 s after the close, every quarter second
        time.sleep(0.25)
        samples.append(cpu_seconds(server.proc.pid) - at_close)
    late = samples[-1] - samples[7]  # from 2 s to 5 s after the close
    print(f"\nCPU seconds of the server after the tab closed mid-study: {samples[3]:.2f} in the first second, "
          f"{samples[7]:.2f} in 2 s, {samples[-1]:.2f} in 5 s ({late:.2f} from 2 to 5 s); "
          "the whole study would have taken minutes")
    if late >= 0.5:  # which threads of the server were busy (debugging aid)
        import glob
        busy = []
        for stat in glob.glob(f"/proc/{server.proc.pid}/task/*/stat"):
            text = pathlib.Path(stat).read_text()
            name = text[text.index("(") + 1:text.rindex(")")]
            f = text.rsplit(")", 1)[1].split()
            busy.append((int(f[11]) + int(f[12]), name, stat.split("/")[4]))
        print(sorted(busy)[-8:])
    assert late < 0.5, samples
    assert_server_alive(server)


def _plot_columns_mostly_white(png: bytes) -> float:
    """Share of the plotting area's pixel columns that are mostly background (gaps between cells)."""
    import io

    import numpy as np
    from PIL import Image

    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    white = im.min(axis=2) > 240
    rows = (~white).mean(axis=1) > 0.5  # rows crossing the plotting area
    sub = white[rows]
    cols = (~sub).mean(axis=0) > 0.3  # columns inside it (axis labels are sparse)
    inner = sub[:, cols]
    return float((inner.mean(axis=0) > 0.5).mean())


def _red_fill_height(png: bytes) -> int:
    """Height in pixels of the bits strip's filled area, near its right end."""
    import io

    import numpy as np
    from PIL import Image

    im = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)
    red = (abs(im[..., 0] - 211) < 30) & (abs(im[..., 1] - 116) < 30) & (abs(im[..., 2] - 106) < 30)
    cols = np.flatnonzero(red.any(axis=0))
    col = cols[int(len(cols) * 0.95)]
    return int(red[:, col].sum())


def test_training_charts_at_1920_px(server, browser):
    """Boundaries drawn as vertical stripes at 1920 px; the bits strip about 15 px tall."""
    context = browser.new_context(viewport={"width": 1920, "height": 3600})
    page = context.new_page()
    try:
        page.goto(f"{server.url}/training_divergence?steps=150")
        wait_for_app(page)
        press(page, button(page, "td_play"), settle=False)
        expect(details(page)).to_contain_text(after_step(150), timeout=240_000)
        wait_for_app(page, timeout=120_000)
        assert_charts_rendered(page, 5)
        assert_healthy_page(page)
        screenshot(page, "training-1920")
        charts = page.locator('[data-testid="stVegaLiteChart"]')
        for i in (4, 5):  # the two decision boundaries
            gaps = _plot_columns_mostly_white(charts.nth(i).screenshot())
            assert gaps < 0.02, f"boundary chart {i}: {gaps:.0%} of its columns are gaps (stripes)"
        share = details(page).locator('[data-testid="stMetric"]')  # the share of parameter bits that differ
        expect(share).to_contain_text(re.compile(r"[\d.]+%"), use_inner_text=True, timeout=RERUN)  # then read it
        pct = float(re.search(r"([\d.]+)%", share.inner_text()).group(1)) / 100
        fill = _red_fill_height(charts.nth(3).screenshot())
        plot_height = fill * 0.5 / pct  # the strip's y axis runs from 0 to 50%
        print(f"\nbits strip: {pct:.1%} of bits differ, fill {fill} px, plotting area about {plot_height:.0f} px")
        assert plot_height >= 120, plot_height
    finally:
        context.close()


def test_a_scenario_reopened_from_the_home_page_is_ready_to_play(server, page):
    """Reopening 'Watch two runs diverge' showed the old run (finished: Play disabled)."""
    page.goto(server.url)
    wait_for_app(page)
    for attempt in range(2):
        page_link(page, "training_divergence", with_settings=True).click()  # the talk's scenario: a preset
        expect(before_a_first_step(page)).to_be_visible(timeout=60_000)
        wait_for_app(page)
        assert_healthy_page(page)
        expect(button(page, "td_play")).to_be_enabled(timeout=RERUN)
        if attempt == 0:
            press(page, button(page, "td_step10"))
            expect(details(page)).to_contain_text(after_step(10), timeout=60_000)
            nav_link(page, "").click()  # back to the overview
            wait_for_app(page)
    screenshot(page, "training-scenario-reopened")


FIRST_SCREEN = {"width": 1280, "height": 720}
BLUE_A, ORANGE_B = (0x00, 0x72, 0xB2), (0xE6, 0x9F, 0x00)  # ui.training_view.RUN_COLOURS


def live_charts(page):
    """The loss chart and the relative-gap chart beside the buttons (inside the punchline container)."""
    charts = page.locator('.st-key-punchline [data-testid="stVegaLiteChart"]')
    expect(charts).to_have_count(2, timeout=RERUN)
    return charts.nth(0), charts.nth(1)


def progress_bar(page):
    """The pair's progress bar beside the live charts ("step n of N")."""
    return page.locator('.st-key-punchline [data-testid="stProgress"]')


def shown_progress(page) -> int:
    bar = progress_bar(page)
    expect(bar).to_contain_text(re.compile(r"step [\d,]+ of"), use_inner_text=True, timeout=RERUN)  # then read it
    return int(re.search(r"step ([\d,]+) of", bar.inner_text()).group(1).replace(",", ""))


def playing_step(page) -> int | None:
    """The step the progress bar shows at this moment (None: none shown just now, as while a frame replaces it)."""
    current = page.locator('.st-key-punchline [data-stale="false"] [data-testid="stProgress"]').first
    try:
        text = current.inner_text(timeout=1_000)
    except PlaywrightError:
        return None
    found = re.search(r"step ([\d,]+) of", text)
    return int(found.group(1).replace(",", "")) if found else None


# The key numbers beside the live charts, in the order ui.training_view._key_numbers draws them
KEY_NUMBERS = ("loss", "weights", "gap", "doubling")


def key_number(page, which: str):
    """One key number (KEY_NUMBERS): which of loss and weights differ first, where the gap passes 1%, how fast
    ‖Δθ‖ doubles."""
    return page.locator('.st-key-td_numbers [data-testid="stMetric"]').nth(KEY_NUMBERS.index(which))


def colour_pixels(chart) -> tuple[int, int]:
    """How much of the chart is drawn in run A's blue and in run B's orange (PIXELS_NEAR)."""
    handle = chart.element_handle()
    return (chart.page.evaluate(PIXELS_NEAR, [handle, list(BLUE_A)]),
            chart.page.evaluate(PIXELS_NEAR, [handle, list(ORANGE_B)]))


def assert_on_first_screen(chart, what: str, playing: bool = False) -> None:
    """The chart's drawing lies inside the first screen; ``playing``: the chart's own box, since Play replaces its
    drawing with every frame (between two, none is there to measure)."""
    def in_first_screen(box) -> bool:
        return (box is not None and box["height"] >= 150 and box["y"] >= 0
                and box["y"] + box["height"] <= FIRST_SCREEN["height"])

    measured = chart if playing else chart.locator("canvas, svg").first

    def box_now():
        try:
            return measured.bounding_box(timeout=1_000)
        except PlaywrightError:  # replaced while read: read again
            return None

    box = until(box_now, in_first_screen)  # the layout settles late
    assert box is not None and box["height"] >= 150, (what, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= FIRST_SCREEN["height"], (what, box)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("talk", ["0", "1"], ids=["normal", "presenter"])
def test_the_losses_part_on_the_first_screen_while_play_runs(server, browser, talk):
    """The loss chart began 1.6 screens down, and Play showed a progress bar and four metrics.

    At 1280x720, normal and presenter mode: after one Step both live charts (the losses of A and B,
    their relative gap) lie inside the first screen and neither is empty axes; the loss chart draws
    A in blue and B in orange; the metrics say which of loss and weights differ, as the record does;
    while Play runs, the step shown and the loss chart's pixels change between two samples, the
    charts still on the first screen. Screenshots: training-first-screen-<mode>-*.png."""
    mode = "presenter" if talk == "1" else "normal"
    context = browser.new_context(viewport=FIRST_SCREEN)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/training_divergence?steps=400&speed=2&talk={talk}")
        wait_for_app(page, timeout=120_000)
        assert_healthy_page(page)
        assert_sidebar_collapsed(page, talk == "1")
        loss, gap = live_charts(page)
        for chart, what in ((loss, "loss chart"), (gap, "relative gap chart")):
            chart.locator("canvas, svg").first.wait_for(timeout=60_000)
            assert drawn(chart, timeout=RERUN / 1000) > 50, f"{what} is empty axes before the first step"
        screenshot(page, f"training-first-screen-{mode}-fresh")

        press(page, button(page, "td_step"))  # a click a busy browser lost is made again, as a person would
        expect(progress_bar(page)).to_contain_text(re.compile(r"step 1 of 400"), timeout=RERUN)
        first = PairedRun(TrainSettings(steps=400)).run(1)[0]
        expect(key_number(page, "loss")).to_contain_text("not yet" if first.loss_a_bits == first.loss_b_bits else "1",
                                                         timeout=RERUN)
        expect(key_number(page, "weights")).to_contain_text("1" if first.differing_bits else "not yet", timeout=RERUN)
        loss, gap = live_charts(page)
        for chart, what in ((loss, "loss chart"), (gap, "relative gap chart")):
            assert_on_first_screen(chart, what)
            assert drawn(chart, timeout=RERUN / 1000) > 50, f"{what} after one step is empty axes"
        a_px, b_px = until(lambda: colour_pixels(loss), lambda px: px[0] > 20 and px[1] > 20)  # drawn late
        assert a_px > 20 and b_px > 20, (a_px, b_px)  # run A's point and run B's, in their own colours
        screenshot(page, f"training-first-screen-{mode}-step-1")

        press(page, button(page, "td_play"), settle=False)  # watched while it runs
        # two steps Play shows on its way, each read as soon as the progress bar passes the last (a pause between
        # them, such as a screenshot on a busy machine, can let Play reach its end first)
        samples = []
        for _ in range(2):
            after = samples[-1][0] if samples else 1
            step = until(lambda: playing_step(page), lambda s, after=after: s is not None and s > after, timeout=240)
            assert step is not None and after < step < 400, f"Play showed no step between {after} and 400: {step}"
            loss, gap = live_charts(page)
            samples.append((step, loss.evaluate(CANVAS_SIGNATURE)))
            assert_on_first_screen(loss, "loss chart while playing", playing=True)
            assert_on_first_screen(gap, "relative gap chart while playing", playing=True)
        screenshot(page, f"training-first-screen-{mode}-playing")
        (s1, sig1), (s2, sig2) = samples
        assert s2 > s1, samples
        # the browser draws a frame after its progress bar: a busy machine lags, so wait for the chart to change
        s2, sig2 = until(lambda: (shown_progress(page), live_charts(page)[0].evaluate(CANVAS_SIGNATURE)),
                         lambda reading: reading[1] != sig1)
        assert sig1 != sig2, f"the loss chart did not change between steps {s1} and {s2}"
        a_px, b_px = until(lambda: colour_pixels(live_charts(page)[0]), lambda px: px[0] > 100 and px[1] > 100)
        assert a_px > 100 and b_px > 100, (a_px, b_px)
        press(page, button(page, "td_pause"))
        wait_for_app(page, timeout=120_000)
        assert_healthy_page(page)
        print(f"\n{mode}: while playing at 2 steps a frame, step {s1} then {s2}; the loss chart redrawn; "
              f"A in blue {a_px}, B in orange {b_px} (canvas pixels, or SVG mark items x 100)")
    finally:
        context.close()


STORY_HEIGHT = 2160  # px: a story page is at most three screens at its defaults (1280x720)


@pytest.mark.parametrize("talk", ["0", "1"], ids=["normal", "presenter"])
def test_the_page_is_at_most_three_screens_with_its_depth_folded(server, browser, talk):
    """The page was 2,274 px at its defaults; its depth now sits in collapsed sections."""
    context = browser.new_context(viewport=FIRST_SCREEN)
    page = context.new_page()
    try:
        page.goto(f"{server.url}/training_divergence" + ("?talk=1" if talk == "1" else ""))
        wait_for_app(page, timeout=120_000)
        wait_for_page_end(page)
        assert_healthy_page(page)
        main = page.locator('[data-testid="stMain"]')
        height = until(lambda: main.evaluate("m => m.scrollHeight"), lambda h: h <= STORY_HEIGHT)
        print(f"\n{'presenter' if talk == '1' else 'normal'}: the page is {height} px tall at its defaults")
        assert height <= STORY_HEIGHT, height
        intro = keyed(page, "punchline").locator('[data-testid="stMarkdown"]').first  # the insight, the page's first
        expect(intro).to_contain_text(network_name(TrainSettings()), timeout=RERUN)
        box = until(intro.bounding_box, lambda b: b is not None and b["y"] + b["height"] <= FIRST_SCREEN["height"])
        assert box is not None and box["y"] + box["height"] <= FIRST_SCREEN["height"], box
        screenshot(page, f"training-story-{'presenter' if talk == '1' else 'normal'}")
    finally:
        context.close()


def test_a_reload_keeps_the_step_the_run_had_reached(server, page):
    """F5 after Play showed the pair back at step 0 (the speaker had to press Play again)."""
    page.goto(f"{server.url}/training_divergence?steps=60")
    wait_for_app(page)
    press(page, button(page, "td_play"), settle=False)
    expect(details(page)).to_contain_text(after_step(60), timeout=240_000)
    wait_for_app(page)
    until(lambda: page.url, lambda u: "step=60" in u)
    assert "step=60" in page.url, page.url
    step, a_hex, b_hex = shown_step_and_bits(page)
    page.reload()
    wait_for_app(page, timeout=120_000)
    assert_healthy_page(page)
    expect(details(page)).to_contain_text(after_step(60), timeout=240_000)
    assert shown_step_and_bits(page) == (step, a_hex, b_hex) == (60, *clean_bits(TrainSettings(steps=60), 60))
    expect(button(page, "td_play")).to_be_disabled(timeout=RERUN)
    assert "step=60" in page.url, page.url


ROOM = 3  # sessions pressing Play on the talk's link at once (a lean room: each is a browser tab here)
# The geometry of a chart's data marks (Vega's SVG: each mark's path, or its position), not of its axes.
MARKS = """el => Array.from(el.querySelectorAll('g.role-mark > *'))
  .map(e => e.getAttribute('d') || e.getAttribute('transform') || '').join('|')"""


@pytest.mark.timeout(600)
def test_a_room_pressing_play_on_one_link_sees_the_same_curves(server, browser):
    """Each session of a room trained its own copy of the talk's pair: five phones slowed the speaker's Play
    4.3x. Now the preset's run is computed once and every session's Play shows it. ROOM tabs open the talk's
    link and press Play together: each reaches step 500 with the losses' bits of a clean run, the same key
    numbers and the same two live charts, drawn from the same records."""
    from core.studies.talk import scenarios

    (params,) = [p for _, path, p, _ in scenarios() if path == "pages/training_divergence.py"]
    contexts = [browser.new_context(viewport=FIRST_SCREEN) for _ in range(ROOM)]
    try:
        pages = [c.new_page() for c in contexts]
        for page in pages:
            page.goto(f"{server.url}/training_divergence?{urlencode(params)}")
        for page in pages:
            wait_for_app(page, timeout=120_000)
            expect(button(page, "td_play")).to_be_enabled(timeout=RERUN)
        started = time.monotonic()
        for page in pages:  # as fast as one hand can: every Play lands while the others run
            button(page, "td_play").click(no_wait_after=True)
        for page in pages:
            expect(details(page)).to_contain_text(after_step(500), timeout=240_000)
        played = time.monotonic() - started
        for page in pages:
            wait_for_app(page, timeout=120_000)
            assert_healthy_page(page)
        readings = [shown_step_and_bits(page) for page in pages]
        assert readings == [(500, *clean_bits(TrainSettings(), 500))] * ROOM, readings
        numbers = [key_number(page, "doubling").inner_text() for page in pages]
        assert len(set(numbers)) == 1, numbers
        # one viewport, one record set: the same marks (the geometry of each drawn mark, read until each tab's last
        # frame is drawn; pixels are not compared: a chart placed half a pixel lower is antialiased otherwise)
        for chart in (0, 1):
            first = until(lambda c=chart: live_charts(pages[0])[c].evaluate(MARKS), bool)
            assert first, "the chart drew no marks"
            for page in pages[1:]:
                marks = until(lambda p=page, c=chart: live_charts(p)[c].evaluate(MARKS), lambda m, f=first: m == f)
                assert marks == first, f"two sessions of one link drew different curves (chart {chart})"
        screenshot(pages[-1], "training-room-played")
        print(f"\n{ROOM} sessions pressed Play on the talk's link at once: all at step 500 within {played:.1f} s, "
              "the same bits, numbers and curves")
    finally:
        for c in contexts:
            c.close()
