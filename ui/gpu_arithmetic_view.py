"""Tables and charts for the GPU arithmetic page, built from core.studies.gpu_arithmetic's result objects
and core.kernels.dot_trace's operation trace."""

from __future__ import annotations

import math

import altair as alt
import pandas as pd
import streamlit as st

from core.arith.exact import abbreviate, exact_decimal, shortest_repr
from core.arith.formats import FORMATS, Exact
from core.arith.metrics import ulps_brief, ulps_cell
from core.arith.ulps import error_in_ulps
from core.kernels.dot_trace import TraceOp
from core.studies.atomics import AtomicsResult, BucketResult
from core.studies.gpu_arithmetic import (
    CurvePoint,
    DotLab,
    batch_dependence,
    correctly_rounded,
)
from ui.legend import name_hidden
from ui.palette import ATOMICS, CONTEXT, EXACT, LIVE, MODEL
from ui.render import error_table, fitting, inert, ulps_short
from ui.talk import height_for_legends, styled

ORIGINS = alt.Scale(domain=["model", "live", "exact"], range=[MODEL, LIVE, EXACT])  # as ui.sumlab_view
ORIGIN_DASHES = alt.Scale(domain=["model", "live"], range=[[1, 0], [6, 4]])
ULP_TICKS = [0, 1, 10, 100, 1_000, 10_000, 100_000, 1e6, 1e7, 1e8, 1e9, 1e10, 1e12, 1e15, 1e20]  # symlog axes


SHOWN = ("format", "value", "bits", "error (ULPs)", "bound (ULPs)", "within bound")


def results_table(lab: DotLab) -> pd.DataFrame:
    rows = (({"model": row.name, "origin": row.origin}, row.metrics,
             {"provenance": row.provenance if row.metrics is not None else row.note}) for row in lab.rows)
    return error_table(rows, SHOWN)


COMPACT = ("model", "origin", "value", "error (ULPs)", "bound (ULPs)", "within bound")


def compact(table: pd.DataFrame) -> pd.DataFrame:
    """The results table's columns that fit the page at 1280 px (the rest sit in the full table)."""
    return fitting(table, COMPACT)


def error_bars(lab: DotLab) -> pd.DataFrame:
    rows = [{"model": r.name, "origin": r.origin, "ulps": r.metrics.ulps, "abs_ulps": abs(r.metrics.ulps)}
            for r in lab.rows if r.metrics is not None and math.isfinite(r.metrics.ulps)]
    return pd.DataFrame(rows, columns=["model", "origin", "ulps", "abs_ulps"])


def error_bar_chart(df: pd.DataFrame) -> alt.Chart:
    return styled(
        alt.Chart(df)
        .mark_bar()
        .encode(
            y=alt.Y("model:N", sort=None, title=None, axis=alt.Axis(labelLimit=360)),
            x=alt.X("abs_ulps:Q", scale=alt.Scale(type="symlog"), title="|error| in ULPs of the exact dot product",
                    axis=alt.Axis(values=ULP_TICKS, format=",.0f")),
            color=alt.Color("origin:N", scale=ORIGINS, title="where it came from"),
            tooltip=["model", "origin", alt.Tooltip("ulps:Q", format="+.4g")],
        )
        .properties(height=max(120, 30 * len(df)))
    )


def curve_frame(points: list[CurvePoint]) -> pd.DataFrame:
    rows = [{"model": p.name, "origin": p.origin, "K": p.k, "ulps": p.ulps, "abs_ulps": abs(p.ulps)}
            for p in points if math.isfinite(p.ulps)]
    frame = pd.DataFrame(rows, columns=["model", "origin", "K", "ulps", "abs_ulps"])
    return name_hidden(frame, "model", "K", "abs_ulps")


def error_vs_k_chart(df: pd.DataFrame) -> alt.Chart:
    """|error| in ULPs against the number of terms K (both axes logarithmic; exact results at 0)."""
    return styled(
        alt.Chart(df)
        .mark_line(point=True)
        .encode(
            x=alt.X("K:Q", scale=alt.Scale(type="log", base=2), title="K, terms in the dot product"),
            y=alt.Y("abs_ulps:Q", scale=alt.Scale(type="symlog"), title="|error| (ULPs)",
                    axis=alt.Axis(values=ULP_TICKS, format=",.0f")),
            # under the chart, one name a row, never cut: the models' names are long
            color=alt.Color("model:N", title="model", legend=alt.Legend(orient="bottom", columns=1, labelLimit=0)),
            strokeDash=alt.StrokeDash("origin:N", scale=ORIGIN_DASHES, title="where it came from",
                                      legend=alt.Legend(orient="bottom", labelLimit=0)),
            tooltip=["model", "origin", "K", alt.Tooltip("ulps:Q", format="+.4g")],
        )
        # the legends sit inside the chart's height: the plot keeps 300 px above them
        .properties(height=300 + height_for_legends(0, df["model"].nunique(), df["origin"].nunique()))
    )


