"""core.crowd.bytecache: a cache bounded in bytes, safe under many threads, computing each value once."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pytest

from core.arith.vectors import VectorSpec, generate
from core.crowd.bytecache import VECTORS, ByteLRU, approx_nbytes, vector_for


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
    assert c.nbytes == sum(size for _, size in c._items.values()) <= cap


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
