"""Drawing for the training-divergence page: tables, Altair charts, the pair's live view, the
progress bar and the Play loop (no numerics here; core.training.divergence says what is shown)."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st
from streamlit import dataframe_util

from core.arith.exact import exact_decimal
from core.arith.formats import FORMATS
from core.crowd.bytecache import PLAY_FRAMES
from core.crowd.querystate import Field, decode
from core.crowd.runner import PairOutcome
from core.crowd.sharedrun import RunView
from core.recordings.compare import Parting
from core.training.differences import PLAIN, SOURCES
from core.training.divergence import FirstDifferences, PairSnapshot, check_speed, snapshot
from core.training.gap import StepRecord
from core.training.mlp import TrainSettings
from core.training.seeds import APART, DivergenceSummary, SeedStudy
from core.training.thinning import thinned_rows
from ui import charts, glossary
from ui.export import download_buttons
from ui.palette import (
    CLASSES,
    DIFFERING_BITS,
    FIT,
    FLOAT32_PAIR,
    FLOAT64_PAIR,
    LEGEND_FILL,
    LOSS_GAP,
    NOTE,
    OUTLINE,
    REFERENCE,
    RUN_A,
    RUN_B,
    WEIGHT_GAP,
)
from ui.progress import YIELD_EVERY, ProgressBar
from ui.render import bits_html, inert
from ui.talk import styled

RUN_COLOURS = alt.Scale(domain=["A", "B"], range=[RUN_A, RUN_B])  # B is dashed as well (ui.palette)
GAP_COLOURS = [LOSS_GAP, WEIGHT_GAP, FIT]  # |Δ loss|, ‖Δθ‖, the fit
POINTS_UP_TO = 60  # steps: up to this many, every step is drawn as a point too (one Step shows one point)


def records_frame(records: list[StepRecord]) -> pd.DataFrame:
    return pd.DataFrame({
        "step": [r.step for r in records],
        "loss A": [r.loss_a for r in records],
        "loss B": [r.loss_b for r in records],
        "|Δ loss|": [r.abs_diff for r in records],
        "relative gap": [r.rel_diff for r in records],
        "‖Δθ‖": [r.param_distance for r in records],
        "differing bits": [r.differing_bits / r.total_bits for r in records],
        "accuracy A": [r.acc_a for r in records],
        "accuracy B": [r.acc_b for r in records],
    })


STEP_AXIS = alt.X("step:Q", title="training step", axis=alt.Axis(format="d", tickMinStep=1),
                  scale=alt.Scale(nice=False))
# Streamlit's theme fits title, axes and legend inside a chart's height, so the heights below leave
# room for them (a 170 px strip keeps about 15 px for its plotting area).
LINE_HEIGHT = 340
STRIP_HEIGHT = 300
# The two live charts beside the controls, both on the first screen at 1280x720: stacked in the
# normal layout, side by side (and taller) in presenter mode.
LIVE_HEIGHT, LIVE_HEIGHT_SIDE_BY_SIDE = 190, 300
BOUNDARY_WIDTH, BOUNDARY_HEIGHT = 420, 480  # a square plotting area once axes and legend are placed


# A step chart draws at most about this many rows. A chart is 600 to 1,200 px wide, so more points share
# pixel columns; at 5,000 steps the live charts sent 1.4 MB of points a frame and the details 2.7 MB.
CHART_ROWS = 1000


def thinned(df: pd.DataFrame, columns: list[str], limit: int = CHART_ROWS) -> pd.DataFrame:
    """The rows a chart of ``columns`` against step draws (core.training.thinning: at most about ``limit``,
    every spike and dip kept); a frame that keeps every row comes back whole."""
    rows = thinned_rows([df[c].to_numpy(dtype=np.float64) for c in columns], len(df), limit)
    return df if len(rows) == len(df) else df.iloc[rows]


def _few(df: pd.DataFrame) -> bool:
    """Short enough to draw every step as a point too (one record: one visible point)."""
    return len(df) > 0 and df["step"].nunique() <= POINTS_UP_TO


def _line(data, title=None, few: bool = False):
    """A line chart of ``data`` (a table, or its name: see ``Tables``) that also draws its points while the run is
    short (``few``: one record, one visible point)."""
    chart = alt.Chart(data) if title is None else alt.Chart(data, title=title)
    return chart.mark_line(point=few)


def _text(text: str) -> pd.DataFrame:
    return pd.DataFrame({"text": [text]})


def _message(data, colour: str) -> alt.Chart:
    """A line of text inside a chart's plotting area, a third down (a chart with nothing to plot yet says
    why), in the colour of the series that will appear there. ``data``: a one-row table of the text."""
    return (alt.Chart(data)
            .mark_text(fontSize=15, color=colour, align="center", baseline="middle")
            .encode(text="text:N", x=alt.value(alt.expr("width / 2")), y=alt.value(alt.expr("height / 3"))))


class Tables:
    """Where a chart's rows come from. A chart of the pair is built from its tables (``Tables.inline``: the rows
    inside the chart, as ``st.altair_chart`` draws them), or from their names alone (``Tables.by_name``), so that
    one specification serves every frame of one shape: the rows travel beside it as named datasets, the same
    bytes Streamlit makes of the inline chart, so the chart drawn is the same (tests/pages/test_training_divergence.py
    compares them)."""

    def __init__(self, tables: Mapping[str, object], as_names: bool) -> None:
        self.tables, self.as_names = tables, as_names
        self._refs: dict[str, alt.NamedData] = {}  # one reference per table: layers sharing it share their data

    @classmethod
    def inline(cls, tables: Mapping[str, pd.DataFrame]) -> Tables:
        return cls(tables, as_names=False)

    @classmethod
    def by_name(cls, names: Iterable[str]) -> Tables:
        return cls(dict.fromkeys(names), as_names=True)

    @staticmethod
    def dataset(name: str) -> str:
        """The name a table's rows travel under beside a specification built ``by_name``."""
        return f"td-{name}"

    def __contains__(self, name: str) -> bool:
        return name in self.tables

    def __getitem__(self, name: str):
        if not self.as_names:
            return self.tables[name]
        if name not in self._refs:
            self._refs[name] = alt.NamedData(name=self.dataset(name))
        return self._refs[name]


