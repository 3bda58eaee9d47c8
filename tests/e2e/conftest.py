"""Real-server, real-browser fixtures: `streamlit run app.py` and Debian's Chromium.

The server starts with the same flags as the Docker image's ENTRYPOINT
(--server.port, --server.address=0.0.0.0) on a free port; tests wait for
/_stcore/health to answer "ok" and for the app to report that its script finished.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 3200}  # tall: Streamlit scrolls inside its own container


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ROOT / "artifacts" / f"server-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            sys.executable, "-m", "streamlit", "run", "app.py",
            f"--server.port={self.port}", "--server.address=0.0.0.0", "--server.headless=true",
        ]
        self._log_file = self.log.open("w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._log_file, stderr=subprocess.STDOUT)
        self._wait_healthy()

    def _wait_healthy(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited early:\n{self.log.read_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as r:
                    if r.read().decode().strip() == "ok":
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"/_stcore/health never answered ok:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log_file.close()


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


def wait_for_app(page, timeout: float = 60_000) -> None:
    """Wait until the app is connected and its script has finished running.

    A rerun triggered by the last action may not have started yet when this is called;
    the state is therefore checked again after a pause. Tests that depend on a rerun's
    result also wait for that result itself (playwright's expect, which retries).
    """
    for pause in (300, 300):
        page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]', timeout=timeout)
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)
        page.wait_for_timeout(pause)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout)


def assert_healthy_page(page) -> None:
    assert page.locator('[data-testid="stException"]').count() == 0, page.locator(
        '[data-testid="stException"]'
    ).first.inner_text()
    assert "page not found" not in page.content().lower()


def screenshot(page, name: str) -> pathlib.Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path))
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
