"""One compiled pass over float32 values on a CPU: float64 sums of blocks, and of |values|.

The order-independent sum's fast path (core.kernels.reprosum.reproducible_sum) needs float64
partial sums of float32 values and a bound on sum|x|. Eager torch on a CPU has no
reduction that widens as it reads: ``sum(dtype=torch.float64)`` first casts into a new
buffer, and widening cache-sized pieces plus a dot product for the bound measured
3.8-4.9x the time of ``torch.sum`` before any bookkeeping (benchmarks/bench_reprosum.py).
This kernel reads each value once, widens it in registers and adds it to two float64
accumulators; on the 2-core development machine it takes 1.6-2x the time of torch.sum.

**What it computes.** The values are cut into blocks of BLOCK = ROW * GROUP consecutive
values (the last block may be shorter), each block into rows of ROW values. For block b:
``sums[b]`` is the float64 sum of its values and ``abs_sums[b]`` the float64 sum of their
absolute values, each computed as: every row summed by ``_row`` (the compiler may
reassociate these additions, to use vector registers: any binary tree over the row's at
most ROW values), then the row sums added in order, one after the other (no reassociation
is allowed there). Widening float32 to float64 and taking |v| are exact, so each value
takes part in at most (ROW - 1) + (GROUP - 1) = DEPTH float64 additions, whatever the
compiler chose: the error bound in core.studies.mitigations holds for every such tree.

Blocks are split between threads by whole blocks, so the thread count changes which thread
computes a block, never its value. The threads run in the caller's floating-point
environment (subnormals are not flushed: nothing in this app changes that).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np

ROW = 256  # values per row: the additions the compiler may reorder
GROUP = 64  # rows per block, added in order
BLOCK = ROW * GROUP
DEPTH = (ROW - 1) + (GROUP - 1)  # float64 additions a value takes part in, at most
PER_THREAD = 1 << 19  # values a helper thread must get to be worth waking (about 80 us of work)


@numba.njit(nogil=True, fastmath={"reassoc"}, boundscheck=False)
def _row(row):  # pragma: no cover - compiled; its results are tested through block_sums
    s = 0.0
    a = 0.0
    for j in range(row.size):
        v = np.float64(row[j])
        s += v
        a += abs(v)
    return s, a


@numba.njit(nogil=True, boundscheck=False)
def _blocks(x, first, last, sums, abs_sums):  # pragma: no cover - compiled
    n = x.size
    for b in range(first, last):
        s = 0.0
        a = 0.0
        start = b * BLOCK
        for r in range(GROUP):
            lo = start + r * ROW
            if lo >= n:
                break
            rs, ra = _row(x[lo : min(lo + ROW, n)])
            s += rs
            a += ra
        sums[b] = s
        abs_sums[b] = a


_POOL_LOCK = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _helpers(workers: int) -> ThreadPoolExecutor:
    """A small pool for the other threads' shares (the caller computes its own), made once."""
    global _pool
    with _POOL_LOCK:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="widesum")
        return _pool


def threads_for(size: int, threads: int, max_threads: int, per_thread: int = PER_THREAD) -> int:
    """How many threads block_sums uses for ``size`` values: at most ``threads`` and
    ``max_threads``, one per block at most, and only as many as get ``per_thread`` values each."""
    blocks = -(-size // BLOCK)
    return max(1, min(threads, max_threads, blocks, size // per_thread))


def block_sums(x: np.ndarray, threads: int = 1, max_threads: int = 1,
               per_thread: int = PER_THREAD) -> tuple[np.ndarray, np.ndarray]:
    """(sums, abs_sums) of the 1-D float32 array x in blocks of BLOCK values (see the module
    docstring), computed by ``min(threads, max_threads)`` threads, fewer where a thread would
    get under ``per_thread`` values (waking it would cost more than it saves)."""
    if x.dtype != np.float32 or x.ndim != 1:
        raise TypeError("block_sums takes a 1-D float32 array")
    blocks = -(-x.size // BLOCK)
    sums, abs_sums = np.empty(blocks), np.empty(blocks)
    k = threads_for(x.size, threads, max_threads, per_thread)
    cuts = [blocks * i // k for i in range(k + 1)]
    pending = [_helpers(max(1, max_threads - 1)).submit(_blocks, x, cuts[i], cuts[i + 1], sums, abs_sums)
               for i in range(1, k)]
    _blocks(x, cuts[0], cuts[1], sums, abs_sums)
    for p in pending:
        p.result()
    return sums, abs_sums
