"""The textbook summation algorithms, every addition rounding to the array's dtype.

The plain ones (``sequential``, ``pairwise``, ``lanes_then_pairwise``, ``split_sequential``) sum along
the last axis: one vector gives one value, a matrix gives every row's sum at once, with the same bits
as each row summed alone (core.diagnose.simulate sums thousands of short rows this way). ``compensated``
takes one vector. core.kernels.orders names them as orders (``ORDERS``); this module only computes.
"""

from __future__ import annotations

import numpy as np

from core.arith.exact import exact_sum_fraction
from core.arith.formats import format_of, round_to_format


def _empty(x: np.ndarray) -> np.ndarray | np.generic:
    """The sum of no values: +0 for each row."""
    return np.zeros(x.shape[:-1], dtype=x.dtype)[()]


def sequential(x: np.ndarray) -> np.ndarray | np.generic:
    """Left to right, each partial sum rounded to x's dtype."""
    if x.shape[-1] == 0:
        return _empty(x)
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is a result, not an error
        return np.add.accumulate(x, axis=-1)[..., -1][()]


def pairwise(x: np.ndarray) -> np.ndarray | np.generic:
    """Plain pairwise tree: add neighbours level by level, (x0+x1), (x2+x3), ...

    The values are padded with +0.0 to a power of two (adding +0 is exact), so this is
    the balanced binary tree over the original order; depth ceil(log2 n).
    """
    n = x.shape[-1]
    if n == 0:
        return _empty(x)
    size = 1 << max(0, (n - 1).bit_length())
    level = np.zeros((*x.shape[:-1], size), dtype=x.dtype)
    level[..., :n] = x
    with np.errstate(over="ignore", invalid="ignore"):
        while level.shape[-1] > 1:
            level = level[..., 0::2] + level[..., 1::2]
    return level[..., 0][()]


def lanes_then_pairwise(x: np.ndarray, lanes: int) -> np.ndarray | np.generic:
    """``lanes`` running sums, lane j over x[j], x[j + lanes], ... left to right (the last round padded
    with +0), then the lanes added by ``pairwise``: the shape of a CPU's SIMD accumulators or a GPU warp's
    threads. Depth ``lanes_depth``."""
    n = x.shape[-1]
    if n == 0:
        return _empty(x)
    rounds = -(-n // lanes)
    padded = np.zeros((*x.shape[:-1], rounds * lanes), dtype=x.dtype)
    padded[..., :n] = x
    with np.errstate(over="ignore", invalid="ignore"):
        per_lane = np.add.accumulate(padded.reshape(*x.shape[:-1], rounds, lanes), axis=-2)[..., -1, :]
    return pairwise(per_lane)


def lanes_depth(n: int, lanes: int) -> int:
    """Additions on the longest path of ``lanes_then_pairwise``."""
    return max(-(-n // lanes) - 1, 0) + (lanes - 1).bit_length()


def split_sequential(x: np.ndarray, chunks: int) -> np.ndarray | np.generic:
    """The values cut into ``chunks`` contiguous slices of ceil(n / chunks) (fewer when n is small), each
    summed left to right, then the slices' sums left to right: a split-K reduction. Depth ``split_depth``."""
    n = x.shape[-1]
    if n == 0:
        return _empty(x)
    size = -(-n // chunks)
    parts = [sequential(x[..., s:s + size]) for s in range(0, n, size)]
    return sequential(np.stack(parts, axis=-1))


def split_depth(n: int, chunks: int) -> int:
    """Additions on the longest path of ``split_sequential``."""
    size = -(-n // chunks) if n else 0
    return max(size - 1, 0) + (max(-(-n // size) - 1, 0) if size else 0)


LANES = 1024


def lane_length(n: int, lanes: int = LANES) -> int:
    """Values per lane in the vectorized compensated sums."""
    return -(-n // max(1, min(lanes, n))) if n else 0


def compensated(x: np.ndarray, variant: str = "kahan", lanes: int = LANES) -> np.generic:
    """Kahan or Neumaier compensated summation of one vector, vectorized across ``lanes`` lanes.

    Lane j sums x[j], x[j + lanes], ... with compensation, all lanes at once (one numpy
    step per row of the reshaped vector), every operation rounding to x's dtype. With one
    lane this is the textbook algorithm (Kahan returns s, Neumaier s + c). With several,
    the lanes' sums and corrections are combined exactly and rounded once.
    """
    n = x.size
    if n == 0:
        return x.dtype.type(0)
    lanes = max(1, min(lanes, n))
    rows = -(-n // lanes)
    padded = np.zeros(rows * lanes, dtype=x.dtype)
    padded[:n] = x
    s = np.zeros(lanes, dtype=x.dtype)
    c = np.zeros(lanes, dtype=x.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        for row in padded.reshape(rows, lanes):
            if variant == "kahan":
                y = row - c
                t = s + y
                c = (t - s) - y  # minus the part of y that t lost
                s = t
            else:  # Neumaier: the exact error of each addition, whichever operand is larger
                t = s + row
                big = np.abs(s) >= np.abs(row)
                c = c + np.where(big, (s - t) + row, (row - t) + s)
                s = t
    if lanes == 1:
        return s[0] if variant == "kahan" else (s + c)[0]
    parts = np.concatenate([s, -c if variant == "kahan" else c])
    total = round_to_format(exact_sum_fraction(parts), format_of(x.dtype))
    with np.errstate(over="ignore"):
        return np.array(float(total)).astype(x.dtype)[()]
