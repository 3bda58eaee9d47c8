"""Presentation of a mismatch diagnosis: verdict, evidence tables and Altair charts (no numerics here: the
evidence's medians, histograms and ULP sizes are core.diagnose.evidence's)."""

from __future__ import annotations

import hashlib
import math

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from core.arith.formats import FORMATS
from core.diagnose.envelopes import ENVELOPE_FACTOR, OUTLIER_FACTOR
from core.diagnose.evidence import (
    LogHistogram,
    ShareHistogram,
    difference_evidence,
    fitted_curve,
    outlier_positions,
    simulation_evidence,
    typical_relative,
)
from core.diagnose.loaders import LoadError, load_pasted, parse_log
from core.diagnose.logs import JUMP_FACTOR, LogDiagnosis, LogVerdict
from core.diagnose.results import REORDERING_ENVELOPE, Diagnosis, Simulation, Verdict
from core.diagnose.tolerances import (
    ALLCLOSE_DEFAULT,
    GUARANTEE_FROM,
    GUARANTEE_KIND,
    MARGIN,
    TYPICAL_ASSUMES,
    TYPICAL_KIND,
    format_tol,
    no_tolerance,
    ratio_text,
    scaled_cover,
)
from core.diagnose.verdict import VERDICT_HEADS, rel_text
from ui.palette import CONTEXT, ENVELOPES, LOG_GAP, LOG_MARKS, LOG_RUNS, SIMULATION
from ui.render import inert
from ui.talk import styled

VERDICT_ICONS = {Verdict.IDENTICAL: ":material/check_circle:", Verdict.REORDERING: ":material/check_circle:",
                 Verdict.REDUCED_PRECISION: ":material/info:", Verdict.TOO_LARGE: ":material/error:"}
# The whole chart's height: Streamlit sizes a chart to fit it, axis titles and legends included, so the
# histograms' plotting area is about 150 px of it (at 240 it was under 100 px in presenter type).
CHART_HEIGHT = 300
SHORT = {REORDERING_ENVELOPE: "reordering", "float32": "float32", "tf32": "TF32", "float16": "float16",
         "bfloat16": "bfloat16"}


