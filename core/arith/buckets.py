"""Compiled (numba) passes of the exact sum and the exact dot product: per (sign, exponent) bucket
totals that are exact in float64, in one read of the values.

core.arith.exact defines what the buckets are and why their float64 totals are exact; this module
only computes the same totals faster than NumPy's bincount, which needs an int64 index array and a
float64 copy of every value. Each kernel keeps LANES tables and sends value i to table i % LANES:
consecutive values of one exponent then add to different memory, so one addition need not wait for
the one before it. A table's bucket totals are exact for the same reason the whole is (fewer values
in it), and so is their sum over the tables (core.arith.exact's limits count every value).

Large inputs are split between up to ``MAX_THREADS`` threads (the kernels release the GIL); each
thread fills tables of its own, and their totals are added at the end, exactly, so the split
changes no bit of the result.

numba is imported and the kernels compiled on the first call (about 1 s, and 100 MB shared with
core.kernels.widesum);
``available()`` is False where it cannot be, and core.arith.exact then uses NumPy.
"""

from __future__ import annotations

import functools
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

LANES = 4
MAX_THREADS = 4
PER_THREAD = 1 << 20  # values a helper thread must get to be worth waking
HI_MASK = np.uint64(~((1 << 29) - 1) & ((1 << 64) - 1))  # a float64's sign, exponent and top 23 stored bits


@functools.cache
def _kernels():
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is pinned; a trimmed install falls back to NumPy
        return None

    @numba.njit(nogil=True, boundscheck=False, cache=False)
    def sum32(x, acc):  # pragma: no cover - compiled; tested through core.arith.exact
        bits = x.view(np.uint32)
        n = x.size
        main = n - n % 4
        for i in range(0, main, 4):
            acc[0, bits[i] >> 23] += np.float64(x[i])
            acc[1, bits[i + 1] >> 23] += np.float64(x[i + 1])
            acc[2, bits[i + 2] >> 23] += np.float64(x[i + 2])
            acc[3, bits[i + 3] >> 23] += np.float64(x[i + 3])
        for i in range(main, n):
            acc[0, bits[i] >> 23] += np.float64(x[i])

    @numba.njit(nogil=True, boundscheck=False, cache=False)
    def dot32(a, b, hi_acc, lo_acc):  # pragma: no cover - compiled; tested through core.arith.exact
        # four products at a time go through two small buffers, read back as their bits: numba has no
        # scalar bit cast, and a four-element store and load stays in registers' reach
        p = np.empty(LANES)
        p_bits = p.view(np.uint64)
        hi = np.empty(LANES)
        hi_bits = hi.view(np.uint64)
        n = a.size
        main = n - n % LANES
        for i in range(0, main, LANES):
            for k in range(LANES):
                p[k] = np.float64(a[i + k]) * np.float64(b[i + k])  # exact: 24 x 24 bits
            for k in range(LANES):
                hi_bits[k] = p_bits[k] & HI_MASK
            for k in range(LANES):
                j = np.intp(p_bits[k] >> np.uint64(52))
                hi_acc[k, j] += hi[k]
                lo_acc[k, j] += p[k] - hi[k]  # exact
        for i in range(main, n):
            p[0] = np.float64(a[i]) * np.float64(b[i])
            hi_bits[0] = p_bits[0] & HI_MASK
            j = np.intp(p_bits[0] >> np.uint64(52))
            hi_acc[0, j] += hi[0]
            lo_acc[0, j] += p[0] - hi[0]

    return sum32, dot32


def available() -> bool:
    return _kernels() is not None


_POOL_LOCK = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _split(size: int) -> list[tuple[int, int]]:
    """Contiguous pieces, one per thread: as many threads as torch may use (at most MAX_THREADS), and
    only as many as get PER_THREAD values each."""
    k = max(1, min(torch.get_num_threads(), MAX_THREADS, size // PER_THREAD))
    cuts = [size * i // k for i in range(k + 1)]
    return list(itertools.pairwise(cuts))


def _parallel(kernel, pieces, make_args) -> None:
    """kernel(*make_args(i, lo, hi)) for every piece, the first in this thread, the rest in helpers."""
    global _pool
    if len(pieces) > 1:
        with _POOL_LOCK:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=MAX_THREADS - 1, thread_name_prefix="exact")
        pending = [_pool.submit(kernel, *make_args(i, lo, hi)) for i, (lo, hi) in enumerate(pieces) if i]
    else:
        pending = []
    kernel(*make_args(0, *pieces[0]))
    for f in pending:
        f.result()


def sum_buckets32(x: np.ndarray) -> np.ndarray:
    """The 512 (sign, exponent) totals of the 1-D float32 array x, as core.arith.exact's
    ``_buckets_float32`` computes them with NumPy (the same float64 values: each is exact)."""
    x = np.ascontiguousarray(x)
    pieces = _split(x.size)
    acc = np.zeros((len(pieces), LANES, 512))
    _parallel(_kernels()[0], pieces, lambda i, lo, hi: (x[lo:hi], acc[i]))
    return acc.sum(axis=(0, 1))  # exact: every table's total is a multiple of the bucket's unit, within 2^53


def dot_buckets32(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 4096 (sign, exponent) totals of the high and low parts of the products a_i b_i of two
    1-D float32 arrays, as core.arith.exact's ``_dot_narrow`` computes them with NumPy."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    pieces = _split(a.size)
    hi_acc, lo_acc = np.zeros((len(pieces), LANES, 4096)), np.zeros((len(pieces), LANES, 4096))

    def args(i, lo, hi):
        return a[lo:hi], b[lo:hi], hi_acc[i], lo_acc[i]

    _parallel(_kernels()[1], pieces, args)
    return hi_acc.sum(axis=(0, 1)), lo_acc.sum(axis=(0, 1))
