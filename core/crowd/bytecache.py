"""Process-wide caches bounded in bytes, not entries.

Every viewer of the app is served by threads of one process, so a cache of 10^7-value
vectors must be bounded by what it holds, not by how many entries it has: four entries of
80 MB each are already 320 MB. ``ByteLRU`` keeps the least recently used entries out once
their sizes add up to more than its capacity, never stores one entry larger than its
``max_entry`` share, and computes a missing value once however many threads ask for it at the
same moment (the others wait for that one computation instead of repeating it).

Values are shared, not copied, so they must not be modified: ``Vector.values`` arrays are
read-only already. Nothing here imports streamlit; pages keep only the small key (a
``VectorSpec``) in their session state and fetch the array through ``vector_for``.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
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
    """A thread-safe least-recently-used cache whose entries' sizes add up to at most ``capacity`` bytes."""

    def __init__(self, capacity: int, max_entry: int | None = None,
                 sizeof: Callable[[Any], int] = approx_nbytes) -> None:
        if capacity < 1:
            raise ValueError("a cache needs a positive capacity")
        self.capacity = capacity
        self.max_entry = capacity if max_entry is None else min(max_entry, capacity)
        self._sizeof = sizeof
        self._items: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0

    # ------------------------------------------------------------------ reading
    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                self.misses += 1
                return default
            self._items.move_to_end(key)
            self.hits += 1
            return item[0]

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._items

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
                return False
            while self._items and self._bytes + size > self.capacity:
                _, (_, old_size) = self._items.popitem(last=False)
                self._bytes -= old_size
                self.evictions += 1
            self._items[key] = (value, size)
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
        while True:
            with self._lock:
                item = self._items.get(key)
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
                continue  # stored by the other thread (or it failed or was too large: compute here)
            try:
                value = compute()
                self.put(key, value)
                return value
            finally:
                with self._lock:
                    del self._pending[key]
                pending.done.set()


# The process's vectors (up to 256 MB, a 10^7-value float64 vector is 80 MB) and the small
# results computed from them (lab tables, running errors: kilobytes each).
VECTORS = ByteLRU(256 * MB)
RESULTS = ByteLRU(32 * MB, max_entry=4 * MB)
# Charts' Vega-Lite specifications (dicts, their data as tables), built once per result and drawing mode and
# then sent to every viewer of that result: a room opening one link costs one chart conversion, not one each.
CHART_SPECS = ByteLRU(16 * MB, max_entry=2 * MB)


def vector_for(spec: VectorSpec) -> Vector:
    """The vector ``spec`` describes, generated at most once while it stays in ``VECTORS``."""
    spec.validate()
    return VECTORS.get_or_compute(spec, lambda: generate(spec))
