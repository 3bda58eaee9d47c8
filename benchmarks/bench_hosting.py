"""Hosting limits: cold start, and the server's memory at defaults and at the largest inputs.

Starts the real server (as the Docker image does), opens every page in headless Chromium
at its defaults, then drives the heaviest settings the UI allows. The targets hold the
server's private memory (anonymous pages and shared memory, sampled every 50 ms from /proc;
see harness.Server.private_mb): <= 480 MB at defaults (room to spare below Community Cloud's
smallest allotment, 690 MB, for what visitors add), <= 2.7 GB at the largest. Resident memory
(VmRSS, and its peak VmHWM) is printed too: it adds the mapped pages of library files, which
the kernel can drop and whose count depends on the page cache.
Usage: python -m benchmarks.bench_hosting
"""

from __future__ import annotations

import re
import sys
import time

from playwright.sync_api import TimeoutError as PlaywrightTimeout

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, MemoryWatch, Server, wait_for_app
from ui.navigation import PAGE_TABLE

PAGES = ("", *(stem for stem, *_ in PAGE_TABLE))  # the overview, then every page in the sidebar's order

DEFAULTS_TARGET_MB = 480  # every page at its defaults, with room below the smallest tier (690 MB)
LARGEST_TARGET_MB = 2700  # the largest inputs the UI allows: Community Cloud's largest allotment


def _choose(page, label: str, option: str) -> None:
    """The select box whose label is exactly ``label`` (a substring would also match "Normal" for "n")."""
    exact = page.locator('[data-testid="stWidgetLabel"]').filter(has_text=re.compile(rf"^\s*{re.escape(label)}\s*$"))
    box = page.locator('[data-testid="stSelectbox"]').filter(has=exact).first
    wanted = page.get_by_role("option", name=option, exact=True)
    for _ in range(3):  # a first click that only scrolls the box into view and focuses it does not open it
        box.click()
        try:
            wanted.wait_for(timeout=5_000)
            break
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    wanted.click()
    wait_for_app(page)


def _largest(page, url: str, phases: dict) -> None:
    """The heaviest inputs each page accepts; ``phases`` gets each page's seconds."""
    t0 = time.monotonic()
    page.goto(f"{url}/summation_lab")
    wait_for_app(page)
    _choose(page, "Storage format", "float64")
    box = page.get_by_label("n (1 to 10,000,000)", exact=True)
    box.fill("10000000")
    box.press("Enter")
    wait_for_app(page, timeout=300_000)
    phases["summation_lab"], t0 = time.monotonic() - t0, time.monotonic()
    page.goto(f"{url}/cpu_vs_gpu")
    wait_for_app(page)
    _choose(page, "n", "10,000,000")
    _choose(page, "Format", "float64")
    wait_for_app(page, timeout=300_000)
    phases["cpu_vs_gpu"], t0 = time.monotonic() - t0, time.monotonic()
    page.goto(f"{url}/training_divergence?speed=100")  # the fastest play: 5,000 steps in 50 frames
    wait_for_app(page)
    steps = page.get_by_label("Steps (at most 5,000)", exact=True)
    steps.fill("5000")
    steps.press("Enter")
    wait_for_app(page)
    page.get_by_role("button", name="Play").click()
    page.get_by_text("step 5,000 of 5,000").wait_for(timeout=300_000)
    wait_for_app(page, timeout=300_000)
    phases["training_divergence"] = time.monotonic() - t0


def main(largest: bool = True) -> dict:
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    server = Server()
    healthy = time.monotonic() - t0
    results = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(server.url)
            page.locator("h1").first.wait_for(timeout=120_000)
            results["cold_start_s"] = time.monotonic() - server.launched_at
            wait_for_app(page)
            results["defaults_pages_mb"] = {}
            with MemoryWatch(server) as watch:
                for path in PAGES:
                    page.goto(f"{server.url}/{path}")
                    wait_for_app(page, timeout=120_000)
                    results["defaults_pages_mb"][path or "overview"] = watch.peak_mb
            results["defaults_peak_mb"] = watch.peak_mb
            results["defaults_rss_mb"], results["defaults_peak_rss_mb"] = server.rss_mb()
            if largest:
                results["largest_phases_s"] = {}
                with MemoryWatch(server) as watch:
                    _largest(page, server.url, results["largest_phases_s"])
                results["largest_peak_mb"] = watch.peak_mb
                results["largest_rss_mb"], results["largest_peak_rss_mb"] = server.rss_mb()
            browser.close()
    finally:
        server.stop()
    print(f"health answered ok after {healthy:.1f} s; first page rendered {results['cold_start_s']:.1f} s after launch")
    print("peak private memory as each page opens at its defaults: " + ", ".join(
        f"{k} {v:.0f} MB" for k, v in results["defaults_pages_mb"].items()))
    if largest:
        print("the largest inputs took: " + ", ".join(f"{k} {v:.0f} s" for k, v in results["largest_phases_s"].items()))
    print(f"every page at its defaults: peak {results['defaults_peak_mb']:.0f} MB private "
          f"(target <= {DEFAULTS_TARGET_MB} MB); "
          f"{results['defaults_rss_mb']:.0f} MB resident after, peak {results['defaults_peak_rss_mb']:.0f} MB")
    if largest:
        print(f"the largest inputs: peak {results['largest_peak_mb']:.0f} MB private "
              f"(target <= {LARGEST_TARGET_MB} MB); "
              f"{results['largest_rss_mb']:.0f} MB resident after, peak {results['largest_peak_rss_mb']:.0f} MB")
        print(f"hosting: {results['defaults_peak_mb']:.0f} MB private at defaults, {results['largest_peak_mb']:.0f} MB "
              f"private peak at the largest inputs, cold start {results['cold_start_s']:.1f} s")
    else:
        print(f"hosting: {results['defaults_peak_mb']:.0f} MB private at defaults, "
              f"cold start {results['cold_start_s']:.1f} s")
    return results


if __name__ == "__main__":
    main(largest="--defaults-only" not in sys.argv)
