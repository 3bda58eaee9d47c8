"""The Summation lab's tables and Altair charts, built from core result objects (no numerics here),
and its progress while a stage computes."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import altair as alt
import pandas as pd
import streamlit as st

from core.arith.exact import abbreviate, exact_decimal, shortest_repr
from core.arith.metrics import ulps_brief
from core.crowd import budget
from core.kernels.trees import Tree
from core.machines.progress import OnProgress
from core.studies.sumlab import LabResult, RunningError
from ui.crowd import heavy_section
from ui.palette import CONTEXT, NOTE, ORIGINS
from ui.progress import ProgressBar
from ui.render import error_table, fitting
from ui.talk import presenter, styled

NO_BOUND = "no finite bound (n·u ≥ 1, or non-finite data)"
SHOWN = ("value", "bits", "error (ULPs)", "a-priori bound (ULPs)", "relative error", "correct digits",
         "|error| (absolute)", "a-priori bound (absolute)", "within bound")


def results_table(r: LabResult) -> pd.DataFrame:
    rows = (({"order": row.order.name, "origin": row.order.origin}, row.metrics,
             {"provenance": row.outcome.provenance, "time (ms)": round(row.outcome.seconds * 1e3, 2)})
            for row in r.rows)
    return error_table(rows, SHOWN, bound="a-priori bound", no_bound=NO_BOUND)


COMPACT = ("order", "origin", "value", "error (ULPs)", "a-priori bound (ULPs)", "within bound")


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """The results table's columns that fit the page at 1280 px (every column sits in the full table)."""
    return fitting(table, COMPACT)


def error_frame(r: LabResult) -> pd.DataFrame:
    rows = []
    for row in r.rows:
        u = row.metrics.ulps
        if math.isfinite(u):
            rows.append({"order": row.order.name, "origin": row.order.origin, "ulps": u, "abs_ulps": abs(u),
                         "value": shortest_repr(row.metrics.value, r.fmt)})
    return pd.DataFrame(rows, columns=["order", "origin", "ulps", "abs_ulps", "value"])