def digest(*parts: bytes | str) -> str:
    """A short key for caching a diagnosis of uploaded or pasted data in the session."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p if isinstance(p, bytes) else str(p).encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def _num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if math.isinf(x):
        return "∞"
    return f"{x:.{digits}g}"


# ----------------------------------------------------------------------------- verdict


def verdict_box(d: Diagnosis) -> None:
    head = VERDICT_HEADS[d.verdict]
    rest = d.sentence[len(head):] if d.sentence.startswith(head) else " " + d.sentence
    text = f"**{head}**{inert(rest, line_start=False)}"
    icon = VERDICT_ICONS[d.verdict]
    if d.verdict in (Verdict.IDENTICAL, Verdict.REORDERING):
        st.success(text, icon=icon)
    elif d.verdict == Verdict.REDUCED_PRECISION:
        st.warning(text, icon=icon)
    else:
        st.error(text, icon=icon)


LARGE_NORMAL_ULPS = 100  # from here a reader asks how a difference this many ULPs wide can be normal


def metrics_row(d: Diagnosis) -> None:
    c = st.columns(5)
    c[0].metric("Elements differing", f"{d.n_differ:,}", help=f"Of {d.size:,} elements compared.")
    c[1].metric("Max diff. (ULPs)", _num(d.ulp_stats.max),
                help=f"The largest |A − B|, in ULPs of result B's value in {d.fmt} (B only sets the unit; it is not "
                     "the reference). Near zero an ULP is tiny, so this can be large for harmless elements.")
    c[2].metric("Median difference (ULPs)", _num(d.ulp_stats.p50))
    # the same figure as the verdict's sentence: both leave out the elements near zero, where a relative difference
    # says nothing (they once showed two different figures side by side)
    c[3].metric("Max rel. (typical)", "–" if math.isnan(d.rel_typical_max) else rel_text(d.rel_typical_max),
                help="The largest |A − B| / |B| among the elements at least as large as the median |B|: the figure in "
                     f"the verdict. Over all elements, including those near zero: {_num(d.rel_stats.max)}.")
    # an assumed K says so in its label, not only in a tooltip (K = 0 read silently as 65,536); labels are short
    # enough for a fifth of the page in any browser's font (a longer one is cut with an ellipsis)
    c[4].metric("K (assumed)" if d.k_source == "assumed" else "K (terms per sum)", f"{d.k:,}",
                help={"given": "as you gave it", "inputs": "from the inputs",
                      "assumed": "unknown (0 or not given): assumed, since neither K nor the inputs were given; give K "
                                 "for envelopes that fit your computation"}[d.k_source])
    if d.verdict in (Verdict.IDENTICAL, Verdict.REORDERING) and d.ulp_stats.max >= LARGE_NORMAL_ULPS:
        st.caption(f"Why {_num(d.ulp_stats.max)} ULPs can be normal here: a sum's rounding errors grow with the sizes "
                   "of its terms, not with its result. Where terms cancel, the result is small and one of its ULPs is "
                   "tiny, so the same rounding-sized difference counts many of them; the verdict compares each "
                   "difference with what its terms' sizes allow.")


def tolerance_section(d: Diagnosis) -> None:
    if d.assert_line is None:
        st.markdown("No tolerance is recommended: a tolerance wide enough to pass would also hide the problem "
                    "above. Find the cause first (what to check is listed below).")
        return
    st.code(d.assert_line, language="python")
    if d.margin is not None and math.isfinite(d.margin):
        st.caption(f"Passes with at least {MARGIN:g}× headroom: every element uses at most 1/{d.margin:.3g} of its "
                   f"tolerance (atol + rtol·|B|). rtol is {MARGIN:g}× the largest relative difference among "
                   "elements of at least median size (and at least one ULP); atol covers the elements near zero. "
                   "It is fitted to these two results: another run, machine or GPU can differ more.")
    else:
        st.caption("The results are equal, so this passes with any headroom.")
    if d.envelope_rtol is not None and d.verdict != Verdict.IDENTICAL:
        for line in envelope_tolerance_lines(d):
            st.caption(line)


def envelope_tolerance_lines(d: Diagnosis) -> list[str]:
    """The explanation's two tolerances for other runs, each named for what it is: the typical one (its envelope)
    with what it assumes, and the one guaranteed for every order (its a-priori bound); or why there is none."""
    reason = no_tolerance(d.k, FORMATS[d.acc_fmt])
    if reason:
        return [reason]
    env = d.envelope(d.explanation) if d.verdict == Verdict.REDUCED_PRECISION else d.envelopes[0]
    typical = (d.envelope_rtol, d.envelope_atol)
    lines = [f"{TYPICAL_KIND}, for what this explanation typically allows on another run, machine or GPU: "
             f"rtol={format_tol(typical[0])}, atol={format_tol(typical[1])} (the envelope below). {TYPICAL_ASSUMES}"]
    cover = scaled_cover(typical, env.envelope, env.bound)
    if cover is None:
        return [*lines, "No tolerance holds for every order here: the worst-case bound does not exist (K·u ≥ 1 in "
                "float32, where the inputs' side accumulates)."]
    rtol, atol, ratio = cover
    inputs = "" if env.key == REORDERING_ENVELOPE else f" plus the inputs' rounding to {env.name.split()[0]}"
    given = ("with each sum's Σ|x| computed from the inputs" if env.bound_rigorous else "with each sum's Σ|x| "
             "estimated as √K × its scale (no inputs given), so it holds where that estimate does: give the inputs "
             "to make it rigorous")
    return [*lines, f"{GUARANTEE_KIND}: rtol={format_tol(rtol)}, atol={format_tol(atol)}, from {GUARANTEE_FROM}"
            f"{inputs}, {given}. That is the a-priori bound below, up to {ratio_text(ratio)} the envelope."]


def allclose_section(d: Diagnosis) -> None:
    ac = d.allclose
    rtol, atol = ALLCLOSE_DEFAULT
    if ac.failing == 0:
        st.markdown(f"`torch.allclose` with its defaults (rtol={rtol:g}, atol={atol:g}) **passes** on these two "
                    "arrays.")
    else:
        where = f" The worst is element {ac.worst_index}, {_num(ac.worst_ratio)} times over." if ac.worst_index else ""
        lines = [f"`torch.allclose` with its defaults (rtol={rtol:g}, atol={atol:g}) **fails at {ac.failing:,} "
                 f"element(s)**.{where}"]
        if ac.failing_small:
            lines.append(f"{ac.failing_small:,} of them are near zero (below 1 % of the median magnitude): there "
                         f"atol={atol:g} is all the tolerance there is, yet a sum that cancels to near zero keeps the "
                         "absolute rounding error of its large terms.")
        if ac.failing > ac.failing_small:
            lines.append(f"At ordinary magnitudes rtol={rtol:g} is about {rtol / 2 ** (1 - 24):.0f} float32 ULPs; "
                         "K-term sums in another order differ by around √K·u relative to their partial sums, which "
                         "for large K is more.")
        if d.n_both_nan or d.nan_mismatch:
            lines.append("NaN never equals NaN unless equal_nan=True.")
        st.markdown(" ".join(lines))
    acd = d.assert_close_defaults
    st.caption(f"torch.testing.assert_close with its {narrow(d)} defaults (rtol={acd.rtol:g}, atol={acd.atol:g}) "
               + ("passes." if acd.failing == 0 else f"fails at {acd.failing:,} element(s)."))


def narrow(d: Diagnosis) -> str:
    return d.actual_fmt if d.actual_fmt == d.expected_fmt else f"{d.actual_fmt}/{d.expected_fmt}"


def reasons_section(d: Diagnosis) -> None:
    st.markdown("\n".join(f"- {inert(r, line_start=False)}" for r in d.reasons))


def next_checks(d: Diagnosis) -> None:
    if not d.next_checks:
        return
    st.subheader("What to check next")
    st.markdown("\n".join(f"- {inert(c, line_start=False)}" for c in d.next_checks))


# ---------------------------------------------------------------------------- evidence


def envelope_frame(d: Diagnosis) -> pd.DataFrame:
    rows = []
    for env, rel in zip(d.envelopes, typical_relative(d), strict=True):
        rows.append({
            "explanation": env.name,
            "typical size (relative, median element)": _num(rel),
            "envelope factor": f"{env.factor:.3g}" + ("" if env.factor == ENVELOPE_FACTOR else " (widened by the "
                                                      "simulation)"),
            "a-priori bound": "rigorous (inputs)" if env.bound_rigorous else "estimated",
            "elements beyond it": f"{env.exceed:,}",
            "largest |d| / envelope": _num(env.worst_ratio),
            "fits": "yes" if env.fits else ("no: too few elements moved" if env.exceed == 0 else "no"),
            "what it assumes": env.what,
        })
    return pd.DataFrame(rows)


def _hist_frame(h: LogHistogram) -> pd.DataFrame:
    return pd.DataFrame({"lo": h.lo, "hi": h.hi, "count": h.count}, columns=["lo", "hi", "count"])


def difference_histogram(d: Diagnosis, kind: str) -> alt.LayerChart | None:
    """ULP (``kind="ulp"``) or relative differences of the differing elements, with each envelope's median."""
    evidence = difference_evidence(d, kind)
    if evidence.histogram.empty:
        return None
    hist = _hist_frame(evidence.histogram)
    marks = [{"envelope": SHORT.get(m.key, m.key), "at": m.at, "i": m.index} for m in evidence.marks]
    title = "|A − B| in ULPs of B" if kind == "ulp" else ("|A − B| / |B|" if kind == "rel" else "")
    x = alt.X("lo:Q", scale=alt.Scale(type="log"), title=title)
    bars = alt.Chart(hist).mark_bar(color=CONTEXT).encode(
        x=x, x2="hi:Q", y=alt.Y("count:Q", title="elements"), y2=alt.datum(0),
        tooltip=[alt.Tooltip("lo:Q", format=".3g", title="from"), alt.Tooltip("hi:Q", format=".3g", title="to"),
                 "count:Q"])
    layers = [bars]
    if marks:
        mdf = pd.DataFrame(marks)
        names = list(mdf["envelope"])
        layers.append(alt.Chart(mdf).mark_rule(strokeWidth=2, strokeDash=[6, 3]).encode(
            x=alt.X("at:Q", scale=alt.Scale(type="log")),
            color=alt.Color("envelope:N", scale=alt.Scale(domain=names, range=ENVELOPES[: len(names)]),
                            title="envelopes", legend=alt.Legend(orient="top", direction="horizontal")),
            tooltip=["envelope", alt.Tooltip("at:Q", format=".3g")]))
    return alt.layer(*layers).properties(height=CHART_HEIGHT)


