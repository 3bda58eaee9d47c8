"""Is my mismatch normal? Diagnose the difference between two results of one computation.

``diagnose(actual, expected)`` takes two arrays of one shape (NumPy arrays or torch tensors,
float16 / bfloat16 / float32 / float64), measures every element's difference, and decides
which explanation covers it, the smallest first. The words call them result A and result B:
neither is the reference (the second only sets the unit of a difference, ULPs of its value, and
the ``expected`` of torch's assert_close). Where a reference exists (given, or the exact result of
the inputs) core.diagnose.accuracy judges both against it.

``"identical"``          every element has the same value;
``"reordering"``         the differences fit the same sums added in another order (another
                         kernel, thread count, batch size or device) in the format that ran;
``"reduced_precision"``  too large for that, but they fit one side having rounded its inputs
                         to TF32, float16 or bfloat16 (float32 when the result is float64)
                         and accumulated in float32;
``"too_large"``          no rounding explanation covers them, or a few elements are far off
                         while the rest agree, or NaN/Inf appear in one result only.

The arguments are checked and every element's difference measured in core.diagnose.measure. The
notation and the derivations of the envelopes, the scale and the pattern check are in
core.diagnose.envelopes; the simulation of the inputs' own orders in core.diagnose.simulate; the
recommended tolerances in core.diagnose.tolerances; both sides against a reference in
core.diagnose.accuracy. This module decides the verdict from them and
words it: the sentence, the reasons and the worst elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from core.arith.metrics import ulps_count
from core.diagnose.accuracy import against_exact, against_given
from core.diagnose.envelopes import (
    Elements,
    Scale,
    envelope_tolerances,
    pattern_check,
    reduced_envelope,
    reordering_envelope,
)
from core.diagnose.measure import Case, Differences, check_case, scale_of
from core.diagnose.results import (
    BULK_SHARE,
    REORDERING_ENVELOPE,
    Diagnosis,
    Distribution,
    EnvelopeCheck,
    Simulation,
    Verdict,
    WorstElement,
)
from core.diagnose.rounding import REDUCED_FORMATS, as_float_array, narrower
from core.diagnose.simulate import SIM_ELEMENTS, SIM_TERMS, inputs_fit, sample_elements, simulate
from core.diagnose.tolerances import (
    ALLCLOSE_DEFAULT,
    ASSERT_CLOSE_DEFAULTS,
    MARGIN,
    allclose_report,
    covering_tolerances,
    format_tol,
    nice_up,
)

VERDICTS = tuple(Verdict)
# The deterministic-algorithms switch, as PyTorch documents it
DETERMINISTIC_DOCS = "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"
RANDOMNESS_DOCS = "https://pytorch.org/docs/stable/notes/randomness.html"
# how each verdict's one-sentence summary begins
VERDICT_HEADS = {Verdict.IDENTICAL: "Identical", Verdict.REORDERING: "Normal rounding noise",
                 Verdict.REDUCED_PRECISION: "Explained by reduced precision",
                 Verdict.TOO_LARGE: "Too large for rounding"}


NEXT_CHECKS = (
    "Same inputs? Hash the inputs of both runs (and the weights) just before the operation; a difference there "
    "is not the operation's fault.",
    "Randomness: dropout, data augmentation, random initialisation or sampling without a shared seed. torch's CPU "
    "and CUDA generators are different algorithms, so one seed gives different numbers on each (PyTorch's "
    f"reproducibility notes, {RANDOMNESS_DOCS}): draw on the CPU, then move the tensor, to compare like with like.",
    "Nondeterministic operations: on GPUs some ops add with atomics in an order that changes from run to run "
    "(index_add_, scatter_add_, the backward passes of some others). torch.use_deterministic_algorithms(True) "
    "switches an op to a deterministic implementation where one exists (index_add_ and scatter_add_ on CUDA among "
    f"them) and raises a RuntimeError only where none exists ({DETERMINISTIC_DOCS}). PyTorch 2.9 and older also "
    "refuse CUDA matrix products in that mode unless CUBLAS_WORKSPACE_CONFIG is :4096:8 or :16:8; from 2.10 the "
    "variable is no longer required (pytorch/pytorch pull request 161749).",
    "Uninitialised memory: torch.empty / empty_like / new_empty read before every element is written gives "
    "different garbage (sometimes NaN) from run to run.",
    "A real bug: a wrong axis, an off-by-one slice, an unintended broadcast, a missing mask, a stale buffer.",
)


def diagnose(actual, expected, *, reduction_length: int | None = None, dtype: str | None = None,
             reduced_precision: str | None = "any", inputs=None, simulate_orders: bool = True,
             reference=None) -> Diagnosis:
    """Diagnose the difference between two results of the same computation.

    ``reduction_length``: K, the number of terms summed into each element (the inner
    dimension of a matrix product, the length of the summed axis), when known; ``dtype``:
    the format the computation ran in (default: the arrays' own, the narrower of the two);
    ``reduced_precision``: which reduced-precision explanations to consider ("any", "none",
    or one of "float32", "tf32", "float16", "bfloat16"); ``inputs``: the operands, ``(a, b)``
    of ``a @ b`` or one array whose last axis was summed (or an ``Inputs`` from
    ``prepare_inputs``), for rigorous bounds, the simulation and the exact reference;
    ``reference``: an array of the results' shape (e.g. the computation in float64) to judge both
    against (without it, the exact result of the inputs is the reference when they are given).
    Raises TypeError / ValueError for inputs it cannot diagnose.

    The steps: check the arguments (core.diagnose.measure's ``check_case``), measure every element's
    difference (``Differences``), the scale each is measured against (``scale_of``), simulate the
    inputs' own orders, check each envelope, decide (``_decide``), then the tolerances that pass.
    """
    case = check_case(actual, expected, reduction_length, dtype, reduced_precision, inputs)
    diffs = Differences.of(case.a, case.e, case.fmt)
    notes = list(case.notes)
    scale = scale_of(case, diffs, notes)
    sim = _simulation(case, diffs, scale, notes) if simulate_orders else None
    d, fin, k = diffs.d, diffs.fin, case.k
    elements = Elements(d=d, fin=fin, scale=scale, k=k, fmt=case.fmt, acc=case.acc)
    envs = [reordering_envelope(elements, sim)]
    envs += [reduced_envelope(key, elements, case.ops, sim) for key in case.keys]
    pattern = pattern_check(d, fin, scale.s, case.fmt)
    verdict, explanation, reasons = _decide(case, diffs, envs, pattern)
    if sim is not None:
        reasons += _simulation_reasons(sim, envs, verdict, explanation)
    tol = _tolerances(case, diffs, verdict, explanation, envs)
    accuracy = _accuracy(case, diffs, scale, reference)
    shape = case.a.shape
    return Diagnosis(
        verdict=verdict, sentence=_sentence(verdict, explanation, case, diffs, tol.rtol, tol.atol, pattern),
        reasons=tuple(reasons), explanation=explanation, rtol=tol.rtol, atol=tol.atol,
        equal_nan=bool(diffs.both_nan.any()), check_dtype=case.fa == case.fe, margin=tol.margin,
        envelope_rtol=tol.envelope_rtol, envelope_atol=tol.envelope_atol, shape=tuple(shape), size=int(case.a.size),
        fmt=case.fmt_name, acc_fmt=case.acc_name, actual_fmt=case.fa, expected_fmt=case.fe, k=k,
        k_source=case.k_source, abs_diff=d, rel_diff=diffs.rel, ulp_diff=diffs.ulps, scale=scale.s,
        abs_stats=Distribution.of(d), rel_stats=Distribution.of(diffs.rel), ulp_stats=Distribution.of(diffs.ulps),
        n_compared=int(fin.sum()), n_differ=int(diffs.differ.sum()), n_signed_zero=diffs.n_signed_zero,
        n_both_nan=int(diffs.both_nan.sum()), nan_mismatch=int(diffs.nan_mismatch.sum()),
        inf_mismatch=int(diffs.inf_mismatch.sum()), nonfinite_index=diffs.nonfinite, envelopes=tuple(envs),
        pattern=pattern, simulation=sim, allclose=tol.allclose, assert_close_defaults=tol.assert_close_defaults,
        worst=_worst(diffs, envs, shape), next_checks=NEXT_CHECKS if verdict == Verdict.TOO_LARGE else (),
        notes=tuple(notes), rel_typical_max=typical_rel_max(diffs), accuracy=accuracy,
    )


def _accuracy(case: Case, diffs: Differences, scale: Scale, reference):
    """Both results against the given reference, else against the exact result of the inputs, else None."""
    if reference is not None:
        r, fr = as_float_array(reference, "the reference")
        if r.size != case.a.size:
            raise ValueError(f"the reference has shape {r.shape} but the results have shape {case.a.shape}")
        return against_given(r, fr, diffs.af, diffs.ef, diffs.fin, fmt=case.fmt, acc=case.acc, k=case.k,
                             sum_abs=scale.sum_abs, rigorous=scale.rigorous)
    if case.ops is None:
        return None
    score = np.where(diffs.fin, diffs.d / np.maximum(scale.s, np.finfo(float).tiny), 0.0)
    return against_exact(case.ops, diffs.af, diffs.ef, score, diffs.fin, fmt=case.fmt, acc=case.acc,
                         sum_abs=scale.sum_abs)


def _simulation(case: Case, diffs: Differences, scale: Scale, notes: list[str]) -> Simulation | None:
    """The inputs' own summation orders on a sample of the elements that differ most (inputs only)."""
    ops, k, fin = case.ops, case.k, diffs.fin
    if ops is None:
        return None
    cand = np.flatnonzero(fin)
    if not cand.size:
        return None
    budget = max(1, min(SIM_ELEMENTS, SIM_TERMS // max(k, 1)))
    score = np.where(fin, diffs.d / np.maximum(scale.s, np.finfo(float).tiny), 0.0)
    sim = simulate(ops, diffs.af, diffs.ef, case.fmt_name, sample_elements(score, cand, budget),
                   tuple(kk for kk in case.keys if inputs_fit(ops, kk)))
    notes += list(sim.notes)
    return sim


def _decide(case: Case, diffs: Differences, envs: list[EnvelopeCheck],
            pattern) -> tuple[Verdict, str | None, list[str]]:
    """(verdict, the reduced format that explains it or None, the reasons in words), smallest explanation first."""
    reasons: list[str] = []
    explanation = None
    reorder = envs[0]
    fmt, fmt_name, acc_name, k = case.fmt, case.fmt_name, case.acc_name, case.k
    af, ef, nonfinite = diffs.af, diffs.ef, diffs.nonfinite
    if nonfinite.size:
        verdict = Verdict.TOO_LARGE
        reasons.append(f"NaN or infinity in one result but not the other at {nonfinite.size:,} element(s) "
                       f"({int(diffs.nan_mismatch.sum()):,} NaN, {int(diffs.inf_mismatch.sum()):,} infinite): rounding "
                       "reaches infinity or NaN only through an overflow (to inf, then inf − inf or 0 × inf), "
                       "and no tolerance accepts NaN or inf against a finite number.")
        inf_mismatch = diffs.inf_mismatch
        near = np.abs(np.where(np.isfinite(af), af, ef)[inf_mismatch]) if inf_mismatch.any() else np.array([])
        if near.size and np.any(near > float(fmt.max_finite) / 2):
            reasons.append(f"The finite side is within a factor of 2 of {fmt_name}'s largest value: one run may have "
                           "overflowed where the other just did not (an order-dependent overflow).")
    elif not diffs.differ.any():
        verdict = Verdict.IDENTICAL
        reasons.append(f"All {case.a.size:,} elements have equal values.")
        if diffs.n_signed_zero:
            reasons.append(f"{diffs.n_signed_zero:,} of them are +0 against -0: equal as numbers, different in the "
                           "sign bit.")
        if diffs.both_nan.any():
            reasons.append(f"{int(diffs.both_nan.sum()):,} element(s) are NaN in both.")
    elif pattern.localized:
        verdict = Verdict.TOO_LARGE
        reasons.append(
            f"{pattern.outliers.size:,} element(s) are far off (up to {ulps_count(pattern.worst)} of their scale) "
            f"while the rest agree to {ulps_count(pattern.level)} or better: rounding spreads over all elements, so "
            "isolated large differences are not rounding, whatever their size. (Only if just those elements were "
            "computed by another kernel, an edge tile say, could they be; their positions are listed below.)")
    elif reorder.fits:
        verdict = Verdict.REORDERING
        reasons.append(_fit_reason(reorder, k, acc_name))
    else:
        fitting = next((env for env in envs[1:] if env.fits), None)
        reasons.append(f"{reorder.exceed:,} element(s) exceed the reordering envelope (up to "
                       f"{reorder.worst_ratio:,.3g} times it): another summation order in {acc_name} does not "
                       "explain them.")
        if fitting is not None:
            verdict, explanation = Verdict.REDUCED_PRECISION, fitting.key
            reasons.append(_fit_reason(fitting, k, acc_name))
            reasons.append("If neither side can have used reduced precision (TF32, autocast, .half(), "
                           "torch.set_float32_matmul_precision), treat this as too large.")
        else:
            verdict = Verdict.TOO_LARGE
            reasons += _unexplained_reasons(envs[1:])
    if pattern.applicable and verdict in (Verdict.REORDERING, Verdict.REDUCED_PRECISION):
        reasons.append(f"The pattern check found no isolated outliers (the largest difference is "
                       f"{ulps_count(pattern.worst)} of its scale; the other 99 % reach {pattern.level:,.3g}).")
    return verdict, explanation, reasons


def _unexplained_reasons(reduced: list[EnvelopeCheck]) -> list[str]:
    """Why no reduced-precision envelope explains the differences, one envelope at a time."""
    out = []
    for env in reduced:
        if env.exceed:
            out.append(f"{env.name}: {env.exceed:,} element(s) exceed its envelope (up to "
                       f"{env.worst_ratio:,.3g} times it).")
        else:
            out.append(f"{env.name}: every element is inside its envelope, but such inputs would move "
                       f"most elements by about its typical size, and the median element differs by only "
                       f"{env.bulk_ratio:.2g} of it (at least {BULK_SHARE:.3g} needed): the large "
                       "differences are confined to some elements.")
    if not reduced:
        out.append("Reduced precision was ruled out.")
    return out


@dataclass(frozen=True, kw_only=True)
class _Tolerances:
    """The tolerances that pass (None for a verdict of too_large), and what allclose says at its defaults."""

    rtol: float | None
    atol: float | None
    margin: float | None  # how far inside rtol/atol the closest element lies
    envelope_rtol: float | None
    envelope_atol: float | None
    allclose: object
    assert_close_defaults: object


def _tolerances(case: Case, diffs: Differences, verdict: Verdict, explanation: str | None,
                envs: list[EnvelopeCheck]) -> _Tolerances:
    fin, ef = diffs.fin, diffs.ef
    df, efin = diffs.d[fin], ef[fin]
    rtol = atol = margin = env_rtol = env_atol = None
    if verdict != Verdict.TOO_LARGE:
        rtol0, atol0 = covering_tolerances(df, efin)
        if verdict != Verdict.IDENTICAL:  # another order can always move the last bit: at least one ULP, relatively
            rtol0 = max(rtol0, 2.0 ** (1 - case.fmt.precision))
        rtol, atol = nice_up(MARGIN * rtol0), nice_up(MARGIN * atol0)
        with np.errstate(divide="ignore", invalid="ignore"):
            lim = atol + rtol * np.abs(efin)
            margin = float(np.min(np.where(df > 0, lim / df, np.inf))) if df.size else math.inf
        chosen = envs[0] if verdict in (Verdict.IDENTICAL, Verdict.REORDERING) \
            else next(x for x in envs if x.key == explanation)
        env_rtol, env_atol = envelope_tolerances(chosen, fin, ef)
    c = float(np.median(np.abs(efin))) if efin.size else 0.0
    nan_any = np.isnan(diffs.af) | np.isnan(ef)
    d_all = np.where(fin, diffs.d, np.where(nan_any | ~(diffs.same_inf | fin), np.inf, 0.0))
    ef_finite = np.where(np.isfinite(ef), ef, 0.0)
    shape = case.a.shape
    return _Tolerances(
        rtol=rtol, atol=atol, margin=margin, envelope_rtol=env_rtol, envelope_atol=env_atol,
        allclose=allclose_report(d_all, ef_finite, nan_any, *ALLCLOSE_DEFAULT, shape, c * 1e-2),
        assert_close_defaults=allclose_report(d_all, ef_finite, nan_any, *ASSERT_CLOSE_DEFAULTS[narrower(case.fa,
                                                                                                       case.fe)],
                                              shape, c * 1e-2))


# -------------------------------------------------------------------------- the words


def _fit_reason(env: EnvelopeCheck, k: int, acc: str) -> str:
    kind = "rigorous a-priori bound (from the inputs)" if env.bound_rigorous else "estimated a-priori bound"
    return (f"Every element is within the envelope of {env.name[0].lower() + env.name[1:]} "
            f"(the largest difference uses {env.worst_ratio:.2g} of it): min({kind}, {env.factor:g} × typical), "
            f"with typical = " + ("u·√K·scale" if env.key == REORDERING_ENVELOPE else "(u_in + u_32·√K)·scale")
            + f" for K = {k:,}.")


def _simulation_reasons(sim: Simulation, envs, verdict, explanation) -> list[str]:
    out = []
    n = sim.elements.size
    p = sim.pair_diffs_ulps
    umax = float(np.max(sim.user_ulps)) if n else 0.0
    pmax = float(np.max(p)) if p.size else 0.0
    out.append(f"Simulation: {len(sim.orders)} summation orders of the inputs on {n:,} sampled element(s) differ "
               f"from each other by up to {ulps_count(pmax)}; your differences there reach {ulps_count(umax)}, and "
               f"{sim.within:,} of {n:,} lie within their element's spread of orders.")
    if explanation is not None and explanation in sim.reduced:
        rd = sim.reduced_diffs_ulps(explanation)
        u = sim.user_ulps
        out.append(f"With the inputs rounded to {REDUCED_FORMATS[explanation].fmt.name}, the simulated results move by "
                   f"a median {ulps_count(float(np.median(rd)))} (at most {float(np.max(rd)):,.3g}) from the "
                   f"full-precision orders; your differences there: median {float(np.median(u)):,.3g}, at most "
                   f"{ulps_count(float(np.max(u)))}.")
    env_r = envs[0].envelope[sim.elements]
    a_ok = sim.actual_err <= env_r
    e_ok = sim.expected_err <= env_r
    if verdict == Verdict.TOO_LARGE and e_ok.all() and not a_ok.all():
        out.append("Result B is within reordering distance of the exact result of these inputs at every sampled "
                   f"element; result A is not at {int((~a_ok).sum()):,} of them.")
    elif verdict == Verdict.TOO_LARGE and a_ok.all() and not e_ok.all():
        out.append("Result A is within reordering distance of the exact result of these inputs at every sampled "
                   f"element; result B is not at {int((~e_ok).sum()):,} of them.")
    widest = envs[-1].envelope[sim.elements] if len(envs) > 1 else env_r
    if np.mean((sim.actual_err > widest) & (sim.expected_err > widest)) > 0.5:
        out.append("Neither result is near the exact result of the inputs given at most sampled elements: are "
                   "these the inputs behind them?")
    return out


def _worst(diffs: Differences, envs: list[EnvelopeCheck], shape, count: int = 10) -> tuple[WorstElement, ...]:
    """The mismatched non-finite elements first, then the largest differences against the reordering
    envelope's typical size, ``count`` in all, with the envelopes that cover each."""
    af, ef, d, fin = diffs.af, diffs.ef, diffs.d, diffs.fin
    reorder = envs[0]
    rows = []
    for i in diffs.nonfinite[:count]:
        rows.append(
            WorstElement(
                index=tuple(int(v) for v in np.unravel_index(int(i), shape)),
                actual=float(af[i]),
                expected=float(ef[i]),
                abs_diff=math.nan,
                rel_diff=math.nan,
                ulps=math.nan,
                ratio_typical=math.inf,
                fits=(),
            )
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(fin, d / reorder.typical, -1.0)
        ratio = np.where(fin & (reorder.typical == 0), np.where(d > 0, np.inf, 0.0), ratio)
    cand = np.flatnonzero(fin & (d > 0))
    if cand.size and len(rows) < count:
        top = cand[np.argsort(-ratio[cand], kind="stable")[: count - len(rows)]]
        for i in top:
            rows.append(
                WorstElement(
                    index=tuple(int(v) for v in np.unravel_index(int(i), shape)),
                    actual=float(af[i]),
                    expected=float(ef[i]),
                    abs_diff=float(d[i]),
                    rel_diff=float(diffs.rel[i]),
                    ulps=float(diffs.ulps[i]),
                    ratio_typical=float(ratio[i]),
                    fits=tuple(env.key for env in envs if d[i] <= env.envelope[i]),
                )
            )
    return tuple(rows)


def typical_rel_max(diffs: Differences) -> float:
    """The largest relative difference among the elements whose |B| is at least the median |B| (all finite
    elements when none is): what the verdict's sentence and the page's metric both state. Elements near
    zero are left out: a sum that cancels keeps the absolute error of its large terms, so its relative
    difference says nothing about the computation."""
    ef, rel, fin = diffs.ef, diffs.rel, diffs.fin
    if not fin.any():
        return math.nan
    mag = np.abs(ef)
    c = float(np.median(mag[fin]))
    typical = fin & (mag >= c) & (mag > 0)
    return float(np.max(rel[typical])) if typical.any() else float(np.max(rel[fin]))


def rel_text(x: float) -> str:
    """A relative difference as the sentence and the metric both print it."""
    return f"{x:.3g}"


def _size_text(diffs: Differences) -> str:
    """"median 3 ULPs where they differ, at most 2.1e-06 relative among elements of at least median size"
    (``typical_rel_max``)."""
    ulps, differ = diffs.ulps, diffs.differ
    if not differ.any():
        return "none"
    med = float(np.median(ulps[differ]))
    return (f"median {ulps_count(med)} where they differ, at most {rel_text(typical_rel_max(diffs))} relative among "
            "elements of at least median size")


def _sentence(verdict: Verdict, explanation: str | None, case: Case, diffs: Differences, rtol: float | None,
              atol: float | None, pattern) -> str:
    """The verdict in one sentence, with the size of the differences and the tolerances that pass."""
    size, acc, differ, n_nonfinite = case.a.size, case.acc_name, diffs.differ, diffs.nonfinite.size
    if verdict == Verdict.IDENTICAL:
        return f"Identical: all {size:,} elements have the same value, so any tolerance passes (even rtol=0, atol=0)."
    size_txt = _size_text(diffs)
    kk = f"K = {case.k:,}" + (" (assumed)" if case.k_source == "assumed" else "")
    tol = f"rtol={format_tol(rtol)}, atol={format_tol(atol)}" if rtol is not None else ""
    if verdict == Verdict.REORDERING:
        return (f"Normal rounding noise: {int(differ.sum()):,} of {size:,} elements differ ({size_txt}), as much "
                f"as adding the same {kk} terms in another order in {acc} does; compare with {tol}.")
    if verdict == Verdict.REDUCED_PRECISION:
        p = REDUCED_FORMATS[explanation].fmt
        also = " (or float16, which keeps as many bits)" if explanation == "tf32" else ""
        return (f"Explained by reduced precision: the differences ({size_txt}) are too large for another summation "
                f"order in {acc} but fit {p.name} inputs{also} with float32 accumulation; compare with {tol} if that "
                "precision is intended.")
    if n_nonfinite:
        return f"Too large for rounding: {n_nonfinite:,} element(s) are NaN or infinite in only one of the results."
    if pattern.localized:
        return (f"Too large for rounding: {pattern.outliers.size:,} element(s) are far off ({size_txt}) while "
                "the rest agree, which points to a bug rather than to rounding.")
    return (f"Too large for rounding: the differences ({size_txt}) are larger than another summation order or "
            f"reduced precision plausibly explains for {kk}; look for a bug or a different input.")
