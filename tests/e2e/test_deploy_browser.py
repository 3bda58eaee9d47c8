"""The Community Cloud entrypoint in a real browser: `streamlit run deploy/streamlit_app.py` from the
repository root (as the Cloud runs it) serves the same pages, by deep link and from the sidebar."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.conftest import RERUN, Server, assert_healthy_page, nav_link, screenshot, wait_for_app
from tests.e2e.test_browser import NAV, PAGES, expect_h1, expect_sidebar_labels


def test_the_cloud_entrypoint_serves_every_page(browser):
    deployed = Server("deploy/streamlit_app.py")
    try:
        context = browser.new_context(viewport={"width": 1400, "height": 1200})
        page = context.new_page()
        page.goto(f"{deployed.url}/non_associativity")  # the first visit of a fresh server, by deep link
        wait_for_app(page)
        assert_healthy_page(page)
        expect_h1(page, PAGES[1][1])
        expect_sidebar_labels(page, NAV)
        next_link = page.locator('[data-testid="stPageLink"]').filter(has_text="Next: ")
        # the story's link to the next page resolved from deploy/ (the page's last element: it can come late)
        expect(next_link).to_have_count(1, timeout=RERUN)
        nav_link(page, "").click()  # the overview
        page.wait_for_url(re.compile(rf"{re.escape(deployed.url)}/?(\?.*)?$"))
        wait_for_app(page)
        assert_healthy_page(page)
        expect_h1(page, PAGES[0][1])
        screenshot(page, "deploy-entrypoint-home")
        context.close()
    finally:
        deployed.stop()
