"""One compiled pass over float32 values on a CPU: float64 sums of blocks, and bounds on their |values|.

The order-independent sum's fast path (core.kernels.reprosum.reproducible_sum) needs float64
partial sums of float32 values and a bound on sum|x|. Eager torch on a CPU has no
reduction that widens as it reads: ``sum(dtype=torch.float64)`` first casts into a new
buffer, and widening cache-sized pieces plus a dot product for the bound measured
3.8-4.9x the time of ``torch.sum`` before any bookkeeping (benchmarks/bench_reprosum.py).
This kernel reads each value once, widens it in registers and adds it to a float64
accumulator, and adds its absolute value to a float32 one (twice the values per vector
register of a float64 one: the bound needs no more than float32's precision). Its loop is
written as LLVM vector code (``_vector_part``), because numba's vectoriser would run the float32
additions on half-full registers.

**What it computes.** The values are cut into blocks of BLOCK = ROW * GROUP consecutive
values (the last block may be shorter), each block into rows of ROW values. For block b:

* ``sums[b]`` is the float64 sum of its values, computed as: every row summed by ``_row``
  (in vector lanes, then the lanes pairwise, then a short tail the compiler may reassociate:
  some binary tree over the row's at most ROW values, besides additions of an exact zero,
  which never round), then the row sums added in order, one after the other (no
  reassociation is allowed there). Widening float32 to float64 is exact, so each value takes
  part in at most (ROW - 1) + (GROUP - 1) = DEPTH float64 additions that round, whatever tree
  the row took: the error bound in core.kernels.reprosum holds for every such tree.
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

Blocks are shared between threads by whole blocks (pieces of whole blocks, cut by
core.arith.shares and claimed as threads come free, with an atomic counter in compiled code),
so the thread count changes which thread computes a block, never its value. The threads run
in the caller's floating-point environment (subnormals are not flushed: nothing in this app
changes that).
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

from core.arith import shares
from core.machines.devices import last_level_cache_bytes

# Rows of 1024, not 256: each row ends in a reduction across the vector registers, which took a
# tenth of the pass at 256; the bound grows with DEPTH (3.3x), still about 10^-13 of sum|x|.
ROW = 1024  # values per row: summed in a tree of vector lanes
GROUP = 16  # rows per block, added in order
BLOCK = ROW * GROUP
DEPTH = (ROW - 1) + (GROUP - 1)  # float64 additions a value takes part in, at most
# sum|x| <= abs_sums[b] * ABS_SLACK: 1 / (1 - 1023 * 2^-24 - 15 * 2^-53) < 1 + 6.1e-5 < 1 + 2^-13
ABS_SLACK = 1 + 2.0**-13
PER_THREAD = 1 << 19  # values a helper thread must get to be worth waking (about 80 us of work)


# float32 values per vector: one 256-bit register, which AVX2 and AVX-512 processors both run at full
# width. 512-bit vectors (16) were no faster on the Intel Xeon VM (1.11x torch.sum against 1.02x, kept
# prefetch, one thread): the pass waits on memory, not on additions.
LANES = 8
UNROLL = 2  # vectors per loop step: 16 values (one 64-byte cache line), four float64 accumulators of 4
# and two float32 ones of 8
# Each step asks for the cache line this many bytes ahead. On the 2-core AMD EPYC development VM, over
# 10^7 values on one thread: 2.92 ms without, 2.20 ms at 1 KB (0.98x torch.sum), 2.40 ms at 1.5 KB,
# 2.63 ms at 2 KB. On the 2-core Intel Xeon VM (AVX-512, AMX), 512 B to 2 KB all took 1.0-1.1x.
PREFETCH_BYTES = 1024
# Whether the prefetch asks to keep the line in every cache level (locality 3) or to stream it past them
# (locality 0, non-temporal), chosen per pass by keeps_in_cache. Streaming suits a vector larger than the
# last-level cache, which a pass would only churn: on the AMD VM, kept lines took the
# interpreter's place, and the first torch call after a pass took 64 us against 12 us. Keeping suits one
# that fits: on the Intel VM (480 MB of L3 reported), streamed lines bypass L2 and L3, so every pass over the same
# 40 MB came from memory, 6.5 ms on one thread against 1.5 ms kept (torch.sum: 1.5 ms).
CACHE_BYTES = last_level_cache_bytes()


def keeps_in_cache(nbytes: int, cache_bytes: int | None = CACHE_BYTES) -> bool:
    """Whether a pass over ``nbytes`` prefetches its lines to keep them: where they fit in half the
    last-level cache (the other half left to the rest of the process), or where the processor reports
    no cache size (streamed lines cost 4x where the data would have stayed; kept ones, at worst, cost a
    later call its cached data)."""
    return cache_bytes is None or nbytes <= cache_bytes // 2


# The LLVM types of the vector loop: a vector of LANES float32 values, and one of the same width that holds half
# as many float64 values.
_F32, _F64, _I64, _I32 = ir.FloatType(), ir.DoubleType(), ir.IntType(64), ir.IntType(32)
_WIDE = LANES // 2  # float64 values per vector of the same width
_VF, _VD = ir.VectorType(_F32, LANES), ir.VectorType(_F64, _WIDE)
_BYTES_PTR = ir.IntType(8).as_pointer()
_ZEROS = {_VD: ir.Constant(_VD, [0.0] * _WIDE), _VF: ir.Constant(_VF, [0.0] * LANES)}


def _intrinsics(builder) -> tuple:
    """llvm.fabs on a float32 vector and llvm.prefetch, declared in the module being built."""
    fabs = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_VF, [_VF]), f"llvm.fabs.v{LANES}f32")
    prefetch = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [_BYTES_PTR, _I32, _I32, _I32]), "llvm.prefetch.p0i8")
    return fabs, prefetch


def _prefetch_ahead(builder, prefetch, data, i, keep) -> None:
    """Ask for the cache line PREFETCH_BYTES past value i, kept in every cache level or streamed past them.

    A hint, never a fault, even past the array's end: read (0), kept (3) or not (0), data cache (1); the
    branch does not depend on i, so the compiler may move it out of the loop."""
    ahead = builder.bitcast(builder.gep(data, [builder.add(i, ir.Constant(_I64, PREFETCH_BYTES // 4))]), _BYTES_PTR)
    with builder.if_else(keep) as (kept, streamed):
        for branch, locality in ((kept, 3), (streamed, 0)):
            with branch:
                builder.call(prefetch, [ahead] + [ir.Constant(_I32, c) for c in (0, locality, 1)])


def _loop_step(builder, fabs, ary, i, sums, abs_sums) -> tuple[list, list]:
    """One step of the loop from value i of the array ``ary``: UNROLL vectors loaded, each half widened and
    added to its float64 accumulator, and the vector's |values| added to its float32 one. Returns the new
    accumulators."""
    halves = [ir.Constant(ir.VectorType(_I32, _WIDE), list(range(h, h + _WIDE))) for h in (0, _WIDE)]
    new_sums, new_abs = [], []
    for u in range(UNROLL):
        at = builder.gep(ary.data, [builder.add(i, ir.Constant(_I64, u * LANES))])
        v = builder.load(builder.bitcast(at, _VF.as_pointer()), align=4)
        for h, half in enumerate(halves):
            part = builder.fpext(builder.shuffle_vector(v, ir.Constant(_VF, None), half), _VD)
            new_sums.append(builder.fadd(sums[2 * u + h], part))
        new_abs.append(builder.fadd(abs_sums[u], builder.call(fabs, [v])))
    return new_sums, new_abs


def _after_loop(builder, news: list, entry, body_end) -> list:
    """The accumulators where the loop exits: zero if it never ran, else their values after its last step."""
    merged = []
    for new in news:
        phi = builder.phi(new.type)
        phi.add_incoming(_ZEROS[new.type], entry)
        phi.add_incoming(new, body_end)
        merged.append(phi)
    return merged


def _pairwise(builder, values: list):
    """values[0] + values[1], values[2] + values[3], ..., then the same on the results, down to one."""
    while len(values) > 1:
        values = [builder.fadd(values[j], values[j + 1]) for j in range(0, len(values), 2)]
    return values[0]


def _total(builder, vectors: list):
    """The accumulator vectors added pairwise, then the lanes of their sum added pairwise."""
    summed = _pairwise(builder, vectors)
    return _pairwise(builder, [builder.extract_element(summed, ir.Constant(_I32, j)) for j in range(summed.type.count)])


@intrinsic
def _vector_part(typingctx, row_type, keep_type):
    """(s, a, k) for a 1-D float32 array whose values lie 4 bytes apart: s, the float64 sum of its
    first k = size - size % (LANES * UNROLL) values, and a, the float32 sum of their |values|.

    Written as LLVM vector code because the compiler's own vectoriser picks its width from the
    widest type in a loop: with float64 sums beside them, the |value| additions ran on half-full
    vectors, and a pass over 10^7 values took 1.42x torch.sum's time on one thread against 1.28x
    for this loop before it prefetched (2-core AMD EPYC development VM; see PREFETCH_BYTES).

    The additions are plain IEEE ones (no fast-math flags), so the compiler keeps this tree: value i
    goes into lane i mod 16 of the float64 accumulators (starting from zero) and lane i mod 16 of
    the float32 ones, each lane adds its values in order, then the accumulators are added pairwise
    and their lanes pairwise. That is a binary tree over the k values (and exact zeros), as the
    module's bound requires."""
    if not (isinstance(row_type, types.Array) and row_type.ndim == 1 and row_type.dtype == types.float32
            and isinstance(keep_type, types.Boolean)):
        return None
    sig = types.Tuple((types.float64, types.float32, types.intp))(row_type, keep_type)

    def codegen(context, builder, signature, args):
        step = LANES * UNROLL
        ary = context.make_array(signature.args[0])(context, builder, args[0])
        k = builder.and_(builder.extract_value(ary.shape, 0), ir.Constant(_I64, -step))
        fabs, prefetch = _intrinsics(builder)
        entry = builder.block
        loop = builder.function.append_basic_block("vector_part.loop")
        done = builder.function.append_basic_block("vector_part.done")
        builder.cbranch(builder.icmp_signed(">", k, ir.Constant(_I64, 0)), loop, done)

        builder.position_at_end(loop)
        i = builder.phi(_I64)
        sums = [builder.phi(_VD) for _ in range(2 * UNROLL)]
        abs_sums = [builder.phi(_VF) for _ in range(UNROLL)]
        _prefetch_ahead(builder, prefetch, ary.data, i, args[1])
        new_sums, new_abs = _loop_step(builder, fabs, ary, i, sums, abs_sums)
        i_next = builder.add(i, ir.Constant(_I64, step))
        body_end = builder.block
        builder.cbranch(builder.icmp_signed("<", i_next, k), loop, done)
        i.add_incoming(ir.Constant(_I64, 0), entry)
        i.add_incoming(i_next, body_end)
        for phi, new in zip(sums + abs_sums, new_sums + new_abs, strict=True):
            phi.add_incoming(_ZEROS[phi.type], entry)
            phi.add_incoming(new, body_end)

        builder.position_at_end(done)
        merged_sums = _after_loop(builder, new_sums, entry, body_end)
        merged_abs = _after_loop(builder, new_abs, entry, body_end)
        s, a = _total(builder, merged_sums), _total(builder, merged_abs)
        return context.make_tuple(builder, signature.return_type, [s, a, k])

    return sig, codegen


