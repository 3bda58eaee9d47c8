"""Which result is closer to the truth: both results judged against a reference, never one against the other.

Two results that differ are two approximations; neither is the reference because of the device it ran
on (a GPU's tree sum is often closer to the exact sum than a CPU's left-to-right loop). When a
reference exists, both are judged against it:

* **given**: the visitor's reference, e.g. the same computation in float64, element by element;
* **exact**: computed from the inputs, the exact sum of each element's terms (``core.arith.exact``:
  exact sums and dot products as Fractions), on every element or, beyond ``REF_ELEMENTS`` elements
  or ``REF_TERMS`` terms, on a sample (the largest differences and a seeded draw of the rest, as the
  simulation samples).

Each side's error |x - R| is counted in ULPs of the reference R in the format the computation ran
in (F), exactly (Fractions) against an exact reference. Its bound is the a-priori bound of one K-term
sum in any order accumulated in A (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed.,
Lemma 3.4 / eq. 3.4: gamma_K sum|t| plus K smallest subnormals of A), plus half an ULP of F where F is
narrower than A (the result's last rounding), plus the reference's own error: half a float64 ULP for
the exact result rounded once, gamma_K sum|t| in its own format for a given one. sum|t| comes from
the inputs when they are given (a rigorous bound), else it is estimated as sqrt(K) * scale
(core.diagnose.envelopes). An error beyond the bound is more than any summation order explains.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from core.arith.exact import exact_dot_fraction, exact_sum_fraction
from core.arith.formats import FLOAT64, FORMATS, FloatFormat
from core.arith.metrics import gamma, ulps_count
from core.arith.ulps import in_ulps, ulp, ulp_array
from core.diagnose.inputs import Inputs
from core.diagnose.results import Accuracy, SideError
from core.diagnose.simulate import sample_elements

REF_ELEMENTS = 512  # elements whose exact result is computed at most
REF_TERMS = 2**22  # judged elements x K, at most


def exact_results(ops: Inputs, flat: np.ndarray, n_cols: int) -> list:
    """The exact result (a Fraction, or an IEEE nan / inf) of each output with these flat indices.

    The operands are read back in float32 (which holds float16 and bfloat16 values exactly) or
    float64: the float64 copies in ``ops`` hold their values exactly."""
    dt = np.float64 if ops.fmt == "float64" else np.float32
    if ops.kind == "sum":
        return [exact_sum_fraction(ops.a[int(i)].astype(dt)) for i in flat]
    rows, cols = flat // n_cols, flat % n_cols
    return [exact_dot_fraction(ops.a[int(r)].astype(dt), ops.b[:, int(c)].astype(dt))
            for r, c in zip(rows, cols, strict=True)]


def exact_errors_ulps(x: np.ndarray, exact: list, fmt: FloatFormat) -> np.ndarray:
    """|x_i - exact_i| in ULPs of exact_i in ``fmt``, computed in Fractions (nan where either is not finite)."""
    out = np.full(len(exact), math.nan)
    for i, (v, r) in enumerate(zip(x.tolist(), exact, strict=True)):
        if isinstance(r, float) or not math.isfinite(v):
            continue
        out[i] = float(abs(Fraction(v) - r) / ulp(r, fmt))
    return out


def one_order_bound(k: int, sum_abs, fmt: FloatFormat, acc: FloatFormat, reference: np.ndarray) -> np.ndarray:
    """The largest error of one K-term sum in any order accumulated in ``acc`` and returned in ``fmt``
    (absolute, per element): gamma_K sum|t| + K minsub_acc, plus half an ULP of ``fmt`` where it is narrower."""
    b = gamma(k, float(acc.unit_roundoff), math.inf) * sum_abs + k * float(acc.min_subnormal)
    if fmt.precision < acc.precision:
        b = b + 0.5 * ulp_array(reference, fmt)
    return b


def _side(name: str, err: np.ndarray, bound: np.ndarray) -> SideError:
    ok = np.isfinite(err)
    if not ok.any():
        return SideError(name=name, median_ulps=math.nan, max_ulps=math.nan, beyond_bound=0, worst_ratio=math.nan)
    e, b = err[ok], bound[ok]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(b > 0, e / np.where(b > 0, b, 1.0), np.where(e > 0, np.inf, 0.0))
    return SideError(name=name, median_ulps=float(np.median(e)), max_ulps=float(np.max(e)),
                     beyond_bound=int(np.sum(e > b)), worst_ratio=float(np.max(ratio)))


def _sentence(source: str, ref_fmt: str, n: int, sampled: bool, a: SideError, b: SideError, a_closer: int,
              b_closer: int, ties: int, bound: np.ndarray, k: int, acc: str, rigorous: bool) -> str:
    ref = ("the exact result of the inputs" if source == "exact" else f"your {ref_fmt} reference")
    where = f"on {n:,} sampled elements" if sampled else ("on the one element" if n == 1 else f"on all {n:,} elements")
    if n == 1:
        head = (f"Neither result is the reference. Against {ref}: result A is off by {ulps_count(a.max_ulps)}, "
                f"result B by {ulps_count(b.max_ulps)}.")
    else:
        head = (f"Neither result is the reference. Against {ref}, {where}: result A is off by at most "
                f"{ulps_count(a.max_ulps)} (median {a.median_ulps:,.3g}), result B by at most {ulps_count(b.max_ulps)} "
                f"(median {b.median_ulps:,.3g}).")
    if n == 1:
        closer = (" They are equally close." if ties else
                  f" Result {'A' if a_closer else 'B'} is the closer one.")
    else:
        closer = f" B is the closer one at {b_closer:,} element(s), A at {a_closer:,}; {ties:,} tied."
    fin = bound[np.isfinite(bound)]
    bmax = float(np.max(fin)) if fin.size else math.inf
    kind = "" if rigorous else " (estimated: no inputs given)"
    over = [s for s in (a, b) if s.beyond_bound]
    if not over:
        tail = (f" Both are within the bound of any order of {k:,}-term sums in {acc}{kind}, at most "
                f"{ulps_count(bmax)} here.")
    else:
        tail = " " + " ".join(f"{s.name[0].upper() + s.name[1:]} exceeds the bound of any order of {k:,}-term sums "
                              f"in {acc}{kind} at {s.beyond_bound:,} element(s), up to {s.worst_ratio:,.3g} times it: "
                              "more error than any summation order explains." for s in over)
    return head + closer + tail


def _headline(source: str, n: int, sampled: bool, a: SideError, b: SideError, a_closer: int, b_closer: int) -> str:
    """The comparison in one short line, for the page's first screen: medians first (the largest errors sit
    where a sum cancels to near zero, whose ULP is tiny), then the largest."""
    ref = "the exact result" if source == "exact" else "your reference"
    of = f" of {n:,} sampled elements" if sampled else (f" of {n:,} elements" if n > 1 else "")
    if a_closer > b_closer:
        closer = f"A is closer at {a_closer:,}{of}" if n > 1 else "A is closer"
    elif b_closer > a_closer:
        closer = f"B is closer at {b_closer:,}{of}" if n > 1 else "B is closer"
    else:
        closer = "neither is closer more often"
    if n == 1:
        return (f"Neither result is the reference. Against {ref}: A is off by {ulps_count(a.max_ulps)}, B by "
                f"{ulps_count(b.max_ulps)}; {closer}.")
    return (f"Neither result is the reference. Against {ref}: A is off by a median {ulps_count(a.median_ulps)} (up to "
            f"{a.max_ulps:,.3g}), B by {ulps_count(b.median_ulps)} (up to {b.max_ulps:,.3g}); {closer}.")


def judge(af: np.ndarray, bf: np.ndarray, elements: np.ndarray, reference: np.ndarray, err_a: np.ndarray,
          err_b: np.ndarray, bound_abs: np.ndarray, *, source: str, ref_fmt: str, fmt: FloatFormat, acc: FloatFormat,
          k: int, rigorous: bool, sampled: bool, notes: tuple[str, ...] = ()) -> Accuracy:
    """The Accuracy of both sides from their errors (ULPs of the reference) and the bound (absolute)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = bound_abs / ulp_array(reference, fmt)
    a, b = _side("result A", err_a, bound), _side("result B", err_b, bound)
    both = np.isfinite(err_a) & np.isfinite(err_b)
    a_closer = int(np.sum(both & (err_a < err_b)))
    b_closer = int(np.sum(both & (err_b < err_a)))
    ties = int(np.sum(both & (err_a == err_b)))
    sentence = _sentence(source, ref_fmt, int(elements.size), sampled, a, b, a_closer, b_closer, ties, bound, k,
                         acc.name, rigorous)
    headline = _headline(source, int(elements.size), sampled, a, b, a_closer, b_closer)
    return Accuracy(source=source, ref_fmt=ref_fmt, fmt=fmt.name, elements=elements, reference=reference,
                    err_a=err_a, err_b=err_b, bound=bound, bound_rigorous=rigorous, side_a=a, side_b=b,
                    a_closer=a_closer, b_closer=b_closer, ties=ties, sampled=sampled, sentence=sentence,
                    headline=headline,
                    notes=notes)


