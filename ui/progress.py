"""The one progress bar of every long computation a page runs (a core.machines.progress callback)."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.machines.progress import Progress

YIELD_EVERY = 0.1  # seconds between two progress updates (each is where a click or a closed tab stops a run)


class ProgressBar:
    """A progress bar updated at most every YIELD_EVERY seconds.

    Every update sends a message, which is where Streamlit stops this script run when the
    visitor clicked something else or closed the tab: long work calls the bar (it is an
    ``OnProgress``) between chunks. A computation that reports thousands of pieces would send
    as many messages; at most ten a second keep the stop prompt and the page light.

    ``say`` writes the bar's text for a Progress; by default "<text> 3 of 10 steps". A callback
    written for a bar of Streamlit's (``bar.progress(value, text=...)``) moves this one the same
    way, throttled too.
    """

    def __init__(self, where, text: str, say: Callable[[Progress], str] | None = None) -> None:
        self.bar = where.progress(0.0, text=text)
        self.text = text
        self.say = say
        self.last = time.monotonic()

    def _due(self) -> bool:
        now = time.monotonic()
        if now - self.last < YIELD_EVERY:
            return False
        self.last = now
        return True

    def progress(self, value: float, text: str | None = None) -> None:
        """Streamlit's ``progress`` call, sent only when YIELD_EVERY has passed since the last one."""
        if self._due():
            self.bar.progress(value, text=text)

    def update(self, p: Progress) -> None:
        if self._due():
            text = self.say(p) if self.say else f"{self.text} {p.done:,} of {p.total:,} {p.what or 'steps'}"
            self.bar.progress(p.fraction, text=text)

    __call__ = update

    def empty(self) -> None:
        self.bar.empty()
