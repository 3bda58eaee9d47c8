"""One compiled pass over float32 values on a CPU: float64 sums of blocks, and bounds on their |values|.

The order-independent sum's fast path (core.kernels.reprosum.reproducible_sum) needs float64
partial sums of float32 values and a bound on sum|x|. Eager torch on a CPU has no
reduction that widens as it reads: ``sum(dtype=torch.float64)`` first casts into a new
buffer, and widening cache-sized pieces plus a dot product for the bound measured
3.8-4.9x the time of ``torch.sum`` before any bookkeeping (benchmarks/bench_reprosum.py).
This kernel reads each value once, widens it in registers and adds it to a float64
accumulator, and adds its absolute value to a float32 one (twice the values per vector
register of a float64 one: the bound needs no more than float32's precision).

**What it computes.** The values are cut into blocks of BLOCK = ROW * GROUP consecutive
values (the last block may be shorter), each block into rows of ROW values. For block b:

* ``sums[b]`` is the float64 sum of its values, computed as: every row summed by ``_row``
  (the compiler may reassociate these additions, to use vector registers: any binary tree
  over the row's at most ROW values), then the row sums added in order, one after the other
  (no reassociation is allowed there). Widening float32 to float64 is exact, so each value
  takes part in at most (ROW - 1) + (GROUP - 1) = DEPTH float64 additions, whatever the
  compiler chose: the error bound in core.kernels.reprosum holds for every such tree.
* ``abs_sums[b]`` is the sum of the block's absolute values up to a factor ABS_SLACK, by
  which it bounds that sum from above: per row, the float32 sum of |v| (any tree; taking |v|
  is exact), widened, and the rows' results added in order in float64. A computed sum of
  nonnegative terms is at least (1 - u)^d times the exact one when each term takes part in at
  most d additions of unit roundoff u (each rounding to nearest loses at most u of its result;
  float32 additions are exact where the result is subnormal), so
  ``abs_sums[b] >= (1 - 2^-24)^(ROW-1) * (1 - 2^-53)^(GROUP-1) * sum|x|
  >= (1 - (ROW-1) 2^-24 - (GROUP-1) 2^-53) * sum|x|``; hence sum|x| <= abs_sums[b] * ABS_SLACK.
  A row whose float32 sum overflows (or holds an infinity) is summed again in float64, which
  cannot overflow and loses less: the bound holds for it too. NaN stays NaN.

Blocks are shared between threads by whole blocks (core.arith.shares: pieces of whole blocks,
claimed as threads come free), so the thread count changes which thread computes a block, never
its value. The threads run in the caller's floating-point
environment (subnormals are not flushed: nothing in this app changes that).
"""

from __future__ import annotations

import numba
import numpy as np

from core.arith import shares

# Rows of 1024, not 256: each row ends in a reduction across the vector registers, which took a
# tenth of the pass at 256; the bound grows with DEPTH (3.3x), still about 10^-13 of sum|x|.
ROW = 1024  # values per row: the additions the compiler may reorder
GROUP = 16  # rows per block, added in order
BLOCK = ROW * GROUP
DEPTH = (ROW - 1) + (GROUP - 1)  # float64 additions a value takes part in, at most
# sum|x| <= abs_sums[b] * ABS_SLACK: 1 / (1 - 1023 * 2^-24 - 15 * 2^-53) < 1 + 6.1e-5 < 1 + 2^-13
ABS_SLACK = 1 + 2.0**-13
PER_THREAD = 1 << 19  # values a helper thread must get to be worth waking (about 80 us of work)


@numba.njit(nogil=True, fastmath={"reassoc"}, boundscheck=False)
def _row(row):  # pragma: no cover - compiled; its results are tested through block_sums
    s = 0.0
    a = np.float32(0.0)
    for j in range(row.size):
        v = row[j]
        s += np.float64(v)
        a += abs(v)
    return s, np.float64(a)


@numba.njit(nogil=True, boundscheck=False)
def _row_abs64(row):  # pragma: no cover - compiled; the rare row whose float32 |sum| overflows
    a = 0.0
    for j in range(row.size):
        a += abs(np.float64(row[j]))
    return a


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
            if ra == np.inf:  # the float32 sum overflowed, or the row holds an infinity
                ra = _row_abs64(x[lo : min(lo + ROW, n)])
            s += rs
            a += ra
        sums[b] = s
        abs_sums[b] = a


@numba.njit(nogil=True, boundscheck=False)
def _in_order(sums, abs_sums):  # pragma: no cover - compiled; tested through combine
    s = 0.0
    a = 0.0
    for b in range(sums.size):
        s += sums[b]
        a += abs_sums[b]
    return s, a


def combine(sums: np.ndarray, abs_sums: np.ndarray) -> tuple[float, float, int]:
    """(total, abs_total, depth): the block sums added in order in float64, and the absolute ones
    likewise, with ``depth``, the most float64 additions any value took part in from the start
    (DEPTH, then one per further block). sum|x| <= abs_total * ABS_SLACK for fewer than 2^24
    blocks (the docstring's bound with (GROUP - 1) + 2^24 float64 additions: still under 2^-13).
    One compiled loop rather than ``math.fsum``: after a pass over megabytes, every Python object
    such a call touches comes from memory again, and that cost a tenth of the whole sum."""
    if sums.size >= 1 << 24:
        raise ValueError("combine takes fewer than 2^24 blocks")
    total, abs_total = _in_order(sums, abs_sums)
    return float(total), float(abs_total), DEPTH + max(0, sums.size - 1)


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
    ranges = shares.cuts(blocks, shares.piece_count(blocks, k))
    shares.run_pieces(lambda i: _blocks(x, *ranges[i], sums, abs_sums), len(ranges), k)
    return sums, abs_sums
