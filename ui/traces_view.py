"""Drawing for the "Where two runs part" page: the punchline, the op timeline, the per-op table."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from core.arith.metrics import ulps_count
from core.traces.compare import Comparison, Row, cast_formats
from core.traces.judge import BEYOND_ROUNDING, BORN, FORMAT_CHANGE, IDENTICAL, INHERITED
from core.traces.opclass import packet
from core.traces.pairs import STATE_ORDER, timeline
from ui.palette import TRACE_STATES
from ui.render import inert
from ui.talk import styled

# one colour per timeline state, in STATE_ORDER
COLOURS = dict(zip(STATE_ORDER, TRACE_STATES, strict=True))


FORMAT_WORDS = ("A format change is expected wherever one run computes in another format (bfloat16 weights, "
                "autocast): from there on the two runs round to other grids, so their differences measure the "
                "narrower format's precision, not a reordering. Compare runs in one format to find rounding "
                "differences, or read this answer as the cost of the format.")


WORDY = [1.1, 1.2, 1.7]  # metric columns wide enough for "format change" and "reads the whole batch"


def _where(r: Row) -> str:
    return f"{packet(r.a.op)} in {r.a.module}" + (" (backward)" if r.a.backward else "")


def punchline(punch, c: Comparison, a_name: str, b_name: str) -> None:
    """The first difference in one sentence, then its op, its state and its verdict."""
    first = c.first
    if c.cast is not None:  # a cast only one run has: the runs part by a change of format
        o, side = c.cast, c.cast_side
        n = c.n_b if side == "B" else c.n_a
        src, dst = cast_formats(o)
        punch.markdown(f"### The runs part at op {o.index} of {n} in {side}: a cast from {src} to {dst} in "
                       f"{inert(o.module)} that only {side} has")
        c1, c2, c3 = punch.columns(WORDY)
        c1.metric(f"First difference (in {side})", f"op {o.index} of {n}",
                  help=f"Counted in run {side}'s ops from 1: a cast with no counterpart in the other run.")
        c2.metric("What differs", FORMAT_CHANGE, help="The runs compute in other formats from here: a choice, "
                                                      "not a rounding difference.")
        c3.metric("Formats", f"{src} to {dst}", help=c.note)
        return
    if first is None:
        punch.markdown(f"### {inert(a_name)} and {inert(b_name)} give the same bits in all {c.n_a} matched ops")
        return
    j = first.judgement
    punch.markdown(f"### The runs part at op {first.a.index} of {c.n_a}: {inert(_where(first))}")
    c1, c2, c3 = punch.columns([1, 1, 2] if j.state in (BORN, INHERITED) else WORDY)
    c1.metric("First difference", f"op {first.a.index} of {c.n_a}",
              help="Counted in run A's ops from 1; every op before it gives the same bits in both runs.")
    if j.state in (BORN, INHERITED):
        c2.metric("Born or inherited", j.state,
                  help="Born here: its inputs are bit-identical in both runs and its output is not. Inherited: an "
                       "input already differed.")
        c3.metric("Against rounding", j.verdict, help=_size(first))
    else:  # not comparable (shapes, the whole batch) or a format change: no rounding verdict to give
        c2.metric("What differs", j.state, help=j.reason[:1].upper() + j.reason[1:] + ".")
        c3.metric("Formats" if j.state == FORMAT_CHANGE else "Why", j.verdict, help=_size(first))
    flip(punch, c)


def flip(where, c: Comparison) -> None:
    """The moment a rounding-sized difference flips a discrete choice, in one sentence (nothing when none does)."""
    if c.flip_sentence:
        s = c.flip_sentence
        where.warning("A choice flips at " + inert(s[:1].lower() + s[1:]) + ".", icon=":material/call_split:")


def _size(r: Row) -> str:
    return r.judgement.size.text() if r.judgement.size is not None else "not comparable (other shapes or formats)"


def details(where, c: Comparison) -> None:
    """Why: the first difference's reason and size against its envelope, and the one-line answer."""
    first = c.first
    if c.cast is not None:
        where.info(inert(c.note) + " " + FORMAT_WORDS, icon=":material/swap_horiz:")
    elif first is None:
        note = ""
        if c.only_a or c.only_b:
            note = f" ({len(c.only_a)} ops only in A and {len(c.only_b)} only in B are listed below.)"
        where.success("No matched op differs: the two runs give bit-identical results op for op." + note,
                      icon=":material/check_circle:")
    else:
        j = first.judgement
        basis = j.size.basis if j.size is not None else ""
        msg = f"{inert(j.reason[:1].upper() + j.reason[1:])}. {inert(_size(first))}" + (
            f" (envelope: {inert(basis)})." if basis else ".")
        if c.note:
            msg += " " + inert(c.note)
        if j.state == FORMAT_CHANGE:
            msg += " " + FORMAT_WORDS
        (where.error if j.verdict == BEYOND_ROUNDING and j.state == BORN else where.info)(
            msg, icon=":material/search:")
    where.code(c.line, language=None, wrap_lines=True)


