"""A vectorized NumPy model of the order in which PyTorch's CPU ``torch.sum`` adds a 1-D tensor.

``torch_cpu_sum_model(x, threads)`` reproduces, bit for bit, what ``torch.sum(torch.from_numpy(x))``
returns on the CPU with ``threads`` intra-op threads (PyTorch 2.13, x86-64, OpenMP backend).  It does so
by performing the same floating-point additions, in the same order and in the same working precision,
with NumPy elementwise arithmetic (each NumPy ``+`` on float32/float64 arrays rounds once, like one SIMD
lane's ``+``).

Sources read (pytorch/pytorch):

* ``aten/src/ATen/native/cpu/SumKernel.cpp`` -- ``cascade_sum``, ``vectorized_inner_sum``, ``row_sum``,
  ``multi_row_sum``, the load policies and ``CastStoreAccumulate``.
* ``aten/src/ATen/native/cpu/utils.h`` -- ``utils::CeilLog2``.
* ``aten/src/ATen/native/TensorIteratorReduce.cpp`` -- ``parallel_reduce`` and ``two_pass_reduction``.
* ``aten/src/ATen/Parallel-inl.h`` and ``aten/src/ATen/ParallelOpenMP.h`` -- ``parallel_for`` and
  ``invoke_parallel`` (how the index range is split between threads).
* ``aten/src/ATen/native/DispatchStub.h`` -- ``REGISTER_DISPATCH`` registers *no* AVX512 kernel, so on an
  AVX512 machine the sum stub falls back to the AVX2 build: ``Vectorized<float>`` has 8 lanes and
  ``Vectorized<double>`` 4 even when ``torch.backends.cpu.get_cpu_capability()`` says ``"AVX512"``.

The order modelled
------------------

Working type: float32 for float32/float16/bfloat16 (``acc_type<T, /*is_cuda=*/true>``), float64 for
float64.  ``L`` = SIMD lanes of the working type (8 floats / 4 doubles: 32-byte vectors).

1. *Threads* (``TensorIteratorBase::parallel_reduce``): if ``n < GRAIN_SIZE`` (32768) or one thread,
   the whole range is reduced serially (step 2) and written as ``out = 0 + r`` in the input dtype.
   Otherwise ``two_pass_reduction``: a buffer of ``T = get_num_threads()`` slots of the input dtype,
   ``parallel_for(0, n, GRAIN_SIZE)``; if ``n > GRAIN_SIZE`` the OpenMP team uses
   ``nt = min(T, ceil(n / GRAIN_SIZE))`` tasks, task ``t`` reduces ``[t*c, min(n, (t+1)*c))`` with
   ``c = ceil(n / nt)`` into slot ``t`` (``slot = 0 + r``, rounded to the input dtype); when
   ``n == GRAIN_SIZE`` the single range goes to slot 0.  Unused slots stay 0.  The ``T`` slots are then
   summed by the very same serial kernel (step 2) and stored as ``out = 0 + r``.
2. *Serial kernel* on a contiguous range of ``n`` elements (``cascade_sum`` -> ``vectorized_inner_sum``
   when ``n >= Vectorized<scalar_t>::size()``, else the scalar ``row_sum``):

   a. The range is cut into ``V = n // E`` vectors of ``E`` input elements (``E = L``; for float16 and
      bfloat16 ``E = 2L = 16``: the 16 halves are widened to two float vectors ``first`` (elements 0..7)
      and ``second`` (8..15) and loaded as ``first + second``).  The ``n - V*E`` trailing elements are
      the scalar tail.
   b. ``row_sum`` over the ``V`` vectors with ``ilp_factor = 4``: vector ``v`` goes to accumulator
      ``v % 4`` of row ``v // 4``; the ``m = V // 4`` full rows go through ``multi_row_sum``; the
      ``V - 4m`` (< 4) leftover vectors are then added, in order, to accumulator 0; finally
      ``acc0 = ((acc0 + acc1) + acc2) + acc3``.
   c. ``multi_row_sum`` (per accumulator and lane, all independent): ``p = max(4, CeilLog2(m) // 4)``,
      ``S = 2**p``.  Level 0 sums ``S`` consecutive rows from 0; each level-0 block sum is added into
      level 1; every ``S**2`` rows level 1 is added into level 2 and reset; every ``S**3`` rows level 2
      is added into level 3 (which is never flushed).  The ``m % S`` rows after the last full block
      are summed into level 0.  Result: ``((level0 + level1) + level2) + level3``.
   d. The scalar tail is summed from 0 in order, then the ``L`` lanes of the vector result are added
      to it one by one, lane 0 first: ``(((0 + t0) + t1) + ... + lane0) + lane1 + ...``.
   e. For ``n < E`` (no vector) the same ``row_sum`` runs on scalars (one lane).

Every addition happens in the working type; float16/bfloat16 results are rounded (nearest-even) to the
input dtype when stored (in each thread's slot and in the output).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from core.arith.formats import BFLOAT16, to_scalar, to_torch
from core.machines.globalstate import torch_threads

_BFLOAT16 = BFLOAT16.numpy_dtype

GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE (aten/src/ATen/Parallel.h)
ILP_FACTOR = 4  # row_sum's interleaved accumulators
NUM_LEVELS = 4  # multi_row_sum's cascade levels
VECTOR_BYTES = 32  # the AVX2 (and generic) Vectorized<T> width used by the sum kernel on x86

# Where the model is established to match the real torch.sum, as measured by tests/core/test_torch_cpu_model.py
# (PyTorch 2.13.0+cpu, capability AVX512 -> AVX2 sum kernel, OpenMP, 2 cores).
MEASURED_MATCH = {
    "torch": "2.13.0+cpu, x86-64, cpu capability AVX512 (sum kernel uses the AVX2 build: 8 float / 4 double lanes), "
    "OpenMP backend, 2 cores",
    "float32": "bit-exact in every tested case: threads 1 and 2 for n = 1 .. 10**6 (edges around 8/16/32/.../4096, "
    "the 32768 grain, random sizes; randn, wide-exponent, cancelling and uniform data) and n = 10**7; "
    "threads 3, 4, 8 for n in 32769 .. 200003",
    "float64": "bit-exact in every tested case (same grid as float32, without n = 10**7)",
    "float16": "bit-exact in every tested case (same grid; inputs scaled so no partial sum overflows)",
    "bfloat16": "bit-exact in every tested case (same grid)",
    "checked once, not in the test suite": "threads 16, 17, 33 for n up to 1234567; float32 n = 2**25 + 12345 and "
    "5e7, float64 n = 2**24 + 777 and 3e7 (cascade step 2**5): all bit-exact",
    "not covered": "other SIMD widths (ARM/SVE/VSX builds), non-finite inputs (inf/nan), "
    "non-contiguous or multi-dimensional tensors, other torch versions",
}


# No arguments: one entry per process; torch picks its CPU kernels once, when it loads.
@functools.cache
def cpu_capability() -> str:
    """The SIMD capability torch's CPU kernels were dispatched for (``"AVX2"``, ``"AVX512"``, ...)."""
    return str(torch.backends.cpu.get_cpu_capability())


