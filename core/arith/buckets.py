"""Compiled (numba) passes of the exact sum and the exact dot product, in one read of the values.

The sum: per (sign, exponent) bucket totals that are exact in float64; core.arith.exact defines the
buckets and why their totals are exact, and this module only computes the same totals faster than
NumPy's bincount, which needs an int64 index array and a float64 copy of every value. The dot
product: per exponent totals of the products' signed integer significands, in int64 (see
``dot_buckets32``); the arithmetic is on integers only, so the compiler vectorises the products and
no floating-point rounding is involved at all. Each kernel keeps LANES tables and sends value i to
table i % LANES: consecutive values of one exponent then add to different memory, so one addition
need not wait for the one before it. A table's totals are exact for the same reason the whole is
(fewer values in it), and so is their sum over the tables.

Large inputs are shared between up to ``MAX_THREADS`` threads (the kernels release the GIL), in
pieces claimed as threads come free (core.arith.shares); each piece fills tables of its own, and
their totals are added at the end, exactly, so the split changes no bit of the result.

numba is imported and the kernels compiled on the first call (about 1 s, and 100 MB shared with
core.kernels.widesum);
``available()`` is False where it cannot be, and core.arith.exact then uses NumPy.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from core.arith import shares
from core.arith.formats import bit_view

LANES = 4
MAX_THREADS = 4
PER_THREAD = 1 << 20  # values a helper thread must get to be worth waking
# The dot product's integer tables: a lane's entry gets fewer than 2^15 products of magnitude < 2^48
# between flushes (at most DOT_FLUSH + DOT_TILE values, a quarter each plus the tiles' leftovers), so
# it stays below 2^63.
DOT_TILE = 512
DOT_FLUSH = 1 << 16


# No arguments: one pair of kernels per process, compiled at the first call, so the cache holds one entry.
@functools.cache
def _kernels():
    try:
        import numba
    except ImportError:  # pragma: no cover - numba is pinned; a trimmed install falls back to NumPy
        return None
    jit = numba.njit(nogil=True, boundscheck=False, cache=False)
    return _sum_kernel(jit), _dot_kernel(jit)


def _sum_kernel(jit):
    """The bucket sum of float32 values, compiled with ``jit`` (numba's, passed in: numba loads on first use)."""

    @jit
    def sum32(x, bits, acc):  # pragma: no cover - compiled; tested through core.arith.exact
        n = x.size
        main = n - n % 4
        for i in range(0, main, 4):
            acc[0, bits[i] >> 23] += np.float64(x[i])
            acc[1, bits[i + 1] >> 23] += np.float64(x[i + 1])
            acc[2, bits[i + 2] >> 23] += np.float64(x[i + 2])
            acc[3, bits[i + 3] >> 23] += np.float64(x[i + 3])
        for i in range(main, n):
            acc[0, bits[i] >> 23] += np.float64(x[i])

    return sum32


def _dot_kernel(jit):
    """The bucket sum of float32 products, compiled with ``jit``: tiles of products, then their tables."""

    @jit
    def dot_tile(a_bits, b_bits, m, e):  # pragma: no cover - compiled; tested through core.arith.exact
        # integer work only, so the compiler vectorises it: the signed product of the two significands
        # (24 x 24 bits, exact in int64) and the sum of the two exponent fields (0 read as 1: a
        # subnormal's scale); returns the largest exponent field seen (255: an inf or nan)
        top = np.uint32(0)
        for j in range(m.size):
            x = a_bits[j]
            y = b_bits[j]
            fx = (x >> np.uint32(23)) & np.uint32(0xFF)
            fy = (y >> np.uint32(23)) & np.uint32(0xFF)
            top = max(top, max(fx, fy))
            mx = np.int64((x & np.uint32(0x7FFFFF)) | (np.uint32(fx != 0) << np.uint32(23)))
            my = np.int64((y & np.uint32(0x7FFFFF)) | (np.uint32(fy != 0) << np.uint32(23)))
            negative = np.int64((x ^ y) >> np.uint32(31))
            p = mx * my
            m[j] = (p ^ -negative) + negative
            e[j] = fx + fy + np.uint32(fx == 0) + np.uint32(fy == 0)
        return top

    @jit
    def dot32(a_bits, b_bits, hi, lo):  # pragma: no cover - compiled; tested through core.arith.exact
        acc = np.zeros((LANES, 512), dtype=np.int64)
        m = np.empty(DOT_TILE, dtype=np.int64)
        e = np.empty(DOT_TILE, dtype=np.uint32)  # unsigned: indexing with it needs no wraparound check
        n = a_bits.size
        top = np.uint32(0)
        since = 0
        for start in range(0, n, DOT_TILE):
            count = min(DOT_TILE, n - start)
            # slices, not offsets: an index the compiler knows is not negative lets it vectorise the loop
            top = max(top, dot_tile(a_bits[start : start + count], b_bits[start : start + count], m[:count], e[:count]))
            main = count - count % LANES
            for j in range(0, main, LANES):
                acc[0, e[j]] += m[j]
                acc[1, e[j + 1]] += m[j + 1]
                acc[2, e[j + 2]] += m[j + 2]
                acc[3, e[j + 3]] += m[j + 3]
            for j in range(main, count):
                acc[0, e[j]] += m[j]
            since += count
            if since >= DOT_FLUSH or start + count >= n:
                since = 0
                for k in range(LANES):
                    for q in range(512):
                        v = acc[k, q]
                        if v != 0:
                            hi[q] += v >> 31  # floor division: hi * 2^31 + lo == v, 0 <= lo < 2^31
                            lo[q] += v & 0x7FFFFFFF
                            acc[k, q] = 0
        return top

    return dot32


def available() -> bool:
    return _kernels() is not None


def _pieces(size: int) -> tuple[list[tuple[int, int]], int]:
    """Contiguous pieces of range(size) and the number of threads that share them (core.arith.shares):
    as many threads as torch may use (at most MAX_THREADS), and only as many as get PER_THREAD values
    each."""
    k = max(1, min(torch.get_num_threads(), MAX_THREADS, size // PER_THREAD))
    return shares.cuts(size, shares.piece_count(size, k)), k


def sum_buckets32(x: np.ndarray) -> np.ndarray:
    """The 512 (sign, exponent) totals of the 1-D float32 array x, as core.arith.exact's
    ``_buckets_float32`` computes them with NumPy (the same float64 values: each is exact)."""
    x = np.ascontiguousarray(x)
    bits = bit_view(x)
    pieces, threads = _pieces(x.size)
    acc = np.zeros((len(pieces), LANES, 512))
    shares.run_pieces(lambda i: _kernels()[0](x[slice(*pieces[i])], bits[slice(*pieces[i])], acc[i]), len(pieces),
                      threads)
    return acc.sum(axis=(0, 1))  # exact: every table's total is a multiple of the bucket's unit, within 2^53


def dot_buckets32(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """The products a_i b_i of two 1-D float32 arrays, summed exactly by exponent: ``(hi, lo, special)``
    where bucket j holds (hi[j] * 2^31 + lo[j]) * 2^(j - 300), int64 tables of 512, and ``special`` is
    True when an input is inf or nan (the tables are then meaningless).

    A float32 value is an integer significand below 2^24 times 2^(f - 150), f its exponent field (1 for
    a subnormal), so a product is an integer below 2^48 times 2^(fa + fb - 300), and per exponent
    sum the signed integers add exactly in int64."""
    a, b = bit_view(np.ascontiguousarray(a)), bit_view(np.ascontiguousarray(b))  # the kernel reads bits only
    pieces, threads = _pieces(a.size)
    hi, lo = np.zeros((len(pieces), 512), dtype=np.int64), np.zeros((len(pieces), 512), dtype=np.int64)
    tops = [0] * len(pieces)

    def run(i):
        part = slice(*pieces[i])
        tops[i] = int(_kernels()[1](a[part], b[part], hi[i], lo[i]))

    shares.run_pieces(run, len(pieces), threads)
    return hi.sum(axis=0), lo.sum(axis=0), max(tops) == 0xFF
