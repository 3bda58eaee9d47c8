"""Drawing for the Mitigations page: the tables of each fix's measurements and the summary."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.arith.formats import FORMATS
from core.arith.hexbits import hex_bits
from core.recordings.store import Recording
from core.studies.mitigations import (
    AccumulationError,
    MismatchCheck,
    ReproducibleStudy,
    ThroughputRun,
    WiderStudy,
)
from core.studies.peak_rates import float64_peaks
from ui import glossary
from ui.navigation import page_file
from ui.render import inert
from ui.talk import presenter


def _table(rows: list[dict]) -> None:
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def _wrapped_table(rows: list[dict]) -> None:
    """A static table whose cells wrap: every column fits the screen's width, nothing cut with an ellipsis."""
    df = pd.DataFrame(rows)
    st.table(df.set_index(df.columns[0]))


def story_link(path: str, label: str, icon: str) -> None:
    """A link to another page, or its name where the page is not in this session's navigation (a page run on its
    own, in tests, or a page not registered yet): the guard ui.navigation.next_page_link uses."""
    try:
        st.page_link(page_file(path), label=label, icon=icon)
    except st.errors.StreamlitAPIException:
        st.caption(f"See the page “{label}”.")


def time_ratio(speed_ratio: float) -> float:
    """float64 time as a multiple of float32's, from float64 speed as a fraction of float32's."""
    return 1.0 / speed_ratio if speed_ratio > 0 else float("inf")


def throughput_table(run: ThroughputRun) -> None:
    """This server's float32-vs-float64 measurement, per value, with the spread and what it means (in a container
    with a key: what browser tests find it by)."""
    with st.container(key="mi_throughput"):
        _throughput_rows(run)


def _throughput_rows(run: ThroughputRun) -> None:
    _wrapped_table([{"operation": f"{t.op} ({t.size:,}{'²' if t.op == 'matmul' else ' values'}), {t.device}",
                     "float32": f"{t.rate32:,.2f} {t.unit}", "float64": f"{t.rate64:,.2f} {t.unit}",
                     "float64 cost, × float32's time (quartiles)":
                         f"{time_ratio(t.ratio):.2f}× ({time_ratio(t.ratio_quartiles[1]):.2f}–"
                         f"{time_ratio(t.ratio_quartiles[0]):.2f}×)",
                     "what it means": t.verdict()} for t in run.rows])


def recorded_throughput_table(recs: list[Recording]) -> None:
    _table([{"device": r.label, "operation": f"{t.op} ({t.size:,})",
             "float32": f"{t.rate_float32:,.1f} {t.unit}", "float64": f"{t.rate_float64:,.1f} {t.unit}",
             "float64 cost, × float32's time": f"{time_ratio(t.ratio):.2f}×"}
            for r in recs for t in r.throughput])


TF32_NOTES = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"


def _times(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}×" if x >= 10 else f"{x:.1f}×"


def vendor_table() -> None:
    """The cited peak rates: float64's cost as × the float32 default's time, without and with tensor cores."""
    rows = []
    for p in float64_peaks():
        tc = p.tensor_cost
        rows.append({"hardware": p.hardware, "FP64 : FP32, no tensor cores": p.ratio,
                     "float64 cost vs plain float32": _times(p.plain_cost) if p.plain_cost else
                     ("about 2×" if p.ratio_text and p.ratio_text.startswith("about") else "—"),
                     "vs float32 training on tensor cores (TF32 – bfloat16)":
                         f"{_times(tc[0])} – {_times(tc[1])}" if tc else "—",
                     "source": p.source})
    _wrapped_table(rows)
    # addresses as plain text (inert): the page takes link parameters, so it shows no live link
    links = "; ".join(f"{p.source}, {inert(p.url, line_start=False)}" for p in float64_peaks() if p.url)
    notes = "; ".join(f"{p.hardware}: {inert(p.note, line_start=False)}" for p in float64_peaks() if p.note)
    st.caption("Vendor peak rates, dense (no sparsity), cited, not measured here; a cost is one peak rate over the "
               "other, × the float32 default's time (1.0× = as fast). The 1 : 2 of the A100 and H100 holds without "
               "tensor cores. float32 training often runs its matrix products on tensor cores when TF32 or autocast "
               "is on: in TF32 (cuDNN's "
               "default for convolutions; for matmuls after `torch.set_float32_matmul_precision(\"high\")`) or in "
               f"bfloat16 under autocast (PyTorch's TF32 notes, {inert(TF32_NOTES, line_start=False)}), and float64 "
               f"has only its FP64 (tensor-core) rate: so moving it to float64 costs the larger factors. {notes}. "
               f"Sources: {links}.")


