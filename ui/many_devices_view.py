"""Tables, Altair charts, progress bars and wait texts for the Many devices page (no numerics here: what
it shows is computed and kept by core.studies.many_devices)."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager

import altair as alt
import pandas as pd
import streamlit as st

from core.crowd.gate import HEAVY
from core.kernels.collectives import COLLECTIVE_MODELS, Comparison
from core.machines.progress import Progress
from core.studies.many_devices import last_live_time
from core.training.emulate import EmulatedRun
from core.training.gloo import DataParallelResult
from core.training.gloo_supervisor import WorkerProgress
from core.training.pair import StepRecord
from core.training.seeds import DivergenceSummary
from ui.palette import COLLECTIVE_COLOURS, DEVICE_RUNS
from ui.talk import styled

MODEL_COLOURS = alt.Scale(domain=[m.name for m in COLLECTIVE_MODELS.values()], range=COLLECTIVE_COLOURS)
HEIGHT = 320


@contextmanager
def gated(what: str) -> Iterator[None]:
    """Run a heavy block through the server-wide gate (core.crowd.gate.HEAVY), saying whom it waits for."""
    slot = st.empty()

    def waiting(k: int) -> None:
        slot.info(f"Waiting for {k} other heavy computation{'s' if k != 1 else ''} to finish before {what} "
                  f"starts (at most {HEAVY.slots} at once on this server).", icon=":material/hourglass_top:")

    started = time.monotonic()
    with HEAVY.hold(on_wait=waiting) as ahead:
        if ahead:
            slot.caption(f":material/hourglass_bottom: Waited {time.monotonic() - started:.0f} s for a free slot.")
        else:
            slot.empty()
        yield


def step_text(step: int | None, steps: int) -> str:
    return f"step {step}" if step is not None else f"never within {steps} steps"


def short_step(step: int | None, steps: int) -> str:
    """For a metric tile: 'step 12', or 'none in 200 steps'."""
    return f"step {step}" if step is not None else f"none in {steps} steps"


def parting(s: DivergenceSummary, steps: int) -> str:
    """One sentence: when the weights first differ and when the losses part by more than 1%."""
    if s.first_difference is None:
        return f"bit-identical to one process at every one of the {steps} steps."
    rel = (f"the losses are first more than 1% apart at step {s.first_rel_1pct} on" if s.first_rel_1pct is not None
           else f"the losses stay within 1% of each other for all {steps} steps")
    return f"the weights first differ from one process at step {s.first_difference}; {rel}."


def summary_row(label: str, s: DivergenceSummary, steps: int) -> dict:
    return {
        "run": label,
        "first differs from one process": step_text(s.first_difference, steps),
        "losses more than 1% apart": step_text(s.first_rel_1pct, steps),
        "‖Δθ‖ doubles every": f"{s.doubling_steps:.1f} steps" if s.doubling_steps else "—",
    }


def divergence_frame(runs: dict[str, list[StepRecord]]) -> pd.DataFrame:
    rows = []
    for label, records in runs.items():
        for r in records:
            rows.append({"run": label, "step": r.step, "‖Δθ‖": r.param_distance, "|Δ loss|": r.abs_diff,
                         "relative loss gap": r.rel_diff, "differing bits": r.differing_bits / r.total_bits})
    return pd.DataFrame(rows, columns=["run", "step", "‖Δθ‖", "|Δ loss|", "relative loss gap", "differing bits"])


def gap_chart(df: pd.DataFrame, title: str, field: str = "‖Δθ‖") -> alt.Chart:
    """The gap to one process per step, on a log scale (steps where it is exactly 0 are left out)."""
    shown = df[df[field] > 0]
    runs = list(dict.fromkeys(df["run"]))
    colours = alt.Scale(domain=runs, range=DEVICE_RUNS[: max(1, len(runs))])
    return styled(alt.Chart(shown, title=title, height=HEIGHT).mark_line(strokeWidth=2).encode(
        x=alt.X("step:Q", title="training step", axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y(f"{field}:Q", title=f"{field} (log scale)", scale=alt.Scale(type="log")),
        color=alt.Color("run:N", title=None, scale=colours,
                        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)),  # labels never cut
        tooltip=["run", "step", alt.Tooltip(f"{field}:Q", format=".3e")],
    ))


def live_facts(r: DataParallelResult) -> pd.DataFrame:
    mb = 2**20
    rows = [
        ("worker processes", f"{r.world_size} (pids {', '.join(map(str, r.pids))}), torch {r.torch_version}"),
        ("threads per worker", ", ".join(map(str, r.threads_per_worker))),
        ("peak resident memory of the group (RSS, sampled)", f"{r.peak_rss_bytes / mb:,.0f} MB"),
        ("peak proportional memory (PSS: shared pages split)",
         f"{r.peak_pss_bytes / mb:,.0f} MB" if r.peak_pss_bytes else "not reported here"),
        ("each worker's own peak (RSS)", ", ".join(f"{m / mb:,.0f} MB" for m in r.worker_max_rss)),
        ("replicas identical at the end", "yes" if r.replicas_identical else "no"),
        ("time to start the group / whole run", f"{r.startup_s:.1f} s / {r.wall_s:.1f} s"),
    ]
    return pd.DataFrame(rows, columns=["", "measured in this run"])


def models_frame() -> pd.DataFrame:
    return pd.DataFrame([{"model": m.name, "order": m.order, "source": m.source, "checked": m.checked}
                         for m in COLLECTIVE_MODELS.values()])


def study_frame(study: tuple[Comparison, ...]) -> pd.DataFrame:
    rows = []
    for c in study:
        for o in c.outcomes:
            rows.append({"ranks k": c.ranks, "model": COLLECTIVE_MODELS[o.model].name,
                         "mean |error| (ULPs)": o.mean_abs_ulps, "largest |error| (ULPs)": o.max_abs_ulps,
                         "correctly rounded": o.correctly_rounded})
    return pd.DataFrame(rows)


def study_chart(df: pd.DataFrame, field: str, title: str, log_y: bool) -> alt.Chart:
    y_scale = alt.Scale(type="symlog", constant=0.01) if log_y else alt.Scale(domain=[0, 1])
    return styled(alt.Chart(df, title=title, height=HEIGHT).mark_line(point=True).encode(
        x=alt.X("ranks k:Q", title="ranks k (log scale)", scale=alt.Scale(type="log", base=2)),
        y=alt.Y(f"{field}:Q", title=field, scale=y_scale,
                axis=alt.Axis(format="%") if not log_y else alt.Axis()),
        color=alt.Color("model:N", title=None, scale=MODEL_COLOURS,
                        legend=alt.Legend(orient="bottom", labelLimit=0, columns=2)),  # "Double binary tree (…)" whole
        tooltip=["ranks k", "model", alt.Tooltip(f"{field}:Q", format=".3~g")],
    ))


def pairs_frame(c: Comparison) -> pd.DataFrame:
    return pd.DataFrame([{"model": COLLECTIVE_MODELS[p.a].name, "against": COLLECTIVE_MODELS[p.b].name,
                          "elements whose bits differ": f"{p.differing:.1%}",
                          "largest distance": f"{p.max_ulp_distance:,} ULPs"} for p in c.pairs])


def outcomes_frame(c: Comparison) -> pd.DataFrame:
    return pd.DataFrame([{"model": COLLECTIVE_MODELS[o.model].name, "mean |error|": f"{o.mean_abs_ulps:.3g} ULPs",
                          "largest |error|": f"{o.max_abs_ulps:,.4g} ULPs",
                          "correctly rounded elements": f"{o.correctly_rounded:.1%}"} for o in c.outcomes])


def emulation_rows(runs: list[EmulatedRun]) -> pd.DataFrame:
    return pd.DataFrame([summary_row(f"{r.ranks:,} devices · {COLLECTIVE_MODELS[r.model].name}", r.summary, r.steps)
                         for r in runs])


def between_frame(pairs: list[tuple[str, str, int | None, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"run": a, "against": b, "weights first differ": step_text(s, n)} for a, b, s, n in pairs])


def megabytes(b: float | None) -> str:
    return "—" if b is None or not math.isfinite(b) else f"{b / 2**20:,.0f} MB"


def live_progress(bar):
    """A progress callback for a live run that moves ``bar`` (joining takes the first tenth)."""

    def update(p: WorkerProgress) -> None:
        mb = f" · workers use {p.rss_bytes / 2**20:,.0f} MB" if p.rss_bytes else ""
        if p.what == "starting":
            bar.progress(0.1 * p.done / p.total, text=f"{p.done} of {p.total} workers joined the process group{mb}")
        else:
            bar.progress(min(1.0, 0.1 + 0.9 * p.done / p.total), text=f"Step {p.done} of {p.total}{mb}")

    return update


def live_wait_text() -> str:
    """What the live run's wait is: the last run's measured times here, else only that a bar shows it."""
    last = last_live_time()
    if last is None:
        return ("Each worker imports torch before it trains; a bar shows the workers joining, then each step.")
    world = last.world_size
    return (f"The last run here ({world} worker{'s' if world > 1 else ''}, {last.steps} steps) took "
            f"{last.startup_s:.0f} s to start its workers and {last.wall_s:.0f} s in all; a bar shows the workers "
            "joining, then each step.")


def study_estimate(ks: int, per_k: float) -> str:
    """The wait, from a measured rate: one sentence. Twice the rate as the upper end, for a busy server."""
    low = max(1, round(ks * per_k))
    return (f"about {low}–{max(low + 1, round(2 * ks * per_k))} s for {ks} values of k ({per_k:.2f} s each, "
            "timed on this server; longer while other visitors compute).")


def study_progress(bar):
    """A progress callback for the order study: each k done, the time so far and the time left at that rate."""
    started = time.monotonic()

    def update(p: Progress) -> None:
        spent = time.monotonic() - started
        left = spent / p.done * (p.total - p.done) if p.done else 0.0
        bar.progress(p.fraction, text=f"{p.what} done ({p.done} of {p.total}) · {spent:.0f} s so far, "
                                      f"about {left:.0f} s left")

    return update