def loss_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The loss chart's rows: both losses by step (thinned, one row per run and step), and the message of an
    empty chart."""
    long = thinned(df, ["loss A", "loss B"]).melt(id_vars=["step"], value_vars=["loss A", "loss B"], var_name="run",
                                                   value_name="loss")
    long["run"] = long["run"].str[-1]
    return {"loss": long, **({} if len(df) else {"message": _text("press Play or Step to train A and B")})}


def loss_chart(df: pd.DataFrame, title: str | None = None, height: int = LINE_HEIGHT,
               x_title: bool = True) -> alt.LayerChart:
    """A blue and wide, B orange, dashed and on top: where the losses agree both stay visible.

    While the run is short every step is a point too, A's larger than B's, so that a single step
    (two equal losses) still shows both runs. ``x_title=False`` for the chart stacked on the relative
    gap, whose step axis says it."""
    return loss_layers(Tables.inline(loss_tables(df)), _few(df), title, height, x_title)


def loss_layers(tables: Tables, few: bool, title: str | None = None, height: int = LINE_HEIGHT,
                x_title: bool = True) -> alt.LayerChart:
    """``loss_chart`` from its tables (``loss_tables``)."""
    long = tables["loss"]
    where = alt.Legend(orient="top-right", fillColor=LEGEND_FILL, padding=4, title=None)
    x = STEP_AXIS if x_title else STEP_AXIS.title(None)
    y = alt.Y("loss:Q", scale=alt.Scale(type="log"), title="loss A and B (log)")
    colour = alt.Color("run:N", scale=RUN_COLOURS, legend=where)
    lines = (
        (alt.Chart(long) if title is None else alt.Chart(long, title=title))
        .mark_line()
        .encode(
            x=x, y=y, color=colour,
            strokeDash=alt.StrokeDash("run:N", scale=alt.Scale(domain=["A", "B"], range=[[1, 0], [6, 4]]),
                                      legend=where),
            strokeWidth=alt.StrokeWidth("run:N", scale=alt.Scale(domain=["A", "B"], range=[3.5, 2.0]),
                                        legend=where),
            order=alt.Order("run:N", sort="ascending"),
        )
    )
    layers = [lines]
    if "message" in tables:
        layers.append(_message(tables["message"], RUN_COLOURS.range[0]))
    elif few:
        layers.append(alt.Chart(long).mark_circle(opacity=1).encode(
            x=x, y=y, color=alt.Color("run:N", scale=RUN_COLOURS, legend=None),
            size=alt.Size("run:N", scale=alt.Scale(domain=["A", "B"], range=[130, 35]), legend=None),
            order=alt.Order("run:N", sort="ascending"),
            tooltip=["step:Q", "run:N", alt.Tooltip("loss:Q", format=".9g")]))
    return styled(alt.layer(*layers).properties(height=height))


# The live chart's vertical title is centred on a plot of about 140 px (LIVE_HEIGHT less the step axis); Vega
# draws a longer one past the chart's top edge, where it is cut off: "relative loss gap (linear" showed.
RELATIVE_GAP_TITLE = "relative loss gap"
GAP_TOP = 2 * APART  # the relative gap's axis reaches at least twice the parting line, so that line always shows


def gap_top(df: pd.DataFrame) -> float:
    """Where the relative gap's axis ends: its largest finite value, at least GAP_TOP."""
    gap = df["relative gap"]
    finite = gap[np.isfinite(gap)]
    return max(GAP_TOP, float(finite.max()) if len(finite) else GAP_TOP)


