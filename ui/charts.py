"""Altair charts for the summation lab (data in, chart out; no numerics here)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ui.talk import styled

ORIGIN_COLOURS = alt.Scale(
    domain=["live", "model", "algorithm", "exact"],
    range=["#1f5fa8", "#d97706", "#6b7280", "#1e8449"],
)


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
    """Distribution of random-permutation results, with the exact sum and each order marked."""
    hist = (
        alt.Chart(values)
        .mark_bar(opacity=0.7, color="#9ca3af")
        .encode(
            x=alt.X("ulps:Q", bin=alt.Bin(maxbins=40), title="result − exact sum, in ULPs"),
            y=alt.Y("count():Q", title="permutations"),
        )
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeWidth=2)
        .encode(
            x="ulps:Q",
            color=alt.Color("label:N", title="marked"),
            tooltip=["label", alt.Tooltip("ulps:Q", format="+.4g")],
        )
    )
    return styled(alt.layer(hist, rules).properties(height=260))


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
            color=alt.Color("series:N", title=None),
            strokeDash=alt.StrokeDash("series:N", legend=None),
        )
        .properties(height=260)
    )


def tree_chart(nodes: pd.DataFrame, edges: pd.DataFrame, height: int = 320) -> alt.LayerChart:
    """The reduction tree: leaves at the bottom, each addition coloured by its rounding error."""
    x = alt.X("x:Q", title="leaves, in summation order", axis=alt.Axis(tickMinStep=1))
    y = alt.Y("y:Q", title="depth", axis=alt.Axis(tickMinStep=1))
    lines = alt.Chart(edges).mark_rule(color="#9ca3af").encode(x=x, y=y, x2="x2:Q", y2="y2:Q")
    points = (
        alt.Chart(nodes)
        .mark_circle(size=220, opacity=1)
        .encode(
            x=x,
            y=y,
            color=alt.Color("abs_ulps:Q", scale=alt.Scale(scheme="orangered"), title="|rounding error| (ULP)",
                            legend=alt.Legend(orient="bottom")),  # under the tree: a half-width column keeps its room
            tooltip=["label", "exact", "rounded", alt.Tooltip("ulps:Q", format="+.3g")],
        )
    )
    return styled(alt.layer(lines, points).properties(height=height))
