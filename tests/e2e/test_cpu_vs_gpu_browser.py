"""The CPU vs GPU page in a real browser (the server has no GPU; the bundled CPU recordings are replayed)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core.recordings.compare import compare_recordings, default_pair
from core.recordings.fingerprint import fingerprint, op_fingerprint
from core.recordings.store import load_recordings
from tests.e2e.conftest import (
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    button,
    folded_section,
    open_folded,
    open_section_with_icon,
    pick,
    screenshot,
    shown_loosely,
    wait_for_app,
)


def test_cpu_vs_gpu_page(server, page):
    page.goto(f"{server.url}/cpu_vs_gpu")
    wait_for_app(page)
    assert_healthy_page(page)
    # the server's facts, fingerprint and hashes sit in an expander below the comparison
    open_folded(page, "cg_open_server")
    wait_for_app(page, timeout=120_000)
    expect(folded_section(page, "cg_open_server")).to_contain_text("No GPU is visible to torch on this server",
                                                                   timeout=RERUN)
    # the server runs on the test's machine, so its fingerprint is the one computed here
    expect(page.get_by_text(re.compile("Fingerprint of this server: " + fingerprint(op_fingerprint())))).to_be_visible(
        timeout=RERUN)
    # the first screen sets this CPU against a GPU's order and the exact sum
    expect(page.locator(".st-key-punchline")).to_contain_text("Neither device is the reference", timeout=RERUN)
    open_folded(page, "cg_open_pair")  # made once opened: a rerun
    wait_for_app(page, timeout=120_000)
    recs, _ = load_recordings()
    cmp = compare_recordings(*(recs[i] for i in default_pair(recs)))
    pair = folded_section(page, "cg_open_pair")
    verdict = pair.get_by_text(re.compile(r"(gave the same bits in every result|part first in|part; run A)"))
    expect(verdict.first).to_be_visible(timeout=RERUN)
    if not cmp.ops_differing and all(t.first_step_machines_differ is None for t in cmp.training):
        expect(verdict.first).to_contain_text(f"{cmp.sums_compared} sums")
    # one chart of reduction stages, two training charts per recorded preset and machine
    assert_charts_rendered(page, 1 + 2 * len(cmp.training))
    screenshot(page, "cpu-vs-gpu-default", full_page=True)
    wait_for_app(page)
    pick(page, "cg_dtype", "bfloat16")
    assert_healthy_page(page)
    every = open_section_with_icon(page, "table")  # every result, with its bits
    table = every.locator('[data-testid="stDataFrame"]').filter(has_text="recorded")
    expect(table.first).to_be_visible(timeout=RERUN)


def test_a_visitors_own_capture_file_is_shown_as_theirs(server, page):
    """A bundled file uploaded under another name joins the page labelled as the visitor's, unverified; a broken
    file gets its reason next to the uploader and the earlier upload stays; Remove takes it away."""
    from core.recordings.store import DEFAULT_DIR, UPLOADED
    from core.recordings.upload import recording_from_upload

    src = sorted(DEFAULT_DIR.glob("*.json"))[-1]
    mine = recording_from_upload("my-gpu-capture.json", src.read_bytes())
    page.goto(f"{server.url}/cpu_vs_gpu")
    wait_for_app(page, timeout=120_000)
    assert_healthy_page(page)
    open_section_with_icon(page, "upload_file")  # bring your own GPU's capture
    uploader = page.locator('[data-testid="stFileUploader"] input[type="file"]')
    uploader.set_input_files(files=[{"name": "my-gpu-capture.json", "mimeType": "application/json",
                                     "buffer": src.read_bytes()}])
    wait_for_app(page, timeout=120_000)
    card = page.locator('[data-testid="stAlert"]').filter(has_text=f"Your recording, {UPLOADED}")
    expect(card).to_be_visible(timeout=60_000)
    expect(card).to_contain_text("my-gpu-capture.json")
    expect(card).to_contain_text(mine.provenance.captured_at.replace(":", ":\u2060"))
    assert_healthy_page(page)
    main = page.locator('[data-testid="stMain"]')
    expect(page.locator('[data-testid="stDataFrame"]').filter(has_text="uploaded by you").first).to_be_visible(
        timeout=RERUN)
    # the model's line and the pair's choice, in their folded sections (made once opened)
    open_folded(page, "cg_open_model")
    wait_for_app(page, timeout=120_000)
    expect(main).to_contain_text(shown_loosely(mine.label), use_inner_text=True, timeout=RERUN)
    screenshot(page, "cpu-vs-gpu-uploaded", full_page=True)

    uploader.set_input_files(files=[{"name": "broken.json", "mimeType": "application/json",
                                     "buffer": b'{"format_version": 2, "provenance": '}])
    wait_for_app(page, timeout=120_000)
    error = page.locator('[data-testid="stAlert"]').filter(has_text="broken.json is not JSON")
    expect(error).to_be_visible(timeout=60_000)
    expect(page.get_by_text("Still using your earlier upload, my-gpu-capture.json.")).to_be_visible(timeout=RERUN)
    expect(card).to_be_visible()
    assert_healthy_page(page)
    screenshot(page, "cpu-vs-gpu-upload-refused")

    button(page, "cg_upload_remove").click()
    wait_for_app(page, timeout=120_000)
    expect(card).to_have_count(0, timeout=RERUN)
    expect(error).to_have_count(0, timeout=RERUN)
    assert_healthy_page(page)
    expect(main).not_to_contain_text(shown_loosely(UPLOADED), use_inner_text=True, timeout=RERUN)