def relative_gap_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The relative gap chart's rows: the gap by step (thinned), the 1% line, and a message while there is no gap."""
    data = df[["step", "relative gap"]]
    tables = {"gap": thinned(data, ["relative gap"]), "rule": pd.DataFrame({"y": [APART], "label": [f"{APART:.0%}"]})}
    if not len(data):
        tables["message"] = _text("no step yet")
    elif not (data["relative gap"] > 0).any():
        tables["message"] = _text(f"losses bit-identical so far ({len(data)} step{'s' if len(data) != 1 else ''})")
    return tables


def relative_gap_chart(df: pd.DataFrame, height: int = LIVE_HEIGHT) -> alt.LayerChart:
    """|loss A − loss B| / loss A on a linear axis, with the 1% line the metric beside it counts from.

    On a linear scale the gap stays flat on zero while the runs agree and lifts off when they part:
    what the log chart below shows as a steady climb, this one shows as the moment it matters."""
    return relative_gap_layers(Tables.inline(relative_gap_tables(df)), _few(df), gap_top(df), height)


def relative_gap_layers(tables: Tables, few: bool, top: float, height: int = LIVE_HEIGHT) -> alt.LayerChart:
    """``relative_gap_chart`` from its tables (``relative_gap_tables``), its axis up to ``top``."""
    scale = alt.Scale(domainMin=0, domainMax=top)
    gap = (
        _line(tables["gap"], few=few)
        .encode(x=STEP_AXIS,
                y=alt.Y("relative gap:Q", scale=scale, axis=alt.Axis(format="%"), title=RELATIVE_GAP_TITLE),
                color=alt.value(GAP_COLOURS[0]))
    )
    line = alt.Chart(tables["rule"]).mark_rule(strokeDash=[4, 4], color=REFERENCE).encode(y="y:Q")
    label = alt.Chart(tables["rule"]).mark_text(align="left", dx=4, dy=-8, fontSize=13, color=NOTE).encode(
        y="y:Q", x=alt.value(0), text="label:N")
    layers = [gap, line, label]
    if "message" in tables:
        layers.append(_message(tables["message"], GAP_COLOURS[0]))
    return styled(alt.layer(*layers).properties(height=height))


GAP_SERIES = ["|Δ loss|", "‖Δθ‖", "fitted growth of ‖Δθ‖"]


