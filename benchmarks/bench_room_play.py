"""The room presses Play: the speaker's Play on the training scenario, alone and while N phones press it too.

At a talk the room opens the training scenario's link (``core.studies.talk.scenarios()``: "Watch two runs diverge") and
presses Play with the speaker. Each Play advances the pair step by step and draws it every few steps; what
matters is that the speaker's Play, on the screen everyone watches, is not slowed by the room's.

One real server per count of players (``benchmarks.harness.Server``, nothing computed before: every scenario
starts from the same cold pair). The speaker's session opens the link in presenter mode (``talk=1``), as a
projector shows it; each player's session opens the link as a phone does. Sessions are protocol-level
clients (``RoomSession``: the websocket messages a browser tab sends and reads, as scripts/viewer.py), so
twenty players cost the measuring machine little and the server is what is measured. Once every page is
drawn, the players press Play at seeded moments within half a second either side of the speaker's click;
the speaker's time is from its click to the first message that shows "step 500 of 500" (and, reported
beside it, to the end of the run that draws the finished page). Players keep reading their messages, as a
phone does, without decoding them (only the end is looked for).

Reported per count: the speaker's Play, its ratio to the speaker alone, the players' times to their step
500, the server's CPU seconds over the Plays (what the room cost it: a Play is paced at a frame every
ui.training_view.FRAME_S at most, so time alone is not all of it) and its peak private memory
(benchmarks.harness.MemoryWatch).

Usage: python -m benchmarks.bench_room_play [N ...]   (default: 4 20)
Last line: room play: speaker alone X s, with 4 players Y s (R x), with 20 players Z s (S x), peak private M MB
"""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from urllib.parse import urlencode

import websockets
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from benchmarks.harness import MemoryWatch, Server

PAGE = "training_divergence"
SPREAD_S = 0.5  # players press Play within this many seconds either side of the speaker's click
DONE = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_SUCCESSFULLY")
RERAN = ForwardMsg.ScriptFinishedStatus.Value("FINISHED_EARLY_FOR_RERUN")
MAX_MESSAGE = 256 * 1024 * 1024


def talk_query(talk: bool) -> str:
    """The training scenario's link (core.studies.talk.scenarios()), in presenter mode or as a phone opens it."""
    from core.studies.talk import scenarios

    (params,) = [p for _, page, p, _ in scenarios() if page == f"pages/{PAGE}.py"]
    return urlencode({**params, **({"talk": "1"} if talk else {})})


def scenario_steps() -> int:
    """How many steps the scenario's preset trains (Play's last step)."""
    from core.studies.talk import scenarios
    from core.training.mlp import PRESETS

    (params,) = [p for _, page, p, _ in scenarios() if page == f"pages/{PAGE}.py"]
    return PRESETS[params["preset"]].settings.steps


STEPS = scenario_steps()


def _ws_url(http_url: str) -> str:
    return http_url.replace("http://", "ws://", 1).rstrip("/") + "/_stcore/stream"


@dataclass(kw_only=True)
class Played:
    """One session's Play: seconds from its click to the step asked for, and to the end of the run after it."""

    to_step: float | None = None
    to_end: float | None = None
    messages: int = 0
    steps_seen: list[int] = field(default_factory=list)  # the speaker's progress, frame by frame
    error: str | None = None


