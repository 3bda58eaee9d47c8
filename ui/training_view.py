"""Tables and Altair charts for the training-divergence page (no numerics here)."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from core.runner import PairOutcome
from core.training import DivergenceSummary, SeedStudy, StepRecord
from ui.talk import styled

RUN_COLOURS = alt.Scale(domain=["A", "B"], range=["#1f5fa8", "#d97706"])


def records_frame(records: list[StepRecord]) -> pd.DataFrame:
    return pd.DataFrame({
        "step": [r.step for r in records],
        "loss A": [r.loss_a for r in records],
        "loss B": [r.loss_b for r in records],
        "|Δ loss|": [r.abs_diff for r in records],
        "‖Δθ‖": [r.param_distance for r in records],
        "differing bits": [r.differing_bits / r.total_bits for r in records],
        "accuracy A": [r.acc_a for r in records],
        "accuracy B": [r.acc_b for r in records],
    })


STEP_AXIS = alt.X("step:Q", title="training step", axis=alt.Axis(format="d", tickMinStep=1),
                  scale=alt.Scale(nice=False))
# Streamlit's theme fits title, axes and legend inside a chart's height, so the heights below leave
# room for them (a 170 px strip used to keep about 15 px for its plotting area).
LINE_HEIGHT = 340
STRIP_HEIGHT = 300
BOUNDARY_WIDTH, BOUNDARY_HEIGHT = 420, 480  # a square plotting area once axes and legend are placed
CLASS_COLOURS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"]


def loss_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    """A wide and pale, B thin and dashed on top: where the losses agree both stay visible."""
    long = df.melt(id_vars=["step"], value_vars=["loss A", "loss B"], var_name="run", value_name="loss")
    long["run"] = long["run"].str[-1]
    legend = "run (B dashed on top of A)"
    return styled(
        alt.Chart(long, title=title)
        .mark_line()
        .encode(
            x=STEP_AXIS,
            y=alt.Y("loss:Q", scale=alt.Scale(type="log"), title="loss on the step's batch (nats, log scale)"),
            color=alt.Color("run:N", scale=RUN_COLOURS, title=legend, legend=alt.Legend(orient="top")),
            strokeDash=alt.StrokeDash("run:N", scale=alt.Scale(domain=["A", "B"], range=[[1, 0], [6, 3]]),
                                      title=legend, legend=alt.Legend(orient="top")),
            strokeWidth=alt.StrokeWidth("run:N", scale=alt.Scale(domain=["A", "B"], range=[3.5, 1.5]),
                                        title=legend, legend=alt.Legend(orient="top")),
            opacity=alt.Opacity("run:N", scale=alt.Scale(domain=["A", "B"], range=[0.45, 1.0]),
                                title=legend, legend=alt.Legend(orient="top")),
            order=alt.Order("run:N", sort="ascending"),
        )
        .properties(height=LINE_HEIGHT)
    )


def gap_chart(df: pd.DataFrame, summary: DivergenceSummary, title: str) -> alt.LayerChart:
    long = df.melt(id_vars=["step"], value_vars=["|Δ loss|", "‖Δθ‖"], var_name="gap", value_name="value")
    long = long[long["value"] > 0]
    series = ["|Δ loss|", "‖Δθ‖", "fitted growth of ‖Δθ‖"]
    colours = alt.Scale(domain=series, range=["#1f5fa8", "#7cb7e8", "#111827"])
    lines = (
        alt.Chart(long, title=title)
        .mark_line()
        .encode(
            x=STEP_AXIS,
            y=alt.Y("value:Q", scale=alt.Scale(type="log"),
                    title="|loss A − loss B| (nats) and ‖θA − θB‖ (log scale)"),
            color=alt.Color("gap:N", scale=colours, title="difference", legend=alt.Legend(orient="top")),
        )
    )
    layers = [lines]
    if summary.growth_per_step and summary.fit_range:
        a, b = summary.fit_range
        sel = df[(df["step"] >= a) & (df["step"] <= b) & (df["‖Δθ‖"] > 0)]
        if len(sel) >= 2:
            slope, icept = np.polyfit(sel["step"], np.log(sel["‖Δθ‖"]), 1)
            fit = pd.DataFrame({"step": [a, b], "value": [math.exp(icept + slope * a), math.exp(icept + slope * b)],
                                "gap": [series[2]] * 2})
            layers.append(
                alt.Chart(fit).mark_line(strokeDash=[6, 3]).encode(x="step:Q", y="value:Q",
                                                                   color=alt.Color("gap:N", scale=colours))
            )
    return styled(alt.layer(*layers).properties(height=LINE_HEIGHT))


def bits_strip(df: pd.DataFrame) -> alt.Chart:
    return styled(
        alt.Chart(df)
        .mark_area(color="#c0392b", opacity=0.7)
        .encode(
            x=STEP_AXIS,
            y=alt.Y("differing bits:Q", title="share of parameter bits (%)", axis=alt.Axis(format="%", tickCount=5),
                    scale=alt.Scale(domain=[0, 0.5])),
        )
        .properties(height=STRIP_HEIGHT, title="Share of all parameter bits that differ between A and B")
    )


def boundary_frame(gx, gy, pred, x64, y) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Grid cells as rectangles that tile the plane (edges half a grid step either side), and the points."""
    xs, ys = np.unique(gx), np.unique(gy)
    hx = (xs[1] - xs[0]) / 2 if xs.size > 1 else 0.5
    hy = (ys[1] - ys[0]) / 2 if ys.size > 1 else 0.5
    grid = pd.DataFrame({"x": gx - hx, "x2": gx + hx, "y": gy - hy, "y2": gy + hy, "class": pred.astype(str)})
    pts = pd.DataFrame({"x": x64[:, 0], "y": x64[:, 1], "class": y.astype(str)})
    return grid, pts