def gap_tables(df: pd.DataFrame, summary: DivergenceSummary | None) -> dict[str, pd.DataFrame]:
    """The log chart's rows: both gaps by step where above zero (thinned), the fitted line while the distance grows,
    and the message of a pair still bit-identical."""
    long = thinned(df, ["|Δ loss|", "‖Δθ‖"]).melt(id_vars=["step"], value_vars=["|Δ loss|", "‖Δθ‖"], var_name="gap",
                                                  value_name="value")
    long = long[long["value"] > 0]
    tables = {"gaps": long if len(long) else pd.DataFrame({"step": [], "value": [], "gap": []})}
    if not len(long):
        tables["message"] = _text("A and B bit-identical so far: no difference to draw on a log scale")
    if summary is not None and summary.growing:
        a, b = summary.fit_range  # the fitted line itself (core.arith.metrics.growth_fit), not a refit
        tables["fit"] = pd.DataFrame({"step": [a, b], "value": [summary.fit.at(a), summary.fit.at(b)],
                                      "gap": [GAP_SERIES[2]] * 2})
    return tables


def gap_chart(df: pd.DataFrame, summary: DivergenceSummary, title: str) -> alt.LayerChart:
    tables = gap_tables(df, summary)
    return gap_layers(Tables.inline(tables), _few(tables["gaps"]), title)


def gap_layers(tables: Tables, few: bool, title: str) -> alt.LayerChart:
    """``gap_chart`` from its tables (``gap_tables``)."""
    colours = alt.Scale(domain=GAP_SERIES, range=GAP_COLOURS)
    lines = (
        _line(tables["gaps"], title, few=few)
        .encode(
            x=STEP_AXIS,
            y=alt.Y("value:Q", scale=alt.Scale(type="log"),
                    title="|loss A − loss B| (nats) and ‖θA − θB‖ (log)"),
            color=alt.Color("gap:N", scale=colours, title="difference", legend=alt.Legend(orient="top")),
        )
    )
    layers = [lines]
    if "message" in tables:
        layers.append(_message(tables["message"], GAP_COLOURS[0]))
    if "fit" in tables:
        layers.append(
            alt.Chart(tables["fit"]).mark_line(strokeDash=[6, 3]).encode(x="step:Q", y="value:Q",
                                                                         color=alt.Color("gap:N", scale=colours))
        )
    return styled(alt.layer(*layers).properties(height=LINE_HEIGHT))


def bits_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    return {"bits": thinned(df[["step", "differing bits"]], ["differing bits"])}


def bits_strip(df: pd.DataFrame) -> alt.Chart:
    return bits_layers(Tables.inline(bits_tables(df)), len(df) <= POINTS_UP_TO)


def bits_layers(tables: Tables, few: bool) -> alt.Chart:
    """``bits_strip`` from its table (``bits_tables``)."""
    return styled(
        alt.Chart(tables["bits"])
        .mark_area(color=DIFFERING_BITS, opacity=0.7, point=alt.OverlayMarkDef(color=DIFFERING_BITS) if few else False)
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
    colours = alt.Scale(domain=classes, range=CLASSES[: len(classes)])
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
        .mark_circle(size=16, opacity=0.9, stroke=OUTLINE, strokeWidth=0.3)
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
                                                                    range=[FLOAT32_PAIR, FLOAT64_PAIR]),
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
        y=alt.Y(f"{field}:Q", scale=alt.Scale(zero=False), title=unit.get(field, field), axis=alt.Axis(format="~g")),
        color=alt.Color("side:N", scale=RUN_COLOURS, legend=None))
    dots = alt.Chart(df).mark_circle(size=60).encode(
        x="side:N", y=f"{field}:Q", color=alt.Color("side:N", scale=RUN_COLOURS, legend=None),
        tooltip=["seed", "side", alt.Tooltip(f"{field}:Q", format=".5g")])
    return styled(alt.layer(box, dots).properties(height=300, title=field))


# ------------------------------------------------------------------------ the live pair

