"""The two results of a diagnosis, checked and measured element by element.

``check_case`` checks the arguments of ``core.diagnose.verdict.diagnose`` (shapes, size, formats, the
inputs, K and which reduced-precision explanations to try) into a ``Case``; ``Differences`` holds every
element's absolute, relative and ULP difference and which NaNs and infinities fail to match; ``scale_of``
is the scale each difference is measured against (from the inputs where they are given, else estimated:
core.diagnose.envelopes derives both).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.arith.formats import FORMATS, FloatFormat
from core.arith.ulps import in_ulps
from core.diagnose.envelopes import Scale, median_floor
from core.diagnose.inputs import Inputs, prepare_inputs
from core.diagnose.rounding import accumulation_format, as_float_array, narrower, reduced_candidates

ASSUMED_K = 65_536  # reduction length assumed when neither K nor the inputs are given
MAX_ELEMENTS = 1_000_000  # per compared array
REDUCED_PRECISION_CHOICES = ("any", "none", "float32", "tf32", "float16", "bfloat16")


def _check_k(reduction_length, inputs: Inputs | None) -> tuple[int, str]:
    if reduction_length is not None:
        if isinstance(reduction_length, bool) or not isinstance(reduction_length, int | np.integer) \
                or reduction_length < 1:
            raise ValueError(f"reduction_length must be a whole number of at least 1 (got {reduction_length!r})")
        k = int(reduction_length)
        if inputs is not None and inputs.k != k:
            raise ValueError(f"reduction_length = {k:,}, but the inputs sum {inputs.k:,} terms per element")
        return k, "given"
    if inputs is not None:
        return inputs.k, "inputs"
    return ASSUMED_K, "assumed"


def _reduced_keys(fmt: str, reduced_precision: str | None) -> tuple[str, ...]:
    choice = "none" if reduced_precision is None else reduced_precision
    if choice not in REDUCED_PRECISION_CHOICES:
        raise ValueError(f"reduced_precision must be one of {', '.join(REDUCED_PRECISION_CHOICES)}")
    if choice == "none":
        return ()
    cands = reduced_candidates(fmt)
    return cands if choice == "any" else tuple(c for c in cands if c == choice) or (choice,)


@dataclass(frozen=True, kw_only=True)
class Case:
    """The checked arguments: the two arrays, the formats, the inputs, K and the explanations to try."""

    a: np.ndarray
    e: np.ndarray
    fa: str  # actual's own format
    fe: str
    fmt_name: str  # the format the computation ran in
    fmt: FloatFormat
    acc_name: str  # the format it accumulated in
    acc: FloatFormat
    ops: Inputs | None
    k: int
    k_source: str  # "given", "inputs" or "assumed"
    keys: tuple[str, ...]  # the reduced-precision explanations to try
    notes: tuple[str, ...]


def check_case(actual, expected, reduction_length, dtype, reduced_precision, inputs) -> Case:
    """The arguments of ``diagnose`` checked (a ValueError or TypeError says what is wrong), with the notes
    they call for."""
    a, fa = as_float_array(actual, "result A")
    e, fe = as_float_array(expected, "result B")
    if a.shape != e.shape:
        raise ValueError(f"result A has shape {a.shape} but result B has shape {e.shape}")
    if a.size == 0:
        raise ValueError("the arrays are empty")
    if a.size > MAX_ELEMENTS:
        raise ValueError(f"the arrays hold {a.size:,} elements; at most {MAX_ELEMENTS:,} are diagnosed")
    fmt_name = dtype if dtype is not None else narrower(fa, fe)
    if fmt_name not in FORMATS:
        raise ValueError(f"unknown format {fmt_name!r}; choose one of {', '.join(FORMATS)}")
    acc_name = accumulation_format(fmt_name)
    ops = inputs if isinstance(inputs, Inputs) or inputs is None else prepare_inputs(inputs, a.shape)
    if ops is not None and ops.a.shape[0] * (ops.b.shape[1] if ops.b is not None else 1) != a.size:
        raise ValueError("the prepared inputs do not match the compared results")
    k, k_source = _check_k(reduction_length, ops)
    keys = _reduced_keys(fmt_name, reduced_precision)
    notes = []
    if fa != fe:
        notes.append(f"Result A is {fa} and result B is {fe}: differences are measured in {fmt_name}.")
    if k_source == "assumed":
        notes.append(f"K (terms per sum) is unknown: the envelopes assume K = {ASSUMED_K:,}. Give K (or the "
                     "inputs) for a sharper envelope.")
    return Case(a=a, e=e, fa=fa, fe=fe, fmt_name=fmt_name, fmt=FORMATS[fmt_name], acc_name=acc_name,
                 acc=FORMATS[acc_name], ops=ops, k=k, k_source=k_source, keys=keys, notes=tuple(notes))


@dataclass(frozen=True, kw_only=True)
class Differences:
    """Element by element (flattened), how the two results differ: where both are finite, the
    absolute, relative and ULP differences (ULPs of expected's value in the format that ran); where
    not, which NaNs and infinities fail to match."""

    af: np.ndarray
    ef: np.ndarray
    fin: np.ndarray  # both finite
    both_nan: np.ndarray
    nan_mismatch: np.ndarray  # NaN in one only
    inf_mismatch: np.ndarray  # an infinity against something else
    same_inf: np.ndarray  # the same infinity in both
    nonfinite: np.ndarray  # flat indices of the mismatches
    d: np.ndarray  # |actual - expected| (NaN where not both finite)
    rel: np.ndarray
    ulps: np.ndarray
    differ: np.ndarray  # both finite and unequal
    n_signed_zero: int  # +0 against -0

    @classmethod
    def of(cls, a: np.ndarray, e: np.ndarray, fmt: FloatFormat) -> Differences:
        af, ef = a.reshape(-1), e.reshape(-1)
        fin = np.isfinite(af) & np.isfinite(ef)
        both_nan = np.isnan(af) & np.isnan(ef)
        nan_mismatch = np.isnan(af) != np.isnan(ef)
        with np.errstate(invalid="ignore"):
            same_inf = ~fin & ~both_nan & (af == ef)
        inf_mismatch = ~fin & ~both_nan & ~same_inf & ~nan_mismatch
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            d = np.where(fin, np.abs(af - ef), np.nan)
            rel = np.where(fin, np.where(ef != 0, d / np.abs(ef), np.where(d > 0, np.inf, 0.0)), np.nan)
            ulps = np.where(fin, in_ulps(d, np.where(fin, ef, 0.0), fmt), np.nan)
        return cls(af=af, ef=ef, fin=fin, both_nan=both_nan, nan_mismatch=nan_mismatch, inf_mismatch=inf_mismatch,
                   same_inf=same_inf, nonfinite=np.flatnonzero(nan_mismatch | inf_mismatch), d=d, rel=rel, ulps=ulps,
                   differ=fin & (d > 0),
                   n_signed_zero=int(np.sum(fin & (af == 0) & (ef == 0) & (np.signbit(af) != np.signbit(ef)))))


def scale_of(case: Case, diffs: Differences, notes: list[str]) -> Scale:
    """The scale of each element: rigorous from the inputs where given (``notes`` says where some are not
    finite), else estimated."""
    ops, k, fin = case.ops, case.k, diffs.fin
    m = np.where(fin, np.maximum(np.abs(diffs.af), np.abs(diffs.ef)), 0.0)
    floor = median_floor(case.e, fin.reshape(case.a.shape)).reshape(-1)
    if ops is None:
        s = np.maximum(m, floor)
        return Scale(m=m, s=s, sum_abs=math.sqrt(k) * s, rows_abs=None, rigorous=False)
    with np.errstate(over="ignore", invalid="ignore"):
        if ops.kind == "matmul":
            sum_abs = (np.abs(ops.a) @ np.abs(ops.b)).reshape(-1)
            sq = np.sqrt((ops.a * ops.a) @ (ops.b * ops.b)).reshape(-1)
            rows_abs = (np.abs(ops.a).sum(1)[:, None] + np.abs(ops.b).sum(0)[None, :]).reshape(-1)
        else:
            sum_abs = np.abs(ops.a).sum(1)
            sq = np.sqrt((ops.a * ops.a).sum(1))
            rows_abs = sum_abs
    sum_abs = sum_abs * (1 + 4 * k * 2.0**-53)
    good = np.isfinite(sum_abs) & np.isfinite(sq)
    if not good.all():
        notes.append("Some inputs are not finite or too large to square: those elements use the estimated scale.")
    s = np.maximum(m, np.where(good, sq, floor))
    return Scale(m=m, s=s, sum_abs=np.where(good, sum_abs, math.sqrt(k) * s), rows_abs=rows_abs, rigorous=True)
