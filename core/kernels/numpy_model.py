"""A bit-for-bit model of ``np.sum`` of a 1-D float array: NumPy's pairwise summation.

NumPy does not add the elements of a float array left to right.  Its add-reduction loop
calls ``@TYPE@_pairwise_sum`` (numpy/_core/src/umath/loops_utils.h.src), which works as
follows on ``n`` elements (``PW_BLOCKSIZE = 128``):

* ``n < 8``: a plain left-to-right sum that starts from ``-0.0`` (so that a sum of only
  ``-0.0`` stays ``-0.0``);
* ``8 <= n <= 128``: eight accumulators, ``r[j] = x[j]`` and then ``r[j] += x[j + 8k]``
  for every full group of eight; they are combined as
  ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))`` and the last ``n % 8`` elements
  are then added one by one;
* ``n > 128``: split at ``n2 = n // 2 - (n // 2) % 8``, sum both halves recursively, and
  add the two results.

The reduction loop (``FLOAT_add``/``DOUBLE_add`` in loops_arithm_fp.dispatch.c.src) then
does ``*out += pairwise_sum(...)``, where ``*out`` starts at the identity of ``add``,
``+0.0``: that is why ``np.sum(np.array([-0.0]))`` is ``0.0``.  For a 1-D contiguous array
of a native float dtype the whole array reaches the pairwise routine in a single call: no
buffering into chunks of 8192 elements takes place (checked against ``np.sum`` up to
10^7 elements in tests/core/test_numpy_model.py; a chunked model already disagrees at
n = 8193 for float64).

float16 (``HALF_add`` in loops.c.src): the same routine with ``npy_float`` as the
accumulator type, so each half is widened to float32 (exactly) and every addition is
rounded to float32; the reduction does ``io1 = half_to_float(*out); io1 += pairwise;
*out = float_to_half(io1)``, i.e. one final rounding to float16.

The model rounds exactly like that with NumPy element-wise operations in the
accumulator dtype (never ``np.sum``/``np.add.reduce``), vectorised across leaves: the
recursion tree is built level by level with integer arrays, the leaves (blocks of at most
128 elements) are grouped by length and summed as 2-D array operations, and the tree is
then folded bottom up, one vectorised addition per level.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

PW_BLOCKSIZE = 128  # loops_utils.h.src: #define PW_BLOCKSIZE 128
UNROLL = 8  # eight accumulators r[0..7]

_ACCUMULATOR = {
    np.dtype(np.float16): np.dtype(np.float32),  # HALF: @type@ = npy_float, @trf@ = npy_half_to_float
    np.dtype(np.float32): np.dtype(np.float32),
    np.dtype(np.float64): np.dtype(np.float64),
}


@dataclass(frozen=True)
class _Level:
    """One depth of the recursion tree; nodes are in left-to-right order."""

    leaf_positions: np.ndarray  # positions (in this level) of the nodes that are leaves
    leaf_ids: np.ndarray  # their index into the tree's global leaf list
    internal_positions: np.ndarray  # positions of nodes that split; children 2k, 2k+1 of the next level


@dataclass(frozen=True, kw_only=True)
class _Tree:
    n: int
    level_sizes: tuple[int, ...]
    levels: tuple[_Level, ...]
    leaf_starts: np.ndarray  # global leaf list, in order of discovery (level by level)
    leaf_lengths: np.ndarray
    groups: tuple[tuple[int, np.ndarray], ...]  # (length, global leaf ids of that length)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@functools.lru_cache(maxsize=64)
def _tree(n: int) -> _Tree:
    """The pairwise recursion tree for ``n >= 8`` elements, built level by level (O(n/128) integers)."""
    starts = np.zeros(1, dtype=np.int64)
    lengths = np.full(1, n, dtype=np.int64)
    levels: list[_Level] = []
    sizes: list[int] = []
    all_starts: list[np.ndarray] = []
    all_lengths: list[np.ndarray] = []
    n_leaves = 0
    while starts.size:
        split = lengths > PW_BLOCKSIZE
        leaf_pos = np.flatnonzero(~split)
        internal_pos = np.flatnonzero(split)
        leaf_ids = np.arange(n_leaves, n_leaves + leaf_pos.size, dtype=np.int64)
        n_leaves += leaf_pos.size
        all_starts.append(starts[leaf_pos])
        all_lengths.append(lengths[leaf_pos])
        levels.append(_Level(_readonly(leaf_pos), _readonly(leaf_ids), _readonly(internal_pos)))
        sizes.append(starts.size)
        s, m = starts[internal_pos], lengths[internal_pos]
        half = m // 2
        n2 = half - half % UNROLL  # "divide by two but avoid non-multiples of unroll factor"
        starts = np.stack([s, s + n2], axis=1).reshape(-1)
        lengths = np.stack([n2, m - n2], axis=1).reshape(-1)
    leaf_starts = np.concatenate(all_starts)
    leaf_lengths = np.concatenate(all_lengths)
    groups = tuple(
        (int(length), _readonly(np.flatnonzero(leaf_lengths == length))) for length in np.unique(leaf_lengths)
    )
    return _Tree(
        n=n,
        level_sizes=tuple(sizes),
        levels=tuple(levels),
        leaf_starts=_readonly(leaf_starts),
        leaf_lengths=_readonly(leaf_lengths),
        groups=groups,
    )


def numpy_leaf_blocks(n: int) -> list[tuple[int, int]]:
    """The ``(start, stop)`` blocks that NumPy sums directly (the leaves of its recursion), left to right.

    Below 8 elements the whole array is one sequential block; up to 128 it is one
    eight-accumulator block; above that every leaf has between 64 and 128 elements.
    """
    if n < 0:
        raise ValueError("n must be non-negative")
    if n == 0:
        return []
    if n < UNROLL:
        return [(0, n)]
    tree = _tree(n)
    order = np.argsort(tree.leaf_starts, kind="stable")
    return [(int(s), int(s + m)) for s, m in zip(tree.leaf_starts[order], tree.leaf_lengths[order], strict=True)]


def _leaf_sums(xa: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray:
    """The eight-accumulator sum of every block ``xa[s : s + length]`` (``8 <= length <= 128``), vectorised."""
    full = length - length % UNROLL
    lane = np.arange(UNROLL, dtype=np.int64)
    base = starts[:, None] + lane  # (blocks, 8)
    r = xa[base]  # r[j] = x[j], copied
    for i in range(UNROLL, full, UNROLL):  # r[j] += x[i + j], i = 8, 16, ...
        r += xa[base + i]
    res = ((r[:, 0] + r[:, 1]) + (r[:, 2] + r[:, 3])) + ((r[:, 4] + r[:, 5]) + (r[:, 6] + r[:, 7]))
    for i in range(full, length):  # the n % 8 rest, one at a time
        res += xa[starts + i]
    return res


def _pairwise(xa: np.ndarray) -> np.ndarray:
    """``@TYPE@_pairwise_sum`` of the whole (already widened) array, as a 0-d array of the accumulator dtype."""
    n = xa.size
    acc = xa.dtype
    if n < UNROLL:
        res = np.array(-0.0, dtype=acc)
        for v in xa:
            res = res + v
        return np.asarray(res, dtype=acc)
    tree = _tree(n)
    leaf_values = np.empty(tree.leaf_starts.size, dtype=acc)
    for length, ids in tree.groups:
        leaf_values[ids] = _leaf_sums(xa, tree.leaf_starts[ids], length)
    below: np.ndarray | None = None
    for size, level in zip(reversed(tree.level_sizes), reversed(tree.levels), strict=True):
        values = np.empty(size, dtype=acc)
        values[level.leaf_positions] = leaf_values[level.leaf_ids]
        if level.internal_positions.size:
            assert below is not None
            values[level.internal_positions] = below[0::2] + below[1::2]
        below = values
    assert below is not None and below.size == 1
    return below.reshape(())


def numpy_pairwise_model(x: np.ndarray) -> np.generic:
    """Reproduce ``np.sum(x)`` bit for bit for a 1-D array of float16, float32 or float64.

    The order is NumPy's pairwise summation over the whole array in one call (no
    buffered chunks), started from the identity ``+0.0``; float16 accumulates in float32
    and is rounded to float16 once at the end.  Verified for contiguous arrays.
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError(f"expected a 1-D array, got shape {x.shape}")
    if x.dtype not in _ACCUMULATOR:
        raise TypeError(f"unsupported dtype {x.dtype}; expected float16, float32 or float64")
    acc = _ACCUMULATOR[x.dtype]
    xa = np.ascontiguousarray(x, dtype=acc)  # widening float16 -> float32 is exact
    with np.errstate(over="ignore", invalid="ignore"):  # inf - inf etc. behave as in C; no warnings
        total = np.zeros((), dtype=acc) + _pairwise(xa)  # *out (the identity, +0.0) += pairwise_sum(...)
        return x.dtype.type(total)  # float16: npy_float_to_half, one rounding to nearest even


def tree_depth_numpy(n: int) -> int:
    """Additions on the longest path of NumPy's pairwise sum (blocks of 128, 8 lanes)."""
    if n < 8:
        return max(n - 1, 0)
    levels = 0
    m = n
    while m > 128:
        m = m // 2 + 8  # the larger half, rounded to a multiple of 8 at most 8 larger
        levels += 1
    return levels + (m // 8) + 3 + 7