PLAY_CHUNK = 10  # steps applied at once while playing: tens of milliseconds between yield points (idle core)
# Play draws a frame at most this often (12.5 a second). Steps another viewer computed already cost no training,
# and a frame drawn from rows and a specification made for the room costs a few milliseconds: unpaced, such a Play
# would rush through its frames faster than a screen shows them (the server sends only the last of the frames
# queued meanwhile), and the curves would jump to the end instead of growing. A Play that computes its own steps
# alone took about 0.09 s a frame before frames were shared (2-core VM), and takes this pace now.
FRAME_S = 0.08


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


def value_and_bits(v: float, bits: int, dtype: str) -> str:
    """A loss and its bit pattern, as the record carries them (core.training.pair reads the bits)."""
    fmt = FORMATS[dtype]
    digits = f"{v:.9g}" if dtype == "float32" else repr(v)
    return f"<code>{digits}</code> {bits_html(bits, fmt)}<br><small>exactly {exact_decimal(Fraction(v))}</small>"


@dataclass(kw_only=True)
class PairSlots:
    """Where the pair is drawn: beside the buttons the progress bar and key numbers, beside them the two
    live charts (losses, relative gap: the first screen), and below the page's first screen the rest."""

    progress: object
    numbers: object
    charts: object
    details: object
    side_by_side: bool = False  # the two live charts beside each other (presenter mode's whole width)
    shown_numbers: tuple | None = None  # the key numbers drawn last in this script run (unchanged: not sent again)

    def show_progress(self, done: int, steps: int) -> None:
        self.progress.progress(done / steps, text=f"step {done:,} of {steps:,}")


# Key numbers beside the live charts: smaller than Streamlit's metric type so that five fit in a
# narrow column (presenter mode sizes them again in ui.talk.CSS; the values stay short).
NUMBERS_CSS = """<style>
.st-key-td_numbers [data-testid="stMetricValue"] { font-size: 1.45rem !important; }
.st-key-td_numbers [data-testid="stMetricLabel"] p { font-size: 0.8rem !important; }
.st-key-td_numbers [data-testid="stVerticalBlock"] { gap: 0.4rem; }
.st-key-td_numbers [data-testid="stMetricLabel"], .st-key-td_numbers [data-testid="stMetricLabel"] * {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important; }
</style>"""


def _key_numbers(summary: DivergenceSummary, firsts: FirstDifferences, slots: PairSlots) -> None:
    """Which of the losses and the weights differ first (as the charts show them), and how fast it grows; drawn
    again only when one of them changed since this script run drew them (most frames of a Play change none)."""
    doubling = f"{summary.doubling_steps:.1f} steps" if summary.doubling_steps else "—"
    fit = f"{summary.fit_range[0]}–{summary.fit_range[1]}" if summary.fit_range else None
    shown = (firsts.loss, firsts.weights, summary.first_rel_1pct, doubling, fit, firsts.note)
    if shown == slots.shown_numbers:
        return
    slots.shown_numbers = shown
    box = slots.numbers.container()  # inside the page's st.container(key="td_numbers"): NUMBERS_CSS
    m1, m2 = box.columns(2)
    m1.metric("Loss differs from step", firsts.loss or "not yet",
              help="The first step whose two losses have other bits (the loss curves and the relative gap).")
    m2.metric("Weights differ from step", firsts.weights or "not yet",
              help="The first step after which a parameter of B (rounded to A's format, in A's layout) has "
                   "other bits than A's (the ‖θA − θB‖ line and the bits strip below).")
    m3, m4 = box.columns(2)
    m3.metric("Loss gap first > 1% at step", summary.first_rel_1pct or "not yet",
              help="The first step with |loss A − loss B| / loss A above 1% (the dashed line of the relative gap); "
                   "the gap can fall back under 1% later.")
    label = "‖Δθ‖ doubles every"  # the page's first ‖Δθ‖: the distance and its doubling explained here
    m4.metric(label, doubling, help=glossary.help_for(label, "delta_theta", "doubling")
              + (f"\n\nFitted here over steps {fit}." if fit else ""))
    box.caption(firsts.note)