def worst_frame(d: Diagnosis) -> pd.DataFrame:
    names = {e.key: e.name for e in d.envelopes}
    return pd.DataFrame([{
        "index": str(w.index),
        "result A": f"{w.actual:.9g}",
        "result B": f"{w.expected:.9g}",
        "|difference|": _num(w.abs_diff),
        "relative": _num(w.rel_diff),
        "ULPs": _num(w.ulps),
        "× typical reordering": _num(w.ratio_typical),
        "within": ", ".join(names[k] for k in w.fits) or "none",
    } for w in d.worst])


def pattern_text(d: Diagnosis) -> str:
    p = d.pattern
    if p is None or not p.applicable:
        return "Pattern check: too few elements to tell isolated outliers from the rest."
    if p.localized:
        idx = ", ".join(str(pos) for pos in outlier_positions(d, 12))
        more = f" and {p.outliers.size - 12:,} more" if p.outliers.size > 12 else ""
        return (f"Pattern check: {p.outliers.size:,} element(s) are more than {OUTLIER_FACTOR:g} times the level of "
                f"the other 99 % ({_num(p.level)} ULPs of their scale): {idx}{more}.")
    return (f"Pattern check: no isolated outliers. The largest difference is {_num(p.worst)} ULPs of its element's "
            f"scale; the other 99 % reach {_num(p.level)}; an outlier would need more than {OUTLIER_FACTOR:g} times "
            "that.")