def _exact_text(v: Exact) -> str:
    return abbreviate(exact_decimal(v), 40)


def trace_frames(ops: list[TraceOp], k: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Node positions (products at the bottom, each rounding above what it adds), edges, and a table."""
    level: list[int] = []
    xpos: list[float] = []
    for op in ops:
        lv = 1 + max([level[i] for i in op.inputs], default=0)
        spans = list(op.products) + [xpos[i] for i in op.inputs]
        level.append(lv)
        xpos.append(sum(spans) / len(spans))
    nodes = [{"x": float(i), "y": 0, "label": f"x{i}·y{i} (exact)", "exact": "", "rounded": "", "ulps": 0.0,
              "abs_ulps": 0.0, "kind": "product"} for i in range(k)]
    edges, table = [], []
    for n, op in enumerate(ops):
        fmt = FORMATS[op.fmt]
        u = 0.0 if isinstance(op.exact, float) else error_in_ulps(op.rounded, op.exact, fmt)
        nodes.append({"x": xpos[n], "y": level[n], "label": op.label, "exact": _exact_text(op.exact),
                      "rounded": shortest_repr(op.rounded, fmt), "ulps": u, "abs_ulps": abs(u), "kind": "rounding"})
        for i in op.products:
            edges.append({"x": xpos[n], "y": level[n], "x2": float(i), "y2": 0})
        for i in op.inputs:
            edges.append({"x": xpos[n], "y": level[n], "x2": xpos[i], "y2": level[i]})
        table.append({"step": n + 1, "operation": op.label, "exact value": _exact_text(op.exact),
                      f"rounded to {op.fmt}": shortest_repr(op.rounded, fmt), "rounding error (ULPs)": ulps_brief(u)})
    return pd.DataFrame(nodes), pd.DataFrame(edges), pd.DataFrame(table)


def trace_chart(nodes: pd.DataFrame, edges: pd.DataFrame) -> alt.LayerChart:
    x = alt.X("x:Q", title="products x_i·y_i, in order of i")
    y = alt.Y("y:Q", title="roundings from the products")
    lines = alt.Chart(edges).mark_rule(color=CONTEXT).encode(x=x, y=y, x2="x2:Q", y2="y2:Q")
    points = (
        alt.Chart(nodes)
        .mark_point(size=160, filled=True, opacity=1)
        .encode(
            x=x,
            y=y,
            shape=alt.Shape("kind:N", title=None),
            color=alt.Color("abs_ulps:Q", scale=alt.Scale(scheme="orangered"), title="|rounding error| (ULP)"),
            tooltip=["label", "exact", "rounded", alt.Tooltip("ulps:Q", format="+.3g")],
        )
    )
    return styled(alt.layer(lines, points).properties(height=360))


# --------------------------------------------------------------------------- atomics


def atomics_table(res: AtomicsResult) -> pd.DataFrame:
    rows = []
    for b in res.buckets:
        errs = b.run_ulps
        rows.append({
            "bucket": b.bucket,
            "values": b.count,
            "different results (simulated runs)": f"{b.distinct} of {len(b.runs)}",
            "run errors, min … max (ULPs)": f"{ulps_brief(min(errs))} … {ulps_brief(max(errs))}" if errs else "—",
            "fixed order (ULPs)": ulps_cell(b.ulps(b.fixed.value)),
            "torch index_add_, this CPU (ULPs)": ulps_cell(b.ulps(b.cpu_index_add.value)),
            "order-independent sum (ULPs)": ulps_cell(b.ulps(b.reproducible.value)),
            "GPU index_add_ (live)": "no GPU here" if b.gpu_distinct is None else f"{b.gpu_distinct} different",
            "exact sum": _exact_text(b.exact),
        })
    return pd.DataFrame(rows)


ATOMICS_COMPACT = ("bucket", "values", "different results (simulated runs)", "run errors, min … max (ULPs)",
                   "order-independent sum (ULPs)")


def atomics_compact(table: pd.DataFrame) -> pd.DataFrame:
    """The atomics table's columns that fit the page at 1280 px (every column sits in the full table)."""
    return table[[c for c in ATOMICS_COMPACT if c in table.columns]]


def atomics_frames(b: BucketResult) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Each simulated run's error in ULPs, and marks for the fixed order, index_add_ and the
    order-independent sum (and the GPU's runs, when there are any)."""
    hist = pd.DataFrame({"ulps": b.run_ulps, "source": "simulated random arrival orders (model)"})
    if b.gpu_values is not None:
        hist = pd.concat([hist, pd.DataFrame({"ulps": b.gpu_ulps, "source": "index_add_ on the GPU (live)"})])
    marks = pd.DataFrame([
        {"label": "exact sum", "ulps": 0.0},
        {"label": "fixed index order (model)", "ulps": b.ulps(b.fixed.value)},
        {"label": "torch index_add_ on this CPU (live)", "ulps": b.ulps(b.cpu_index_add.value)},
        {"label": "order-independent sum (reproducible_sum)", "ulps": b.ulps(b.reproducible.value)},
    ])
    return hist, name_hidden(marks, "label", "ulps")


def atomics_chart(hist: pd.DataFrame, marks: pd.DataFrame) -> alt.LayerChart:
    bars = (
        alt.Chart(hist)
        .mark_bar(opacity=0.75)
        .encode(
            x=alt.X("ulps:Q", bin=alt.Bin(maxbins=40), title="bucket result − exact sum, in ULPs"),
            y=alt.Y("count():Q", title="runs"),
            color=alt.Color("source:N", title=None, scale=alt.Scale(range=ATOMICS),
                            legend=alt.Legend(orient="top", labelLimit=0)),
        )
    )
    rules = (
        alt.Chart(marks)
        .mark_rule(strokeWidth=2)
        .encode(x="ulps:Q", strokeDash=alt.StrokeDash("label:N", title="marked",
                                                      legend=alt.Legend(orient="bottom", columns=1, labelLimit=0)),
                tooltip=["label", alt.Tooltip("ulps:Q", format="+.4g")])
    )
    height = 260 + height_for_legends(0, hist["source"].nunique(), marks["label"].nunique())  # legends inside
    return styled(alt.layer(bars, rules).resolve_scale(color="independent").properties(height=height))


# --------------------------------------------------------------------------- summary


def exact_text(lab: DotLab, chars: int | None = None) -> str:
    """The exact dot product in decimal (every digit, or abbreviated to `chars`)."""
    text = exact_decimal(lab.exact)
    return text if chars is None else abbreviate(text, chars)


def correctly_rounded_text(lab: DotLab) -> str:
    fmt = FORMATS[lab.accumulate]
    return shortest_repr(correctly_rounded(lab), fmt)


# the first two present are shown, in this order (the FP8 models are present for FP8 inputs only)
PUNCH_MODELS = ("fp8_limited", "fp8_promoted", "fma", "tf32", "bf16", "fp16", "split_k")
# a third of the page wide, a metric label holds about 30 characters: the model's whole name goes in its help
PUNCH_LABELS = {"fma": "Sequential FMA", "tf32": "TF32 inputs", "bf16": "bfloat16 inputs", "fp16": "float16 inputs",
                "split_k": "Split-K", "fp8_limited": "FP8, 14-bit accumulator",
                "fp8_promoted": "FP8, promoted to float32"}


# one short clause per term, where the first screen shows it first
PUNCH_CLAUSES = {
    "fma": "FMA (fused multiply-add): each a·b + c rounded once instead of twice.",
    "tf32": "TF32: tensor cores cut each float32 input to 10 mantissa bits before multiplying.",
    "bf16": "bfloat16 inputs: 8 significant bits per input, products added in float32.",
    "fp16": "float16 inputs: 11 significant bits per input, products added in float32.",
    "split_k": "Split-K: the K terms cut into slices summed in parallel, then the slices added.",
    "fp8_limited": "FP8 tensor cores: exact products added in an accumulator of about 14 bits (the DeepSeek-V3 "
                   "report's measurement on H800).",
    "fp8_promoted": "Promoted: that accumulator added into float32 every 128 products, DeepSeek-V3's fix, which "
                    "tightens the error bound once K > 128 (the bound column below); on one vector either can land "
                    "closer to the exact value.",
}


def punchline(lab: DotLab) -> None:
    """The page's numbers first: two models' errors (exact on this CPU) and torch.mm's batch dependence (live)."""
    rows = {r.key: r for r in lab.rows if r.metrics is not None}
    shown = [rows[k] for k in PUNCH_MODELS if k in rows][:2]
    batch = batch_dependence(lab)
    cols = st.columns(3)
    for col, row in zip(cols, shown, strict=False):
        col.metric(f"{PUNCH_LABELS.get(row.key, row.name)} (model)", ulps_short(row.metrics.ulps),
                   help=f"{row.name}: error against the exact dot product, in ULPs of the exact result in "
                        f"{row.metrics.fmt.name}; computed exactly on this CPU.")
    if batch is not None:
        cols[2].metric(f"{batch.product}, 1 row vs 64 rows (live)",
                       "same bits" if batch.same_bits else f"{batch.ulps_apart:.4g} ULP apart",
                       help="The same row x times the same column y, as the only row of a product (M = 1) and as the "
                            "first of 64 rows (M = 64), run by torch on this CPU: another shape, possibly another "
                            "kernel.")
    k = lab.pair.k
    source = inert(lab.pair.source, line_start=False)
    terms = " ".join(PUNCH_CLAUSES[row.key] for row in shown if row.key in PUNCH_CLAUSES)
    st.caption(f"The dot product of K = {k:,} terms ({source}), against its exact value: the models' "
               "errors in ULPs, and whether torch's own matrix product on this server depends on how many rows it "
               f"is given. {terms} Details, every model and the bounds below.")
