"""Who owns a session's training pair, and bounded memos of finished training work.

Streamlit may start a new run of a session's script while the previous run of the same
session is still computing (a click requests a rerun; the old thread only stops at its next
``st.*`` call). Both threads then see the same session state. This module is the one place
where a session's ``PairedRun`` is created or replaced, atomically (compare and set under a
lock), so two script runs never install two different pairs for the same settings; moving
the pair is ``PairedRun.advance``'s job, under the pair's own lock.

Nothing here imports streamlit: the session state is any mutable mapping.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, MutableMapping
from dataclasses import dataclass

from core.machines.progress import OnProgress
from core.training.mlp import TrainSettings
from core.training.pair import PairedRun
from core.training.seeds import SEED_CHUNK, summarize

_SLOT_LOCK = threading.Lock()  # held only for a lookup and a store, never while computing


def current_run(state: MutableMapping, key: str, settings: TrainSettings, fresh: bool = False) -> PairedRun:
    """The pair stored under ``key`` for ``settings``; a new one if missing, stale, or ``fresh``.

    The new pair is built outside the lock (it takes milliseconds), then stored only if no
    other thread stored a matching one meanwhile (for ``fresh``: only if the pair seen at the
    start is still the stored one, so two simultaneous resets leave one pair, not two).
    Raises ValueError or RuntimeError when the settings cannot make a pair.
    """
    with _SLOT_LOCK:
        seen = state.get(key)
    if not fresh and isinstance(seen, PairedRun) and seen.settings == settings:
        return seen
    built = PairedRun(settings)
    with _SLOT_LOCK:
        now = state.get(key)
        if now is not seen and isinstance(now, PairedRun) and now.settings == settings:
            return now  # another thread installed its pair first: everyone uses that one
        state[key] = built
        return built


class Memo:
    """A small thread-safe least-recently-used map with a fixed number of entries."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 1:
            raise ValueError("a memo needs room for one entry")
        self.max_entries = max_entries
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable):
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


@dataclass(frozen=True, kw_only=True)
class PairOutcome:
    """What the float64 comparison shows of one whole pair: small, whatever the step count."""

    settings: TrainSettings
    steps: tuple[int, ...]  # steps where |loss A - loss B| > 0
    abs_diff: tuple[float, ...]
    first_rel_1pct: int | None
    final_distance: float
    distances: tuple[float, ...] = ()  # ||theta_A - theta_B|| at every step (what float64 buys is fitted to it)


def pair_outcome(settings: TrainSettings, on_progress: OnProgress | None = None,
                 memo: Memo | None = None, chunk: int = SEED_CHUNK) -> PairOutcome:
    """Train one pair to the end in chunks (the steps done reported between them; the callback may raise)."""
    if memo is not None and (hit := memo.get(settings)) is not None:
        return hit
    run = PairedRun(settings)
    recs = run.run(settings.steps, on_progress, chunk)
    nz = [r for r in recs if r.abs_diff > 0]
    out = PairOutcome(settings=settings, steps=tuple(r.step for r in nz), abs_diff=tuple(r.abs_diff for r in nz),
                      first_rel_1pct=summarize(recs).first_rel_1pct, final_distance=recs[-1].param_distance,
                      distances=tuple(r.param_distance for r in recs))
    if memo is not None:
        memo.put(settings, out)
    return out


# Finished work shared by every session of this process: a seed is four floats, a pair outcome at
# most a few tens of kilobytes, so these bounds keep both memos far below a megabyte or two.
SEED_MEMO = Memo(512)
PAIR_MEMO = Memo(32)
