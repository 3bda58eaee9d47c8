"""Models of the summation orders of all-reduce algorithms, computed exactly on the CPU.

An all-reduce sums one vector per rank (device), element by element, and gives every rank
the result. Which partial sums it forms depends on the algorithm, on the number of ranks k,
and for ring algorithms on the element's position: the vector is cut into chunks, and the
sum of each chunk starts at a different rank. So the same k gradient vectors summed on 8 or
on 16 devices, or by a ring instead of a tree, give other roundings.

Every function here is a *model*: float32 IEEE arithmetic in numpy (one correctly rounded
addition per step, exactly as the collective library's reduction function adds two
buffers), in the order the cited source code uses. Addition is commutative in IEEE
arithmetic, so only which partial sums are formed matters, not which operand is on the left.

* ``ring_gloo``: gloo's ring all-reduce (the algorithm torch's gloo backend runs for a float
  tensor on CPU). The vector is cut into ``numSegments`` segments, ``numSegments / k`` per
  chunk; chunk c is summed starting at rank c-1 and going down the ring to rank c.
  Checked bit for bit against torch's real gloo all-reduce (tests/core/test_collectives.py).
* ``ring_nccl``: NCCL's ring order (``runRing``): chunk c starts at ring position c+1 and
  goes up to c. NCCL also splits the vector over channels and sizes chunks by protocol;
  the model uses one channel and k equal chunks, so its chunk boundaries are a model.
* ``tree_nccl``: NCCL's double binary tree (``ncclGetBtree``/``ncclGetDtree``), one rank per
  node; every node adds its children's subtree sums to its own value, first child first.
  NCCL splits channels between the two trees; the model sends the first half of the
  elements over tree 0 and the second half over tree 1.
* ``halving_doubling``: gloo's recursive halving-doubling (``AllreduceHalvingDoubling``):
  ranks are split into blocks of power-of-two size (the binary digits of k, largest block
  first); inside a block partners at distance 1, 2, 4, ... are summed (a balanced tree over
  neighbouring ranks); then each block adds the total of all smaller blocks.

Exact references: ``exact_column_sums`` gives every element's exact sum of the k values as
an integer multiple of 2^-149 (the float32 quantum), by per-exponent buckets that are exact in
float64 and a final combination in Python integers; ``ulp_errors`` compares a result with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

import numpy as np

from core.arith.formats import FORMATS, bit_view, bits_differ, last_bit_even
from core.arith.ulps import error_in_ulps, ulp_distance_array

FLOAT32 = FORMATS["float32"]

SEGMENT_BYTES = 1 << 20  # gloo's AllreduceOptionsImpl::kMaxSegmentSize (gloo/allreduce.h)
QUANTUM_EXP = -149  # every float32 is an integer multiple of 2^-149


@dataclass(frozen=True, kw_only=True)
class CollectiveModel:
    key: str
    name: str
    order: str  # the summation order in words
    source: str  # the public code the order follows
    checked: str  # what the model was checked against


COLLECTIVE_MODELS: dict[str, CollectiveModel] = {
    m.key: m
    for m in (
        CollectiveModel(
            key="ring_gloo", name="Ring (gloo)",
            order="Reduce-scatter around a ring, then all-gather. The vector is cut into k chunks of whole "
            "segments; chunk c is summed starting at rank c−1 and going down to rank c, so neighbouring "
            "chunks start at different ranks.",
            source="facebookincubator/gloo, gloo/allreduce.cc (ring); torch's ProcessGroupGloo calls gloo::allreduce "
            "without choosing an algorithm (torch/csrc/distributed/c10d/ProcessGroupGlooDetail.hpp, "
            "AsyncAllreduceWork), and gloo runs the ring for that case",
            checked="bit for bit against torch's real gloo all-reduce with 3 and 4 processes (tests)",
        ),
        CollectiveModel(
            key="ring_nccl", name="Ring (NCCL-style)",
            order="NCCL's ring order: chunk c starts at ring position c+1 and goes up to c. One channel and k "
            "equal chunks (NCCL splits over several channels with protocol-dependent chunk sizes, which "
            "moves the boundaries).",
            source="NVIDIA/nccl, src/device/all_reduce.h (runRing)",
            checked="against a plain Python loop (tests); not against NCCL (no GPU here)",
        ),
        CollectiveModel(
            key="tree_nccl", name="Double binary tree (NCCL-style)",
            order="NCCL's double binary tree, one rank per node: each node adds its children's subtree sums to "
            "its own value, first child first. First half of the elements on tree 0, second half on "
            "tree 1 (the mirrored or shifted tree).",
            source="NVIDIA/nccl, src/graph/trees.cc (ncclGetBtree, ncclGetDtree) and src/device/all_reduce.h "
            "(runTreeUpDown / runTreeSplit)",
            checked="tree shapes against the figures in NCCL's trees.cc; sums against a recursive Python "
            "reference (tests); not against NCCL (no GPU here)",
        ),
        CollectiveModel(
            key="halving_doubling", name="Recursive halving-doubling (gloo)",
            order="Blocks of power-of-two size (the binary digits of k, largest first); inside a block, "
            "partners at distance 1, 2, 4, … are summed (a balanced tree over neighbouring ranks), then "
            "each block adds the total of all smaller blocks.",
            source="facebookincubator/gloo, gloo/allreduce_halving_doubling.h (AllreduceHalvingDoubling); "
            "Thakur, Rabenseifner, Gropp, Optimization of Collective Communication Operations in "
            "MPICH (2005)",
            checked="against a recursive Python reference (tests); gloo's bcube equals it for powers of two",
        ),
    )
}


def _check(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] < 1:
        raise ValueError("need one vector per rank: an array of shape (ranks, elements)")
    if x.dtype != np.float32:
        raise ValueError("the models sum float32 vectors")
    return x


# ------------------------------------------------------------------------------ rings


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def gloo_ring_chunks(n: int, k: int, element_size: int = 4, max_segment_bytes: int = SEGMENT_BYTES) -> np.ndarray:
    """The chunk (0..k-1) of every element in gloo's ring, from its segment arithmetic.

    numSegments = roundUp(max(ceil(bytes / maxSegmentBytes), 2k), k); segments are
    ceil(bytes / numSegments) bytes rounded up to whole elements; chunk c is segments
    c·(numSegments/k) ... (c+1)·(numSegments/k) - 1 (gloo/allreduce.cc, ring()).
    """
    if k < 1 or n < 0:
        raise ValueError("need at least one rank")
    total = n * element_size
    seg_max = element_size * max(1, max_segment_bytes // element_size)
    wanted = max(_ceil_div(total, seg_max), 2 * k)
    num_segments = _ceil_div(wanted, k) * k
    per_rank = num_segments // k
    segment_bytes = _ceil_div(_ceil_div(total, num_segments), element_size) * element_size
    segment_elements = max(1, segment_bytes // element_size)
    return (np.arange(n) // segment_elements) // per_rank


def equal_chunks(n: int, k: int) -> np.ndarray:
    """k contiguous chunks of ceil(n / k) elements (the last ones shorter or empty)."""
    return np.arange(n) // max(1, _ceil_div(n, k))


def ring_sum(x: np.ndarray, chunks: np.ndarray, direction: int) -> np.ndarray:
    """Sum chunk c of every rank's vector starting at rank c+direction, then c+2·direction, ..., c."""
    x = _check(x)
    k, n = x.shape
    if direction not in (-1, 1):
        raise ValueError("a ring goes up (+1) or down (-1)")
    # Two copies of the ranks stacked: rank c + d·s (s = 1..k) is row c + d·s (+k when going down),
    # always inside, so every step is one gather with a flat index that moves by one row.
    doubled = np.concatenate([x, x]).ravel()
    idx = (chunks.astype(np.int64) + direction + (k if direction < 0 else 0)) * n + np.arange(n)
    acc = doubled[idx]
    for _ in range(2, k + 1):
        idx += direction * n
        acc += doubled[idx]
    return acc


