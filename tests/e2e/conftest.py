"""Real-server, real-browser fixtures: `streamlit run app.py` and Debian's Chromium.

The server starts with the same flags as the Docker image's ENTRYPOINT
(--server.port, --server.address=0.0.0.0) on a free port; tests wait for
/_stcore/health to answer "ok" and for the app to report that its script finished.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from benchmarks.harness import CHROMIUM, CHROMIUM_ARGS, ROOT, Server, free_port, wait_for_app  # noqa: F401

ARTIFACTS = ROOT / "artifacts" / "screenshots"
VIEWPORT = {"width": 1400, "height": 3200}  # tall: Streamlit scrolls inside its own container


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.stop()


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    if not pathlib.Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: run `make test`, which installs Debian's chromium.")
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright_instance):
    b = playwright_instance.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    pg = context.new_page()
    yield pg
    context.close()


def assert_healthy_page(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]'
    ).first.inner_text()
    assert "page not found" not in page.content().lower()


def screenshot(page, name: str, full_page: bool = False) -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def assert_charts_rendered(page, minimum: int) -> None:
    """Every Altair chart drew something: vega-embed puts a canvas (or svg) of real size."""
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    assert charts.count() >= minimum, charts.count()
    for i in range(charts.count()):
        drawn = charts.nth(i).locator("canvas, svg").first
        drawn.wait_for(timeout=30_000)
        box = drawn.bounding_box()
        assert box is not None and box["height"] > 50 and box["width"] > 100, (i, box)


def choose(page, label: str, option: str) -> None:
    """Pick an option of the select box whose label contains ``label``."""
    page.locator('[data-testid="stSelectbox"]').filter(has_text=label).first.click()
    page.get_by_role("option", name=option, exact=True).click()
    wait_for_app(page)


def set_number(page, label: str, value: int) -> None:
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    wait_for_app(page)
