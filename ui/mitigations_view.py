"""Drawing for the Mitigations page: the tables of each fix's measurements and the summary."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.arith.exact import shortest_repr
from core.arith.formats import FORMATS, hex_bits
from core.recordings.store import Recording
from core.studies.mitigations import VENDOR_RATIOS, AccumulationError, ReproducibleStudy, ThroughputRun, WiderStudy


def _table(rows: list[dict]) -> None:
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def throughput_table(run: ThroughputRun) -> None:
    """This server's float32-vs-float64 measurement, per value, with the spread and what it means."""
    _table([{"device": t.device, "operation": f"{t.op} ({t.size:,}{'²' if t.op == 'matmul' else ' values'})",
             "float32": f"{t.rate32:,.2f} {t.unit}", "float64": f"{t.rate64:,.2f} {t.unit}",
             "float64 speed / float32 speed, per value (quartiles)":
                 f"{t.ratio:.2f} ({t.ratio_quartiles[0]:.2f}–{t.ratio_quartiles[1]:.2f})",
             "what it means": t.verdict()} for t in run.rows])


def recorded_throughput_table(recs: list[Recording]) -> None:
    _table([{"device": r.label, "operation": f"{t.op} ({t.size:,})",
             "float32": f"{t.rate_float32:,.1f} {t.unit}", "float64": f"{t.rate_float64:,.1f} {t.unit}",
             "float64 speed / float32 speed, per value": f"{t.ratio:.2f}"}
            for r in recs for t in r.throughput])


def vendor_table() -> None:
    st.dataframe(pd.DataFrame(VENDOR_RATIOS, columns=["hardware", "peak FP64 : FP32", "source"]), hide_index=True,
                 width="stretch")


def error_table(errors: tuple[AccumulationError, ...]) -> None:
    _table([{"order": e.order, "error, float32 accumulation": f"{float(e.error32):.3e}",
             "error, float64 accumulation": f"{float(e.error64):.3e}",
             "shrink factor": f"{float(e.shrink):.2e}" if e.shrink is not None else "exact in float64"}
            for e in errors])


def wider_table(study: WiderStudy) -> None:
    base = study.base
    _table([{"torch.sum accumulates in": r.accumulate, "threads": r.threads,
             "result": shortest_repr(r.value, FORMATS[r.accumulate]), "|error|": f"{float(r.abs_error):.3e}",
             "time (ms)": f"{r.seconds * 1e3:.3f}",
             "time vs plain torch.sum, 1 thread": f"{r.seconds / base.seconds:.1f}x"} for r in study.rows])


def reproducible_table(study: ReproducibleStudy) -> None:
    _table([{"how the sum was ordered": order, "ordinary sum": value, "order-independent sum": study.value}
            for order, value in study.ordinary])


def device_bits(study: ReproducibleStudy) -> str:
    """Where the order-independent sum ran, with its bits."""
    return ", ".join(f"{where} (`{hex_bits(b, FORMATS['float32'])}`)" for where, b in study.devices)


def summary_table(float64_cost: str, wider: WiderStudy, repro_vs_torch: float) -> None:
    """Each mitigation: what it fixes, what it does not, and what it costs (measured, or cited)."""
    _table([
        {"mitigation": "float64 everywhere", "fixes": "errors 2²⁹ times smaller; divergence much later",
         "does not fix": "order dependence; still diverges eventually",
         "cost": f"{float64_cost}; 1/32 to 1/64 on consumer GPUs (cited)"},
        {"mitigation": "wider accumulation (torch.sum dtype=)", "fixes": "the reduction's own error",
         "does not fix": "order dependence (far smaller); errors elsewhere in the model",
         "cost": f"{wider.slowdown:.1f}x a plain torch.sum ({wider.storage} input, 1 thread; measured)"},
        {"mitigation": "deterministic algorithms", "fixes": "run-to-run changes on one device",
         "does not fix": "CPU vs GPU, thread count, batch size", "cost": "not toggled on a shared server"},
        {"mitigation": "order-independent sum", "fixes": "sums: same bits everywhere",
         "does not fix": "other operations (matmuls, convolutions) unless rewritten likewise",
         "cost": f"{repro_vs_torch:.1f}x torch.sum for 10⁶ float32 (measured live, section 4)"},
        {"mitigation": "accept the divergence", "fixes": "nothing, by design", "does not fix": "bit-level comparisons",
         "cost": "nothing at run time; K seeds per side to compare"},
    ])
