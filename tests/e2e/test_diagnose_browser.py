"""Diagnose a mismatch in a real browser: every bundled example and both bundled loss-log pairs; both results
judged against the exact result on the first screen, and the evidence's charts drawn once its section is opened."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from core.diagnose.examples import EXAMPLES, LOG_EXAMPLES, log_network
from core.diagnose.verdict import VERDICT_HEADS
from tests.e2e.conftest import (
    RERUN,
    assert_charts_rendered,
    assert_healthy_page,
    folded_section,
    keyed,
    open_folded,
    pick,
    screenshot,
    wait_for_app,
)

# verdicts that do not depend on the machine (the thread-count and batch-size pairs are computed live)
KNOWN = {"bfloat16": "reduced_precision", "tf32": "reduced_precision", "bug": "too_large"}


def test_every_bundled_example_and_log_pair(server, page):
    page.goto(f"{server.url}/diagnose")
    wait_for_app(page, timeout=120_000)
    assert_healthy_page(page)
    expect(page.get_by_role("heading", name="Diagnose a mismatch")).to_be_visible(timeout=RERUN)
    for key, title in EXAMPLES.items():
        pick(page, "dg_example", title)
        expect(page.get_by_text("Computed live on this server.", exact=False)).to_be_visible(timeout=120_000)
        wait_for_app(page, timeout=120_000)
        assert_healthy_page(page)
        verdict = page.locator('[data-testid="stAlert"]').first
        if key in KNOWN:
            expect(verdict, key).to_contain_text(VERDICT_HEADS[KNOWN[key]], use_inner_text=True, timeout=RERUN)
        else:
            any_head = re.compile("|".join(re.escape(t) for t in VERDICT_HEADS.values()))
            expect(verdict, key).to_contain_text(any_head, use_inner_text=True, timeout=RERUN)
        if key == "bug":
            expect(page.get_by_text("What to check next")).to_be_visible(timeout=RERUN)
        else:
            expect(page.get_by_text("torch.testing.assert_close(result_a, result_b, rtol=").first).to_be_visible(
                timeout=RERUN)
        # neither side is the reference: the first screen judges both against the exact result of the inputs
        judged = page.locator(".st-key-punchline").get_by_text("Neither result is the reference", exact=False)
        expect(judged, key).to_be_visible(timeout=RERUN)
        if key == "tree":  # the tree sum is closer to the exact sum than the loop, at every row (IEEE, any CPU)
            expect(judged, key).to_contain_text("B is closer at 32 of 32 elements", timeout=RERUN)
        open_folded(page, "dg_open_evidence")
        open_folded(page, "dg_open_simulation")
        assert_charts_rendered(page, 1)
        expect(page).to_have_url(re.compile(re.escape(f"example={key}")), timeout=RERUN)
        screenshot(page, f"diagnose-{key}", full_page=True)

    # the fourth choice of what to diagnose (pages/diagnose.SOURCES): two loss logs
    keyed(page, "dg_source").locator('[data-testid="stRadioOption"]').nth(3).click()
    wait_for_app(page, timeout=120_000)
    expect(page).to_have_url(re.compile(r"source=logs"), timeout=RERUN)
    for key, title in LOG_EXAMPLES.items():
        pick(page, "dg_log_example", title)
        expect(page.get_by_text(f"Computed live: the Training divergence page's tanh network ({log_network()}",
                                exact=False)).to_be_visible(timeout=RERUN)
        wait_for_app(page)
        assert_healthy_page(page)
        verdict = page.locator('[data-testid="stAlert"]').first
        if key == "jump":
            expect(verdict, key).to_contain_text("A jump", use_inner_text=True, timeout=RERUN)
        else:
            expect(verdict, key).not_to_contain_text("A jump", use_inner_text=True, timeout=RERUN)
        assert_charts_rendered(page, 2)
        screenshot(page, f"diagnose-logs-{key}", full_page=True)


def type_into(page, key: str, text: str) -> None:
    """Type into the text area made with ``key`` and send it (Ctrl+Enter), as a person would."""
    box = keyed(page, key).locator("textarea")
    box.fill(text)
    box.press("Control+Enter")
    wait_for_app(page)


def test_pasted_results_are_judged_against_a_pasted_reference(server, page):
    """Neither pasted result is the reference; a reference typed into its folded box judges both on the first
    screen, and a bad one is refused inside that box while the verdict of the two results stays."""
    page.goto(f"{server.url}/diagnose?source=paste")
    wait_for_app(page, timeout=120_000)
    punch = page.locator(".st-key-punchline")
    type_into(page, "dg_paste_actual", "1.0000001, 2.0, 3.0000002, -4.0")
    type_into(page, "dg_paste_expected", "1 2 3 -4")
    expect(punch).to_contain_text(VERDICT_HEADS["reordering"], use_inner_text=True, timeout=RERUN)
    expect(punch).not_to_contain_text("Against your reference", use_inner_text=True, timeout=RERUN)
    open_folded(page, "dg_paste_reference")  # the folded box that holds the reference
    type_into(page, "dg_paste_reference", "1.00000005 2 3.0000001 -4")
    expect(punch).to_contain_text("Neither result is the reference. Against your reference", use_inner_text=True,
                                  timeout=RERUN)
    type_into(page, "dg_paste_reference", "1 2 3")
    section = folded_section(page, "dg_paste_reference")
    expect(section).to_contain_text("The reference holds 3 numbers but the results hold 4", timeout=RERUN)
    expect(punch).to_contain_text(VERDICT_HEADS["reordering"], use_inner_text=True, timeout=RERUN)
    expect(punch).not_to_contain_text("Against your reference", use_inner_text=True, timeout=RERUN)
    assert_healthy_page(page)
