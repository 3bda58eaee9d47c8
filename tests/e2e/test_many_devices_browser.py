"""The Many devices page in a real browser against a real server: the server starts a gloo process
group of two workers, shows the comparison with one process and the workers' memory, leaves no
worker process behind, and runs the emulation of 8 devices."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import expect

from tests.e2e.conftest import (
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    button,
    keyed,
    screenshot,
    until,
    wait_for_app,
)


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def test_live_gloo_run_and_emulation(server, page):
    page.goto(f"{server.url}/many_devices?workers=2&steps=10&devices=8&emulated_steps=10&model=ring_gloo")
    wait_for_app(page)
    assert_healthy_page(page)
    expect(button(page, "md_run")).to_be_visible(timeout=RERUN)
    before = set(children(server.proc.pid))

    button(page, "md_run").click()  # start 2 worker processes and train 10 steps
    expect(page.get_by_text("2 worker processes against one process, 10 steps")).to_be_visible(timeout=300_000)
    wait_for_app(page, timeout=300_000)
    assert_healthy_page(page)
    expect(page.get_by_text(re.compile(r"data-parallel \(gloo, world size 2\): "))).to_be_visible(timeout=RERUN)
    expect(page.get_by_text("Peak memory of the group (PSS)")).to_be_visible(timeout=RERUN)
    left = until(lambda: set(children(server.proc.pid)), lambda kids: kids <= before)  # an exit takes a moment
    assert left <= before, left - before  # every worker was reaped by the server
    screenshot(page, "many-devices-live")

    button(page, "md_check_go").click()  # replay this run with the ring model
    expect(page.get_by_text(re.compile(r"bit for bit at all 10 steps|first differ from the live run's at step"))
           ).to_be_visible(timeout=300_000)
    wait_for_app(page, timeout=300_000)

    expect(button(page, "md_emulate")).to_contain_text("1 run of 10 steps", timeout=RERUN)
    button(page, "md_emulate").click()
    expect(page.get_by_text("8 emulated devices (Ring (gloo)): the weights first differ")).to_be_visible(
        timeout=300_000)
    wait_for_app(page, timeout=300_000)
    assert_healthy_page(page)
    assert_charts_rendered(page, 2)  # the live run's gap and the emulated runs' gap
    screenshot(page, "many-devices-emulated", full_page=True)


def test_ring_and_tree_first_and_the_order_study_estimate(server, page):
    """Ring and tree are explained above the first numbers; the order study says how long it will take from a
    rate timed on this server, then shows its results."""
    page.goto(f"{server.url}/many_devices?largest_k=16")
    wait_for_app(page)
    assert_healthy_page(page)
    punch = page.locator(".st-key-punchline")
    expect(punch.get_by_text("A ring passes partial sums", exact=False)).to_be_visible(timeout=RERUN)
    study = page.locator(".st-key-md_study_go button:visible")
    if study.count():  # not yet computed by this server
        expect(page.get_by_text(re.compile(r"about \d+–\d+ s for 15 values of k \(\d\.\d\d s each, timed on this "
                                           r"server"))).to_be_visible(timeout=RERUN)
        study.first.click()
    expect(keyed(page, "md_kshow")).to_be_visible(timeout=300_000)  # the details, for each k
    wait_for_app(page, timeout=300_000)
    assert_healthy_page(page)