def nonfinite_frame(d: Diagnosis) -> pd.DataFrame:
    rows = [w for w in d.worst if math.isinf(w.ratio_typical) and math.isnan(w.abs_diff)]
    return pd.DataFrame([{"index": str(w.index), "result A": str(w.actual), "result B": str(w.expected)}
                         for w in rows])


# -------------------------------------------------------------------------- simulation


def simulation_chart(sim: Simulation, explanation: str | None) -> alt.Chart | None:
    ev = simulation_evidence(sim, explanation)
    series: list[tuple[str, ShareHistogram]] = [("simulated orders, pairwise", ev.orders),
                                                ("your differences", ev.user)]
    if ev.reduced is not None:
        series.append((f"simulated {explanation} inputs vs the orders", ev.reduced))
    frames = []
    for name, sh in series:
        if not sh.histogram.empty:
            h = _hist_frame(sh.histogram)
            h["share"] = sh.share
            h["series"] = name
            frames.append(h)
    if not frames:
        return None
    df = pd.concat(frames, ignore_index=True)
    return alt.Chart(df).mark_bar(opacity=0.55).encode(
        x=alt.X("lo:Q", scale=alt.Scale(type="log"), title="difference in ULPs of B (zero differences not shown)"),
        x2="hi:Q",
        y=alt.Y("share:Q", stack=None, title="share of the series", axis=alt.Axis(format="%")), y2=alt.datum(0),
        color=alt.Color("series:N", scale=alt.Scale(range=SIMULATION), title=None,
                        legend=alt.Legend(orient="bottom")),
        tooltip=["series", alt.Tooltip("lo:Q", format=".3g"), alt.Tooltip("hi:Q", format=".3g"),
                 alt.Tooltip("share:Q", format=".1%")],
    ).properties(height=CHART_HEIGHT)


def simulation_section(d: Diagnosis, charts: bool = True) -> None:
    sim = d.simulation
    if sim is None:
        st.info("Give the inputs (the two factors of a matrix product, or the summed array) to see your difference "
                "against the same sums recomputed here in several orders.", icon=":material/science:")
        return
    n = sim.elements.size
    ev = simulation_evidence(sim)
    pmax = ev.spread
    st.markdown(
        f"{len(sim.orders)} orders of the same {sim.k:,} terms, recomputed on this server's CPU for {n:,} sampled "
        f"element(s) (the worst half of your differences and a random draw of the rest): "
        + ", ".join(sim.orders[:7]) + f" and {len(sim.orders) - 7} seeded random orders. They differ from each other "
        f"by up to {_num(pmax)} ULPs; **{sim.within:,} of {n:,}** of your sampled differences lie within their "
        "element's spread of orders.")
    chart = simulation_chart(sim, d.explanation) if charts else None
    if chart is not None:
        st.altair_chart(styled(chart), width="stretch")
    err = pd.DataFrame({
        "": ["result A", "result B"],
        "median |x − exact| (ULPs)": [_num(ev.actual_median), _num(ev.expected_median)],
        "largest |x − exact| (ULPs)": [_num(ev.actual_max), _num(ev.expected_max)],
    })
    st.dataframe(err, hide_index=True)
    st.caption("Exact: the float64 sum of the exact terms, rounded once (math.fsum). Products of float32 or "
               "narrower values are exact in float64; the fused order emulates one rounding per multiply-add "
               "exactly (round-to-odd).")
    for note in sim.notes:
        st.caption(inert(note, line_start=False))