def ring_gloo(x: np.ndarray) -> np.ndarray:
    x = _check(x)
    if x.shape[0] == 1:
        return x[0].copy()
    return ring_sum(x, gloo_ring_chunks(x.shape[1], x.shape[0], x.itemsize), -1)


def ring_nccl(x: np.ndarray) -> np.ndarray:
    x = _check(x)
    return ring_sum(x, equal_chunks(x.shape[1], x.shape[0]), +1)


# ------------------------------------------------------------------------------ trees


def nccl_btree(nranks: int, rank: int) -> tuple[int, int, int]:
    """(parent, first child, second child) of ``rank``; -1 for none. A port of ncclGetBtree."""
    bit = 1
    while bit < nranks:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, -1, (bit >> 1) if nranks > 1 else -1
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, down0, down1


def nccl_dtree(nranks: int, rank: int, tree: int) -> tuple[int, int, int]:
    """The second tree of ncclGetDtree: the first one mirrored (even k) or shifted by one (odd k)."""
    if tree == 0:
        return nccl_btree(nranks, rank)
    if nranks % 2 == 1:
        u, d0, d1 = nccl_btree(nranks, (rank - 1 + nranks) % nranks)
        return tuple(-1 if v == -1 else (v + 1) % nranks for v in (u, d0, d1))  # type: ignore[return-value]
    u, d0, d1 = nccl_btree(nranks, nranks - 1 - rank)
    return tuple(-1 if v == -1 else nranks - 1 - v for v in (u, d0, d1))  # type: ignore[return-value]