def _boundaries(snap: PairSnapshot, run: RunView, key: tuple) -> None:
    left, right = st.columns(2)

    def chart(side: int) -> alt.LayerChart:
        gx, gy = snap.grid[0], snap.grid[1]
        grid, pts = boundary_frame(gx, gy, snap.grid[2 + side], run.x64, run.y)
        return boundary_chart(grid, pts, f"Run {'AB'[side]} at step {snap.last.step}")

    for side, where in enumerate((left, right)):
        charts.show(chart, side, key=("boundary", *key, side), where=where, width="content")
    st.caption("Decision boundaries: the pale cells are the class each run predicts there, the dots are the "
               "data points in their true class (both runs saw the same points).")


# A chart of the pair at one step: whether every step is a point too, where its axis ends (None: no such axis), its
# tables. The same for every viewer of one run at one step: made once, kept in PLAY_FRAMES as Arrow bytes.
Frame = tuple[bool, float | None, dict[str, pd.DataFrame]]


def _frame_rows(frame: Frame) -> tuple[bool, float | None, dict[str, bytes], str]:
    """A frame's rows as the bytes Streamlit sends, and a digest of them (what names the frame's rows)."""
    few, top, tables = frame
    rows = {name: dataframe_util.convert_anything_to_arrow_bytes(t) for name, t in tables.items()}
    digest = hashlib.blake2b(b"".join(rows.values()), digest_size=8).hexdigest()
    return few, top, rows, digest


def _with(spec, key: str, value):
    """``spec`` with the one ``key`` inside it set to ``value``, copied along the way (the cached one stays whole)."""
    if isinstance(spec, dict):
        if key in spec:
            return {**spec, key: value}
        for k, v in spec.items():
            if (new := _with(v, key, value)) is not v:
                return {**spec, k: new}
    elif isinstance(spec, list):
        for i, v in enumerate(spec):
            if (new := _with(v, key, value)) is not v:
                return [*spec[:i], new, *spec[i + 1:]]
    return spec


def frame_spec(kind: str, at: Hashable, shape: Hashable, frame: Callable[[], Frame],
               build: Callable[[Tables, bool, float], object], keep: bool = True) -> dict | None:
    """The Vega-Lite specification of the chart ``kind`` of the pair at ``at`` (a run's key and a step), with its
    rows beside it as named datasets: ``build(tables, few, top)`` makes the chart, ``frame()`` its tables. None
    where Streamlit offers no conversion (``ui.charts``).

    A Play draws the pair tens of times, each time in every session of the room. The specification is built
    once per shape, drawing mode and table names (``Tables.by_name``, its axis end set to GAP_TOP), the rows
    once per run and step for the whole room (``keep=False``: a run no other viewer sees, its rows not kept);
    a view only joins the two and sets the axis end.

    The specification also names its rows (``usermeta``, which Vega-Lite carries and ignores): the browser then
    lays out each frame afresh, as it did when every frame's datasets had names of their own. With one
    specification and new rows it would update the rows in place, and Vega's "fit" layout, redone from the
    last frame's, can then place the plot a few pixels otherwise than a fresh one (two tabs of one step differed).
    """
    if keep:
        few, top, rows, digest = PLAY_FRAMES.get_or_compute((kind, at), lambda: _frame_rows(frame()))
    else:
        few, top, rows, digest = _frame_rows(frame())
    structure = charts.spec(lambda: build(Tables.by_name(rows), few, GAP_TOP), key=(kind, shape, few, tuple(rows)))
    if structure is None:
        return None
    spec = {**structure, "usermeta": {"rows": digest},
            "datasets": {Tables.dataset(name): data for name, data in rows.items()}}
    return spec if top is None else _with(spec, "domainMax", top)


def frame_chart(where, kind: str, at: Hashable, shape: Hashable, frame: Callable[[], Frame],
                build: Callable[[Tables, bool, float], object], keep: bool = True, width: str = "stretch") -> None:
    """Draw ``frame_spec``'s chart in ``where`` (as ``st.altair_chart`` draws it where there is no conversion)."""
    spec = frame_spec(kind, at, shape, frame, build, keep)
    if spec is None:
        few, top, tables = frame()
        where.altair_chart(build(Tables.inline(tables), few, top), width=width)
    else:
        where.vega_lite_chart(spec=spec, width=width)