def permutation_frames(r: LabResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Histogram data (each permutation's error in ULPs) and marks for the other orders."""
    assert r.permutations is not None and not isinstance(r.exact, float)
    hist = pd.DataFrame({"ulps": r.permutation_ulps()})
    marks = [{"label": "exact sum", "ulps": 0.0}]
    for row in r.rows:
        if math.isfinite(row.metrics.ulps):
            marks.append({"label": row.order.name, "ulps": row.metrics.ulps})
    return hist, pd.DataFrame(marks, columns=["label", "ulps"])


def running_frame(re: RunningError) -> pd.DataFrame:
    return pd.DataFrame({
        "values summed": re.positions,
        "|error|": re.abs_error,
        "bound γ(k−1)·Σ|x|": re.bound,
        "error (ULPs)": re.ulps,
    })


def tree_frames(tree: Tree) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Node positions, edges, and a table of every addition."""
    fmt = tree.fmt
    x: dict[int, float] = {}
    leaf_rank = 0
    for node in tree.nodes:
        if node.leaf_index is not None:
            x[node.id] = float(leaf_rank)
            leaf_rank += 1
    for node in tree.nodes:  # children always precede parents
        if node.leaf_index is None:
            x[node.id] = (x[node.left] + x[node.right]) / 2
    nodes, edges, table = [], [], []
    for node in tree.nodes:
        is_leaf = node.leaf_index is not None
        u = node.error_ulps(fmt)
        label = f"x[{node.leaf_index}]" if is_leaf else f"node {node.id}"
        nodes.append({"id": node.id, "x": x[node.id], "y": node.depth, "label": label,
                      "exact": shortest_repr(node.exact, fmt) if is_leaf else _exact_text(node.exact),
                      "rounded": shortest_repr(node.rounded, fmt), "ulps": u, "abs_ulps": abs(u),
                      "short": f"{float(node.rounded):.3g}"})  # a leaf's label: 3 digits (the tooltip has all)
        if not is_leaf:
            for child in (node.left, node.right):
                edges.append({"x": x[node.id], "y": node.depth, "x2": x[child], "y2": tree.nodes[child].depth})
            table.append({"addition": f"{_name(tree, node.left)} + {_name(tree, node.right)}",
                          "exact sum": _exact_text(node.exact), "rounded": shortest_repr(node.rounded, fmt),
                          "rounding error": _exact_text(node.error), "error (ULPs)": ulps_brief(u)})
    return pd.DataFrame(nodes), pd.DataFrame(edges), pd.DataFrame(table)


def tree_picture(tree: Tree, height: int = 320, max_abs_ulps: float | None = None) -> alt.LayerChart:
    """The tree as a chart (``tree_chart`` of its ``tree_frames``); trees drawn side by side pass the same
    ``max_abs_ulps`` so that one colour means one rounding error in both."""
    nodes, edges, _ = tree_frames(tree)
    return tree_chart(nodes, edges, height, max_abs_ulps)


def largest_rounding(*trees: Tree) -> float:
    """The largest |rounding error| in ULPs over the additions of the given trees (0 if all exact)."""
    return max((abs(n.error_ulps(t.fmt)) for t in trees for n in t.internal()), default=0.0)


def additions_table(tree: Tree) -> pd.DataFrame:
    """Every addition of the tree: its inputs, exact sum, rounded value and rounding error."""
    return tree_frames(tree)[2]


def _name(tree: Tree, node_id: int) -> str:
    n = tree.nodes[node_id]
    return f"x[{n.leaf_index}]" if n.leaf_index is not None else f"node {n.id}"


def _exact_text(v) -> str:
    return abbreviate(exact_decimal(v), 40)


# ------------------------------------------------------------------------------ progress


@contextmanager
def computing(cost: budget.Cost, what: str) -> Iterator[OnProgress]:
    """A spinner, through the heavy gate when ``cost`` is heavy, and a progress bar naming each step
    (the ``on_progress`` callback this yields); both go away when the block ends."""
    with heavy_section(cost, what), st.spinner("Summing…"):
        bar = ProgressBar(st, "Summing…", say=lambda p: f"Summing: {p.what}…")
        yield bar
        bar.empty()


# -------------------------------------------------------------------------------- charts
ORIGIN_COLOURS = alt.Scale(domain=list(ORIGINS), range=list(ORIGINS.values()))  # live, model, algorithm, exact


def error_bars(df: pd.DataFrame) -> alt.Chart:
    """|error| in ULPs per order (symlog scale: exact results sit at 0)."""
    return styled(
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("order:N", sort=None, title=None, axis=alt.Axis(labelOverlap=False, labelLimit=320)),
            x=alt.X("abs_ulps:Q", scale=alt.Scale(type="symlog"), title="|error| in ULPs of the exact sum"),
            color=alt.Color("origin:N", scale=ORIGIN_COLOURS, title="where it came from"),
            tooltip=["order", "origin", alt.Tooltip("ulps:Q", format="+.4g"), "value"],
        )
        .properties(height=max(120, 32 * len(df)))
    )


def permutation_histogram(values: pd.DataFrame, marks: pd.DataFrame) -> alt.LayerChart:
    """One chart, one x axis: grey bars count the random permutations per result (left axis, whole counts: a
    count is a number of permutations, never 0.2 of one), and a dot per chosen order and the exact sum, each on
    its own labelled row (right axis), so that orders giving the same result do not hide one another."""
    x = alt.X("ulps:Q", title="result − exact sum, in ULPs")
    bars = (
        alt.Chart(values)
        .mark_bar(opacity=0.45, color=CONTEXT)
        .encode(
            x=alt.X("ulps:Q", bin=alt.Bin(maxbins=40), title="result − exact sum, in ULPs"),
            y=alt.Y("count():Q", title="permutations", axis=alt.Axis(format="d", tickMinStep=1)),
            tooltip=[alt.Tooltip("count():Q", title="permutations")],
        )
    )
    dots = (
        alt.Chart(marks)
        .mark_point(filled=True, size=90, opacity=1)
        .encode(
            x=x,
            y=alt.Y("label:N", sort=None, title=None,
                    axis=alt.Axis(orient="right", labelLimit=0, labelOverlap=False, grid=False)),
            color=alt.Color("label:N", legend=None),
            tooltip=["label", alt.Tooltip("ulps:Q", format="+.4g")],
        )
    )
    # the height holds the x axis below the plot; each order's row needs its label's height at this mode's text size
    height = 90 + (34 if presenter() else 24) * max(len(marks), 6)
    return styled(alt.layer(bars, dots).resolve_scale(y="independent").properties(height=height))


def running_error_chart(df: pd.DataFrame) -> alt.Chart:
    """|error| of the left-to-right sum after k values, with its a-priori bound."""
    long = df.melt(id_vars=["values summed"], value_vars=["|error|", "bound γ(k−1)·Σ|x|"], var_name="series")
    long = long[long["value"] > 0]
    return styled(
        alt.Chart(long)
        .mark_line(point=False)
        .encode(
            x=alt.X("values summed:Q"),
            y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="absolute error"),
            color=alt.Color("series:N", title=None, legend=alt.Legend(orient="top", labelLimit=400)),
            strokeDash=alt.StrokeDash("series:N", title=None, legend=alt.Legend(orient="top", labelLimit=400)),
        )
        .properties(height=260)
    )


def tree_chart(nodes: pd.DataFrame, edges: pd.DataFrame, height: int = 320,
               max_abs_ulps: float | None = None) -> alt.LayerChart:
    """The reduction tree: leaves at the bottom labelled by their values, each addition coloured by its rounding
    error (on the scale 0 to ``max_abs_ulps`` when given, so that two trees side by side share it)."""
    depth = int(nodes["y"].max()) if len(nodes) else 0
    x = alt.X("x:Q", title=None, axis=alt.Axis(labels=False, ticks=False))  # the leaves carry their values
    # room under the leaves for their values, written upwards
    y = alt.Y("y:Q", title="depth", scale=alt.Scale(domain=[-max(1.0, 0.3 * depth + 0.5), depth + 0.3], nice=False),
              axis=alt.Axis(values=list(range(depth + 1))))
    top = max_abs_ulps if max_abs_ulps and max_abs_ulps > 0 else max(float(nodes["abs_ulps"].max() or 0), 0.5)
    lines = alt.Chart(edges).mark_rule(color=CONTEXT).encode(x=x, y=y, x2="x2:Q", y2="y2:Q")
    points = (
        alt.Chart(nodes)
        .mark_circle(size=220, opacity=1)
        .encode(
            x=x,
            y=y,
            color=alt.Color("abs_ulps:Q", scale=alt.Scale(scheme="orangered", domain=[0, top]),
                            title="|rounding error| (ULP)",
                            # under the tree: a half-width column keeps its room
                            legend=alt.Legend(orient="bottom", gradientLength=140, gradientThickness=10)),
            tooltip=["label", "exact", "rounded", alt.Tooltip("ulps:Q", format="+.3g")],
        )
    )
    leaves = (
        alt.Chart(nodes[nodes["label"].str.startswith("x[")])
        .mark_text(angle=270, align="right", baseline="middle", dx=-10, color=NOTE)  # size: styled
        .encode(x=x, y=y, text="short:N")
    )
    return styled(alt.layer(lines, points, leaves).properties(height=height))