@numba.njit(nogil=True, fastmath={"reassoc"}, boundscheck=False)
def _row(row, keep):  # pragma: no cover - compiled; its results are tested through block_sums
    if row.strides[0] == 4:
        s, a, k = _vector_part(row, keep)
    else:  # a strided view (a zero-stride broadcast, say): element by element
        s, a, k = 0.0, np.float32(0.0), 0
    for j in range(k, row.size):
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
def _blocks(x, first, last, sums, abs_sums, keep):  # pragma: no cover - compiled
    n = x.size
    for b in range(first, last):
        s = 0.0
        a = 0.0
        start = b * BLOCK
        for r in range(GROUP):
            lo = start + r * ROW
            if lo >= n:
                break
            rs, ra = _row(x[lo : min(lo + ROW, n)], keep)
            if ra == np.inf:  # the float32 sum overflowed, or the row holds an infinity
                ra = _row_abs64(x[lo : min(lo + ROW, n)])
            s += rs
            a += ra
        sums[b] = s
        abs_sums[b] = a


@intrinsic
def _claim(typingctx, counter_type):
    """counter[0]++, atomically, returning the value before: each number is returned to one caller."""
    if not (isinstance(counter_type, types.Array) and counter_type.ndim == 1 and counter_type.dtype == types.int64):
        return None

    def codegen(context, builder, signature, args):
        counter = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", counter.data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(counter_type), codegen