def tree_links(nranks: int, tree: int = 0) -> tuple[int, list[list[int]]]:
    """(root, children of every rank in the order a node adds them) for NCCL's tree 0 or 1."""
    root, children = -1, []
    for r in range(nranks):
        up, d0, d1 = nccl_dtree(nranks, r, tree)
        children.append([c for c in (d0, d1) if c != -1])
        if up == -1:
            root = r
    return root, children


def tree_sum(x: np.ndarray, root: int, children: list[list[int]]) -> np.ndarray:
    """Every node's value plus its children's subtree sums, first child first, children before parents."""
    x = _check(x)
    v = x.copy()
    post, stack = [], [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            post.append(node)
            continue
        stack.append((node, True))
        stack.extend((c, False) for c in reversed(children[node]))
    for node in post:
        for c in children[node]:
            v[node] += v[c]
    return v[root]


def tree_nccl(x: np.ndarray) -> np.ndarray:
    x = _check(x)
    k, n = x.shape
    half = _ceil_div(n, 2)
    out = np.empty(n, np.float32)
    for t, cols in ((0, slice(0, half)), (1, slice(half, n))):
        root, children = tree_links(k, t)
        out[cols] = tree_sum(x[:, cols], root, children)
    return out


# ------------------------------------------------------------------- halving-doubling


def binary_blocks(k: int) -> list[tuple[int, int]]:
    """(first rank, size) of gloo's binary blocks: the powers of two in k, largest first, at rank 0."""
    sizes = [1 << b for b in range(k.bit_length() - 1, -1, -1) if k >> b & 1]
    out, offset = [], 0
    for s in sizes:
        out.append((offset, s))
        offset += s
    return out


def halving_doubling(x: np.ndarray) -> np.ndarray:
    x = _check(x)
    totals = []
    for first, size in binary_blocks(x.shape[0]):
        v = x[first:first + size]
        while v.shape[0] > 1:
            v = v[0::2] + v[1::2]  # partners at distance 1, then 2, 4, ... within the block
        totals.append(v[0])
    acc = totals[-1].copy()
    for t in reversed(totals[:-1]):
        acc = t + acc  # a block adds what the smaller blocks sent up
    return acc


MODEL_FUNCTIONS = {"ring_gloo": ring_gloo, "ring_nccl": ring_nccl, "tree_nccl": tree_nccl,
                   "halving_doubling": halving_doubling}


def allreduce(x: np.ndarray, model: str) -> np.ndarray:
    """The all-reduced (summed) vector under one model's order, in float32."""
    if model not in MODEL_FUNCTIONS:
        raise ValueError(f"unknown collective model {model!r}; choose one of {', '.join(MODEL_FUNCTIONS)}")
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is a result, not an error
        return MODEL_FUNCTIONS[model](x)


# -------------------------------------------------------------------------- exactness


def exact_column_sums(x: np.ndarray) -> list[int]:
    """Each element's exact sum over the ranks, as an integer N: the sum is N · 2^-149.

    Values are bucketed by (element, sign and exponent); within one bucket all values are
    multiples of one power of two with 24 significant bits, so their float64 sum is exact for
    fewer than 2^29 ranks. The buckets are then combined as Python integers.
    """
    x = _check(x)
    k, n = x.shape
    if k >= 1 << 29:
        raise ValueError("too many ranks for the exact bucket sums")
    if not np.isfinite(x).all():
        raise ValueError("the exact sums need finite values")
    keys = (bit_view(x) >> 23).astype(np.int64)  # sign and biased exponent
    flat = (np.arange(n, dtype=np.int64)[None, :] * 512 + keys).ravel()
    buckets = np.bincount(flat, weights=x.astype(np.float64).ravel(), minlength=n * 512).reshape(n, 512)
    totals = np.zeros(n, dtype=object)
    for key in np.flatnonzero((buckets != 0).any(axis=0)):
        biased = max(int(key) & 0xFF, 1)
        scale = biased - 1  # a value of this exponent is an integer times 2^(biased - 150) = 2^scale quanta
        ints = np.ldexp(buckets[:, key], -(biased - 150)).astype(np.int64)  # exact: integers below 2^53
        totals += ints.astype(object) * (1 << scale)
    return [int(t) for t in totals]


def _quanta(values: np.ndarray) -> list[int]:
    """float32 values as exact integer multiples of 2^-149."""
    scaled = np.ldexp(values.astype(np.float64), -QUANTUM_EXP)  # exact: a power-of-two scaling
    return [int(v) for v in scaled]


def ulp_errors(result: np.ndarray, exact: list[int]) -> np.ndarray:
    """``error_in_ulps`` per element: (result - exact) / ulp(exact), in float32 ULPs of the exact sum
    (given in quanta of 2^-149), signed."""
    res = np.asarray(result, dtype=np.float32)
    if not np.isfinite(res).all():
        raise ValueError("a result overflowed")
    quantum = Fraction(1, 2 ** -QUANTUM_EXP)
    return np.array([error_in_ulps(r * quantum, s * quantum, FLOAT32)
                     for r, s in zip(_quanta(res), exact, strict=True)], dtype=np.float64)


def correctly_rounded(result: np.ndarray, errors: np.ndarray) -> np.ndarray:
    """Whether each result is the exact sum rounded to nearest, ties to even."""
    even = last_bit_even(np.asarray(result, np.float32))
    a = np.abs(errors)
    return (a < 0.5) | ((a == 0.5) & even)


# ------------------------------------------------------------------------- comparisons


@dataclass(frozen=True, kw_only=True)
class ModelOutcome:
    model: str
    max_abs_ulps: float  # largest |error| against the exact sum, in ULPs
    mean_abs_ulps: float
    correctly_rounded: float  # share of elements equal to the exact sum rounded once


@dataclass(frozen=True, kw_only=True)
class ModelPairOutcome:
    """Two all-reduce models' results for the same ranks' vectors, element by element."""

    a: str
    b: str
    differing: float  # share of elements whose bits differ
    max_ulp_distance: int


@dataclass(frozen=True, kw_only=True)
class Comparison:
    ranks: int
    elements: int
    outcomes: tuple[ModelOutcome, ...]
    pairs: tuple[ModelPairOutcome, ...]


def compare(x: np.ndarray, models: tuple[str, ...] = tuple(COLLECTIVE_MODELS)) -> Comparison:
    """Every model's result against the exact sums and against each other."""
    x = _check(x)
    exact = exact_column_sums(x)
    results = {m: allreduce(x, m) for m in models}
    outcomes = []
    for m, r in results.items():
        err = np.abs(ulp_errors(r, exact))
        outcomes.append(
            ModelOutcome(
                model=m,
                max_abs_ulps=float(err.max(initial=0.0)),
                mean_abs_ulps=float(err.mean()) if err.size else 0.0,
                correctly_rounded=float(correctly_rounded(r, err).mean()) if err.size else 1.0,
            )
        )
    pairs = []
    for a, b in combinations(models, 2):
        ra, rb = results[a], results[b]
        diff = bits_differ(ra, rb)
        pairs.append(ModelPairOutcome(a=a, b=b, differing=float(diff.mean()) if diff.size else 0.0,
                                 max_ulp_distance=int(ulp_distance_array(ra, rb).max(initial=0))))
    return Comparison(ranks=x.shape[0], elements=x.shape[1], outcomes=tuple(outcomes), pairs=tuple(pairs))