def error_table(errors: tuple[AccumulationError, ...]) -> None:
    _table([{"order": e.order, "error, float32 accumulation": f"{float(e.error32):.3e}",
             "error, float64 accumulation": f"{float(e.error64):.3e}",
             "shrink factor": f"{float(e.shrink):.2e}" if e.shrink is not None else "exact in float64"}
            for e in errors])


def wider_table(study: WiderStudy) -> None:
    _table([{"torch.sum accumulates in": r.accumulate, "threads": r.threads,
             "result": r.value_text, "|error|": f"{float(r.abs_error):.3e}",
             "time (ms)": f"{r.seconds * 1e3:.3f}",
             "time vs plain torch.sum, 1 thread (quartiles)":
                 f"{r.vs_base:.1f}x ({r.vs_base_iqr[0]:.1f}–{r.vs_base_iqr[1]:.1f}x)"} for r in study.rows])


def reproducible_table(study: ReproducibleStudy) -> None:
    _table([{"how the sum was ordered": order, "ordinary sum": value, "order-independent sum": study.value}
            for order, value in study.ordinary])


def device_bits(study: ReproducibleStudy) -> str:
    """Where the order-independent sum ran, with its bits."""
    return ", ".join(f"{where} (`{hex_bits(b, FORMATS['float32'])}`)" for where, b in study.devices)


def summary_table(rows: list[dict]) -> None:
    """Each mitigation: what it fixes, what it does not, and what it costs (× the default's time)."""
    with st.container(key="mi_summary"):  # what browser tests find it by
        _wrapped_table(rows)


def mismatch_rule(check: MismatchCheck) -> None:
    """Is my mismatch normal or a bug: the rule, with the Diagnose page's verdict on two live cases (in a container
    with a key: what browser tests find it by)."""
    with st.container(key="mi_mismatch"):
        _mismatch_rule(check)


def _mismatch_rule(check: MismatchCheck) -> None:
    st.markdown(
        "**Is my mismatch normal or a bug?** A difference within the rounding envelope (for sums of K terms "
        "typically about √K·u·max(|sum|, √Σ terms²), and between two orders at most about 2K·u·Σ|terms|; u: "
        "the format's unit roundoff, 2⁻²⁴ in float32) is normal: the same sums in another order. "
        "Beyond it, a NaN or Inf on one side only, a flipped sign on an element well outside its "
        "envelope, or a few elements far off while the rest agree are worth a look."
        + ("" if presenter() else  # the speaker says it: the slide stays within three screens
           " A loss after many training steps is another matter: its gap may have grown far past a rounding, so "
           "compare it with the spread between seeds instead (Training divergence trains seeds per side; Diagnose "
           "reads two loss logs)."),
        help=glossary.help_texts("envelope", "unit_roundoff"))  # the page's first use of both terms
    st.caption(
        f"Live on this server, judged by the Diagnose page's own code: one row of a float32 matrix product "
        f"(K = {check.k:,}) computed alone against the same row in a batch differs in {check.differing:,} of "
        f"{check.outputs:,} outputs, the largest difference {check.normal_worst:.2f} of its envelope: verdict "
        f"“{check.normal_verdict}”, {'normal' if check.normal_verdict in ('identical', 'reordering') else 'not normal'}"
        ". The same pair with one output's sign flipped: "
        f"{check.broken_worst:,.0f}× its envelope, verdict “{check.broken_verdict.replace('_', ' ')}”.")
