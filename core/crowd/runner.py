"""A session's own state: which training pair it views, its last result; and finished training work.

Streamlit may start a new run of a session's script while the previous run of the same
session is still computing (a click requests a rerun; the old thread only stops at its next
``st.*`` call). Both threads then see the same session state. This module is the one place
where a session's view of a pair (``core.crowd.sharedrun.RunView``: the room's run of a preset,
or a run of its own for other settings) is created or replaced, atomically (compare and set under
a lock), so two script runs never install two different views for the same settings; moving
the view is ``RunView.advance``'s job, under the view's own lock. ``session_value`` keeps a
session's last result of a kind (a diagnosis of its own upload), computed by one of its script
runs at a time. Work shared by every session goes to the named caches of ``core.crowd.bytecache``.

Nothing here imports streamlit: the session state is any mutable mapping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any

from core.crowd.bytecache import ByteLRU
from core.crowd.sharedrun import RunView, shared_run
from core.machines.progress import OnProgress
from core.training.mlp import TrainSettings
from core.training.pair import PairedRun
from core.training.seeds import SEED_CHUNK, summarize

_SLOT_LOCK = threading.Lock()  # held only for a lookup and a store, never while computing


def current_run(state: MutableMapping, key: str, settings: TrainSettings, fresh: bool = False) -> RunView:
    """The view stored under ``key`` for ``settings``; a new one at step 0 if missing, stale, or ``fresh``.

    A new view looks at the room's run of these settings when they are a preset's (steps computed once for
    every viewer), else at a new run of its own (core.crowd.sharedrun.shared_run). It is built outside the
    lock (the first of a kind takes milliseconds), then stored only if no other thread stored a matching
    one meanwhile (for ``fresh``: only if the view seen at the start is still the stored one, so two
    simultaneous resets leave one view, not two). Raises ValueError or RuntimeError when the settings
    cannot make a pair.
    """
    with _SLOT_LOCK:
        seen = state.get(key)
    if not fresh and isinstance(seen, RunView) and seen.settings == settings:
        return seen
    reuse = isinstance(seen, RunView) and seen.settings == settings and seen.shared.broken is None
    built = RunView(seen.shared if reuse else shared_run(settings))  # a reset views the same run from step 0
    with _SLOT_LOCK:
        now = state.get(key)
        if now is not seen and isinstance(now, RunView) and now.settings == settings:
            return now  # another thread installed its view first: everyone uses that one
        state[key] = built
        return built


_SESSION_LOCK = "_crowd_session_lock"  # the session-state key of a session's own lock


def _session_lock(state: MutableMapping) -> threading.RLock:
    with _SLOT_LOCK:
        lock = state.get(_SESSION_LOCK)
        if lock is None:
            lock = state[_SESSION_LOCK] = threading.RLock()
        return lock


def session_value(state: MutableMapping, slot: str, key: Hashable, compute: Callable[[], Any]) -> Any:
    """The value kept in ``state[slot]`` if it was computed for ``key``, else ``compute()``'s, kept there.

    One slot per kind of result (the session's last one: an upload is not shared with other sessions,
    and its diagnosis holds arrays of its size). A second script run of the same session that asks
    meanwhile waits for the first one's computation and takes it, so a session computes one at a time.
    If ``compute`` raises, nothing is kept.
    """
    with _session_lock(state):
        held = state.get(slot)
        if held is not None and held[0] == key:
            return held[1]
        value = compute()
        state[slot] = (key, value)
        return value


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
                 memo: ByteLRU | None = None, chunk: int = SEED_CHUNK) -> PairOutcome:
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