def boundary_chart(grid: pd.DataFrame, pts: pd.DataFrame, title: str) -> alt.LayerChart:
    """Predicted class as tiled cells (pale), the data points in their true class (solid).

    Rectangles with explicit edges tile the plane at any width (squares of a fixed size left
    gaps, which read as vertical stripes on a wide screen); the chart keeps a square aspect.
    """
    classes = sorted(set(grid["class"]) | set(pts["class"]), key=int)
    colours = alt.Scale(domain=classes, range=CLASS_COLOURS[: len(classes)])
    lo_x, hi_x = float(grid["x"].min()), float(grid["x2"].max())
    lo_y, hi_y = float(grid["y"].min()), float(grid["y2"].max())
    x = alt.X("x:Q", title="feature x₁", scale=alt.Scale(domain=[lo_x, hi_x], nice=False, zero=False))
    y = alt.Y("y:Q", title="feature x₂", scale=alt.Scale(domain=[lo_y, hi_y], nice=False, zero=False))
    cells = (
        alt.Chart(grid, title=title)
        .mark_rect(opacity=0.3)
        .encode(x=x, x2="x2:Q", y=y, y2="y2:Q",
                color=alt.Color("class:N", scale=colours, title="class", legend=alt.Legend(orient="bottom")))
    )
    dots = (
        alt.Chart(pts)
        .mark_circle(size=16, opacity=0.9, stroke="#111827", strokeWidth=0.3)
        .encode(x=x, y=y, color=alt.Color("class:N", scale=colours))
    )
    return styled(alt.layer(cells, dots).properties(width=BOUNDARY_WIDTH, height=BOUNDARY_HEIGHT))


def precision_overlay(f32: PairOutcome, f64: PairOutcome) -> alt.Chart:
    rows = [{"step": t, "|Δ loss|": d, "pair": "float32 pair"} for t, d in zip(f32.steps, f32.abs_diff, strict=True)]
    rows += [{"step": t, "|Δ loss|": d, "pair": "float64 pair"} for t, d in zip(f64.steps, f64.abs_diff, strict=True)]
    df = pd.DataFrame(rows, columns=["step", "|Δ loss|", "pair"])
    return styled(
        alt.Chart(df, title="|loss A − loss B| of the float32 pair and of the float64 pair")
        .mark_line()
        .encode(
            x=STEP_AXIS,
            y=alt.Y("|Δ loss|:Q", scale=alt.Scale(type="log"), title="|loss A − loss B| (nats, log scale)"),
            color=alt.Color("pair:N", title="pair", scale=alt.Scale(domain=["float32 pair", "float64 pair"],
                                                                    range=["#c0392b", "#1e8449"]),
                            legend=alt.Legend(orient="top")),
        )
        .properties(height=LINE_HEIGHT)
    )


def seed_frame(study: SeedStudy) -> pd.DataFrame:
    rows = []
    for i, s in enumerate(study.seeds):
        rows.append({"seed": s, "side": "A", "final loss": study.final_loss_a[i], "accuracy": study.final_acc_a[i]})
        rows.append({"seed": s, "side": "B", "final loss": study.final_loss_b[i], "accuracy": study.final_acc_b[i]})
    return pd.DataFrame(rows)


def seed_chart(df: pd.DataFrame, field: str) -> alt.LayerChart:
    unit = {"final loss": "final loss on the last batch (nats)", "accuracy": "accuracy on the whole data set"}
    box = alt.Chart(df).mark_boxplot(extent="min-max", opacity=0.4).encode(
        x=alt.X("side:N", title="side (one dot per seed)"),
        y=alt.Y(f"{field}:Q", scale=alt.Scale(zero=False), title=unit.get(field, field)),
        color=alt.Color("side:N", scale=RUN_COLOURS, legend=None))
    dots = alt.Chart(df).mark_circle(size=60).encode(
        x="side:N", y=f"{field}:Q", color=alt.Color("side:N", scale=RUN_COLOURS, legend=None),
        tooltip=["seed", "side", alt.Tooltip(f"{field}:Q", format=".5g")])
    return styled(alt.layer(box, dots).properties(height=300, title=field))
