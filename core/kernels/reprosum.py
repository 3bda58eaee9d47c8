"""An order-independent sum: the correctly rounded sum of a tensor's values, the same bits for
every order, thread count and device.

float64 partial sums with a proven error bound decide the rounding where they can; exact folds
decide it where they cannot. torch reductions serve on any device; large float32 vectors on a
CPU take one compiled pass (core.kernels.widesum, numba, imported on first use).
Only core.machines.globalstate.torch_threads changes a global setting (locked and restored).

How reproducible_sum works, and why every bit of its result is independent of order, thread split
and device:

**Fast path (float16, bfloat16, float32).** Two ways to the same float64 partial
sums and bound, both covered by the proof below:

* float32 on a CPU, from 2^15 values: core.kernels.widesum's one compiled pass
  (numba; a strided tensor through contiguous copies of whole blocks) gives, per
  block of 16,384 values, the float64 sum of the values, in which each value takes
  part in at most 1023 + 15 additions (any tree inside a row of 1,024, then the
  row sums in order), and an absolute sum; ``widesum.combine`` adds the blocks' sums
  in order, in float64, so d = 1038 + (blocks - 1), and their absolute sums likewise,
  to a_total with sum|x| <= a_total * s (s = widesum.ABS_SLACK = 1 + 2^-13;
  widesum's docstring proves it). A = a_total * s * (1 + 2^-40) >= sum|x| (the last
  factor covers the two products' roundings).
* Otherwise (an accelerator, float16 and bfloat16, small inputs, or no numba),
  torch reductions: pieces of k values (2^19 on a CPU, 2^22 on an accelerator; a
  strided piece is copied first). Per piece, one pass for a bound on sum|x|
  (below), then one reduction that widens rows of 256 values to float64 and sums
  each row; then sums of 8 partial sums, level by level, until at most 4096 are
  left, which ``math.fsum`` adds with one rounding (one host synchronization in
  all); here d = 255 + 7 * levels.

* Specials. The float64 sums cannot overflow (|partial sums| <= n * 2^128 < 2^1024),
  so a partial sum is not finite only where a value is not: NaN where a NaN or both
  infinities meet, else the infinity's sign. The IEEE result follows from them:
  NaN if any is NaN or both signs occur, else that infinity.
* Error. Each float64 addition has a relative error of at most u = 2^-53 (no
  underflow: every partial sum is a multiple of 2^-149), and each value takes part in
  at most d of them (above), whatever order, thread split or reduction tree torch or
  the compiler uses on any device (any algorithm made of float64 additions). So the
  result S satisfies |S - T| <= eps = gamma_d * A + |S| * u, with
  gamma_d = d*u / (1 - d*u) and A >= sum|x| (the last term is fsum's rounding, where
  fsum adds the partial sums; where they are added in float64, d counts those additions).
* The bound A, float32 through torch reductions: the float32 dot product s = fl(c . c) of each piece c with
  itself (any order, FMA or not: each square passes through at most k roundings, its
  product and at most k - 1 additions, each of relative error at most u32 = 2^-24;
  a product that underflows, flushed to zero or not, also an absolute error below
  2^-126, which later roundings grow by at most (1 + u32)^k) satisfies
  s >= (1 - u32)^k * sum c^2 - k * 2^-126 * (1 + u32)^k, so with k * u32 <= 1/4,
  sum c^2 <= (s + k * 2^-125) / (1 - k * u32); by Cauchy-Schwarz,
  sum|c| <= sqrt(k * sum c^2). s not finite: no bound. A = the sum over pieces
  (sqrt(k * sum c^2) <= k * max|c|, usually far less). Where A does not decide (or s
  is not finite: squares beyond 2^128), the second chance takes A = the sum over
  pieces of k * max|c| (one ``torch.aminmax`` per piece): tighter where squares
  underflow, the only bound where they overflow.
* The bound A, float16 and bfloat16: A = sum over pieces of k * max|c|, from one
  ``torch.aminmax`` per piece (their squares under- and overflow too easily).
* Decision. If S - eps and S + eps round to the same value, T rounds to it too
  (rounding is monotonic): that is the result. Computed in float64, every bound
  rounded outward: A and eps times 1 + 2^-40 (more than their few dozen roundings of
  relative 2^-53 at most; 1 - k * u32, 1 - d * u and the products k * max|c| are
  exact), S - eps and S + eps each widened by one ulp; each end rounded to the format
  exactly (scaled by a power of two to the format's quantum, then Python's round,
  ties to even). Otherwise T lies within eps of a rounding boundary (a tie, or heavy
  cancellation) and the folds decide. This is the stopping test of Rump, Ogita and
  Oishi's AccSum (SIAM J. Sci. Comput. 31(1), 2008) on float64 partial sums.

**Folds (exact; any format).** In a working precision p (24, float32, for float16,
bfloat16 and float32 values; 53, float64, for float64 values) with every value v of a
piece below 2^E in magnitude, take the grid 2^b, b = max(E - W, bmin), and split
hi = (v + M) - M, r = v - hi, with M = 1.5 * 2^(b+p-1).

* Extraction is exact. W <= p - 2 gives |v| < 2^(b+p-2), so v + M lies in
  [2^(b+p-1), 2^(b+p)], where the spacing of the working format is 2^b: its one
  rounding puts v on the grid 2^b (nearest); (v + M) - M is then exact (Sterbenz: both
  are within a factor 2). r = v - hi is exact: hi is 0 or a multiple of the spacing of
  v, and |r| <= min(|v|, 2^(b-1)), so r fits in as many bits as v.
* Every sum of the hi is exact, in any order. The hi are multiples of 2^b with
  |hi| <= 2^(b+W); a partial sum of k of them is a multiple of 2^b of magnitude at
  most k * 2^(b+W), representable while k * 2^W <= 2^53 (float64) or <= 2^24 (float32),
  so no addition can round, whatever order, thread split or tree. Float32 work:
  W = 20, columns of 16 values are summed in float32 (16 * 2^20 = 2^24), the column
  sums in float64. Float64 work: W = min(51, 53 - ceil(log2 k)) for a piece of k.
* The folds end: after one, |r| <= 2^(b-1), so the next E is at most b and the next
  grid at least W bits finer; the remainders are all zero at the latest after the
  fold with b = bmin (2^bmin is the working format's smallest subnormal, of which
  every value is a multiple). That is at most floor((b1 - bmin) / W) + 1 folds for a
  first grid 2^b1: 13 in float32 work, 76 in float64 work with pieces below 2^26
  values; ordinary data needs 2 or 3, and each fold checks the remainders' max first.
* Top of the range: when M would overflow (b > 103 in float32, b > 970 in float64),
  float32 work continues in float64 (exact widening); float64 values of at least
  2^-766 are scaled by 2^-256 (exactly: they stay normal) and summed apart from the
  smaller ones, which have room as they are.

The folds' sums (integers times 2^b) accumulate as one Python integer in units of
2^-1074, rounded once by core.arith.formats.round_to_format. float64 values: one
``torch.aminmax`` per piece first, for the specials. An exact zero sum: two more
passes (any nonzero value, every sign bit) for its sign. Assumes IEEE arithmetic
without flush-to-zero of subnormals in the sums (torch's default on CPUs and GPUs).

**Devices.** Only torch operations on whole pieces, or core.kernels.widesum's compiled pass
over a CPU tensor's memory; no per-element Python. Through torch reductions, the fast
path synchronizes with the host once per call (twice with the second chance); the
folds (pieces of 2^20 values per CPU thread, at most 2^21; 2^24 on an accelerator)
twice per fold and piece (the max and the sum).
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from core.arith.exact import correctly_rounded_sum
from core.arith.formats import (
    FLOAT32,
    FLOAT64,
    bit_view,
    bits_of,
    format_of,
    round_precision,
    round_to_format,
    to_numpy,
)
from core.arith.metrics import gamma
from core.machines.devices import available_devices
from core.machines.globalstate import PROCESS_THREADS, torch_threads

# --------------------------------------------------------------- order-independent sum
#
# How it works, and why every bit of the result is independent of order, thread split
# and device: see the module's docstring.

_U = float(FLOAT64.unit_roundoff)
_U32 = float(FLOAT32.unit_roundoff)
_MARGIN = 1 + 2.0**-40  # the fast path's bounds: more than a few dozen float64 roundings (2^-53 each)
_ROW = 256  # fast path: values per first-level float64 row sum
_GROUP = 8  # fast path: partial sums per later-level float64 sum
_FINAL = 4096  # fast path: at most this many partial sums go to math.fsum
_FAST_CPU = 1 << 19  # fast path, CPU: values per piece (the piece and its float64 copy stay in cache)
_FAST_DEVICE = 1 << 22  # fast path, accelerator; also the most values one float32 dot takes (k * 2^-24 <= 1/4)
_KERNEL_MIN = 1 << 15  # fast path, CPU float32: from this many values, core.kernels.widesum's compiled pass
_DOT_UNDERFLOW = 2.0**-125  # per square: more than any underflow error, flush-to-zero included
_CHUNK_PER_THREAD = 1 << 20  # folds: elements per piece and CPU thread (a thread's share stays in cache)
_CHUNK_CPU_MAX = 1 << 21  # folds: a piece's float64 copy stays below 32 MB: malloc reuses it (no page faults)
_CHUNK_DEVICE = 1 << 24  # folds: elements per piece on an accelerator
_UNIT_EXP = -1074  # exact totals are integers in units of 2^-1074 (every value is a multiple)
_LIMITS = {torch.float64: 1 << 26}  # see reproducible_sum, "Size limits"
_LIMIT_NARROW = 1 << 29


@dataclass(frozen=True, kw_only=True)
class _Working:
    """A working precision for the exact folds: where ``(v + M) - M`` rounds v to a grid."""

    dtype: torch.dtype
    p: int  # significand bits
    bmin: int  # exponent of the smallest subnormal: every value is a multiple of 2^bmin
    bmax: int  # largest grid exponent b with M = 1.5 * 2^(b+p-1) and 2^(b+p) both finite


_W32 = _Working(dtype=torch.float32, p=24, bmin=-149, bmax=127 - 24)
_W64 = _Working(dtype=torch.float64, p=53, bmin=-1074, bmax=1023 - 53)


def _chunk_size(t: torch.Tensor) -> int:
    """Elements per piece: cache-sized on a CPU, large on an accelerator. The result does
    not depend on it (every piece is summed exactly or within a proven bound)."""
    if t.device.type == "cpu":  # few pieces: each parallel region can wait for a busy core
        return min(_CHUNK_PER_THREAD * max(1, torch.get_num_threads()), _CHUNK_CPU_MAX)
    return _CHUNK_DEVICE


def _grid_sum(hi: torch.Tensor) -> float:
    """The exact float64 sum of values that are multiples of 2^b with |hi| <= 2^(b+W)
    (W = 20 in float32 work; W <= 53 - ceil(log2 n) in float64 work)."""
    if hi.dtype == torch.float32 and hi.numel() % 16 == 0:
        # 16 values per column: partial sums are multiples of 2^b below 2^(b+24), exact in
        # float32; then the column sums, exact in float64
        return hi.view(16, -1).sum(0).sum(dtype=torch.float64).item()
    return hi.sum(dtype=torch.float64).item()


def _exact_units(v: torch.Tensor, buffers: dict) -> int:
    """The exact sum of the finite 1-D tensor v, as an integer count of 2^-1074.

    Folds: with E such that max|v| < 2^E, pick the grid 2^b, b = E - W, and split every
    value as hi = (v + M) - M, M = 1.5 * 2^(b+p-1), and r = v - hi (see reproducible_sum
    for why both are exact and why the sum of the hi is exact in any order). Add that sum
    to the integer total and repeat on the remainders (|r| <= 2^(b-1), so the next grid
    is at least W bits finer) until they are all zero. ``buffers`` holds two scratch
    tensors per working dtype, reused from piece to piece.
    """
    total = 0
    w = _W64 if v.dtype == torch.float64 else _W32

    def scratch(avoid: torch.Tensor) -> torch.Tensor:
        pair = buffers.get(w.dtype)
        if pair is None or pair[0].numel() < v.numel():
            pair = buffers[w.dtype] = [torch.empty(v.numel(), dtype=w.dtype, device=v.device) for _ in range(2)]
        free = pair[1] if pair[0].data_ptr() == avoid.data_ptr() else pair[0]
        return free[: v.numel()]

    if v.dtype != w.dtype or not v.is_contiguous():
        v = scratch(v).copy_(v)  # float16 and bfloat16 widen exactly; a strided piece is read faster as a copy
    while True:
        lo, hi = torch.stack(torch.aminmax(v)).tolist()
        m = max(-lo, hi)
        if m == 0:
            return total
        e = math.frexp(m)[1]  # m < 2^e
        if w is _W32:
            width = 20  # <= p - 2 (the extraction's range); 16 * 2^20 = 2^24 (_grid_sum)
        else:  # numel * 2^width <= 2^53: the float64 sum of the hi cannot round
            width = min(w.p - 2, 53 - (v.numel() - 1).bit_length())
        b = max(e - width, w.bmin)
        if b > w.bmax:  # M would overflow
            if w is _W32:  # float32 values near 2^128: continue in float64 (exact widening)
                w = _W64
                v = scratch(v).copy_(v)
                continue
            # float64 values near 2^1024: those of at least 2^-766 scale by 2^-256 exactly
            # (staying at least 2^-1022); the smaller ones have room as they are
            small = v.abs() < 2.0**-766
            scaled = torch.where(small, 0.0, v) * 2.0**-256
            return total + _exact_units(torch.where(small, v, 0.0), buffers) + (
                _exact_units(scaled, buffers) << 256)
        big_m = 1.5 * 2.0 ** (b + w.p - 1)
        hi_part = torch.add(v, big_m, out=scratch(v))
        hi_part -= big_m
        total += int(math.ldexp(_grid_sum(hi_part), -b)) << (b - _UNIT_EXP)
        if b == w.bmin:  # every value is a multiple of 2^bmin, so hi == v: nothing is left
            return total
        v = torch.sub(v, hi_part, out=hi_part)  # the remainders, exact, into hi's buffer


def _exact_sum(flat: torch.Tensor) -> Fraction:
    """The exact sum of a finite 1-D tensor (the folds, piece by piece)."""
    step = _chunk_size(flat)
    buffers: dict = {}
    units = sum(_exact_units(flat[s : s + step], buffers) for s in range(0, flat.numel(), step))
    return Fraction(units) * Fraction(2) ** _UNIT_EXP


def _specials(mins: list[float], maxs: list[float]) -> float | None:
    """The IEEE result when some value is not finite: nan, +inf or -inf; else None."""
    if any(math.isnan(v) for v in mins + maxs):
        return math.nan
    pos, neg = any(v == math.inf for v in maxs), any(v == -math.inf for v in mins)
    if pos and neg:
        return math.nan
    return math.inf if pos else -math.inf if neg else None


def _row_sums(c: torch.Tensor) -> list[torch.Tensor]:
    """Rows of _ROW values of the piece c, widened and summed in float64 (one reduction),
    and the sum of its last, shorter row."""
    full = c.numel() - c.numel() % _ROW
    out = [c[:full].reshape(-1, _ROW).sum(1, dtype=torch.float64)] if full else []
    if full < c.numel():
        out.append(c[full:].sum(dtype=torch.float64).reshape(1))
    return out


def _cauchy_schwarz_bound(length: int, squares: float) -> float | None:
    """An upper bound on sum|x| over a piece of ``length`` <= 2^22 float32 values whose
    float32 dot product with itself came out as ``squares``; None when that is not finite."""
    if not math.isfinite(squares):
        return None
    # length * 2^-125 and 1 - length * 2^-24 are exact; three roundings, then the root's
    q = length * (squares + length * _DOT_UNDERFLOW) / (1 - length * _U32)  # >= length * sum x^2
    return math.sqrt(q) * _MARGIN


def _max_bound(lengths: list[int], mins: list[float], maxs: list[float]) -> float:
    """An upper bound on sum|x|: the sum over pieces of length * max|value| (exact products)."""
    return math.fsum(k * max(-lo, hi) for k, lo, hi in zip(lengths, mins, maxs, strict=True)) * _MARGIN


# Formats whose rounding from float64 the struct module does (float32: the CPU's conversion; float16:
# CPython's own, to nearest, ties to even): after a pass over megabytes of data this is one cold
# call, where the arithmetic below measured 50-100 us on the 2-core development VM.
_PACKED = {"float32": struct.Struct("<f"), "float16": struct.Struct("<e")}


def _round_float(v: float, fmt) -> float:
    """The float64 value v rounded to fmt (nearest, ties to even, overflow to ±inf), exactly:
    by struct where it packs the format (it refuses what rounds beyond the largest finite value:
    that is an overflow), else by ``round_precision``."""
    packed = _PACKED.get(fmt.name)
    if packed is not None:
        try:
            return packed.unpack(packed.pack(v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    return float(round_precision(v, fmt.precision, fmt.emin, float(fmt.max_finite)))


def _decide(approx: float, abs_bound: float | None, depth: int, fmt) -> float | None:
    """The rounding of every real within eps of approx, when they all round alike (see
    reproducible_sum, "Fast path"), as a float (exact: fmt's values are float64 values); else None."""
    if abs_bound is None:
        return None
    eps = (gamma(depth, _U, math.inf) * abs_bound + abs(approx) * _U) * _MARGIN  # depth * u and 1 - depth * u are exact
    low = _round_float(math.nextafter(approx - eps, -math.inf), fmt)  # the roundings of the two
    high = _round_float(math.nextafter(approx + eps, math.inf), fmt)  # ends, widened by one ulp
    return low if low == high else None


def _piece_extremes(pieces: list[torch.Tensor]) -> tuple[list[float], list[float]]:
    """The minimum and the maximum of every piece (one host synchronization; a strided piece is read as a
    contiguous copy, one at a time: torch reduces a strided tensor several times slower)."""
    values = torch.stack([torch.stack(torch.aminmax(c.contiguous())) for c in pieces]).double().reshape(-1).tolist()
    return values[0::2], values[1::2]


# No arguments: the cache holds one entry, the module (or None) for the life of the process.
@functools.cache
def _widesum():
    """core.kernels.widesum, imported on first use: it loads numba (about 0.3 s and 100 MB), which
    only a server that sums large float32 vectors needs. None where numba cannot be imported
    (not installed, or built for another NumPy): the torch reductions then serve (slower,
    same result), and nothing on a page breaks."""
    try:
        import core.kernels.widesum as widesum  # deferred on purpose, see above
    except ImportError:
        return None
    return widesum


def compiled_pass_available() -> bool:
    """Whether large float32 sums on this CPU take core.kernels.widesum's compiled pass (numba imports)."""
    return _widesum() is not None


def _kernel_applies(flat: torch.Tensor, kernel: bool | None) -> bool:
    """Whether the fast path reads flat with core.kernels.widesum (float32 on a CPU, any strides; by
    default from _KERNEL_MIN values) rather than with torch reductions."""
    if kernel is False or flat.device.type != "cpu" or flat.dtype != torch.float32:
        return False
    return (kernel or flat.numel() >= _KERNEL_MIN) and _widesum() is not None


def _nonfinite_result(partials: list[float]) -> float:
    """The IEEE sum from float64 partial sums of which some are not finite: nan where one is
    nan or both infinities occur, else that infinity."""
    signs = {v for v in partials if not math.isfinite(v)}
    return math.nan if any(map(math.isnan, signs)) or len(signs) > 1 else signs.pop()


def _decided_by_kernel(flat: torch.Tensor, fmt) -> tuple[float | None, float | None]:
    """The fast path on a CPU for float32: core.kernels.widesum's block sums and absolute block sums
    in one pass (see reproducible_sum, "Fast path")."""
    widesum = _widesum()
    threads = torch.get_num_threads()
    if flat.is_contiguous():
        sums, abs_sums = widesum.block_sums(flat.numpy(), threads, PROCESS_THREADS)
    else:  # strided (a slice with a step, an expanded value): cache-sized contiguous copies, whole blocks each,
        # so the blocks and their sums are the contiguous tensor's
        step = _FAST_CPU * max(1, threads) // widesum.BLOCK * widesum.BLOCK
        buffer = torch.empty(min(step, flat.numel()), dtype=flat.dtype)
        parts = [widesum.block_sums(buffer[: min(step, flat.numel() - s)].copy_(flat[s : s + step]).numpy(),
                                    threads, PROCESS_THREADS) for s in range(0, flat.numel(), step)]
        sums, abs_sums = (np.concatenate([part[i] for part in parts]) for i in (0, 1))
    approx, abs_total, depth = widesum.combine(sums, abs_sums)
    if not math.isfinite(approx):  # some value is not finite (float64 sums cannot overflow)
        return None, _nonfinite_result(sums[~np.isfinite(sums)].tolist())
    abs_bound = abs_total * widesum.ABS_SLACK * _MARGIN  # >= sum|x|: see the module docstring
    return _decide(approx, abs_bound, depth, fmt), None


def _decided_sum(flat: torch.Tensor, fmt, kernel: bool | None = None) -> tuple[float | None, float | None]:
    """The fast path (float16, bfloat16, float32): float64 partial sums with a proven
    error bound, rounded both ways.

    Returns (the correctly rounded sum, or None when the bound does not decide it or some
    value is not finite; the IEEE result, nan, +inf or -inf, when some value is not
    finite, else None). ``kernel``: None picks core.kernels.widesum for large contiguous float32
    on a CPU, else torch reductions; True or False forces the choice (tests).
    """
    if _kernel_applies(flat, kernel):
        return _decided_by_kernel(flat, fmt)
    step = _FAST_CPU if flat.device.type == "cpu" else _FAST_DEVICE
    pieces = [flat[s : s + step] for s in range(0, flat.numel(), step)]
    float32 = flat.dtype == torch.float32
    parts, bounds = [], []
    for c in pieces:
        c = c.contiguous()  # a strided piece, copied (cache-sized, one at a time): reduced several times faster
        bounds.append(torch.dot(c, c).reshape(1) if float32 else torch.stack(torch.aminmax(c)))
        parts += _row_sums(c)  # after the bound's pass: the piece is read from cache
    p = torch.cat(parts)
    depth = _ROW - 1  # additions a value can take part in, at most, before fsum
    while p.numel() > _FINAL:
        pad = -p.numel() % _GROUP
        if pad:
            p = torch.cat((p, p.new_zeros(pad)))
        p = p.reshape(-1, _GROUP).sum(1)
        depth += _GROUP - 1
    head = torch.cat(bounds).double()
    values = torch.cat((head, p)).tolist()  # the only host synchronization of the fast path
    partials = values[head.numel() :]
    if not all(map(math.isfinite, partials)):  # some value is not finite (float64 sums cannot overflow)
        return None, _nonfinite_result(partials)
    approx = math.fsum(partials)  # correctly rounded: error <= |approx| * u
    lengths = [c.numel() for c in pieces]
    if float32:
        per_piece = [_cauchy_schwarz_bound(k, s) for k, s in zip(lengths, values[: head.numel()], strict=True)]
        abs_bound = None if any(b is None for b in per_piece) else math.fsum(per_piece) * _MARGIN
    else:
        abs_bound = _max_bound(lengths, values[0 : head.numel() : 2], values[1 : head.numel() : 2])
    result = _decide(approx, abs_bound, depth, fmt)
    if result is None and float32:  # second chance: length * max|value|, tighter when squares under- or overflow
        bound = _max_bound(lengths, *_piece_extremes(pieces))
        if abs_bound is None or bound < abs_bound:
            result = _decide(approx, bound, depth, fmt)
    return result, None


def reproducible_sum(x: torch.Tensor) -> torch.Tensor:
    """The correctly rounded sum of x's values, as a 0-d CPU tensor of x's dtype: the
    same bits for every order, thread count and device, because the result is a function
    of the exact sum alone.

    **Result.** The exact sum T of the values, rounded once to x's format (nearest, ties
    to even, overflow to ±inf). Specials as IEEE defines them: a NaN, or both +inf and
    -inf, give NaN (one canonical quiet NaN, whatever the payloads); otherwise an
    infinity gives itself. An exact zero sum is -0 only if every value is -0, else +0; a
    nonzero T never rounds to zero (it is a multiple of the format's smallest subnormal).
    float16, bfloat16 and float32 try the fast path first; float64, and any sum the fast
    path leaves undecided, take the exact folds; the eight-bit formats count their patterns.

    Why every bit of the result is independent of order, thread split and device (the fast path,
    the exact folds, what runs on a device) is proven in this module's docstring.

    **Size limits.** Fewer than 2^29 values (float16, bfloat16, float32) or 2^26
    (float64) per call: a contract that bounds one call's time and memory on a shared server.
    Neither path needs them for exactness: every piece is exact on its own.
    """
    limit = _LIMITS.get(x.dtype, _LIMIT_NARROW)
    if x.numel() >= limit:
        raise ValueError(f"reproducible_sum handles fewer than {limit:,} {x.dtype} values per call")
    fmt = format_of(x.dtype)
    flat = x.detach().reshape(-1)
    if flat.numel() == 0:
        return torch.zeros((), dtype=x.dtype)
    if not fmt.arithmetic:  # FP8: no torch sum to be fast against; its 256 patterns are counted exactly
        return tensor_of_result(correctly_rounded_sum(to_numpy(flat.cpu()), fmt), fmt, flat)
    if x.dtype != torch.float64:
        result, special = _decided_sum(flat, fmt)
    else:
        step = _chunk_size(flat)
        result, special = None, _specials(*_piece_extremes([flat[s : s + step] for s in range(0, flat.numel(), step)]))
    if special is not None:
        return torch.tensor(special, dtype=x.dtype)
    if result is None:
        result = round_to_format(_exact_sum(flat), fmt)
    if result == 0:  # T == 0 exactly: -0 only when every value is -0
        negative = not bool(flat.any()) and bool(torch.signbit(flat).all())
        return torch.tensor(-0.0 if negative else 0.0, dtype=x.dtype)
    return torch.tensor(float(result), dtype=x.dtype)  # exact: result is a value of x's format


def tensor_of_result(result, fmt, flat: torch.Tensor) -> torch.Tensor:
    """The 0-d tensor of a correctly rounded sum (NaN canonical; an exact zero is -0 only when every value is)."""
    if isinstance(result, float) and math.isnan(result):
        return torch.tensor(math.nan).to(fmt.torch_dtype)
    if result == 0:
        negative = bool((bit_view(to_numpy(flat.cpu())) == 1 << (fmt.width - 1)).all())
        return torch.tensor(-0.0 if negative else 0.0).to(fmt.torch_dtype)
    return torch.tensor(float(result)).to(fmt.torch_dtype)  # exact: a value of fmt (or its overflow result)


def reproducible_sum_devices(x: torch.Tensor) -> list[tuple[str, int]]:
    """The reproducible sum on every available device (and CPU thread count): (where, bits)."""
    out = []
    flat = x.detach().reshape(-1)
    for t in sorted({1, PROCESS_THREADS}):
        where = f"CPU, {t} thread{'s' if t > 1 else ''}"
        if _kernel_applies(flat, None):
            used = _widesum().threads_for(flat.numel(), t, PROCESS_THREADS)
            if used != t:  # say so: the thread count did not change how the work was split
                where += f" (its one pass used {used}: too few values to share)"
        with torch_threads(t):
            out.append((where, bits_of(reproducible_sum(x))))
    for d in available_devices():
        if d.kind != "cpu" and d.supports(x.dtype):
            out.append((d.name, bits_of(reproducible_sum(x.to(d.torch_device)))))
    return out
