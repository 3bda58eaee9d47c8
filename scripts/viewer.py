"""A viewer that speaks Streamlit's own websocket protocol, as a browser tab does, without a browser.

A browser opens ``/_stcore/stream`` with the subprotocol ``streamlit``, sends one ``BackMsg`` asking
to run the script for its address (``rerun_script``: the query string and the page's URL path), and
draws the ``ForwardMsg`` deltas that come back until the server reports ``script_finished``. This
client does the same and keeps what a benchmark needs: how long until the run that drew the page
finished, how many deltas it sent, and the texts of the waits it showed. A hundred of these cost the
measuring machine a fraction of what a hundred Chromium tabs would, so the server is what is measured.

``view`` answers one visit; ``Speaker`` keeps a session open, as a speaker's tab does, and times a click
(a rerun of another page in the same session). With ``sticky=True`` both first load the page's address over
HTTP, as a browser does, and open the websocket with the cookies that answer set: behind a proxy that keeps a
session on one server process by a cookie (scripts/serve_many.py), the websocket then reaches the process
the cookie names.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

DONE = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")
RERAN = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN")
MAX_MESSAGE = 256 * 1024 * 1024  # a page's charts and tables arrive in one message each


@dataclass(kw_only=True)
class Visit:
    """One viewer's visit: seconds from sending the request to the finished run, and what it carried."""

    seconds: float
    deltas: int
    waits: list[str] = field(default_factory=list)  # texts of notices shown while the page was blank
    error: str | None = None
    cookie: str = ""  # the Cookie header its websocket carried (``sticky``: what the page load set)


def _request(query: str, page: str) -> bytes:
    msg = BackMsg()
    msg.rerun_script.query_string = query
    msg.rerun_script.page_name = page
    return msg.SerializeToString()


def _alert_text(fm: ForwardMsg) -> str | None:
    """The text of an info, warning, toast or spinner element a delta adds (what a waiting viewer reads)."""
    if fm.WhichOneof("type") != "delta" or fm.delta.WhichOneof("type") != "new_element":
        return None
    el = fm.delta.new_element
    kind = el.WhichOneof("type")
    if kind == "alert":
        return el.alert.body
    if kind == "spinner":
        return el.spinner.text
    if kind == "toast":
        return el.toast.body
    return None


async def _until_finished(ws, visit: Visit, started: float, timeout: float) -> Visit:
    deadline = started + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            visit.error, visit.seconds = "timed out", time.monotonic() - started
            return visit
        raw = await asyncio.wait_for(ws.recv(), timeout=left)
        fm = ForwardMsg.FromString(raw)
        kind = fm.WhichOneof("type")
        if kind == "delta":
            visit.deltas += 1
            text = _alert_text(fm)
            if text and visit.deltas <= 3:  # a notice before the page drew anything: a wait it was told of
                visit.waits.append(text)
        elif kind == "page_not_found":
            visit.error = "page not found"
        elif kind == "script_finished" and fm.script_finished == DONE:
            visit.seconds = time.monotonic() - started
            return visit
        elif kind == "script_finished" and fm.script_finished != RERAN:
            visit.error, visit.seconds = f"script finished with status {fm.script_finished}", 0.0
            return visit


def ws_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream"


def _load_page(http_url: str, page: str, query: str, timeout: float) -> dict[str, str]:
    """GET the page's address as a browser's first request does; the headers that send back what it set."""
    url = f"{http_url.rstrip('/')}/{page}" + (f"?{query}" if query else "")
    with urllib.request.urlopen(url, timeout=timeout) as r:
        r.read()
        cookies = [c.split(";", 1)[0].strip() for c in r.headers.get_all("Set-Cookie") or []]
    return {"Cookie": "; ".join(cookies)} if cookies else {}


async def _connect(http_url: str, page: str, query: str, sticky: bool, timeout: float, visit: Visit | None = None):
    headers = await asyncio.to_thread(_load_page, http_url, page, query, timeout) if sticky else {}
    if visit is not None:
        visit.cookie = headers.get("Cookie", "")
    return websockets.connect(ws_url(http_url), subprotocols=["streamlit"], max_size=MAX_MESSAGE,
                              open_timeout=timeout, additional_headers=headers)


async def view(http_url: str, page: str = "", query: str = "", timeout: float = 120.0,
               hold: asyncio.Event | None = None, arrived: Callable[[Visit], None] | None = None,
               sticky: bool = False) -> Visit:
    """Open the page at ``http_url/page?query`` as a new viewer and wait for its run to finish; with ``hold``,
    tell ``arrived`` the visit, then stay connected (an idle tab) until that event is set. ``sticky``: load
    the page over HTTP first and keep its cookies (the module's docstring)."""
    started = time.monotonic()
    visit = Visit(seconds=0.0, deltas=0)
    told = False
    try:
        async with await _connect(http_url, page, query, sticky, timeout, visit) as ws:
            await ws.send(_request(query, page))
            visit = await _until_finished(ws, visit, started, timeout)
            if arrived is not None:
                arrived(visit)
                told = True
            if hold is not None:
                await hold.wait()
            return visit
    except (TimeoutError, OSError, websockets.WebSocketException) as err:
        visit.error, visit.seconds = repr(err), time.monotonic() - started
        if arrived is not None and not told:
            arrived(visit)
        return visit


class Speaker:
    """A session kept open, as the speaker's tab is: it opens a page, then times clicks to other pages."""

    def __init__(self, http_url: str, sticky: bool = False) -> None:
        self.http_url, self.sticky = http_url, sticky
        self._ws = None

    async def __aenter__(self) -> Speaker:
        self._ws = await (await _connect(self.http_url, "", "", self.sticky, 120.0))
        return self

    async def __aexit__(self, *exc) -> None:
        await self._ws.close()

    async def click(self, page: str, query: str = "", timeout: float = 120.0) -> Visit:
        """A click that reruns the session on ``page``: seconds until that run finished."""
        started = time.monotonic()
        await self._ws.send(_request(query, page))
        return await _until_finished(self._ws, Visit(seconds=0.0, deltas=0), started, timeout)
