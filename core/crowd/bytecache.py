"""The app's one kind of cache: process-wide, named, bounded in bytes (and, where asked, in entries and age).

Every viewer of the app is served by threads of one process, so a cache of 10^7-value
vectors must be bounded by what it holds, not by how many entries it has: four entries of
80 MB each are already 320 MB. ``ByteLRU`` keeps the least recently used entries out once
their sizes add up to more than its capacity (or their number exceeds ``max_entries``), never
stores one entry larger than its ``max_entry`` share, forgets an entry older than ``ttl``
seconds, and computes a missing value once however many threads ask for it at the same moment
(the others wait for that one computation instead of repeating it).

Every cache is declared below, once, by ``named``: its name and its budget. ``CACHES`` lists
them (``tests/core/crowd/test_budget.py`` adds their capacities to the hosting budget), and a
page makes one call per result through one of them (``cache.call(study, settings)``); no page
or ui module declares a cache of its own (``tests/test_one_cache_layer.py``).

Values are shared, not copied, so they must not be modified: results are frozen dataclasses and
``Vector.values`` arrays are read-only. Nothing here imports streamlit; pages keep only the
small key (a ``VectorSpec``) in their session state and fetch the array through ``vector_for``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from fractions import Fraction
from typing import Any

import numpy as np

from core.arith.vectors import Vector, VectorSpec, generate

MB = 2**20


def approx_nbytes(obj: Any, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Memory held by ``obj`` and what it references: arrays by ``nbytes``, containers,
    dataclasses and Fractions by their parts, everything else by ``sys.getsizeof``.

    An estimate for sizing caches (shared objects are counted once), not an exact measure.
    """
    seen = set() if _seen is None else _seen
    if id(obj) in seen or _depth > 12:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        base = obj.base if isinstance(obj.base, np.ndarray) else None
        if base is not None:  # a view: count the memory it keeps alive once
            return 112 + approx_nbytes(base, seen, _depth + 1)
        return 112 + obj.nbytes
    size = sys.getsizeof(obj)
    if isinstance(obj, Fraction):
        return size + sys.getsizeof(obj.numerator) + sys.getsizeof(obj.denominator)
    if isinstance(obj, str | bytes | bytearray | int | float | bool | np.generic) or obj is None:
        return size
    if isinstance(obj, dict):
        return size + sum(approx_nbytes(k, seen, _depth + 1) + approx_nbytes(v, seen, _depth + 1)
                          for k, v in obj.items())
    if isinstance(obj, list | tuple | set | frozenset):
        return size + sum(approx_nbytes(v, seen, _depth + 1) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return size + sum(approx_nbytes(getattr(obj, f.name), seen, _depth + 1) for f in dataclasses.fields(obj))
    if hasattr(obj, "__dict__"):
        return size + approx_nbytes(vars(obj), seen, _depth + 1)
    return size


class _Pending:
    """A value being computed by one thread; the others wait on ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()


class ByteLRU:
    """A named, thread-safe least-recently-used cache: its entries' sizes add up to at most ``capacity``
    bytes, it holds at most ``max_entries`` of them (no limit when None) and none older than ``ttl``
    seconds (no age limit when None)."""

    def __init__(self, capacity: int, max_entry: int | None = None,
                 sizeof: Callable[[Any], int] = approx_nbytes, *, name: str = "",
                 max_entries: int | None = None, ttl: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if capacity < 1:
            raise ValueError("a cache needs a positive capacity")
        if max_entries is not None and max_entries < 1:
            raise ValueError("a cache needs room for one entry")
        self.name = name
        self.capacity = capacity
        self.max_entry = capacity if max_entry is None else min(max_entry, capacity)
        self.max_entries = max_entries
        self.ttl = ttl
        self._sizeof = sizeof
        self._clock = clock
        self._items: OrderedDict[Hashable, tuple[Any, int, float]] = OrderedDict()  # value, bytes, stored at
        self._pending: dict[Hashable, _Pending] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = self.refused = 0

    def __repr__(self) -> str:
        return f"ByteLRU({self.name!r}, {self.capacity / MB:g} MB, max_entries={self.max_entries}, ttl={self.ttl})"

    # ------------------------------------------------------------------ reading
    def _live(self, key: Hashable) -> tuple[Any, int, float] | None:
        """The entry under ``key`` if it is young enough (an expired one is dropped); the lock is held."""
        item = self._items.get(key)
        if item is not None and self.ttl is not None and self._clock() - item[2] > self.ttl:
            self._drop(key)
            return None
        return item

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            item = self._live(key)
            if item is None:
                self.misses += 1
                return default
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return self._live(key) is not None

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    @property
    def nbytes(self) -> int:
        """The bytes the cache holds now (by its entries' sizes)."""
        with self._lock:
            return self._bytes

    # ------------------------------------------------------------------ writing
    def put(self, key: Hashable, value: Any, nbytes: int | None = None) -> bool:
        """Store ``value`` (evicting the least recently used entries to make room); False when it
        is too large to keep (it is then not stored, and an older entry under ``key`` is dropped)."""
        size = self._sizeof(value) if nbytes is None else int(nbytes)
        with self._lock:
            self._drop(key)
            if size > self.max_entry:
                self.refused += 1
                return False
            while self._items and (self._bytes + size > self.capacity
                                   or (self.max_entries is not None and len(self._items) >= self.max_entries)):
                _, (_, old_size, _) = self._items.popitem(last=False)
                self._bytes -= old_size
                self.evictions += 1
            self._items[key] = (value, size, self._clock())
            self._bytes += size
            return True

    def _drop(self, key: Hashable) -> None:
        item = self._items.pop(key, None)
        if item is not None:
            self._bytes -= item[1]

    def discard(self, key: Hashable) -> None:
        with self._lock:
            self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """The cached value, or ``compute()``'s, stored; computed once for simultaneous callers.

        If ``compute`` raises, nothing is stored, the exception reaches this caller, and the
        callers that were waiting for it try again themselves.
        """
        return self._compute(key, compute, refresh=False)

    def refresh(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()``'s value, stored under ``key`` in place of the one there (which readers see
        meanwhile); a caller arriving while it is computed waits for that one computation and takes it."""
        return self._compute(key, compute, refresh=True)

    def _compute(self, key: Hashable, compute: Callable[[], Any], refresh: bool) -> Any:
        while True:
            with self._lock:
                item = None if refresh else self._live(key)
                if item is not None:
                    self._items.move_to_end(key)
                    self.hits += 1
                    return item[0]
                pending = self._pending.get(key)
                if pending is None:
                    self.misses += 1
                    pending = self._pending[key] = _Pending()
                    mine = True
                else:
                    mine = False
            if not mine:
                pending.done.wait()
                refresh = False  # the value the other thread computed is this caller's too
                continue  # stored by the other thread (or it failed or was too large: compute here)
            try:
                value = compute()
                self.put(key, value)
                return value
            finally:
                with self._lock:
                    del self._pending[key]
                pending.done.set()

    def call(self, fn: Callable[..., Any], *args: Hashable, **kwargs: Hashable) -> Any:
        """``fn(*args, **kwargs)`` through this cache, keyed by ``fn``'s qualified name and its arguments
        (which must be hashable: settings objects, strings, numbers, tuples)."""
        key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        return self.get_or_compute(key, lambda: fn(*args, **kwargs))


CACHES: dict[str, ByteLRU] = {}  # every cache of the process, by name


def named(name: str, capacity: int, *, max_entry: int | None = None, max_entries: int | None = None,
          ttl: float | None = None, sizeof: Callable[[Any], int] = approx_nbytes) -> ByteLRU:
    """Declare one of the process's caches with its budget; each name once. ``sizeof``: how its entries are
    weighed, where an entry knows its size better than a walk of its attributes does."""
    if name in CACHES:
        raise ValueError(f"a cache named {name!r} exists already")
    CACHES[name] = cache = ByteLRU(capacity, max_entry, sizeof, name=name, max_entries=max_entries, ttl=ttl)
    return cache


# The process's vectors (up to 256 MB, a 10^7-value float64 vector is 80 MB) and the small
# results computed from them (lab tables, running errors: kilobytes each).
VECTORS = named("vectors", 256 * MB)
RESULTS = named("results", 32 * MB, max_entry=4 * MB)
# Charts' Vega-Lite specifications (dicts, their data as tables), built once per result and drawing mode and
# then sent to every viewer of that result: a room opening one link costs one chart conversion, not one each.
CHART_SPECS = named("chart specifications", 16 * MB, max_entry=2 * MB)

# Each page's results, one cache per kind of result (a page calls ``CACHE.call(study, settings)``). The
# entry counts and ages are those the pages held when Streamlit's own caches kept these; the bytes bound
# them whatever a result's size. Deterministic results need no age limit; one that measures this server
# (timings, its devices) is measured again once its ``ttl`` has passed.
HOUR = 3600.0
# CPU vs GPU: the CUDA model against each bundled recording (a few hundred rows each).
FIDELITIES = named("cpu_vs_gpu.fidelity", 8 * MB, max_entries=8, ttl=HOUR)
# Diagnose a mismatch: the bundled examples' diagnoses (their arrays included), the log examples.
DIAGNOSE_EXAMPLES = named("diagnose.examples", 32 * MB, max_entry=8 * MB, max_entries=12, ttl=HOUR)
CALM_LOGS = named("diagnose.calm_lr", 1 * MB, max_entries=4, ttl=HOUR)
LOG_DIAGNOSES = named("diagnose.log_examples", 16 * MB, max_entry=8 * MB, max_entries=4, ttl=HOUR)
# GPU arithmetic: the vectors of a dot product, its lab table, its error curves, an atomics simulation.
DOT_PAIRS = named("gpu_arithmetic.pairs", 32 * MB, max_entry=16 * MB, max_entries=8, ttl=HOUR)
DOT_LABS = named("gpu_arithmetic.labs", 8 * MB, max_entries=16, ttl=HOUR)
DOT_CURVES = named("gpu_arithmetic.curves", 8 * MB, max_entries=16, ttl=HOUR)
ATOMICS = named("gpu_arithmetic.atomics", 16 * MB, max_entry=8 * MB, max_entries=8, ttl=HOUR)
# Many devices: the first screen's 8-rank all-reduce (with the seconds it took, the study's unit of
# time), the order studies, the emulated trainings, the last measured rates.
PUNCH_ALLREDUCE = named("many_devices.punch", 8 * MB, max_entries=1, ttl=HOUR)
ORDER_STUDIES = named("many_devices.order_studies", 16 * MB, max_entries=4)
EMULATIONS = named("many_devices.emulations", 16 * MB, max_entries=24)
STUDY_RATES = named("many_devices.rates", 1 * MB, max_entries=2)
# Mitigations: the lab's sums, wider accumulation, determinism, the order-independent sum and its
# cost, the mismatch rule, the seed study, and the last float32-vs-float64 throughput measured here.
MITIGATION_LABS = named("mitigations.lab", 8 * MB, max_entries=4, ttl=HOUR)
WIDER_STUDIES = named("mitigations.wider", 8 * MB, max_entries=4, ttl=HOUR / 2)
DETERMINISM = named("mitigations.determinism", 4 * MB, max_entries=2, ttl=HOUR / 2)
REPRODUCIBLE_SUMS = named("mitigations.reproducible", 4 * MB, max_entries=2, ttl=HOUR)
REPRODUCIBLE_COST = named("mitigations.reproducible_cost", 1 * MB, max_entries=1, ttl=HOUR / 2)
MISMATCH_RULE = named("mitigations.mismatch", 4 * MB, max_entries=1, ttl=HOUR)
MITIGATION_SEEDS = named("mitigations.seeds", 1 * MB, max_entries=4, ttl=HOUR)
THROUGHPUT = named("mitigations.throughput", 1 * MB, max_entries=1)
# Non-associativity: counterexample searches (small tables of triples).
COUNTEREXAMPLES = named("non_associativity.search", 8 * MB, max_entries=64, ttl=HOUR)
# Serving: finished fork studies (a few kB each), deterministic for their settings.
FORK_STUDIES = named("serving.fork_studies", 4 * MB, max_entries=8)
# Where two runs part: the bundled trace pairs, traced and compared.
TRACE_PAIRS = named("traces.pairs", 16 * MB, max_entry=8 * MB, max_entries=8, ttl=HOUR)
# The Overview: its live first screen, and this server's GPUs (looked at again every ten minutes).
OVERVIEW_HOOKS = named("overview.hook", 1 * MB, max_entries=2, ttl=HOUR)
GPU_NAMES = named("overview.gpus", 1 * MB, max_entries=1, ttl=HOUR / 6)
# Training divergence: finished work shared by every session. A seed is four floats, a pair outcome at
# most a few hundred kilobytes (its distances at every step).
SEEDS = named("training.seeds", 2 * MB, max_entries=512)
PAIR_OUTCOMES = named("training.pair_outcomes", 16 * MB, max_entry=2 * MB, max_entries=32)
# A never-stepped pair per settings, from which each visitor's own pair is copied (core.crowd.runner): its data
# and batch schedule, a few hundred kilobytes at the presets' sizes.
SEED_STREAMS = named("training.seed_streams", 1 * MB, max_entries=16)  # what a seed fixes: a few booleans
PAIR_TEMPLATES = named("training.pair_templates", 16 * MB, max_entry=8 * MB, max_entries=16)
# One paired run per preset for the whole room (core.crowd.sharedrun): its records grow as it is stepped, so
# each is weighed at what it holds once every step is computed (``nbytes``: 2 MB at a preset's 500 steps).
# A session keeps the run it views alive; a run dropped from here is only no longer found by new viewers.
SHARED_RUNS = named("training.shared_runs", 24 * MB, max_entry=12 * MB, max_entries=12, sizeof=lambda run: run.nbytes)
# The rows of the Training divergence charts at one step of one run, as Arrow bytes (tens of kilobytes a frame):
# made once for every session that plays that run (ui.training_view.frame_chart), not once per session.
PLAY_FRAMES = named("training.play_frames", 8 * MB, max_entry=1 * MB, max_entries=2048)
# Decision grids of a pair at one step (about 80 kB at the page's resolution), the same for every viewer.
GRIDS = named("training.grids", 8 * MB, max_entries=64)


def vector_for(spec: VectorSpec) -> Vector:
    """The vector ``spec`` describes, generated at most once while it stays in ``VECTORS``."""
    spec.validate()
    return VECTORS.get_or_compute(spec, lambda: generate(spec))
