"""Two server processes behind HAProxy (scripts/serve_many.py): sessions spread over both, each session's
requests (its page, its websocket, its upload, its media) reach one process, and stopping leaves nothing.

The launcher runs as it would for a room, as a process of its own, on a small app written here: the app names
the process that runs each script run, keeps the ``who`` of every visit in a file of that process, and takes
an upload. Sticky sessions are a property of HAProxy's config and of Streamlit's server, not of a page, so
a small app shows them in seconds where the app's own pages would each import torch first. A second test
takes the app's own upload (CPU vs GPU, "Bring your own GPU") through HAProxy to two processes of app.py.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from benchmarks.harness import ROOT, run_in_own_thread
from scripts.ports import free_port
from scripts.serve_many import COOKIE, Cluster, haproxy_path
from tests.e2e.conftest import RERUN, assert_healthy_page, open_section_with_icon, until, wait_for_app

pytestmark = pytest.mark.skipif(haproxy_path() is None, reason="haproxy is not installed: `make test` installs "
                                "Debian's haproxy where apt-get is there and it runs as root")

APP = '''
import pathlib

import numpy as np
import streamlit as st

port = st.get_option("server.port")
who = st.query_params.get("who", "")
if who:
    with open(pathlib.Path(__file__).parent / f"seen-{port}.txt", "a") as seen:
        seen.write(who + "\\n")
st.markdown(f"served by port {port}")
up = st.file_uploader("a file")
if up is not None:
    data = up.getvalue()
    st.markdown(f"received {len(data)} bytes: {data.decode()}")
    st.image(np.full((16, 16, 3), len(data), dtype=np.uint8))  # served from this process's media store
'''
VIEWERS = 12
UPLOAD = b"hello from the room"


def _lines(proc: subprocess.Popen) -> queue.Queue:
    out: queue.Queue = queue.Queue()

    def read() -> None:
        for line in proc.stdout:
            out.put(line.rstrip("\n"))
        out.put(None)
    threading.Thread(target=read, daemon=True).start()
    return out


def _until_line(out: queue.Queue, seen: list[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = out.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r} within {timeout} s:\n" + "\n".join(seen))


def _seen(folder: pathlib.Path, port: int) -> set[str]:
    path = folder / f"seen-{port}.txt"
    return set(path.read_text().split()) if path.exists() else set()


def _get(url: str, cookie: str) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Cookie": cookie}), timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as err:
        return err.code


def _alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _running_with(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (the app written here: a server process left running)."""
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace") and _alive(int(entry.name)):
                    found.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                pass
    return found


