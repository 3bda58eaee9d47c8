"""core.crowd.bytecache: a cache bounded in bytes, safe under many threads, computing each value once."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from core.arith.vectors import VectorSpec, generate
from core.crowd.bytecache import CACHES, VECTORS, ByteLRU, approx_nbytes, named, vector_for


def _size(v) -> int:
    return v[1] if isinstance(v, tuple) else 1


def test_evicts_least_recently_used_by_bytes_not_by_count():
    c = ByteLRU(100, sizeof=_size)
    assert c.put("a", ("a", 40)) and c.put("b", ("b", 40))
    assert c.get("a") == ("a", 40)  # a is now the most recently used
    c.put("c", ("c", 40))  # 120 > 100: b (least recently used) goes
    assert "b" not in c and "a" in c and "c" in c
    assert c.nbytes == 80 and c.evictions == 1
    for i in range(50):  # many small entries fit where few large ones did
        c.put(i, (i, 1))
    assert c.nbytes <= 100 and len(c) > 3


def test_an_entry_larger_than_allowed_is_not_kept():
    c = ByteLRU(100, max_entry=30, sizeof=_size)
    c.put("x", ("x", 20))
    assert not c.put("x", ("x", 31))  # too large: not stored, and the old value under x is dropped
    assert "x" not in c and c.nbytes == 0
    assert c.get_or_compute("y", lambda: ("y", 50)) == ("y", 50)  # returned, not stored
    assert "y" not in c


def test_array_sizes_are_counted_by_their_bytes():
    a = np.zeros(1_000_000)
    assert 8_000_000 <= approx_nbytes(a) < 8_001_000
    assert abs(approx_nbytes(a[::2]) - approx_nbytes(a)) < 1_000  # a view keeps its whole base alive
    assert approx_nbytes((a, a)) < 8_002_000  # shared objects count once
    v = generate(VectorSpec(kind="normal", n=100_000, seed=0, storage="float64"))
    assert 800_000 <= approx_nbytes(v) < 810_000


def test_thread_safe_under_many_threads():
    cap = 10_000
    c = ByteLRU(cap, sizeof=_size)
    errors = []
    start = threading.Barrier(20)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        start.wait()
        for _ in range(2_000):
            key = rng.randrange(200)
            if rng.random() < 0.5:
                c.put(key, (key, rng.randrange(1, 1_500)))
            else:
                v = c.get(key)
                if v is not None and v[0] != key:
                    errors.append(f"{key} -> {v}")
            if c.nbytes > cap:
                errors.append(f"over capacity: {c.nbytes}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]
    # the byte count is exactly the sum of what is stored
    assert c.nbytes == sum(item[1] for item in c._items.values()) <= cap


def test_one_computation_for_many_simultaneous_requests():
    c = ByteLRU(1_000, sizeof=_size)
    calls = []
    start = threading.Barrier(20)

    def compute():
        calls.append(1)
        time.sleep(0.2)  # long enough for every thread to arrive while it runs
        return ("v", 10)

    results = []

    def worker():
        start.wait()
        results.append(c.get_or_compute("k", compute))

    threads = [threading.Thread(target=worker) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and results == [("v", 10)] * 20


def test_a_failed_computation_stores_nothing_and_the_waiters_try_again():
    c = ByteLRU(1_000, sizeof=_size)
    attempts = []
    first_started = threading.Event()

    def compute():
        attempts.append(1)
        if len(attempts) == 1:
            first_started.set()
            time.sleep(0.2)
            raise RuntimeError("the first try fails")
        return ("ok", 1)

    out = {}

    def waiter():
        first_started.wait()
        out["waiter"] = c.get_or_compute("k", compute)

    t = threading.Thread(target=waiter)
    t.start()
    with pytest.raises(RuntimeError):
        c.get_or_compute("k", compute)
    t.join()
    assert out["waiter"] == ("ok", 1) and len(attempts) == 2 and c.get("k") == ("ok", 1)


def test_vectors_are_shared_read_only_and_regenerated_after_eviction():
    spec = VectorSpec(kind="uniform", n=1_000, seed=3, storage="float32")
    a = vector_for(spec)
    assert vector_for(spec) is a and not a.values.flags.writeable
    VECTORS.discard(spec)
    b = vector_for(spec)
    assert b is not a and np.array_equal(a.values, b.values) and b.source == a.source


def test_an_entry_count_bounds_a_cache_as_well_as_its_bytes():
    c = ByteLRU(1_000, sizeof=_size, max_entries=2)
    c.put("a", ("a", 1))
    c.put("b", ("b", 1))
    assert c.get("a") == ("a", 1)  # now the most recent
    c.put("c", ("c", 1))
    assert "b" not in c and "a" in c and "c" in c and len(c) == 2 and c.evictions == 1
    with pytest.raises(ValueError):
        ByteLRU(1_000, max_entries=0)


def test_an_entry_older_than_the_ttl_is_computed_again():
    now = [0.0]
    c = ByteLRU(1_000, sizeof=_size, ttl=60, clock=lambda: now[0])
    calls = []
    assert c.get_or_compute("k", lambda: calls.append(1) or ("k", 1)) == ("k", 1)
    now[0] = 59.0
    assert c.get_or_compute("k", lambda: calls.append(1) or ("k", 2)) == ("k", 1) and len(calls) == 1
    now[0] = 61.0
    assert "k" not in c and c.get("k") is None and c.nbytes == 0  # expired: dropped, its bytes freed
    assert c.get_or_compute("k", lambda: calls.append(1) or ("k", 3)) == ("k", 3) and len(calls) == 2


def test_call_keys_by_the_function_and_its_arguments():
    c = ByteLRU(1_000, sizeof=lambda v: 1)
    calls = []

    def square(x, offset=0):
        calls.append(x)
        return x * x + offset

    assert c.call(square, 3) == 9 and c.call(square, 3) == 9 and calls == [3]
    assert c.call(square, 4) == 16 and c.call(square, 3, offset=1) == 10 and calls == [3, 4, 3]
    assert c.call(abs, -3) == 3  # another function with the same argument: its own entry


def test_refresh_replaces_a_value_once_for_simultaneous_callers():
    c = ByteLRU(1_000, sizeof=lambda v: 1)
    c.put("last", "old")
    entered, release, calls, got = threading.Event(), threading.Event(), [], []

    def slow():
        calls.append(1)
        entered.set()
        release.wait(5)
        return "new"

    first = threading.Thread(target=lambda: got.append(c.refresh("last", slow)))
    first.start()
    entered.wait(5)
    assert c.get("last") == "old"  # readers see the old value while it is measured again
    second = threading.Thread(target=lambda: got.append(c.refresh("last", slow)))
    second.start()
    time.sleep(0.05)
    release.set()
    first.join(5)
    second.join(5)
    assert got == ["new", "new"] and calls == [1] and c.get("last") == "new"


def test_every_cache_is_named_once_with_its_budget():
    assert CACHES["vectors"] is VECTORS and all(name == c.name for name, c in CACHES.items())
    with pytest.raises(ValueError, match="exists already"):
        named("vectors", 1)
    assert all(c.capacity > 0 and c.max_entry <= c.capacity for c in CACHES.values())


def test_a_refused_entry_is_counted():
    c = ByteLRU(100, max_entry=10, sizeof=_size)
    assert not c.put("x", ("x", 11)) and c.refused == 1
