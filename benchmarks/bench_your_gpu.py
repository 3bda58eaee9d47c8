"""The visitor's GPU path against the server's CPU path, on the same vector, in one run.

The browser path: a real Chromium with WebGPU (on this machine, SwiftShader: Vulkan on the CPU's threads) opens
CPU vs GPU at a link, builds the page's vector from the server's recipe, runs the kernels and sends the bits back.
Measured in the page: the milliseconds to the first GPU result (left to right) and to the last kernel, as the page
reports them; and what the viewer downloaded: every HTTP response body and every websocket frame the server sent,
against the 4 bytes a value that sending the vector itself would cost. The CPU path: this process sums the same
vector with torch.sum, and computes what the server checks the GPU against (the CPU's left-to-right sum, the
workgroup-tree model and the exact sum), median of 5.
Usage: python -m benchmarks.bench_your_gpu [n]
"""

from __future__ import annotations

import re
import sys

import torch

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, Server, wait_for_app
from benchmarks.timing import median_time
from core.arith.vectors import VectorSpec, generate
from core.studies.your_gpu import expected


def browser_path(server: Server, n: int) -> dict:
    from playwright.sync_api import sync_playwright

    received = {"http": 0, "ws": 0}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, "--enable-unsafe-webgpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.on("requestfinished", lambda r: received.__setitem__("http", received["http"]
                                                                  + r.sizes()["responseBodySize"]))
        page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: received.__setitem__(
            "ws", received["ws"] + len(payload))))
        page.goto(f"{server.url}/cpu_vs_gpu?vector=normal&n={n}&format=float32")
        page.locator(".st-key-punchline").get_by_text("Your GPU, live").wait_for(timeout=300_000)
        wait_for_app(page)
        page.get_by_text("Your GPU's kernels one by one").click()
        live = page.locator(".st-key-your_gpu").get_by_text("First result after")
        live.wait_for(timeout=60_000)
        text = live.inner_text()
        browser.close()
    first, last = (int(m.replace(",", "")) for m in re.search(r"First result after ([\d,]+) ms, all after ([\d,]+) ms",
                                                             text).groups())
    return {"first_ms": first, "total_ms": last, **received}


def main(n: int = 1_000_000) -> dict:
    spec = VectorSpec(kind="normal", n=n, seed=0, storage="float32")
    values = generate(spec).values
    t = torch.from_numpy(values.copy())
    t_sum, _ = median_time(lambda: t.sum(), 5, warmup=1)
    t_check, _ = median_time(lambda: expected(spec, values), 5, warmup=1)
    server = Server()
    try:
        b = browser_path(server, n)
    finally:
        server.stop()
    cpu_ms = (t_sum + t_check) * 1e3
    print(f"server CPU: torch.sum {t_sum * 1e3:.1f} ms; what the GPU's bits are checked against "
          f"(left to right, the tree model, the exact sum) {t_check * 1e3:.1f} ms")
    print(f"browser GPU: first result after {b['first_ms']:,} ms, every kernel after {b['total_ms']:,} ms "
          "(vector built in the page from the recipe, then uploaded with writeBuffer)")
    print(f"downloaded by the viewer: {b['http'] / 1e6:.2f} MB over HTTP (the app's scripts and styles) and "
          f"{b['ws'] / 1e6:.2f} MB over the websocket; the vector itself would be {4 * n / 1e6:.1f} MB")
    print(f"your GPU: first result {b['first_ms'] / cpu_ms:.1f}x the server CPU path's time, page data "
          f"{b['ws'] / (4 * n):.2f}x the vector's bytes (n={n} float32)")
    return {**b, "cpu_ms": cpu_ms}


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
