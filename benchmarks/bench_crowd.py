"""A crowd on one server: five heavy visitors at once, and a normal visitor alongside them.

Starts the real server (benchmarks.harness.Server) once for all scenarios; for each, warms it up, times a
normal visitor alone (the Summation lab at its defaults, with a seed no one else uses so
nothing is cached), then opens five heavy visitors at once and, while they run, the normal
visitor again. Reports the server's peak resident memory (VmHWM), the CPU seconds it spent,
the heavy visitors' times, and the normal visitor's page time alone and alongside them.

Scenarios (heavy visitors' links):
  shared  - one shared link opened five times, asking more than one request may use:
            ill-conditioned float64, n = 10^7, every order, 1000 permutations
  largest - five different seeds of the heaviest settings within the per-request budget:
            ill-conditioned float64, n = 10^7, the default orders, 1000 permutations

The test suite runs both with fewer visitors (``main(names, heavy=3, normal_visits=1)``): three heavy
visitors still outnumber the gate's slots (at most two), so they queue and the server's peak is that of
its slots running at once, as with five.

Usage: python -m benchmarks.bench_crowd [shared|largest ...]
"""

from __future__ import annotations

import asyncio
import pathlib
import statistics
import sys
import threading
import time
from dataclasses import dataclass

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, Server
from core.kernels.orders import ORDERS

ALL_ORDERS = ",".join(ORDERS)
HEAVY = 5  # heavy visitors at once, per scenario
NORMAL_VISITS = 3  # the normal visitor's visits alone, and again alongside the heavy ones


def heavy_links(name: str, count: int = HEAVY) -> list[str]:
    """The heavy visitors' query strings of a scenario."""
    if name == "shared":
        return [f"vector=ill_conditioned&storage=float64&n=10000000&orders={ALL_ORDERS}&permutations=1000"] * count
    if name == "largest":
        return [f"vector=ill_conditioned&storage=float64&n=10000000&seed={s}&permutations=1000"
                for s in range(1, count + 1)]
    raise ValueError(f"no scenario {name!r} (shared, largest)")
DONE = ('[data-testid="stDataFrame"], [data-testid="stAlertContentError"]')


def cpu_seconds(pid: int) -> float:
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def _idle(page, timeout: float) -> None:
    for _ in range(2):
        await page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
        await page.wait_for_timeout(300)


async def visit(browser, url: str, query: str, timeout: float = 900_000) -> dict:
    """Open the Summation lab with a query; seconds until its result (or its refusal) is shown."""
    ctx = await browser.new_context()
    page = await ctx.new_page()
    t0 = time.monotonic()
    await page.goto(f"{url}/summation_lab?{query}")
    await page.locator(DONE).first.wait_for(timeout=timeout)
    await _idle(page, timeout)
    seconds = time.monotonic() - t0 - 0.6  # less the two idle checks' pauses
    refused = await page.get_by_text("These settings need more than one request may use").count()
    waited = await page.get_by_text("for a free slot").count()
    exceptions = await page.locator('[data-testid="stException"]').count()
    await ctx.close()
    return {"seconds": seconds, "refused": bool(refused), "waited": bool(waited), "exceptions": exceptions}


@dataclass(frozen=True)
class Crowd:
    """How many come: heavy visitors at once, and the normal visitor's visits alone and alongside them."""

    heavy: int = HEAVY
    normal_visits: int = NORMAL_VISITS


async def normal_visits(browser, url: str, first_seed: int, count: int, delay: float = 0.0) -> list[float]:
    await asyncio.sleep(delay)
    times = []
    for i in range(count):
        times.append((await visit(browser, url, f"seed={first_seed + i}", timeout=600_000))["seconds"])
    return times


async def scenario(name: str, server: Server, seeds: int = 0, crowd: Crowd = Crowd()) -> dict:
    """One scenario; the normal visitor's seeds start at ``seeds`` + 999, so no earlier scenario on the
    same server has its results cached."""
    from playwright.async_api import async_playwright

    url = server.url
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        await visit(browser, url, f"seed={seeds + 999}")  # warm-up: imports, first run of the page
        alone = await normal_visits(browser, url, seeds + 1000, crowd.normal_visits)
        rss_before, hwm_before = server.rss_mb()
        cpu0, t0 = cpu_seconds(server.proc.pid), time.monotonic()
        heavy_task = asyncio.gather(*[visit(browser, url, q) for q in heavy_links(name, crowd.heavy)])
        normal_task = asyncio.ensure_future(normal_visits(browser, url, seeds + 2000, crowd.normal_visits, delay=3.0))
        heavy = await heavy_task
        alongside = await normal_task
        wall, cpu = time.monotonic() - t0, cpu_seconds(server.proc.pid) - cpu0
        await browser.close()
    rss, hwm = server.rss_mb()
    return {"scenario": name, "normal_alone_s": statistics.median(alone), "normal_alongside_s":
            statistics.median(alongside), "normal_alongside_all": alongside, "heavy": heavy,
            "peak_before_mb": hwm_before, "peak_mb": hwm, "rss_after_mb": rss, "wall_s": wall, "cpu_s": cpu,
            "rss_before_mb": rss_before}


def run(names: list[str], crowd: Crowd = Crowd()) -> list[dict]:
    """The scenarios one after the other on one server (each measured from where the last left it:
    its peak before the crowd is the server's high-water mark so far)."""
    server = Server()
    try:
        box: dict = {}

        async def all_of():
            return [await scenario(name, server, seeds=10_000 * i, crowd=crowd) for i, name in enumerate(names)]

        worker = threading.Thread(target=lambda: box.update(r=asyncio.run(all_of())))
        worker.start()
        worker.join()
        return box["r"]
    finally:
        server.stop()


def main(names: list[str], crowd: Crowd = Crowd()) -> list[dict]:
    """Both scenarios (or those named) on one server; the last line is the largest scenario's peak."""
    for name in names:
        heavy_links(name)  # an unknown name is refused before the server starts
    out = run(names, crowd)
    for name, r in zip(names, out, strict=True):
        heavy = r["heavy"]
        print(f"[{name}] heavy visitors: " + ", ".join(
            f"{h['seconds']:.1f} s{' refused' if h['refused'] else ''}{' waited' if h['waited'] else ''}"
            f"{' EXCEPTION' if h['exceptions'] else ''}" for h in heavy))
        print(f"[{name}] server: peak {r['peak_mb']:.0f} MB (peak {r['peak_before_mb']:.0f} MB before the crowd), "
              f"{r['rss_after_mb']:.0f} MB resident after; {r['cpu_s']:.0f} CPU-s in {r['wall_s']:.0f} s")
        print(f"[{name}] normal visitor: {r['normal_alone_s']:.1f} s alone, {r['normal_alongside_s']:.1f} s alongside "
              f"({', '.join(f'{t:.1f}' for t in r['normal_alongside_all'])}): "
              f"{r['normal_alongside_s'] / r['normal_alone_s']:.1f}x")
    for r in out:
        print(f"crowd ({r['scenario']}): peak {r['peak_mb']:.0f} MB with {len(r['heavy'])} heavy visitors; a normal "
              f"visitor's page {r['normal_alongside_s']:.1f} s alongside them "
              f"vs {r['normal_alone_s']:.1f} s alone")
    return out


if __name__ == "__main__":
    main(sys.argv[1:] or ["shared", "largest"])
