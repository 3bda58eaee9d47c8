"""Drawing for the training-divergence page: tables, Altair charts, the pair's live view, the
progress bar and the Play loop (no numerics here; core.training.divergence says what is shown)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from core.arith.exact import exact_decimal
from core.arith.formats import FORMATS
from core.crowd.querystate import Field, decode
from core.crowd.runner import PairOutcome
from core.recordings.store import Parting
from core.training.divergence import PairSnapshot, frame_steps, snapshot
from core.training.mlp import TrainSettings
from core.training.pair import SOURCES, PairedRun, StepRecord
from core.training.seeds import DivergenceSummary, SeedStudy
from ui.export import download_buttons
from ui.render import bits_html, inert
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


# ------------------------------------------------------------------------ the live pair

FRAMES = 10  # chart redraws during one Play of the whole run (fewer redraws keep it fast)
PLAY_CHUNK = 10  # steps applied at once while playing: tens of milliseconds between yield points (idle core)
YIELD_EVERY = 0.1  # seconds between two progress updates (each is where a click or a closed tab stops a run)


def apply_preset_link(fields: list[Field], preset_values: Callable[[str], dict]) -> bool:
    """A link that names a preset sets every setting of that preset; True when one was applied.

    Settings named in the same link win over the preset's. A link that already carries every
    setting is one this page wrote itself (``sync``) and is left to ``restore``.
    """
    params = dict(st.query_params)
    if "preset" not in params or all(f.param in params for f in fields):
        return False
    values, _ = decode(params, fields)
    if "td_preset" not in values:
        return False  # a rejected preset name: restore's note says so
    st.session_state.update({**preset_values(values["td_preset"]), **values})
    return True


class Progress:
    """A progress bar updated at most every YIELD_EVERY seconds.

    Every update sends a message, which is where Streamlit stops this script run when the
    visitor clicked something else or closed the tab: long work calls ``update`` between chunks.
    """

    def __init__(self, where, text: str) -> None:
        self.bar = where.progress(0.0, text=text)
        self.text = text
        self.last = time.monotonic()

    def update(self, done: int, total: int, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self.last >= YIELD_EVERY:
            self.bar.progress(min(1.0, done / total), text=f"{self.text} {done:,} of {total:,} steps")
            self.last = now


def value_and_bits(v: float, bits: int, dtype: str) -> str:
    """A loss and its bit pattern, as the record carries them (core.training.pair reads the bits)."""
    fmt = FORMATS[dtype]
    digits = f"{v:.9g}" if dtype == "float32" else repr(v)
    return f"<code>{digits}</code> {bits_html(bits, fmt)}<br><small>exactly {exact_decimal(Fraction(v))}</small>"


@dataclass
class PairSlots:
    """Where the pair is drawn: the progress bar and key numbers (in the punchline), the charts below."""

    progress: object
    numbers: object
    charts: object

    def show_progress(self, done: int, steps: int) -> None:
        self.progress.progress(done / steps, text=f"step {done:,} of {steps:,}")


def _key_numbers(snap: PairSnapshot, where) -> None:
    summary, last = snap.summary, snap.last
    m1, m2, m3, m4 = where.container().columns(4)
    m1.metric("First step that differs", summary.first_difference or "none yet")
    m2.metric("Loss gap above 1% from step", summary.first_rel_1pct or "not yet")
    m3.metric("‖Δθ‖ doubles every", f"{summary.doubling_steps:.1f} steps" if summary.doubling_steps else "—",
              help="A least-squares line through ln‖θA − θB‖ over its growth phase "
              f"(steps {summary.fit_range[0]}–{summary.fit_range[1]})" if summary.fit_range else None)
    m4.metric("Parameter bits that differ", f"{last.differing_bits / last.total_bits:.1%}")


def _boundaries(snap: PairSnapshot, run: PairedRun) -> None:
    gx, gy, pa, pb = snap.grid
    left, right = st.columns(2)
    grid_a, pts = boundary_frame(gx, gy, pa, run.x64, run.y)
    grid_b, _ = boundary_frame(gx, gy, pb, run.x64, run.y)
    left.altair_chart(boundary_chart(grid_a, pts, f"Run A at step {snap.last.step}"), width="content")
    right.altair_chart(boundary_chart(grid_b, pts, f"Run B at step {snap.last.step}"), width="content")
    st.caption("Decision boundaries: the pale cells are the class each run predicts there, the dots are the "
               "data points in their true class (both runs saw the same points).")


def draw_pair(run: PairedRun, settings: TrainSettings, slots: PairSlots, live: bool = False) -> None:
    """Everything below the buttons, from one atomic snapshot of the pair."""
    snap = snapshot(run, settings, None if live else 50)
    slots.show_progress(len(snap.records), settings.steps)
    with slots.charts.container():
        if not snap.records:
            slots.numbers.info("Press Play to train both runs live, or Step to apply one update at a time.")
            return
        last = snap.last
        if not snap.finite:
            st.warning("The losses have overflowed to inf or NaN: this learning rate makes training blow up. "
                       "Lower it to see a meaningful comparison.", icon=":material/warning:")
        where_b = {"device": f"B ran on {snap.b_device_name}",
                   "stand-in": "both ran live on this CPU (B is a reordered stand-in for another device)",
                   "cpu": "both ran live on this CPU"}[snap.b_kind]
        st.markdown(f"**After step {last.step}** · B differs by: {SOURCES[settings.source].lower()} · {where_b}.")
        a_col, b_col = st.columns(2)
        a_col.markdown("Loss A " + value_and_bits(last.loss_a, last.loss_a_bits, snap.loss_a_dtype),
                       unsafe_allow_html=True)
        b_col.markdown("Loss B " + value_and_bits(last.loss_b, last.loss_b_bits, snap.loss_b_dtype),
                       unsafe_allow_html=True)
        _key_numbers(snap, slots.numbers)
        df = records_frame(list(snap.records))
        what = SOURCES[settings.source].split(":")[0].lower()
        kind = {"device": "real GPU", "stand-in": "reordered stand-in", "cpu": "live on this CPU"}[snap.b_kind]
        st.altair_chart(loss_chart(df, f"Training loss of A and B (B: {what}; {kind})"), width="stretch")
        st.altair_chart(gap_chart(df, snap.summary, f"How far apart: |Δ loss| and ‖θA − θB‖, dashed: fitted "
                                  f"growth (B: {what}; {kind})"), width="stretch")
        st.altair_chart(bits_strip(df), width="stretch")
        if live or snap.grid is None:
            st.caption("Decision boundaries are drawn when the run pauses or ends.")
            return
        download_buttons(df, {"difference": settings.source, "format": settings.dtype,
                              "optimizer": settings.optimizer, "lr": settings.lr, "steps": settings.steps,
                              "seed": settings.seed}, "training-pair", "td")
        _boundaries(snap, run)


def play_requested(run: PairedRun, settings: TrainSettings, slots: PairSlots) -> None:
    """Apply what was asked for (Play: the whole run) in chunks, with a yield point between them.

    A click or a closed tab stops this loop within one chunk; the next script run carries on with
    what is still asked for. The charts are redrawn FRAMES times over a whole run; at the end the
    page is drawn again from the top, with Play and Step disabled.
    """
    if not run.requested:
        return
    frame = frame_steps(settings.steps, FRAMES)
    next_frame = run.done + frame
    last_yield = time.monotonic()
    while run.requested:
        run.advance_requested(PLAY_CHUNK)
        done = run.done
        if done >= next_frame and run.requested:
            draw_pair(run, settings, slots, live=True)
            next_frame = done + frame
            last_yield = time.monotonic()
        elif time.monotonic() - last_yield >= YIELD_EVERY:
            slots.show_progress(done, settings.steps)  # a yield point: raises here when a newer script run took over
            last_yield = time.monotonic()
    if run.finished:
        slots.show_progress(run.done, settings.steps)  # a yield point first: only the current script run may rerun
        st.rerun()


def recorded_partings(partings: tuple[Parting, ...]) -> None:
    """Where this preset's pair parted on each recorded real machine (one caption, each with its recording's
    provenance), and on the same hardware in other numeric configurations (folded away)."""
    def cell(p: Parting) -> str:
        when = f"from step {p.step}" if p.step else f"never within {p.steps} steps"
        return f"{when}, {inert(p.label, line_start=False)}"

    machines = [p for p in partings if p.configuration is None]
    tuned = [p for p in partings if p.configuration is not None]
    if machines:
        st.caption(f"On {len(machines)} recorded machine{'s' if len(machines) > 1 else ''}, this pair is more than "
                   "1% apart " + "; ".join(cell(p) for p in machines) + ".")
    if tuned:
        with st.expander(f"The same hardware in other numeric configurations ({len(tuned)})"):
            for p in tuned:
                st.caption(cell(p)[:1].upper() + cell(p)[1:] + ".")
