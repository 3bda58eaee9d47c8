"""The inputs recomputed: the exact terms of sampled outputs summed in several orders and in reduced
precision, so a user's differences can be placed among those of real orders.

For up to ``SIM_ELEMENTS`` outputs the K terms are formed
exactly in float64 (products of float32 or narrower values are exact), then summed in A
in the orders ``sim_orders()`` lists: sequential with fused multiply-add emulated exactly by
round-to-odd, every order of core.kernels.orders.ORDERS that has a ``RowShape`` (sequential,
reverse, pairwise, 8 and 32 lanes then pairwise, split-K), and seeded random orders; and
with the inputs rounded to each reduced format. The
user's differences are placed in the distribution of differences between those orders,
and each side is compared with the correctly rounded float64 sum of the exact terms. If
the inputs' own orders spread further than T_R predicts, the envelope factor grows to
twice the largest spread seen (never beyond B; see core.diagnose.envelopes).
"""

from __future__ import annotations

import math

import numpy as np

from core.arith.formats import FORMATS, last_bit_even, round_precision
from core.arith.ulps import ulp_array
from core.diagnose.inputs import Inputs
from core.diagnose.results import Simulation
from core.diagnose.rounding import REDUCED_FORMATS, accumulation_format, round_to
from core.kernels.orders import ORDERS, RowShape
from core.kernels.sums import sequential

SIM_ELEMENTS = 256  # outputs recomputed at most (diagnose samples them)
SIM_TERMS = 2**21  # sampled elements x K
SIM_FMA_MAX_K = 8192  # the exact fused-multiply-add emulation loops over K in Python
SIM_PERMUTATIONS = 6


FMA_ORDER = "sequential, fused multiply-add"


def row_orders() -> tuple[RowShape, ...]:
    """Every order of core.kernels.orders.ORDERS that sums many rows at once, in the registry's order."""
    return tuple(o.rows for o in ORDERS.values() if o.rows is not None)


def sim_orders() -> tuple[str, ...]:
    """The simulation's columns: the fused sequential sum, ``row_orders``, then the seeded random orders."""
    return (FMA_ORDER, *(r.label for r in row_orders()), *(f"random order #{i + 1}" for i in range(SIM_PERMUTATIONS)))


def fma_sequential(terms: np.ndarray) -> np.ndarray:
    """Left-to-right float32 sums acc = fl32(acc + t_k) of exact float64 terms, each step
    rounded once (a fused multiply-add): the float64 sum is made round-to-odd with TwoSum,
    and rounding a round-to-odd value of 53 bits to 24 bits is the correct rounding of the
    exact sum (Boldo and Melquiond, 2008)."""
    acc = np.zeros(terms.shape[0], dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(terms.shape[1]):
            t = terms[:, k]
            s = acc + t
            bb = s - acc
            err = (acc - (s - bb)) + (t - bb)
            even = last_bit_even(s)
            fix = (err != 0) & even & np.isfinite(s)
            if fix.any():
                s[fix] = np.nextafter(s[fix], np.where(err[fix] > 0, np.inf, -np.inf))
            acc = s.astype(np.float32).astype(np.float64)
    return acc


def _sum_orders(terms: np.ndarray, acc: str, fused: bool, seed: int = 0) -> np.ndarray:
    """(E, len(sim_orders())) results of each order in the accumulation format (float64 values).
    Columns whose order does not apply (no fused emulation) repeat the plain sequential sum."""
    dt = np.float32 if acc == "float32" else np.float64
    with np.errstate(over="ignore", invalid="ignore"):
        t = terms.astype(dt)  # products rounded to the accumulation format (exact for a summed vector)
        out = [fma_sequential(terms) if fused else sequential(t), *(r.run(t) for r in row_orders())]
        rng = np.random.default_rng(seed)
        for _ in range(SIM_PERMUTATIONS):
            out.append(sequential(t[:, rng.permutation(t.shape[1])]))
    return np.stack([np.asarray(o, dtype=np.float64) for o in out], axis=1)


def _one_order(terms: np.ndarray, fused: bool) -> np.ndarray:
    """The sequential float32 sum (fused when possible): the reduced-precision side's result."""
    if fused:
        return fma_sequential(terms)
    with np.errstate(over="ignore", invalid="ignore"):
        return sequential(terms.astype(np.float32)).astype(np.float64)


def sample_elements(score: np.ndarray, candidates: np.ndarray, count: int) -> np.ndarray:
    """The ``count // 2`` highest-scoring candidates plus a seeded random draw of the rest."""
    if candidates.size <= count:
        return np.sort(candidates)
    order = candidates[np.argsort(-score[candidates], kind="stable")]
    top = order[: count // 2]
    rest = order[count // 2:]
    extra = np.random.default_rng(0).choice(rest, size=count - top.size, replace=False)
    return np.sort(np.concatenate([top, extra]))


def inputs_fit(ops: Inputs, key: str) -> bool:
    """float16 cannot hold inputs beyond its range: that explanation is skipped in the simulation."""
    lim = float(REDUCED_FORMATS[key].fmt.max_finite)
    big = float(np.max(np.abs(ops.a))) if ops.a.size else 0.0
    if ops.b is not None and ops.b.size:
        big = max(big, float(np.max(np.abs(ops.b))))
    return not big > lim


def simulate(inputs: Inputs, a: np.ndarray, e: np.ndarray, fmt: str, elements: np.ndarray,
             reduced_keys: tuple[str, ...]) -> Simulation:
    """Recompute the sampled outputs from the inputs in ``sim_orders()`` (see the module docstring)."""
    acc = accumulation_format(fmt)
    fused = inputs.kind == "matmul" and acc == "float32" and inputs.k <= SIM_FMA_MAX_K
    notes = []
    if inputs.kind == "matmul" and acc == "float32" and not fused:
        notes.append(f"K = {inputs.k:,} is above {SIM_FMA_MAX_K:,}: the fused multiply-add order is replaced by a "
                     "plain sequential sum of rounded products.")
    if inputs.fmt == "float64":
        notes.append("The inputs are float64: their products are rounded to float64 before summing, so the "
                     "reference is not exact.")
    n_cols = inputs.b.shape[1] if inputs.kind == "matmul" else 1
    terms = inputs.terms(elements, n_cols)
    results = _sum_orders(terms, acc, fused)
    f = FORMATS[fmt]
    if f.precision < FORMATS[acc].precision:
        results = round_precision(results, f.precision, f.emin, float(f.max_finite))
    reference = np.array([math.fsum(row) for row in terms])
    reduced = {}
    for key in reduced_keys:
        p = REDUCED_FORMATS[key]
        # the input rounding dominates: fused or not hardly matters, and the plain sum is fast
        r = _one_order(inputs.rounded_terms(elements, n_cols, key), False)
        if p.rounds_output:
            r = round_to(r, key)
        if f.precision < 24:
            r = round_precision(r, f.precision, f.emin, float(f.max_finite))
        reduced[key] = r
    flat_a, flat_e = a.reshape(-1)[elements], e.reshape(-1)[elements]
    unit = ulp_array(flat_e, f)
    with np.errstate(invalid="ignore", over="ignore"):
        return Simulation(
            kind=inputs.kind,
            k=inputs.k,
            elements=elements,
            orders=sim_orders(),
            results=results,
            reference=reference,
            reduced=reduced,
            user_diff=np.abs(flat_a - flat_e),
            unit=unit,
            actual_err=np.abs(flat_a - reference),
            expected_err=np.abs(flat_e - reference),
            notes=tuple(notes),
        )
