"""Tables and Altair charts for the training-divergence page (no numerics here)."""

from __future__ import annotations

import math

import altair as alt
import numpy as np
import pandas as pd

from core.runner import PairOutcome
from core.training import DivergenceSummary, SeedStudy, StepRecord

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


def loss_chart(df: pd.DataFrame, title: str) -> alt.Chart:
    long = df.melt(id_vars=["step"], value_vars=["loss A", "loss B"], var_name="run", value_name="loss")
    long["run"] = long["run"].str[-1]
    return (
        alt.Chart(long, title=title)
        .mark_line(strokeWidth=1.5)
        .encode(
            x="step:Q",
            y=alt.Y("loss:Q", scale=alt.Scale(type="log"), title="training loss (batch)"),
            color=alt.Color("run:N", scale=RUN_COLOURS),
            strokeDash=alt.StrokeDash("run:N", legend=None, sort=["A", "B"]),
        )
        .properties(height=240)
    )


def gap_chart(df: pd.DataFrame, summary: DivergenceSummary, title: str) -> alt.LayerChart:
    long = df.melt(id_vars=["step"], value_vars=["|Δ loss|", "‖Δθ‖"], var_name="gap", value_name="value")
    long = long[long["value"] > 0]
    lines = (
        alt.Chart(long, title=title)
        .mark_line()
        .encode(
            x="step:Q",
            y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="difference between A and B"),
            color=alt.Color("gap:N", title=None),
        )
    )
    layers = [lines]
    if summary.growth_per_step and summary.fit_range:
        a, b = summary.fit_range
        sel = df[(df["step"] >= a) & (df["step"] <= b) & (df["‖Δθ‖"] > 0)]
        if len(sel) >= 2:
            slope, icept = np.polyfit(sel["step"], np.log(sel["‖Δθ‖"]), 1)
            fit = pd.DataFrame({"step": [a, b], "value": [math.exp(icept + slope * a), math.exp(icept + slope * b)]})
            layers.append(
                alt.Chart(fit).mark_line(color="#111827", strokeDash=[6, 3]).encode(x="step:Q", y="value:Q")
            )
    return alt.layer(*layers).properties(height=240)


def bits_strip(df: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(df)
        .mark_area(color="#c0392b", opacity=0.7)
        .encode(
            x="step:Q",
            y=alt.Y("differing bits:Q", title="bits that differ", axis=alt.Axis(format="%", tickCount=3),
                    scale=alt.Scale(domain=[0, 0.5])),
        )
        .properties(height=170, title="Share of all parameter bits that differ between A and B")
    )


def boundary_frame(gx, gy, pred, x64, y) -> tuple[pd.DataFrame, pd.DataFrame]:
    grid = pd.DataFrame({"x": gx, "y": gy, "class": pred.astype(str)})
    pts = pd.DataFrame({"x": x64[:, 0], "y": x64[:, 1], "class": y.astype(str)})
    return grid, pts


def boundary_chart(grid: pd.DataFrame, pts: pd.DataFrame, title: str) -> alt.LayerChart:
    cells = (
        alt.Chart(grid, title=title)
        .mark_square(size=40, opacity=0.35)
        .encode(x=alt.X("x:Q", axis=None), y=alt.Y("y:Q", axis=None), color=alt.Color("class:N", legend=None))
    )
    dots = (
        alt.Chart(pts)
        .mark_circle(size=14, opacity=0.9, stroke="#111827", strokeWidth=0.3)
        .encode(x="x:Q", y="y:Q", color=alt.Color("class:N", legend=None))
    )
    return alt.layer(cells, dots).properties(height=260)


def precision_overlay(f32: PairOutcome, f64: PairOutcome) -> alt.Chart:
    rows = [{"step": t, "|Δ loss|": d, "pair": "float32 pair"} for t, d in zip(f32.steps, f32.abs_diff, strict=True)]
    rows += [{"step": t, "|Δ loss|": d, "pair": "float64 pair"} for t, d in zip(f64.steps, f64.abs_diff, strict=True)]
    df = pd.DataFrame(rows, columns=["step", "|Δ loss|", "pair"])
    return (
        alt.Chart(df, title="|loss A − loss B| of the float32 pair and of the float64 pair")
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="training step"),
            y=alt.Y("|Δ loss|:Q", scale=alt.Scale(type="log"), title="|loss A − loss B| (log scale)"),
            color=alt.Color("pair:N", title="pair", scale=alt.Scale(domain=["float32 pair", "float64 pair"],
                                                                    range=["#c0392b", "#1e8449"])),
        )
        .properties(height=240)
    )


def seed_frame(study: SeedStudy) -> pd.DataFrame:
    rows = []
    for i, s in enumerate(study.seeds):
        rows.append({"seed": s, "side": "A", "final loss": study.final_loss_a[i], "accuracy": study.final_acc_a[i]})
        rows.append({"seed": s, "side": "B", "final loss": study.final_loss_b[i], "accuracy": study.final_acc_b[i]})
    return pd.DataFrame(rows)


def seed_chart(df: pd.DataFrame, field: str) -> alt.LayerChart:
    box = alt.Chart(df).mark_boxplot(extent="min-max", opacity=0.4).encode(
        x=alt.X("side:N", title=None), y=alt.Y(f"{field}:Q", scale=alt.Scale(zero=False)),
        color=alt.Color("side:N", scale=RUN_COLOURS, legend=None))
    dots = alt.Chart(df).mark_circle(size=60).encode(
        x="side:N", y=f"{field}:Q", color=alt.Color("side:N", scale=RUN_COLOURS, legend=None),
        tooltip=["seed", "side", alt.Tooltip(f"{field}:Q", format=".5g")])
    return alt.layer(box, dots).properties(height=220, title=field)