def _working_dtype(dtype) -> np.dtype:
    dtype = np.dtype(dtype)
    if dtype == np.float64:
        return np.dtype(np.float64)
    if dtype == np.float32 or dtype == np.float16 or dtype == _BFLOAT16:
        return np.dtype(np.float32)
    raise TypeError(f"unsupported dtype {dtype}; expected float16, bfloat16, float32 or float64")


def default_lanes(dtype) -> int:
    """SIMD lanes of the working (accumulation) type that torch's sum kernel uses on this CPU.

    The sum stub is registered with ``REGISTER_DISPATCH``, which leaves the AVX512 slot empty, so an
    ``"AVX512"`` CPU runs the AVX2 kernel; AVX2 and the generic (``"DEFAULT"``) build use 32-byte vectors.
    """
    cap = cpu_capability().upper()
    nbytes = VECTOR_BYTES
    if cap.startswith("SVE"):  # e.g. "SVE256": a vector of that many bits (not measured here)
        digits = "".join(c for c in cap if c.isdigit())
        nbytes = int(digits) // 8 if digits else 16
    elif cap in {"NEON", "VSX", "ZVECTOR"}:  # not measured here
        nbytes = 16 if cap == "NEON" else 32
    return nbytes // _working_dtype(dtype).itemsize