# ------------------------------------------------------------------------ the whole page


def accuracy_frame(d: Diagnosis) -> pd.DataFrame:
    acc = d.accuracy
    return pd.DataFrame([{
        "": side.name,
        "median error (ULPs)": _num(side.median_ulps),
        "largest error (ULPs)": _num(side.max_ulps),
        "closer at": f"{closer:,}",
        "beyond the bound": f"{side.beyond_bound:,}",
    } for side, closer in ((acc.side_a, acc.a_closer), (acc.side_b, acc.b_closer))])


def accuracy_section(d: Diagnosis) -> None:
    """Both results against the reference: neither side is the reference by default."""
    acc = d.accuracy
    st.subheader("Which result is closer to the truth")
    if acc is None:
        st.caption("Neither result is the reference: a tree sum (as GPUs use) is often closer to the exact sum than "
                   "a plain left-to-right loop. Give a reference (e.g. the same computation in float64) or the "
                   "inputs, and both are judged against it.")
        return
    st.markdown(acc.sentence)
    for note in acc.notes:
        st.caption(f":material/info: {note}")
    with st.expander("Each side's error, and the bound it is held to"):
        st.dataframe(accuracy_frame(d), hide_index=True)
        ref = ("the exact result of the inputs (exact sums of each element's terms, as fractions), rounded once to "
               "float64 for display" if acc.source == "exact" else f"your reference, read as {acc.ref_fmt}")
        st.caption(f"Reference: {ref}. Errors in ULPs of the reference in {acc.fmt}. The bound: an upper bound "
                   "on the error of a K-term sum in any order, γ_K·Σ|t| with γ_K = K·u / (1 − K·u) and u the unit "
                   "roundoff of the accumulation format (Higham, Accuracy and Stability of Numerical Algorithms, "
                   "2nd ed., Lemma 3.4), plus the result's last rounding and the reference's own error"
                   + ("" if acc.bound_rigorous else "; Σ|t| is estimated as √K × the element's scale (no inputs)")
                   + ".")


def headline(d: Diagnosis) -> None:
    """The verdict and its key numbers, and both sides against a reference when there is one: the page's
    punchline."""
    verdict_box(d)
    metrics_row(d)
    if d.accuracy is not None:
        st.markdown(f":material/balance: {d.accuracy.headline}")


def show_diagnosis(d: Diagnosis, with_headline: bool = True) -> None:
    if with_headline:
        headline(d)
    st.subheader("The tolerance to use")
    tolerance_section(d)
    accuracy_section(d)
    next_checks(d)
    with st.expander("Why this verdict", icon=":material/help:"):
        reasons_section(d)
        if d.nan_mismatch or d.inf_mismatch:
            st.markdown(f"**NaN/Inf mismatches:** {d.nan_mismatch:,} NaN in one result only, {d.inf_mismatch:,} "
                        "infinite in one result only (or infinities of opposite sign).")
            nf = nonfinite_frame(d)
            if not nf.empty:
                st.dataframe(nf, hide_index=True)
    with st.expander("Why the default allclose failed" if d.allclose.failing else "The default allclose",
                     icon=":material/rule:"):
        allclose_section(d)
    # the charts are drawn only once their section is open (a rerun): folded, they would be laid out unseen
    evidence = st.expander("Evidence: the envelopes, the histograms and the worst elements",
                           icon=":material/analytics:", key="dg_open_evidence", on_change="rerun")
    with evidence:
        evidence_section(d, charts=bool(evidence.open))
    simulation = st.expander("Simulation from the inputs", icon=":material/science:", key="dg_open_simulation",
                             on_change="rerun")
    with simulation:
        simulation_section(d, charts=bool(simulation.open))
    for note in d.notes:
        st.caption(f":material/info: {inert(note, line_start=False)}")


