"""Drawing for "Make my runs reproducible": the settings with what each guarantees and costs, the costs table,
the modelled GPU generations and the tolerance."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from core.diagnose.tolerances import format_two_digits
from core.studies.reproducible import Generations, ReproPage, Tolerance
from core.studies.reproducible_rules import HARDWARE, TARGETS, WORKLOADS
from ui.render import inert


def _table(rows: list[dict]) -> None:
    """A static table whose cells wrap: every column fits the screen's width, nothing cut with an ellipsis."""
    df = pd.DataFrame(rows)
    st.table(df.set_index(df.columns[0]))


def headline(page: ReproPage) -> str:
    """One sentence: what the visitor gets, and what its settings cost where this server can measure them."""
    c = page.answer.choice
    n = len([s for s in page.answer.settings if s.key != "imports"])
    got = (f"**{WORKLOADS[c.workload]} on {HARDWARE[c.hardware]}, {TARGETS[c.target]}:** {n} setting"
           f"{'s' if n != 1 else ''}, in this order.")
    if page.answer.cannot:
        got += " Not everything can be had: see the warning below."
    live = {s.cost: page.costs.rows[s.cost] for s in page.answer.settings if s.cost in page.costs.rows}
    if live and c.hardware == "cpu":  # a CPU's timing is no GPU's cost: a GPU setup's costs are in its list
        got += " Measured on this server's CPU: " + ", ".join(
            f"{r.label[0].lower()}{r.label[1:]} {r.text}" + (" (no measurable cost)" if r.within_noise else "")
            for r in live.values()) + " the default's time."
    return got


def settings_list(page: ReproPage) -> None:
    """Each setting: what it guarantees, what it does not, its cost and its source."""
    lines = []
    for s in page.answer.settings:
        if s.key == "imports":
            continue
        cost = page.cost_of(s)
        where = {"measured here": "measured on this server's CPU", "cited": "cited", "none": ""}[cost.origin]
        cost_text = f"{cost.text}" + (f" ({where})" if where else "") + (f": {cost.detail}" if cost.detail else "")
        # addresses as text: a page that takes link parameters shows no live link (tests/pages/test_hostile.py)
        lines.append(f"- **{s.title}.** {inert(s.guarantees, line_start=False)} *Not:* "
                     f"{inert(s.not_guaranteed, line_start=False)} *Cost:* {inert(cost_text, line_start=False)}. "
                     f"Source: {inert(s.source, line_start=False)}")
    st.markdown("\n".join(lines))


def cannot(page: ReproPage) -> None:
    a = page.answer
    if not a.cannot:
        return
    text = " ".join(a.cannot)
    if a.route:
        repro = page.costs.rows["reprosum"]
        text += f" {a.route} Its cost, measured on this server: {repro.text} the time of torch.sum ({repro.what})."
    st.warning(text, icon=":material/block:")


def costs_table(page: ReproPage, cited: list[tuple[str, str, str, str]]) -> None:
    """Live rows first, then the cited ones: one unit, × the default's time."""
    rows = [{"Mitigation": r.label, "Cost (× default time)": f"{r.text} ({r.iqr[0]:.2f}–{r.iqr[1]:.2f})",
             "Where from": f"measured here: {r.what}"}
            for r in (*page.costs.rows.values(), *((page.batch_invariant,) if page.batch_invariant else ()))]
    rows += [{"Mitigation": label, "Cost (× default time)": text, "Where from": f"cited: {what} ({source})"}
             for label, text, what, source in cited]
    _table(rows)
    age = (time.time() - page.costs.measured_at) / 60
    st.caption(f"Measured on {page.costs.where}, {age:.0f} min ago (shared by every visitor, measured again every "
               "half hour): each repeat times a mitigation and its default back to back, the order rotating, each "
               "as the fastest of 3 calls; the median of the per-repeat ratios, quartiles in brackets. A ratio "
               "below 1.0 within its quartiles is no measurable cost. Cited figures were measured by their sources "
               "on their hardware.")


def generations_table(g: Generations) -> None:
    sizes = sorted({r.n for r in g.rows})
    rows = []
    for gpu in dict.fromkeys(r.gpu for r in g.rows):
        mine = {r.n: r for r in g.rows if r.gpu == gpu}
        first = mine[sizes[0]]
        row = {"GPU (modelled)": gpu, "SMs": first.sms, "Threads per SM": first.max_threads}
        for n in sizes:
            r = mine[n]
            row[f"10^{len(str(n)) - 1}: blocks × threads"] = f"{r.blocks} × {r.threads_per_block}"
            row[f"10^{len(str(n)) - 1}: sum bits"] = r.hex
        rows.append(row)
    _table(rows)


def agreement(g: Generations) -> str:
    """Which modelled GPUs agree for each size, and why: the launch, read from the rows."""
    parts = []
    for n in sorted({r.n for r in g.rows}):
        rows = [r for r in g.rows if r.n == n]
        groups = g.groups(n)
        size = f"{n:,}"
        if len(groups) == 1:
            parts.append(f"For {size} values all four give the same bits: each launches {rows[0].blocks} blocks of "
                         f"{rows[0].threads_per_block} threads, because the grid is capped so that each thread still "
                         "adds at least 16 values, below every GPU's target of SMs × threads per SM ÷ 512 blocks.")
        else:
            blocks = ", ".join(f"{r.gpu} {r.blocks}" + (" (its limit)" if r.blocks == r.sms * r.max_threads // 512
                                                        else "") for r in rows)
            parts.append(f"For {size} values they give {len(groups)} different results ("
                         + "; ".join(" = ".join(grp) for grp in groups)
                         + "): the grid grows with the size up to each GPU's limit of SMs × threads per SM ÷ 512 "
                         f"blocks, so the launches differ ({blocks} blocks), each splits the sum at other places, "
                         "and GPUs with the same SM count and threads per SM agree.")
    return " ".join(parts)


def tolerance_code(tol: Tolerance, guarantee: bool = False) -> None:
    """The assert_close line with the typical tolerance, or with the one guaranteed for every order."""
    rtol, atol = map(format_two_digits, (tol.guarantee_rtol, tol.guarantee_atol) if guarantee else (tol.rtol, tol.atol))
    st.code(f"torch.testing.assert_close(actual, expected, rtol={rtol}, atol={atol})", language="python")
