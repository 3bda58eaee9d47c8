"""Links that can be opened: a long paste stays out of the URL, and the page says so.

Before: pasting 100,000 numbers put a 1 MB query into the address bar, and reloading failed with
HTTP 400. Now the URL keeps the other settings, reloads fine, and a download offers the numbers.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from playwright.sync_api import expect

from core.crowd.querystate import LINK_TEXT_CHARS
from tests.e2e.conftest import RERUN, assert_healthy_page, button, keyed, screenshot, wait_for_app


def test_a_100000_number_paste_keeps_the_link_short(server, page):
    numbers = ", ".join(repr(float(x)) for x in np.random.default_rng(1).standard_normal(100_000))
    page.goto(f"{server.url}/summation_lab?vector=paste")
    wait_for_app(page)
    area = keyed(page, "sl_paste").locator("textarea")
    area.fill(numbers)
    area.press("Control+Enter")
    wait_for_app(page, timeout=180_000)
    expect(page.locator('[data-testid="stAlertContentWarning"]').first).to_be_visible(timeout=60_000)  # not linked
    assert_healthy_page(page)
    # the address bar follows the rerun: waited for
    expect(page).not_to_have_url(re.compile("numbers="), timeout=RERUN)
    expect(page).to_have_url(re.compile(r"^.{0,999}$"), timeout=RERUN)  # shorter than 1,000 characters
    expect(page.locator('[data-testid="stMain"]')).to_contain_text(f"at most {LINK_TEXT_CHARS:,}", use_inner_text=True,
                                                                    timeout=RERUN)
    screenshot(page, "summation-lab-long-paste")

    with page.expect_download() as dl:
        button(page, "_url_download_numbers").click()  # ui.urlstate.share_box: what the link leaves out
    assert Path(dl.value.path()).read_text(encoding="utf-8") == numbers

    response = page.goto(page.url)  # the link itself opens
    assert response is not None and response.ok, response and response.status
    wait_for_app(page)
    assert_healthy_page(page)