def evidence_section(d: Diagnosis, charts: bool = True) -> None:
    st.dataframe(envelope_frame(d), hide_index=True, width="stretch")
    st.caption(f"Envelope = min(a-priori bound, factor × typical size), element by element; the factor is "
               f"{ENVELOPE_FACTOR:g} unless the simulation saw the inputs' own orders spread further. Typical sizes: "
               "u·√K·scale for reordering, (u_in + u_32·√K)·scale for reduced-precision inputs; derivations "
               "in core/diagnose/envelopes.py. The typical sizes are heuristics; the bounds are rigorous only with the "
               "inputs.")
    if charts:
        c1, c2 = st.columns(2)
        with c1:
            ch = difference_histogram(d, "ulp")
            if ch is not None:
                st.altair_chart(styled(ch), width="stretch")
        with c2:
            ch = difference_histogram(d, "rel")
            if ch is not None:
                st.altair_chart(styled(ch), width="stretch")
    if charts and d.n_differ:
        st.caption(f"Histograms of the {d.n_differ:,} differing elements ({d.n_compared - d.n_differ:,} are equal). "
                   "Dashed lines: each envelope at the median element (the envelopes differ from element to "
                   "element).")
    st.markdown(pattern_text(d))
    s = d.ulp_stats
    st.dataframe(pd.DataFrame([{"": name, "median": _num(x.p50), "90 %": _num(x.p90), "99 %": _num(x.p99),
                                "99.9 %": _num(x.p999), "max": _num(x.max)}
                               for name, x in (("|difference|", d.abs_stats), ("relative", d.rel_stats),
                                               ("ULPs", s))]), hide_index=True)
    if d.worst:
        st.markdown("**The worst elements** (largest difference relative to the typical reordering size):")
        st.dataframe(worst_frame(d), hide_index=True, width="stretch")


# --------------------------------------------------------------------------- loss logs


def log_frame(ld: LogDiagnosis) -> pd.DataFrame:
    return pd.DataFrame({"step": ld.steps, "loss A": ld.a, "loss B": ld.b, "relative gap": ld.rel_gap,
                         "rounding size": ld.tiny})


def log_loss_chart(ld: LogDiagnosis) -> alt.Chart:
    df = log_frame(ld).melt(id_vars=["step"], value_vars=["loss A", "loss B"], var_name="run", value_name="loss")
    df = df[np.isfinite(df["loss"])]
    positive = bool((df["loss"] > 0).all())
    return alt.Chart(df).mark_line(strokeWidth=1.5).encode(
        # "~g": a log axis's default labels keep one digit, so 0.005 and 0.01 both read "0.01"
        x="step:Q", y=alt.Y("loss:Q", scale=alt.Scale(type="log" if positive else "linear"),
                            axis=alt.Axis(format="~g")),
        color=alt.Color("run:N", scale=alt.Scale(range=LOG_RUNS), title=None),
        strokeDash=alt.StrokeDash("run:N", legend=None),
    ).properties(height=CHART_HEIGHT)


def log_gap_chart(ld: LogDiagnosis) -> alt.LayerChart:
    df = log_frame(ld)
    gap = df[(df["relative gap"] > 0) & np.isfinite(df["relative gap"])]
    y = alt.Y("value:Q", scale=alt.Scale(type="log"), title="|A − B| / max(|A|, |B|)")
    series = [gap.assign(series="relative gap", value=gap["relative gap"])[["step", "series", "value"]],
              df.assign(series="rounding size", value=df["rounding size"])[["step", "series", "value"]]]
    curve = fitted_curve(ld.fit)
    if curve is not None:
        series.append(pd.DataFrame({"step": curve.steps, "series": "fitted growth", "value": curve.values}))
    long = pd.concat(series, ignore_index=True)
    layers = [alt.Chart(long).mark_line().encode(
        x="step:Q", y=y, color=alt.Color("series:N", scale=alt.Scale(
            domain=["relative gap", "rounding size", "fitted growth"], range=LOG_GAP),
            title=None),
        strokeDash=alt.StrokeDash("series:N", legend=None))]
    marks = []
    if ld.first_step is not None:
        marks.append({"step": ld.first_step, "mark": "first difference"})
    if ld.jump_step is not None:
        marks.append({"step": ld.jump_step, "mark": "jump"})
    if marks:
        layers.append(alt.Chart(pd.DataFrame(marks)).mark_rule(strokeDash=[4, 3]).encode(
            x="step:Q", color=alt.Color("mark:N", scale=alt.Scale(domain=["first difference", "jump"],
                                                                  range=LOG_MARKS), title=None),
            tooltip=["mark", "step"]))
    return alt.layer(*layers).resolve_scale(color="independent").properties(height=CHART_HEIGHT)