def thread_chunks(n: int, threads: int) -> list[tuple[int, int]]:
    """The contiguous ``(start, stop)`` ranges torch's two-pass reduction gives its threads.

    Serial (one chunk) when ``n < GRAIN_SIZE`` or ``threads == 1``; ``n == GRAIN_SIZE`` also runs as a
    single chunk (``parallel_for`` parallelizes only when ``n > grain``).  Otherwise
    ``nt = min(threads, ceil(n / GRAIN_SIZE))`` chunks of ``ceil(n / nt)`` elements, the last shorter.
    Chunk ``i`` is reduced by thread ``i`` into buffer slot ``i``.
    """
    if threads < 1:
        raise ValueError("threads must be at least 1")
    if n <= 0:
        return []
    if threads == 1 or n <= GRAIN_SIZE:
        return [(0, n)]
    nt = min(threads, -(-n // GRAIN_SIZE))
    chunk = -(-n // nt)
    return [(b, min(n, b + chunk)) for b in range(0, n, chunk)]


def _ceil_log2(x: int) -> int:
    """``at::native::utils::CeilLog2``."""
    return 1 if x <= 2 else int(x - 1).bit_length()


def _seq_sum_blocks(blocks: np.ndarray) -> np.ndarray:
    """Sum ``blocks`` of shape ``(k, s, c)`` over axis 1 strictly left to right, starting from 0."""
    acc = np.zeros((blocks.shape[0], blocks.shape[2]), dtype=blocks.dtype)
    for j in range(blocks.shape[1]):
        acc = acc + blocks[:, j, :]
    return acc


def _seq_sum_rows(rows: np.ndarray) -> np.ndarray:
    """Sum ``rows`` of shape ``(k, c)`` over axis 0 strictly left to right, starting from 0."""
    if rows.shape[0] <= 64:
        return _seq_sum_blocks(rows[None, :, :])[0]
    # np.add.accumulate is a sequential running sum (no pairwise regrouping); the zero row makes the
    # first addition ``0 + a`` as in the kernel (it matters only for the sign of a zero).
    padded = np.concatenate([np.zeros((1, rows.shape[1]), dtype=rows.dtype), rows])
    return np.add.accumulate(padded, axis=0)[-1]


def _multi_row_sum(a: np.ndarray) -> np.ndarray:
    """``multi_row_sum``: cascade-sum the ``m`` rows of ``a`` (shape ``(m, c)``) independently per column."""
    m, c = a.shape
    power = max(4, _ceil_log2(m) // NUM_LEVELS)
    step = 1 << power
    zero = np.zeros(c, dtype=a.dtype)

    nb = m // step
    level0_blocks = _seq_sum_blocks(a[: nb * step].reshape(nb, step, c)) if nb else np.zeros((0, c), a.dtype)
    level0 = _seq_sum_rows(a[nb * step:]) if m > nb * step else zero

    n1 = nb // step  # level-1 groups flushed into level 2
    groups1 = _seq_sum_blocks(level0_blocks[: n1 * step].reshape(n1, step, c)) if n1 else np.zeros((0, c), a.dtype)
    level1 = _seq_sum_rows(level0_blocks[n1 * step:]) if nb > n1 * step else zero

    n2 = n1 // step  # level-2 groups flushed into level 3
    groups2 = _seq_sum_blocks(groups1[: n2 * step].reshape(n2, step, c)) if n2 else np.zeros((0, c), a.dtype)
    level2 = _seq_sum_rows(groups1[n2 * step:]) if n1 > n2 * step else zero

    level3 = _seq_sum_rows(groups2) if n2 else zero
    return ((level0 + level1) + level2) + level3


def _row_sum(v: np.ndarray) -> np.ndarray:
    """``row_sum`` over ``v`` of shape ``(count, lanes)`` (vectors, or scalars with one lane)."""
    count, lanes = v.shape
    m = count // ILP_FACTOR
    partial = _multi_row_sum(v[: m * ILP_FACTOR].reshape(m, ILP_FACTOR * lanes)).reshape(ILP_FACTOR, lanes)
    acc0 = partial[0]
    for i in range(m * ILP_FACTOR, count):
        acc0 = acc0 + v[i]
    for k in range(1, ILP_FACTOR):
        acc0 = acc0 + partial[k]
    return acc0


def _serial_sum(x: np.ndarray, lanes: int) -> np.generic:
    """One call of the ``cascade_sum`` loop on a contiguous range; returns the working-type value."""
    work = _working_dtype(x.dtype)
    reduced = work != x.dtype and x.dtype != np.float64
    per_vector = 2 * lanes if reduced else lanes  # Vectorized<scalar_t>::size()
    n = x.shape[0]
    if n < per_vector:  # scalar_outer_sum/scalar_inner_sum -> row_sum on scalars
        return _row_sum(x.astype(work).reshape(n, 1))[0]

    nvec = n // per_vector
    body = x[: nvec * per_vector].reshape(nvec, per_vector)
    if reduced:  # load_to_float(ptr, first, second); first + second
        vectors = body[:, :lanes].astype(work) + body[:, lanes:].astype(work)
    else:
        vectors = body
    vec_acc = _row_sum(vectors)

    final = work.type(0)
    for t in x[nvec * per_vector:]:
        final = final + work.type(t)
    for k in range(lanes):
        final = final + vec_acc[k]
    return final


def _store(value: np.generic, dtype: np.dtype) -> np.generic:
    """``CastStoreAccumulate`` into a zero-filled output: ``out += value`` in the output dtype."""
    return dtype.type(dtype.type(0) + dtype.type(value))


def torch_cpu_sum_model(x: np.ndarray, threads: int = 1, lanes: int | None = None) -> np.generic:
    """The scalar ``torch.sum(torch.from_numpy(x))`` returns on the CPU with ``threads`` intra-op threads.

    ``x``: 1-D array of float32, float64, float16 or ml_dtypes.bfloat16 (contiguity is irrelevant: the
    model reads values).  ``lanes``: SIMD lanes of the working type, default ``default_lanes(x.dtype)``.
    Returns a NumPy scalar of ``x``'s dtype.
    """
    x = np.asarray(x)
    if x.ndim != 1:
        raise ValueError("x must be 1-D")
    dtype = x.dtype
    _working_dtype(dtype)  # validates the dtype
    if lanes is None:
        lanes = default_lanes(dtype)
    if lanes < 1:
        raise ValueError("lanes must be at least 1")
    n = x.shape[0]
    if n == 0:
        return dtype.type(0)
    with np.errstate(over="ignore", invalid="ignore"):
        if threads == 1 or n < GRAIN_SIZE:
            return _store(_serial_sum(x, lanes), dtype)
        slots = np.zeros(threads, dtype=dtype)
        for t, (b, e) in enumerate(thread_chunks(n, threads)):
            slots[t] = _store(_serial_sum(x[b:e], lanes), dtype)
        return _store(_serial_sum(slots, lanes), dtype)


def real_torch_sum(x: np.ndarray, threads: int) -> np.generic:
    """The real ``torch.sum`` on the CPU with ``threads`` intra-op threads, as a NumPy scalar of x's dtype."""
    x = np.asarray(x)
    t = to_torch(x)
    with torch_threads(threads):
        out = torch.sum(t)
    return to_scalar(out)


def cascade_depth(n: int, dtype=np.float32, threads: int = 1, lanes: int | None = None) -> int:
    """Additions on the longest path of ``torch_cpu_sum_model`` for ``n`` values (at most n - 1): the cascade's
    levels (a block of up to ``2**power`` rows each), the interleaved and lane combines, the tail, and with
    several threads the slots' sum. For error bounds and tolerances, like ``numpy_model.tree_depth_numpy``."""
    dt = np.dtype(dtype)
    lanes = default_lanes(dt) if lanes is None else lanes
    reduced = _working_dtype(dt) != dt and dt != np.float64
    per_vector = 2 * lanes if reduced else lanes

    def serial(k: int) -> int:
        count = k // per_vector if k >= per_vector else k
        m = max(count // ILP_FACTOR, 1)
        step = 1 << max(4, _ceil_log2(m) // NUM_LEVELS)
        depth, rows = min(m, step), m // step
        for _ in range(NUM_LEVELS - 1):  # each level adds up to `step` of the level below, the last all that is left
            if rows == 0:
                break
            depth += rows if _ == NUM_LEVELS - 2 else min(rows, step)
            rows //= step
        depth += 3 + (ILP_FACTOR - 1) + ILP_FACTOR  # the cascade's levels, the accumulators, the row tail
        if k >= per_vector:
            depth += int(reduced) + (per_vector - 1) + lanes  # the pair widened, the scalar tail, the lanes
        return depth

    if threads == 1 or n < GRAIN_SIZE:
        d = serial(n)
    else:
        d = max(serial(e - b) for b, e in thread_chunks(n, threads)) + serial(threads) + 1
    return max(min(d, n - 1), 0)