def test_two_processes_behind_haproxy_keep_each_session_on_one_and_stop_cleanly(browser, tmp_path):
    from scripts.viewer import view

    app = tmp_path / "many_app.py"
    app.write_text(APP)
    launcher = subprocess.Popen(
        [sys.executable, "-m", "scripts.serve_many", "--processes", "2", "--port", str(free_port()),
         "--script", str(app)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out, log = _lines(launcher), []
    try:
        ready = _until_line(out, log, "serve_many: 2 processes behind ", timeout=90)
        url = re.search(r"behind (\S+)", ready).group(1)
        port_of = {}  # the cookie's value -> the process's port, as the launcher printed them
        for line in log:
            if m := re.match(r"serve_many: (s\d) on 127\.0\.0\.1:(\d+) ", line):
                port_of[m[1]] = int(m[2])
        pids = [int(p) for p in re.findall(r"pid (\d+)", "\n".join(log))]
        assert sorted(port_of) == ["s1", "s2"] and len(pids) == 3, log

        # (a) new viewers, each loading the page then opening its websocket with the cookie that load set
        async def crowd():
            return await asyncio.gather(*(view(url, "", f"who=v{i}", timeout=60, sticky=True)
                                          for i in range(VIEWERS)))
        visits = run_in_own_thread(lambda: asyncio.run(crowd()), timeout=90)
        assert [v.error for v in visits if v.error] == []
        chosen = [m[1] if (m := re.search(rf"{COOKIE}=(s\d)", v.cookie)) else None for v in visits]
        assert set(chosen) == {"s1", "s2"}, (chosen, "each page load gets HAProxy's cookie, naming either process")
        for i, name in enumerate(chosen):  # and each session's script ran on the process its cookie names
            other = next(n for n in port_of if n != name)
            assert f"v{i}" in _seen(tmp_path, port_of[name]) and f"v{i}" not in _seen(tmp_path, port_of[other])

        # (b) a browser: its page, websocket, upload and media all reach the process its cookie names
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto(f"{url}/?who=browser")
            wait_for_app(page)
            name = next(c["value"] for c in context.cookies() if c["name"] == COOKIE)
            mine, other = port_of[name], port_of[next(n for n in port_of if n != name)]
            expect(page.get_by_text(f"served by port {mine}")).to_be_visible(timeout=RERUN)
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
                files=[{"name": "room.txt", "mimeType": "text/plain", "buffer": UPLOAD}])
            expect(page.get_by_text(f"received {len(UPLOAD)} bytes: {UPLOAD.decode()}")).to_be_visible(timeout=RERUN)
            image = page.locator('[data-testid="stImage"] img').first
            width = until(lambda: image.evaluate("i => i.complete ? i.naturalWidth : 0"), lambda w: w > 0)
            assert width == 16
            assert "browser" in _seen(tmp_path, mine) and "browser" not in _seen(tmp_path, other)
            media = url + image.get_attribute("src").removeprefix(url)
            # the image lives in one process: the other has no such file, so a request sent there fails
            assert _get(media, f"{COOKIE}={name}") == 200
            assert _get(media, f"{COOKIE}={next(n for n in port_of if n != name)}") == 404
        finally:
            context.close()

        # (c) SIGTERM stops HAProxy and both processes; none is left
        launcher.send_signal(signal.SIGTERM)
        assert launcher.wait(timeout=30) == 0
        _until_line(out, log, "serve_many: stopped", timeout=5)
        assert [p for p in pids if _alive(p)] == [] and _running_with(str(app)) == []
    finally:
        if launcher.poll() is None:
            launcher.kill()  # its children get SIGTERM from the kernel (PR_SET_PDEATHSIG)
            launcher.wait()


def test_the_apps_own_upload_reaches_its_session_through_haproxy(browser, tmp_path):
    """A visitor's capture file, uploaded on CPU vs GPU through HAProxy to one of two processes of app.py, joins
    their page: the upload's PUT went to the process holding their session; sent to the other, it is refused."""
    from core.recordings.store import DEFAULT_DIR, UPLOADED

    src = sorted(DEFAULT_DIR.glob("*.json"))[-1]
    with Cluster(2, script="app.py", log_dir=tmp_path) as cluster:
        context = browser.new_context(viewport={"width": 1400, "height": 3200})
        try:
            page = context.new_page()
            puts = []
            page.on("request", lambda r: puts.append(r) if r.method == "PUT" and "/upload_file/" in r.url else None)
            page.goto(f"{cluster.url}/cpu_vs_gpu")
            wait_for_app(page, timeout=120_000)
            assert [c["value"] for c in context.cookies() if c["name"] == COOKIE] in (["s1"], ["s2"])
            open_section_with_icon(page, "upload_file")  # bring your own GPU's capture
            page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(
                files=[{"name": "my-gpu-capture.json", "mimeType": "application/json", "buffer": src.read_bytes()}])
            wait_for_app(page, timeout=120_000)
            card = page.locator('[data-testid="stAlert"]').filter(has_text=f"Your recording, {UPLOADED}")
            expect(card).to_be_visible(timeout=60_000)
            expect(card).to_contain_text("my-gpu-capture.json")
            assert_healthy_page(page)
            # the same upload again, as the browser sent it (its session's URL, its XSRF token), to each process:
            # taken by the one its cookie names, refused by the other, which has no such session
            put = puts[-1]
            mine = next(c["value"] for c in context.cookies() if c["name"] == COOKIE)
            part = (b'--fp\r\nContent-Disposition: form-data; name="UploadedFile"; filename="my-gpu-capture.json"\r\n'
                    b"Content-Type: application/json\r\n\r\n")
            body = part + src.read_bytes() + b"\r\n--fp--\r\n"

            def send_to(name: str) -> tuple[int, str]:
                sent = put.all_headers()
                headers = {"Content-Type": "multipart/form-data; boundary=fp", "X-Xsrftoken": sent["x-xsrftoken"],
                           "Cookie": sent["cookie"].replace(f"{COOKIE}={mine}", f"{COOKIE}={name}")}
                request = urllib.request.Request(put.url, data=body, method="PUT", headers=headers)
                try:
                    with urllib.request.urlopen(request, timeout=10) as answer:
                        return answer.status, answer.read().decode()
                except urllib.error.HTTPError as err:
                    return err.code, err.read().decode()
            assert send_to(mine)[0] < 300
            status, text = send_to("s2" if mine == "s1" else "s1")
            assert status == 400 and "Invalid session_id" in text, (status, text)
        finally:
            context.close()