def against_exact(ops: Inputs, af: np.ndarray, bf: np.ndarray, score: np.ndarray, fin: np.ndarray, *,
                  fmt: FloatFormat, acc: FloatFormat, sum_abs) -> Accuracy | None:
    """Both results against the exact results of their inputs (see the module docstring)."""
    cand = np.flatnonzero(fin)
    if not cand.size:
        return None
    k = ops.k
    budget = max(1, min(REF_ELEMENTS, REF_TERMS // max(k, 1)))
    elements = sample_elements(score, cand, budget)
    n_cols = ops.b.shape[1] if ops.kind == "matmul" else 1
    exact = exact_results(ops, elements, n_cols)
    keep = np.array([not isinstance(r, float) for r in exact], dtype=bool)
    if not keep.any():
        return None
    elements = elements[keep]
    exact = [r for r, ok in zip(exact, keep, strict=True) if ok]
    reference = np.array([float(r) for r in exact])
    s = np.broadcast_to(np.asarray(sum_abs, dtype=np.float64), fin.shape)[elements]
    bound = one_order_bound(k, s, fmt, acc, reference) + 0.5 * ulp_array(reference, FLOAT64)
    notes = []
    if ops.fmt == "float64":
        notes.append("The inputs are float64: their products are exact here (Fractions), so the reference is exact.")
    return judge(af, bf, elements, reference, exact_errors_ulps(af[elements], exact, fmt),
                 exact_errors_ulps(bf[elements], exact, fmt), bound, source="exact", ref_fmt="exact", fmt=fmt,
                 acc=acc, k=k, rigorous=True, sampled=elements.size < cand.size, notes=tuple(notes))


def against_given(ref: np.ndarray, ref_fmt: str, af: np.ndarray, bf: np.ndarray, fin: np.ndarray, *,
                  fmt: FloatFormat, acc: FloatFormat, k: int, sum_abs, rigorous: bool) -> Accuracy | None:
    """Both results against a reference the visitor gave, element by element (float64 arithmetic)."""
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    ok = fin & np.isfinite(r)
    elements = np.flatnonzero(ok)
    if not elements.size:
        return None
    rf = r[elements]
    with np.errstate(over="ignore", invalid="ignore"):
        err_a = in_ulps(np.abs(af[elements] - rf), rf, fmt)
        err_b = in_ulps(np.abs(bf[elements] - rf), rf, fmt)
    rfmt = FORMATS[ref_fmt]
    s = np.broadcast_to(np.asarray(sum_abs, dtype=np.float64), fin.shape)[elements]
    bound = one_order_bound(k, s, fmt, acc, rf) + gamma(k, float(rfmt.unit_roundoff), math.inf) * s \
        + k * float(rfmt.min_subnormal)
    notes = []
    if rfmt.precision <= fmt.precision:
        notes.append(f"The reference is {ref_fmt}, no wider than the {fmt.name} results: it is a third result, not a "
                     "judge. A reference computed in float64 tells which side is more accurate.")
    if elements.size < fin.size:
        notes.append(f"{fin.size - elements.size:,} element(s) where a result or the reference is not finite are left "
                     "out.")
    return judge(af, bf, elements, rf, err_a, err_b, bound, source="given", ref_fmt=ref_fmt, fmt=fmt, acc=acc, k=k,
                 rigorous=rigorous, sampled=False, notes=tuple(notes))
