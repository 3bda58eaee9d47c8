"""First render of every page in a real browser against a real server, fresh and warm.

Starts the real server (benchmarks.harness.Server), then opens the home page and every page of
ui.navigation.PAGE_TABLE in Debian's Chromium at 1280x720, each in a new browser context: once
right after the server start ("fresh": each page's first visit, nothing cached) and once more
("warm"). A page's first render is the time from navigation until its first screen is drawn: its
title (h1) and, on a page that has one (the talk's scenario pages), its punchline container
(``st.container(key="punchline")``) with its text; the time until its script finished is printed
beside it. The budget a visitor should not notice: every page shows its
first screen within 2 s warm and 4 s on a fresh server. Timings are printed, never asserted.

Usage: python -m benchmarks.bench_pages [page_stem ...]   (default: every page)
Last line: slowest first render: <page> <s> s warm, <page> <s> s fresh (budget 2.0 s warm, 4.0 s fresh)
"""

from __future__ import annotations

import sys
import time

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, Server, wait_for_app

BUDGET_WARM_S = 2.0
BUDGET_FRESH_S = 4.0
VIEWPORT = {"width": 1280, "height": 720}


# Polls every 20 ms from the start of the document: when the title appeared, when the punchline had text.
WATCH = """
(() => {
  window.__firstScreen = {};
  const tick = () => {
    const t = window.__firstScreen, now = performance.now();
    if (t.title === undefined && document.querySelector('[data-testid="stMain"] h1')) t.title = now;
    const p = document.querySelector('.st-key-punchline');
    if (t.punchline === undefined && p && p.innerText.trim()) t.punchline = now;
    if (t.title === undefined || t.punchline === undefined) setTimeout(tick, 20);
  };
  tick();
})();
"""


def _open(browser, url: str, timeout: float = 300_000) -> tuple[float, float]:
    """(seconds until the page's first screen is drawn, seconds until its script finished)."""
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.add_init_script(WATCH)
    page = ctx.new_page()
    try:
        t0 = time.monotonic()
        page.goto(url)
        page.locator('[data-testid="stMain"] h1').first.wait_for(timeout=timeout)
        wait_for_app(page, timeout=timeout)
        done = time.monotonic() - t0 - 0.9  # less wait_for_app's three pauses
        t = page.evaluate("window.__firstScreen")  # ms since navigation started (performance.now())
        has_punchline = page.locator(".st-key-punchline").count() > 0
        first = max(t.get("title", 0), t.get("punchline", 0) if has_punchline else 0) / 1000
        return first, max(done, first)
    finally:
        ctx.close()


def main(stems: list[str] | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    from ui.navigation import PAGE_TABLE

    pages = [("", "Overview")] + [(stem, title) for stem, title, *_ in PAGE_TABLE if not stems or stem in stems]
    server = Server()
    times: dict[str, dict[str, tuple[float, float]]] = {"fresh": {}, "warm": {}}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for kind in ("fresh", "warm"):
                for stem, title in pages:
                    times[kind][title] = _open(browser, f"{server.url}/{stem}")
            browser.close()
    finally:
        server.stop()
    print(f"{'page':<24} {'fresh: first render':>20} {'(script done)':>14} {'warm: first render':>19} "
          f"{'(script done)':>14}")
    for _, title in pages:
        (f1, f2), (w1, w2) = times["fresh"][title], times["warm"][title]
        print(f"{title:<24} {f1:>18.2f} s {f2:>12.1f} s {w1:>17.2f} s {w2:>12.1f} s")
    warm_title, (warm, _) = max(times["warm"].items(), key=lambda kv: kv[1][0])
    fresh_title, (fresh, _) = max(times["fresh"].items(), key=lambda kv: kv[1][0])
    print(f"slowest first render: {warm_title} {warm:.2f} s warm, {fresh_title} {fresh:.2f} s fresh "
          f"(budget {BUDGET_WARM_S} s warm, {BUDGET_FRESH_S} s fresh)")
    return times


if __name__ == "__main__":
    main(sys.argv[1:] or None)