DETAIL_FRAMES = 10  # while playing, the charts below the first screen are redrawn about this often per run


def draw_pair(run: RunView, settings: TrainSettings, slots: PairSlots, live: bool = False,
              details: bool = True) -> None:
    """The pair from one atomic snapshot: key numbers and the two live charts, then the details below
    (``details=False``: a live frame that leaves them as they are, to keep frames cheap).

    Every chart of the pair at one step is the same for every viewer of that run (``RunView.key``) in one
    drawing mode: its rows are made once for the room and its specification once per shape (``frame_chart``)."""
    snap = snapshot(run, settings, None if live else 50)
    slots.show_progress(len(snap.records), settings.steps)
    at = (run.key, len(snap.records))  # what every chart below shows: this run, this many steps
    made: dict[str, pd.DataFrame] = {}

    def df() -> pd.DataFrame:  # the table, made only when a chart is built here, not drawn from its specification
        if "df" not in made:
            made["df"] = records_frame(list(snap.records))
        return made["df"]

    with slots.charts.container():  # drawn from the first Step on: a point each, or a message in the chart
        height = LIVE_HEIGHT_SIDE_BY_SIDE if slots.side_by_side else LIVE_HEIGHT
        first, second = st.columns(2) if slots.side_by_side else (st, st)
        step = at if snap.records else ("no step",)  # before a first step: the same charts for every run
        keep = run.for_room or not snap.records
        frame_chart(first, "loss", step, (height, slots.side_by_side), lambda: (_few(df()), None, loss_tables(df())),
                    lambda tables, few, top: loss_layers(tables, few, None, height, x_title=slots.side_by_side), keep)
        frame_chart(second, "relative gap", step, height,
                    lambda: (_few(df()), gap_top(df()), relative_gap_tables(df())),
                    lambda tables, few, top: relative_gap_layers(tables, few, top, height), keep)
    if not snap.records:
        slots.numbers.info("Press Play to train both runs live, or Step to apply one update at a time.")
        slots.shown_numbers = None
        slots.details.empty()
        return
    # what the key numbers say at this step is the same for every viewer of the run: worked out once for the room
    numbers = (PLAY_FRAMES.get_or_compute(("numbers", at), lambda: (snap.summary, snap.firsts)) if run.for_room
               else (snap.summary, snap.firsts))
    _key_numbers(*numbers, slots)
    if details:
        with slots.details.container():
            _details(snap, numbers[0], run, settings, df, at, live)