def show_log_diagnosis(ld: LogDiagnosis, where=None) -> None:
    """The logs' verdict and key numbers (in ``where``, the page's punchline, when given), then the rest."""
    head, _, rest = ld.sentence.partition(":")
    text = f"**{inert(head, line_start=False)}:**{inert(rest, line_start=False)}"
    top = where if where is not None else st.container()
    if ld.verdict == LogVerdict.JUMP:
        top.error(text, icon=":material/error:")
    else:
        top.success(text, icon=":material/check_circle:")
    c = top.columns(4)
    c[0].metric("First differing step", "none" if ld.first_step is None else f"{ld.first_step:,}")
    c[1].metric("Gap there (relative)", _num(ld.first_gap) if ld.first_gap is not None else "–")
    c[2].metric("Gap doubles every", f"{ld.doubling_steps:,.3g} steps" if ld.doubling_steps else "–")
    c[3].metric("Jump at step", "none" if ld.jump_step is None else f"{ld.jump_step:,}")
    st.markdown("\n".join(f"- {inert(r, line_start=False)}" for r in ld.reasons))
    c1, c2 = st.columns(2)
    with c1:
        st.altair_chart(styled(log_loss_chart(ld)), width="stretch")
    with c2:
        st.altair_chart(styled(log_gap_chart(ld)), width="stretch")
    st.caption(f"Rounding size: 1024 ULPs relative, or ten times the printed resolution of the values. A jump: the "
               f"gap's running maximum grows {JUMP_FACTOR:g}× beyond the fitted trend within one logged interval, "
               "to at least 1e-3, or appears above rounding size at the first difference. These thresholds are "
               "heuristics.")
    for note in ld.notes:
        st.caption(f":material/info: {inert(note, line_start=False)}")


# --------------------------------------------------------------------------- loading, with problems next to the widget


def loaded_notes(where, loaded) -> None:
    """What was read, and any notes about it, as captions under its widget (inert: may hold a file name)."""
    where.caption(inert(loaded.source, line_start=False))
    for note in loaded.notes:
        where.caption(f":material/info: {inert(note, line_start=False)}")


def upload(where, label: str, key: str, types, loader, fmt: str, help_text: str):
    """(loaded, raw bytes) from an uploader, with any problem shown right under it."""
    up = where.file_uploader(label, type=list(types), key=key, help=help_text)
    if up is None:
        return None, b""
    data = up.getvalue()
    try:
        loaded = loader(up.name, data, fmt)
    except LoadError as err:
        where.error(inert(err), icon=":material/block:")  # quotes the file name
        return None, data
    loaded_notes(where, loaded)
    return loaded, data


def pasted(where, text: str, fmt: str, what: str):
    """The pasted numbers read in ``fmt`` (None when empty or unreadable, with the reason under the box)."""
    if not text.strip():
        return None
    try:
        loaded = load_pasted(text, fmt, f"The pasted {what}")
    except LoadError as err:
        where.error(inert(err), icon=":material/block:")  # quotes the pasted text
        return None
    loaded_notes(where, loaded)
    return loaded


def pasted_log(where, label: str, key: str):
    """(log, text) from a text area of step,value lines, with any problem shown under it."""
    text = where.text_area(label, key=key, height=140, placeholder="1,0.6931\n2,0.6904\n3,0.6875")
    if not text.strip():
        return None, text
    try:
        return parse_log(f"The pasted {label.split(':')[0]}", text), text
    except LoadError as err:
        where.error(inert(err), icon=":material/block:")
        return None, text
