"""The CPU vs GPU page in a real browser (the server has no GPU; the bundled CPU recordings are replayed)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core.recordings.compare import compare_recordings, default_pair
from core.recordings.fingerprint import fingerprint, op_fingerprint
from core.recordings.store import load_recordings
from tests.e2e.conftest import assert_charts_rendered, assert_healthy_page, screenshot, wait_for_app


def test_cpu_vs_gpu_page(server, page):
    page.goto(f"{server.url}/cpu_vs_gpu")
    wait_for_app(page)
    assert_healthy_page(page)
    # the server's facts, fingerprint and hashes sit in an expander below the comparison (issue 23)
    page.get_by_text("What this server has: its facts, fingerprint and hashes").click()
    expect(page.get_by_text("No GPU is visible to torch on this server", exact=False)).to_be_visible()
    # the server runs on the test's machine, so its fingerprint is the one computed here
    expect(page.get_by_text(re.compile("Fingerprint of this server: " + fingerprint(op_fingerprint())))).to_be_visible()
    expect(page.get_by_role("heading", name="Two real machines side by side")).to_be_visible()
    recs, _ = load_recordings()
    cmp = compare_recordings(*(recs[i] for i in default_pair(recs)))
    verdict = page.get_by_text(re.compile(r"(gave the same bits in every result|part first in|part; run A)"))
    expect(verdict.first).to_be_visible()
    if not cmp.ops_differing and all(t.first_step_machines_differ is None for t in cmp.training):
        expect(verdict.first).to_contain_text(f"{cmp.sums_compared} sums")
    # one chart of reduction stages, two training charts per recorded preset and machine
    assert_charts_rendered(page, 1 + 2 * len(cmp.training))
    screenshot(page, "cpu-vs-gpu-default", full_page=True)
    page.locator('[data-testid="stSelectbox"]').filter(has_text="Format").first.click()
    page.get_by_role("option", name="bfloat16", exact=True).click()
    wait_for_app(page)
    assert_healthy_page(page)
    table = page.locator('[data-testid="stDataFrame"]').filter(has_text="recorded")
    expect(table.first).to_be_visible()