def _details(snap: PairSnapshot, summary: DivergenceSummary, run: RunView, settings: TrainSettings,
             df: Callable[[], pd.DataFrame], at: tuple, live: bool) -> None:
    """Below the first screen: the last losses with their bits, the gaps on a log scale, the differing bits; when
    the run pauses or ends, the downloads and the decision boundaries."""
    last = snap.last
    what = SOURCES[settings.source].split(":")[0]
    what = what if what[:2].isupper() else what[:1].lower() + what[1:]  # "CPU threads" keeps its capitals
    kind = {"device": "real GPU", "stand-in": "reordered stand-in", "cpu": "live on this CPU"}[snap.b_kind]
    if not snap.finite:
        st.warning("The losses have overflowed to inf or NaN: this learning rate makes training blow up. "
                   "Lower it to see a meaningful comparison.", icon=":material/warning:")
    where_b = {"device": f"B ran on {snap.b_device_name}",
               "stand-in": "both ran live on this CPU (B is a reordered stand-in for another device's order)",
               "cpu": "both ran live on this CPU"}[snap.b_kind]
    st.markdown(f"**After step {last.step}** · {PLAIN[settings.source]} · {where_b}.")
    a_col, b_col = st.columns(2)
    a_col.markdown("Loss A (nats) " + value_and_bits(last.loss_a, last.loss_a_bits, snap.loss_a_dtype),
                   unsafe_allow_html=True, help=glossary.help_text("nats"))  # the page's first "nats"
    b_col.markdown("Loss B (nats) " + value_and_bits(last.loss_b, last.loss_b_bits, snap.loss_b_dtype),
                   unsafe_allow_html=True)
    title = f"How far apart on a log scale: |Δ loss| and ‖θA − θB‖, dashed: fitted growth (B: {what}; {kind})"

    def gaps() -> Frame:
        tables = gap_tables(df(), summary)
        return _few(tables["gaps"]), None, tables

    frame_chart(st, "log gaps", at, title, gaps, lambda tables, few, top: gap_layers(tables, few, title), run.for_room)
    st.metric("Parameter bits that differ", f"{last.differing_bits / last.total_bits:.1%}",
              help="Of all parameter bits, the share that differs between A and B after this step (the strip).")
    frame_chart(st, "bits", at, (), lambda: (len(snap.records) <= POINTS_UP_TO, None, bits_tables(df())),
                lambda tables, few, top: bits_layers(tables, few), run.for_room)
    if len(snap.records) > CHART_ROWS:
        st.caption(f"The charts draw {len(snap.records):,} steps through about {CHART_ROWS:,} points each: every "
                   "slice of steps by its lowest and its highest value of each line, so no spike is lost. The "
                   "numbers and the download are of every step.")
    if live or snap.grid is None:
        st.caption("Decision boundaries are drawn when the run pauses or ends.")
        return
    download_buttons(df(), {"difference": settings.source, "format": settings.dtype,
                            "optimizer": settings.optimizer, "lr": settings.lr, "steps": settings.steps,
                            "seed": settings.seed}, "training-pair", "td")
    _boundaries(snap, run, at)


def replay(run: RunView, target: int, slots: PairSlots) -> None:
    """Bring a fresh view to ``target`` steps (a reloaded page goes back to the step its run had reached): in
    chunks, with a progress bar where the pair's progress is shown (a click or a closed tab stops it)."""
    bar = ProgressBar(slots.progress, f"Back to step {target:,}, where this run was: replaying")
    run.run(target - run.done, bar.update)
    if run.finished:  # the buttons above were drawn for an unfinished pair: draw the page again, Play disabled
        st.rerun()


def _next(done: int, every: int) -> int:
    """The first multiple of ``every`` after ``done``: frames fall on the same steps in every session, so a room
    playing one run draws the same frames (ui.charts builds each once)."""
    return (done // every + 1) * every


def play_requested(run: RunView, settings: TrainSettings, slots: PairSlots, speed: int,
                   on_details: Callable[[int], object] | None = None) -> None:
    """Apply what was asked for (Play: the whole run) in chunks, with a yield point between them.

    The pair is drawn at every multiple of ``speed`` steps (core.training.divergence.SPEEDS: 1 shows every
    update), at most every FRAME_S seconds. A click or a closed tab stops this loop within one chunk; the next
    script run carries on with what is still asked for. At the end the page is drawn again from the top, with
    Play and Step disabled.
    ``on_details`` gets the step reached each time the details are drawn (the page keeps it in its URL).
    """
    if not run.requested:
        return
    frame = check_speed(speed)
    detail_every = max(frame, -(-settings.steps // DETAIL_FRAMES))
    next_frame, next_details = _next(run.done, frame), _next(run.done, detail_every)
    last_yield = last_frame = time.monotonic()
    while run.requested:
        run.advance_requested(min(PLAY_CHUNK, next_frame - run.done))
        done = run.done
        if done >= next_frame and run.requested:
            if (wait := last_frame + FRAME_S - time.monotonic()) > 0:
                time.sleep(wait)  # the GIL is free meanwhile: the room's frames do not hold back the speaker's
            last_frame = time.monotonic()
            draw_pair(run, settings, slots, live=True, details=done >= next_details)
            if done >= next_details:
                next_details = _next(done, detail_every)
                if on_details is not None:
                    on_details(done)
            next_frame = _next(done, frame)
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
