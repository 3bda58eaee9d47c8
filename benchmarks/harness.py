"""A real Streamlit server and Debian's Chromium, shared by the browser tests and benchmarks.

The server starts with the same flags as the Docker image's ENTRYPOINT
(--server.port, --server.address=0.0.0.0) on a free port and is ready when
/_stcore/health answers "ok".
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import urllib.request

from scripts.ports import free_port

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Debian's chromium-headless-shell: the same Blink and V8 build as its chromium package, without the
# browser's window system and display compositor. A page load costs it 25-45% less CPU (1.2-1.5 vs
# 2.0-2.3 CPU-s for the overview, 4.2-4.7 vs 5.4-6.0 for the CPU-vs-GPU page, 2-core VM), which the
# browser tests of a 2-core machine feel; Playwright's own headless runs use the same shell. The full
# browser serves where the shell is not installed.
CHROMIUM = (os.environ.get("CHROMIUM_PATH") or shutil.which("chromium-headless-shell") or shutil.which("chromium")
            or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


class Server:
    def __init__(self, script: str = "app.py", warmed: bool = False) -> None:
        """``streamlit run script`` from the repository root, as Community Cloud runs it; ``warmed``:
        ``python -m scripts.serve`` instead, as ``make run`` and the Docker image do (app.py, with
        the warm-up that starts with the server; ``warmed_up`` waits for it to end)."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = ROOT / "artifacts" / f"server-{self.port}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        launch = ["-m", "scripts.serve"] if warmed else ["-m", "streamlit", "run", script]
        cmd = [sys.executable, *launch, f"--server.port={self.port}", "--server.address=0.0.0.0",
               "--server.headless=true"]
        self._log_file = self.log.open("w")
        self.launched_at = time.monotonic()
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

    def warmed_up(self, timeout: float = 300) -> str:
        """The warm-up's report lines (scripts.serve), joined by " | ", once its last one is in the server's log:
        the talk links' visit, or the line saying where the warm-up stopped."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._log_file.flush()
            lines = [line for line in self.log.read_text().splitlines() if line.startswith("warm-up")]
            if any(line.startswith(("warm-up: ", "warm-up stopped")) for line in lines):
                return " | ".join(lines)
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited:\n{self.log.read_text()}")
            time.sleep(0.25)
        raise TimeoutError(f"no warm-up report within {timeout} s:\n{self.log.read_text()}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self._log_file.close()

    def _status_mb(self) -> dict[str, float]:
        """The server process's memory fields from /proc/PID/status, in MB."""
        fields = {}
        for line in pathlib.Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if value.strip().endswith(" kB"):
                fields[key] = int(value.split()[0]) / 1024
        return fields

    def cpu_seconds(self) -> float:
        """User and system CPU seconds of the server process so far (all its threads), from /proc."""
        fields = pathlib.Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> tuple[float, float]:
        """(current, peak) resident memory of the server process in MB, from /proc."""
        f = self._status_mb()
        return f["VmRSS"], f["VmHWM"]

    def private_mb(self) -> float:
        """Memory the kernel cannot take back without killing the server, in MB: anonymous
        pages (heap, and library pages written by relocation) and shared memory. Resident
        file pages (the mapped parts of torch's and LLVM's libraries) are left out: they are
        clean copies of files that the kernel drops under memory pressure, and how many are
        mapped depends on the page cache (two installs of the same packages on one machine
        differed by 100 MB of them, and by 20 MB of private memory)."""
        f = self._status_mb()
        return f["RssAnon"] + f.get("RssShmem", 0.0)


class MemoryWatch:
    """Samples the server's private memory every 50 ms in a thread; ``peak_mb`` is the largest."""

    def __init__(self, server: Server) -> None:
        self.server, self.peak_mb = server, server.private_mb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak_mb = max(self.peak_mb, self.server.private_mb())
            except (FileNotFoundError, ProcessLookupError):  # the server has exited
                return

    def __enter__(self) -> MemoryWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_mb = max(self.peak_mb, self.server.private_mb())


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


def run_in_own_thread(fn, timeout: float):
    """Run fn in a fresh thread and return its result, re-raising its exception here.

    Playwright's sync API (and asyncio.run) refuse to start inside a running event loop,
    which browser test fixtures keep in pytest's thread.
    """
    box: dict = {}

    def work():
        try:
            box["out"] = fn()
        except BaseException as err:  # re-raised in the caller's thread
            box["err"] = err

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=timeout)
    if "err" in box:
        raise box["err"]
    if "out" not in box:
        raise TimeoutError(f"no result within {timeout:.0f} s")
    return box["out"]
