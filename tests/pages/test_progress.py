"""ui.progress.ProgressBar: the one progress bar of a page's long computations, at most one update per
YIELD_EVERY seconds whichever way it is called."""

from __future__ import annotations

import pytest

from core.machines.progress import Progress
from ui import progress
from ui.progress import YIELD_EVERY, ProgressBar


class Bar:
    def __init__(self) -> None:
        self.sent: list[tuple[float, str | None]] = []
        self.emptied = False

    def progress(self, value: float, text: str | None = None) -> Bar:
        self.sent.append((value, text))
        return self

    def empty(self) -> None:
        self.emptied = True


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    return now


def test_updates_closer_than_yield_every_are_dropped(clock):
    where = Bar()
    bar = ProgressBar(where, "Training:")
    assert where.sent == [(0.0, "Training:")]
    bar(Progress(done=1, total=4))  # at once: dropped
    clock[0] += 1.5 * YIELD_EVERY
    bar(Progress(done=2, total=4))
    bar(Progress(done=3, total=4, what="orders"))  # same instant: dropped
    clock[0] += 1.5 * YIELD_EVERY
    bar(Progress(done=3, total=4, what="orders"))
    assert where.sent[1:] == [(0.5, "Training: 2 of 4 steps"), (0.75, "Training: 3 of 4 orders")]
    bar.empty()
    assert where.emptied


def test_its_own_words_and_streamlits_call_are_throttled_too(clock):
    where = Bar()
    bar = ProgressBar(where, "Serving…", say=lambda p: f"Serving: {p.what}")
    clock[0] += 1.5 * YIELD_EVERY
    bar.update(Progress(done=1, total=2, what="request 1"))
    bar.progress(0.9, text="joined")  # a callback written for st.progress's bar: same throttle
    clock[0] += 1.5 * YIELD_EVERY
    bar.progress(0.9, text="joined")
    assert where.sent[1:] == [(0.5, "Serving: request 1"), (0.9, "joined")]