@numba.njit(nogil=True, boundscheck=False)
def _claimed_blocks(x, bounds, sums, abs_sums, next_piece, keep):  # pragma: no cover - compiled
    # pieces [bounds[i], bounds[i + 1]) of blocks, claimed in compiled code: between pieces a thread
    # neither takes the GIL nor waits for it
    while True:
        i = _claim(next_piece)
        if i >= bounds.size - 1:
            return
        _blocks(x, bounds[i], bounds[i + 1], sums, abs_sums, keep)


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
               per_thread: int = PER_THREAD, keep: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(sums, abs_sums) of the 1-D float32 array x in blocks of BLOCK values (see the module
    docstring), computed by ``min(threads, max_threads)`` threads, fewer where a thread would
    get under ``per_thread`` values (waking it would cost more than it saves). ``keep``: how the pass
    prefetches (default: keeps_in_cache for x's size); it changes the time, never a result."""
    if x.dtype != np.float32 or x.ndim != 1:
        raise TypeError("block_sums takes a 1-D float32 array")
    blocks = -(-x.size // BLOCK)
    sums, abs_sums = np.empty(blocks), np.empty(blocks)
    k = threads_for(x.size, threads, max_threads, per_thread)
    ranges = shares.cuts(blocks, shares.piece_count(blocks, k))
    bounds = np.array([first for first, _ in ranges] + [blocks], dtype=np.int64)
    next_piece = np.zeros(1, dtype=np.int64)
    keep = keeps_in_cache(x.nbytes) if keep is None else bool(keep)
    shares.run_workers(lambda: _claimed_blocks(x, bounds, sums, abs_sums, next_piece, keep), min(k, len(ranges)))
    return sums, abs_sums
