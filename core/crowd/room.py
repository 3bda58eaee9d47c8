"""The room's GPUs: what each viewer chose to share of their own GPU's results, kept for the speaker's screen.

One entry per session, in a SQLite file in WAL mode, so that every server process on one machine (several behind
HAProxy: scripts/serve_many.py) writes to and reads from the same room. An entry is made by the server from a
report it has already judged (core.studies.your_gpu), never from what a client sent; it holds only the results
and the adapter's vendor and architecture. The room is bounded (``MAX_ENTRIES`` sessions), a session may send
at most once every ``MIN_INTERVAL_S`` seconds, and the speaker can empty it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import pathlib
import sqlite3
import tempfile
import threading
import time
from dataclasses import asdict, dataclass

MAX_ENTRIES = 2_000  # a large lecture hall; beyond it a new session is told the room is full
MIN_INTERVAL_S = 5.0
ENV = "SAMESEED_ROOM_DB"  # where the room's file is; by default one per checkout, in the temporary folder


@dataclass(frozen=True, kw_only=True)
class RoomEntry:
    job: str  # which vector the results are for
    vendor: str
    architecture: str
    sequential: int  # bits of each kernel's sum
    tree: int
    subgroup: int | None
    subgroup_size: int | None
    atomic: tuple[int, ...]
    cpu_match: bool  # left to right gave this server's CPU bits
    model_match: bool  # the tree gave the model's bits


def default_path() -> pathlib.Path:
    if os.environ.get(ENV):
        return pathlib.Path(os.environ[ENV])
    root = str(pathlib.Path(__file__).resolve().parents[2])
    return pathlib.Path(tempfile.gettempdir()) / f"sameseed-room-{hashlib.sha256(root.encode()).hexdigest()[:12]}.db"


class Room:
    def __init__(self, path: pathlib.Path | str | None = None, max_entries: int = MAX_ENTRIES,
                 min_interval_s: float = MIN_INTERVAL_S) -> None:
        self.path = pathlib.Path(path) if path else default_path()
        self.max_entries, self.min_interval_s = max_entries, min_interval_s
        self._lock = threading.Lock()  # one connection per call; the lock keeps this process's writes in turn
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("CREATE TABLE IF NOT EXISTS room (session TEXT PRIMARY KEY, added REAL, job TEXT, body TEXT)")

    def _connect(self):
        """A connection of its own for each call (closed after it): threads and processes never share one."""
        return contextlib.closing(sqlite3.connect(self.path, timeout=5, isolation_level=None))

    def add(self, session: str, entry: RoomEntry, now: float | None = None) -> str | None:
        """Adds or replaces ``session``'s entry; returns why not (too soon, the room is full), or None."""
        now = time.time() if now is None else now
        body = json.dumps(asdict(entry))
        with self._lock, self._connect() as db:
            db.execute("BEGIN IMMEDIATE")  # the check and the write, one transaction across processes
            row = db.execute("SELECT added FROM room WHERE session = ?", (session,)).fetchone()
            if row is not None and now - row[0] < self.min_interval_s:
                db.execute("ROLLBACK")
                return f"you sent your results {now - row[0]:.0f} s ago: one send every {self.min_interval_s:.0f} s"
            if row is None and db.execute("SELECT COUNT(*) FROM room").fetchone()[0] >= self.max_entries:
                db.execute("ROLLBACK")
                return f"the room is full ({self.max_entries:,} GPUs)"
            db.execute("INSERT OR REPLACE INTO room VALUES (?, ?, ?, ?)", (session, now, entry.job, body))
            db.execute("COMMIT")
        return None

    def entries(self) -> list[RoomEntry]:
        with self._connect() as db:
            rows = db.execute("SELECT body FROM room ORDER BY added").fetchall()
        out = []
        for (body,) in rows:
            d = json.loads(body)
            out.append(RoomEntry(**{**d, "atomic": tuple(d["atomic"])}))
        return out

    def reset(self) -> None:
        with self._lock, self._connect() as db:
            db.execute("DELETE FROM room")


_ROOM: Room | None = None
_ROOM_LOCK = threading.Lock()


def the_room() -> Room:
    """This server's room (made on first use: importing this module creates no file)."""
    global _ROOM
    with _ROOM_LOCK:
        if _ROOM is None:
            _ROOM = Room()
        return _ROOM
