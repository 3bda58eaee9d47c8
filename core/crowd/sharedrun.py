"""One paired run for a whole room: a preset's steps computed once, each viewer shown them as far as they go.

A preset's pair is the same computation for every viewer of it on this server: the same settings, the same
initial weights and batches, the same thread count, so the same bits. A room that presses Play on one link
used to train one pair per session, side by side on the same cores. Here a ``SharedRun`` holds one
``PairedRun`` and the records of every step computed so far; each session moves a ``RunView`` of its own
(the step it has reached, the steps it asked for) along those records, and a step is computed only by the
first view that needs it and finds it missing: the others read it.

Locks. A shared run computes under ``_compute`` (one chunk at a time, by whichever view asked first; the
others wait for that chunk, then read it), and every chunk is one atomic ``PairedRun.advance``; records are
appended and read under ``_read``, held only for a list operation, so a reader never waits for a chunk
being computed. A view moves under its own lock, so one script run of its session at a time moves it, as
``PairedRun`` does for a pair of its own. Nothing here changes process-global state: the thread-count
source's steps go through ``core.machines.globalstate.torch_threads`` inside ``train_step`` (locked and
restored), as in every pair.

The decision grid at a view's step is the same for every viewer: computed once per (settings, step,
resolution) into ``core.crowd.bytecache.GRIDS``, from the shared pair when it is at that step, else from a
copy of the pair replayed to it (bit for bit the same state, since the run is deterministic).

Runs of presets are kept in ``core.crowd.bytecache.SHARED_RUNS`` (bounded in entries and bytes): a viewer
who changes a setting gets a run of their own, kept by their view only, exactly as before. A run that stopped
at an error is dropped from the cache, so the next viewer starts a new one. Nothing here imports streamlit.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator

from core.crowd.budget import TRAIN_BYTES_PER_STEP
from core.crowd.bytecache import GRIDS, MB, PAIR_TEMPLATES, SHARED_RUNS
from core.machines.progress import OnProgress, report
from core.training.mlp import FLUSH_EVERY, PRESETS, TrainSettings
from core.training.pair import PairedRun, StepRecord, StepRequests

_SERIALS = itertools.count()
PRESET_SETTINGS = frozenset(p.settings for p in PRESETS.values())
RUN_BYTES_FIXED = 1 * MB  # two networks, their optimizer states and gradients (the data is the template's)


def run_bytes(settings: TrainSettings) -> int:
    """What a shared run holds once it has every step: its records and its two networks."""
    return RUN_BYTES_FIXED + TRAIN_BYTES_PER_STEP * settings.steps


class SharedRun:
    """One pair of ``settings``, stepped once for every view of it; the records of the steps computed so far."""

    def __init__(self, settings: TrainSettings, template: PairedRun | None = None) -> None:
        self.settings = settings
        # the pair at step 0, never stepped: its data and step 0's grids, and the start of every replay
        self.template = PAIR_TEMPLATES.call(PairedRun, settings) if template is None else template
        self.pair = self.template.fresh()  # the same bits as PairedRun(settings)
        self._records: list[StepRecord] = []
        self._compute = threading.Lock()
        self._read = threading.Lock()
        self.broken: BaseException | None = None
        self.computed_by: set[int] = set()  # the threads that computed a chunk (tests, benchmarks)
        # What names its results (charts, grids): its settings, which fix its bits on this CPU; a run with B on a
        # GPU is named by itself alone, since a GPU's kernels need not repeat their bits from one run to the next
        self.key: tuple = (settings,) if settings.source != "device" else (settings, next(_SERIALS))
        self.for_room = False  # kept in SHARED_RUNS for every viewer of a preset (shared_run), not one view's own

    def __repr__(self) -> str:
        return f"SharedRun({self.settings!r}, computed={self.computed})"

    @property
    def nbytes(self) -> int:
        """What it holds once every step is computed (core.crowd.bytecache.SHARED_RUNS weighs it so)."""
        return run_bytes(self.settings)

    @property
    def computed(self) -> int:
        """Steps computed so far (for every view)."""
        with self._read:
            return len(self._records)

    @property
    def b_device_name(self) -> str:
        return self.pair.b_device_name

    def ensure(self, step: int) -> int:
        """Compute the steps up to ``step`` that nobody computed yet (at most the run's steps); steps computed.

        A caller that finds them computed returns at once; one that finds another thread computing waits for
        that chunk and computes only what is still missing after it. A step that raises breaks the run for
        every view (RuntimeError from then on) and takes it out of the shared cache.
        """
        step = min(step, self.settings.steps)
        if self.computed >= step:
            return self.computed
        with self._compute:
            missing = step - self.computed
            if missing > 0:
                try:
                    recs = self.pair.advance(missing)
                except BaseException as err:
                    self.broken = err
                    if SHARED_RUNS.get(self.settings) is self:
                        SHARED_RUNS.discard(self.settings)
                    raise
                self.computed_by.add(threading.get_ident())
                with self._read:
                    self._records += recs
        return self.computed

    def records(self, start: int, stop: int) -> list[StepRecord]:
        """The records of steps ``start + 1`` to ``stop`` (computed ones only)."""
        with self._read:
            return self._records[start:stop]

    def grid(self, step: int, resolution: int) -> tuple:
        """The decision grid after ``step`` steps (see PairedRun.decision_grid), once per server."""
        return GRIDS.get_or_compute((*self.key, step, resolution), lambda: self._grid(step, resolution))

    def _grid(self, step: int, resolution: int) -> tuple:
        if step == 0:
            return self.template.snapshot(resolution)[1]  # step 0's grid, kept with the template
        with self._compute:  # the pair stays at its step while it is read
            if self.computed == step:
                return self.pair.decision_grid(resolution)
        replayed = self.template.fresh()  # the pair went on (or has not got there): the same bits, replayed
        replayed.advance(step)
        return replayed.decision_grid(resolution)


def shared_run(settings: TrainSettings) -> SharedRun:
    """The room's run of a preset's settings (one per server while it stays cached), or a new run of one's own."""
    if settings not in PRESET_SETTINGS:
        return SharedRun(settings)
    held = SHARED_RUNS.get(settings)
    if held is not None and held.broken is None:
        return held
    if held is not None:
        SHARED_RUNS.discard(settings)
    return SHARED_RUNS.get_or_compute(settings, lambda: _for_room(SharedRun(settings)))


def _for_room(run: SharedRun) -> SharedRun:
    run.for_room = True
    return run


class RunView(StepRequests):
    """One session's Play on a shared run: the steps it has reached and those it asked for.

    It answers what the page asks of a pair (``PairedRun``'s names: done, records, request, advance_requested,
    run, snapshot), and moves only along the shared records: a step is computed when no view computed it yet.
    """

    def __init__(self, shared: SharedRun) -> None:
        self.shared = shared
        self.settings = shared.settings
        self._shown = 0
        self._lock = threading.RLock()  # one script run of the session moves the view at a time
        self._start_requests()

    def __repr__(self) -> str:
        return f"RunView({self.settings!r}, done={self._shown})"

    @property
    def _reached(self) -> int:
        return self._shown

    # ------------------------------------------------------------------ what the page reads
    @property
    def done(self) -> int:
        return self._shown

    @property
    def finished(self) -> bool:
        return self._shown >= self.settings.steps

    @property
    def records(self) -> list[StepRecord]:
        """A copy of the records up to the step this view has reached."""
        return self.shared.records(0, self._shown)

    @property
    def ahead(self) -> int:
        """Steps already computed beyond this view's (another view computed them: showing them costs no training)."""
        return max(0, self.shared.computed - self._shown)

    @property
    def key(self) -> tuple:
        """What names the run it views (SharedRun.key): two views with one key draw the same charts at a step."""
        return self.shared.key

    @property
    def for_room(self) -> bool:
        """It views the room's run of a preset (what it draws is worth keeping for the other viewers)."""
        return self.shared.for_room

    @property
    def b_device_name(self) -> str:
        return self.shared.b_device_name

    @property
    def x64(self):
        return self.shared.pair.x64

    @property
    def y(self):
        return self.shared.pair.y

    def snapshot(self, resolution: int | None = None) -> tuple[list[StepRecord], tuple | None]:
        """(records so far, decision grid at that same step or None), read atomically."""
        with self._lock:
            records = self.records
            return records, (self.shared.grid(len(records), resolution) if resolution else None)

    # ------------------------------------------------------------------ moving
    def advance(self, steps: int, timeout: float | None = None) -> list[StepRecord] | None:
        """Up to ``steps`` more steps for this view, computed where no view computed them yet; their records.

        Waits for the view's lock (at most ``timeout`` seconds when given: None comes back, nothing moved).
        """
        if not self._lock.acquire(timeout=-1 if timeout is None else max(0.0, timeout)):
            return None
        try:
            start = self._shown
            stop = start + max(0, min(steps, self.settings.steps - start))
            if stop > start:
                self.shared.ensure(stop)
                self._shown = stop
            return self.shared.records(start, stop)
        finally:
            self._lock.release()

    def run(self, steps: int, on_progress: OnProgress | None = None, chunk: int = FLUSH_EVERY) -> list[StepRecord]:
        """Up to ``steps`` more steps in chunks of ``chunk``, a Progress after each (``on_progress`` may raise to
        stop: what was reached stays reached)."""
        moved: list[StepRecord] = []
        while len(moved) < steps:
            recs = self.advance(min(max(1, chunk), steps - len(moved)))
            if not recs:
                break
            moved += recs
            report(on_progress, done=len(moved), total=steps, what="steps")
        return moved

    def step(self) -> StepRecord:
        recs = self.advance(1)
        if not recs:
            raise StopIteration
        return recs[-1]

    def __iter__(self) -> Iterator[StepRecord]:
        while recs := self.advance(1):
            yield recs[-1]