def timeline_chart(c: Comparison, presenter_mode: bool | None = None):
    pts = timeline(c)
    df = pd.DataFrame({"op": [p.index for p in pts], "state": [p.state for p in pts],
                       "aten op": [p.op for p in pts], "module": [p.module for p in pts],
                       "detail": [p.detail for p in pts]})
    states = [s for s in STATE_ORDER if s in set(df["state"])]
    # one lane per state, named on the axis: every state's ops can be seen, none hidden under another's
    chart = alt.Chart(df).mark_tick(thickness=3).encode(
        x=alt.X("op:Q", title="op (in run A's order)", scale=alt.Scale(nice=False, padding=6)),
        y=alt.Y("state:N", title=None, sort=states, axis=alt.Axis(labelLimit=400)),
        color=alt.Color("state:N", legend=None, scale=alt.Scale(domain=states, range=[COLOURS[s] for s in states])),
        tooltip=["op", "state", "aten op", "module", "detail"],
    ).properties(height=100 + 40 * len(states))  # the whole chart: about 75 px of it are the axis and its title
    return styled(chart, presenter_mode)


def _size_cell(r: Row) -> str:
    """A difference's size in a few words, so the table's columns fit at 1280 px (a size's whole sentence, with
    its envelope, was cut where the column ended; the first difference says it in full above the table)."""
    s = r.judgement.size
    if s is None or r.judgement.state == IDENTICAL:
        return ""
    which = f"output {s.output}: " if s.outputs > 1 else ""
    worst = f", ≤ {ulps_count(s.max_ulps)}" if s.max_ulps is not None and s.differing else ""
    return f"{which}{s.differing} of {s.sampled}{worst}"


def rows_table(c: Comparison, only_differences: bool) -> pd.DataFrame:
    rows = [r for r in c.rows if not only_differences or r.judgement.state != IDENTICAL]
    return pd.DataFrame({
        "op A": [r.a.index for r in rows], "op B": [r.b.index for r in rows],
        "aten op": [r.a.op.removeprefix("aten.") for r in rows],
        "module": [r.a.module + (" (bw)" if r.a.backward else "") for r in rows],
        "state": [r.judgement.state for r in rows],
        "verdict": [r.judgement.verdict or "" for r in rows],
        # a dash where the op sums nothing (an elementwise op has no reduction length)
        "K": [f"{r.a.k:,}" if r.a.k is not None else "—" for r in rows],
        "size": [_size_cell(r) for r in rows],
        "matched": [r.how for r in rows],
    })


def unmatched(c: Comparison) -> None:
    for label, ops in (("A", c.only_a), ("B", c.only_b)):
        if ops:
            shown = ", ".join(f"{o.index} {packet(o.op)} ({o.module})" for o in ops[:30])
            st.caption(f"Only in {label} ({len(ops)} ops, no partner in the other run): {inert(shown)}"
                       + (" …" if len(ops) > 30 else ""))