class RoomSession:
    """One tab's session over Streamlit's websocket protocol: open a page, then press a button by its label.

    A browser sends its current address with every rerun: the query string the page last wrote
    (``page_info_changed``) is sent back with the click, as a tab would, so the page sees the link it wrote,
    not the scenario link it was opened with (which would open a fresh pair)."""

    def __init__(self, http_url: str, query: str) -> None:
        self.http_url, self.query = http_url, query
        self.buttons: dict[str, str] = {}  # label -> widget id, from the page's deltas
        self._ws = None

    async def __aenter__(self) -> RoomSession:
        self._ws = await websockets.connect(_ws_url(self.http_url), subprotocols=["streamlit"],
                                            max_size=MAX_MESSAGE, open_timeout=120)
        return self

    async def __aexit__(self, *exc) -> None:
        await self._ws.close()

    def _rerun(self, widgets: list[WidgetState] = ()) -> bytes:
        msg = BackMsg()
        msg.rerun_script.query_string = self.query
        msg.rerun_script.page_name = PAGE
        msg.rerun_script.widget_states.widgets.extend(widgets)
        return msg.SerializeToString()

    def _read(self, fm: ForwardMsg) -> None:
        kind = fm.WhichOneof("type")
        if kind == "page_info_changed":
            self.query = fm.page_info_changed.query_string
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            el = fm.delta.new_element
            if el.WhichOneof("type") == "button":
                self.buttons[el.button.label] = el.button.id

    async def open(self, timeout: float = 300) -> float:
        """Open the page; seconds until its run finished."""
        t0 = time.monotonic()
        await self._ws.send(self._rerun())
        while True:
            fm = ForwardMsg.FromString(await asyncio.wait_for(self._ws.recv(), timeout))
            self._read(fm)
            if fm.WhichOneof("type") == "script_finished" and fm.script_finished == DONE:
                return time.monotonic() - t0

    async def click(self, label: str) -> float:
        """Press the button ``label``; the monotonic time it was sent."""
        await self._ws.send(self._rerun([WidgetState(id=self.buttons[label], trigger_value=True)]))
        return time.monotonic()

    async def play_watched(self, steps: int, timeout: float) -> Played:
        """Press Play and decode every message: when the progress first says ``steps``, and the end."""
        played = Played()
        t0 = await self.click("Play")
        target = f"step {steps:,} of {steps:,}"
        try:
            while True:
                fm = ForwardMsg.FromString(await asyncio.wait_for(self._ws.recv(), timeout))
                played.messages += 1
                self._read(fm)
                kind = fm.WhichOneof("type")
                if kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                    el = fm.delta.new_element
                    if el.WhichOneof("type") == "progress" and el.progress.text.startswith("step "):
                        played.steps_seen.append(int(el.progress.text.split()[1].replace(",", "")))
                        if el.progress.text == target and played.to_step is None:
                            played.to_step = time.monotonic() - t0
                elif kind == "script_finished" and fm.script_finished == DONE and played.to_step is not None:
                    played.to_end = time.monotonic() - t0
                    return played
                elif kind == "script_finished" and fm.script_finished not in (DONE, RERAN):
                    played.error = f"script finished with status {fm.script_finished}"
                    return played
        except TimeoutError:
            played.error = "timed out"
            return played

    async def play_skimmed(self, steps: int, timeout: float) -> Played:
        """Press Play and read every message as a phone does, decoding none: seconds until one shows ``steps``."""
        played = Played()
        t0 = await self.click("Play")
        target = f"step {steps:,} of {steps:,}".encode()
        try:
            while played.to_step is None:
                raw = await asyncio.wait_for(self._ws.recv(), timeout)
                played.messages += 1
                if target in raw:
                    played.to_step = time.monotonic() - t0
            return played
        except TimeoutError:
            played.error = "timed out"
            return played

    async def drain(self, seconds: float) -> None:
        """Keep reading (an open tab) for ``seconds``."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            try:
                await asyncio.wait_for(self._ws.recv(), left)
            except TimeoutError:
                return


@dataclass(kw_only=True)
class RoomResult:
    players: int
    speaker: Played
    others: list[Played]
    peak_mb: float
    cpu_s: float  # the server's CPU seconds from the first click until every Play reached its last step

    @property
    def errors(self) -> list[str]:
        return [p.error for p in [self.speaker, *self.others] if p.error]


async def _room(server: Server, players: int, seed: int = 0, timeout: float = 300) -> RoomResult:
    rng = random.Random(seed)
    offsets = [rng.uniform(-SPREAD_S, SPREAD_S) for _ in range(players)]
    lead = max(0.0, -min(offsets, default=0.0))  # the earliest player clicks at 0, the speaker at ``lead``
    with MemoryWatch(server) as mem:
        speaker = RoomSession(server.url, talk_query(True))
        crowd = [RoomSession(server.url, talk_query(False)) for _ in range(players)]
        async with speaker:
            for s in crowd:
                await s.__aenter__()
            try:
                await speaker.open()
                await asyncio.gather(*(s.open() for s in crowd))

                async def player(s: RoomSession, at: float) -> Played:
                    await asyncio.sleep(lead + at)
                    return await s.play_skimmed(STEPS, timeout)

                async def speaking() -> Played:
                    await asyncio.sleep(lead)
                    return await speaker.play_watched(STEPS, timeout)

                cpu0 = server.cpu_seconds()
                done = await asyncio.gather(speaking(), *(player(s, at) for s, at in zip(crowd, offsets, strict=True)))
                cpu = server.cpu_seconds() - cpu0
            finally:
                for s in crowd:
                    await s.__aexit__(None, None, None)
    return RoomResult(players=players, speaker=done[0], others=list(done[1:]), peak_mb=mem.peak_mb, cpu_s=cpu)


def room(players: int, seed: int = 0) -> RoomResult:
    """A fresh server, the speaker and ``players`` phones on the training link, everyone pressing Play."""
    server = Server()
    try:
        return asyncio.run(_room(server, players, seed))
    finally:
        server.stop()


def line(r: RoomResult, alone: RoomResult | None) -> str:
    s = r.speaker
    ratio = (f" ({s.to_step / alone.speaker.to_step:.2f}x alone)"
             if alone is not None and s.to_step and alone.speaker.to_step else "")
    others = [p.to_step for p in r.others if p.to_step is not None]
    players = (f"; players' Play to step {STEPS}: median {statistics.median(others):.2f} s, slowest "
               f"{max(others):.2f} s" if others else "")
    errors = f"; ERRORS {r.errors[:3]}" if r.errors else ""
    shown = len(set(s.steps_seen))
    return (f"{r.players} players: the speaker's Play to step {STEPS} {s.to_step or float('nan'):.2f} s{ratio}, "
            f"to the finished page {s.to_end or float('nan'):.2f} s, {shown} steps drawn{players}; "
            f"server {r.cpu_s:.1f} CPU-s, peak private {r.peak_mb:.0f} MB{errors}")


def main(counts: list[int] | None = None) -> list[RoomResult]:
    counts = [4, 20] if counts is None else counts
    alone = room(0)
    print(line(alone, None), flush=True)
    results = [alone]
    for n in counts:
        r = room(n, seed=n)
        results.append(r)
        print(line(r, alone), flush=True)
    parts = [f"with {r.players} players {r.speaker.to_step or float('nan'):.2f} s "
             f"({(r.speaker.to_step or float('nan')) / alone.speaker.to_step:.2f}x)" for r in results[1:]]
    print(f"room play: speaker alone {alone.speaker.to_step:.2f} s, " + ", ".join(parts)
          + f", peak private {max(r.peak_mb for r in results):.0f} MB")
    return results


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or None)
