"""Page: Training divergence — the same training run twice, drifting apart step by step."""

from __future__ import annotations

import math
import struct
from dataclasses import replace
from fractions import Fraction

import streamlit as st

from core.devices import available_devices, cpu_device
from core.exact import exact_decimal
from core.formats import FORMATS
from core.querystate import Field
from core.training import (
    DEFAULT_PRESET,
    DTYPES,
    MAX_STEPS,
    OPTIMIZERS,
    PRESETS,
    SOURCES,
    STAND_IN,
    PairedRun,
    TrainSettings,
    seed_study,
    summarize,
)
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation
from ui.render import bits_html
from ui.talk import more_settings
from ui.training_view import (
    bits_strip,
    boundary_chart,
    boundary_frame,
    gap_chart,
    loss_chart,
    precision_overlay,
    records_frame,
    seed_chart,
    seed_frame,
)
from ui.urlstate import restore, share_box, sync

FRAMES = 10  # screen updates during one Play of the whole run (fewer redraws keep it fast)
OPT_LABELS = {"sgd_momentum": "SGD with momentum 0.9", "adam": "Adam"}
HAS_GPU = any(d.kind != "cpu" for d in available_devices())
SOURCE_KEYS = [k for k in SOURCES if k != "device" or HAS_GPU]


def _load_preset() -> None:
    s = PRESETS[st.session_state["td_preset"]].settings
    st.session_state.update(td_source=s.source, td_dtype=s.dtype, td_opt=s.optimizer, td_lr=s.lr,
                            td_steps=s.steps, td_seed=s.seed)


URL_FIELDS = [
    Field("td_preset", "preset", "choice", tuple(PRESETS)),
    Field("td_source", "difference", "choice", tuple(SOURCE_KEYS)),
    Field("td_dtype", "format", "choice", tuple(DTYPES)),
    Field("td_opt", "optimizer", "choice", OPTIMIZERS),
    Field("td_lr", "lr", "float", low=0.0, high=10.0),
    Field("td_steps", "steps", "int", low=1, high=MAX_STEPS),
    Field("td_seed", "seed", "int", low=0, high=2**31 - 1),
]
if "td_source" not in st.session_state:
    st.session_state["td_preset"] = DEFAULT_PRESET
    _load_preset()
url_notes = restore("td", URL_FIELDS, {})


@st.cache_data(max_entries=16, ttl=3600, show_spinner=False)
def _full_pair(settings: TrainSettings):
    run = PairedRun(settings)
    return run.run(settings.steps)


@st.cache_data(max_entries=8, ttl=3600, show_spinner=False)
def _seeds(settings: TrainSettings, k: int):
    return seed_study(settings, k)


def _value_and_bits(v: float, dtype: str) -> str:
    fmt = FORMATS[dtype]
    if dtype == "float32":
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        digits = f"{v:.9g}"
    else:
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        digits = repr(v)
    return f"<code>{digits}</code> {bits_html(bits, fmt)}<br><small>exactly {exact_decimal(Fraction(v))}</small>"


ensure_app_navigation()
st.title("Training divergence")
st.markdown(
    "Two training runs of the same small network on the same data, from bit-identical weights, "
    "seeing bit-identical batches. Run **B** differs from run **A** in exactly one way, chosen below. "
    "Watch the losses agree, then drift, then go their separate ways."
)

st.selectbox("Preset", list(PRESETS), key="td_preset", on_change=_load_preset)
st.caption(PRESETS[st.session_state["td_preset"]].note)
c1, c2, c3 = st.columns([3, 1, 1])
c1.selectbox("What differs in run B", SOURCE_KEYS, format_func=SOURCES.get, key="td_source")
c2.selectbox("Format", list(DTYPES), key="td_dtype")
c3.selectbox("Optimizer", list(OPTIMIZERS), format_func=OPT_LABELS.get, key="td_opt")
c4, c5, c6 = more_settings().columns(3)
c4.number_input("Learning rate", min_value=0.0, max_value=10.0, step=0.05, format="%.4g", key="td_lr")
c5.number_input(f"Steps (at most {MAX_STEPS:,})", min_value=1, max_value=MAX_STEPS, step=50, key="td_steps")
c6.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="td_seed")
share_box(sync(URL_FIELDS), url_notes)
if not HAS_GPU:
    st.caption("No GPU is visible to this server, so “a real GPU” is not offered; the reordering sources are "
               "the honest CPU stand-in for another device: same mathematics, other summation order.")

settings = TrainSettings(
    source=st.session_state["td_source"], dtype=st.session_state["td_dtype"], optimizer=st.session_state["td_opt"],
    lr=float(st.session_state["td_lr"]), steps=int(st.session_state["td_steps"]), seed=int(st.session_state["td_seed"]),
)
try:
    settings.validate()
except ValueError as err:
    st.error(str(err))
    st.stop()

run: PairedRun | None = st.session_state.get("td_run")
if run is None or run.settings != settings:
    try:
        run = PairedRun(settings)
    except (ValueError, RuntimeError) as err:
        st.error(f"Run B could not be set up: {err}")
        st.stop()
    st.session_state["td_run"] = run
    st.session_state["td_playing"] = False

b1, b2, b3, b4, b5 = st.columns(5)
play = b1.button("Play", icon=":material/play_arrow:", type="primary", key="td_play", disabled=run.finished)
b2.button("Pause", icon=":material/pause:", key="td_pause", on_click=lambda: st.session_state.update(td_playing=False))
step1 = b3.button("Step", icon=":material/skip_next:", key="td_step", disabled=run.finished)
step10 = b4.button("+10 steps", key="td_step10", disabled=run.finished)
if b5.button("Reset", icon=":material/restart_alt:", key="td_reset"):
    run = PairedRun(settings)
    st.session_state["td_run"] = run
if step1:
    run.run(1)
if step10:
    run.run(10)

progress = st.empty()
panel = st.container()
charts = st.empty()


def draw(live: bool = False) -> None:
    progress.progress(run.done / settings.steps, text=f"step {run.done:,} of {settings.steps:,}")
    with charts.container():
        if not run.records:
            st.info("Press Play to train both runs live, or Step to apply one update at a time.")
            return
        recs = run.records
        summary = summarize(recs)
        last = recs[-1]
        if not (math.isfinite(last.loss_a) and math.isfinite(last.loss_b)):
            st.warning("The losses have overflowed to inf or NaN: this learning rate makes training blow up. "
                       "Lower it to see a meaningful comparison.", icon=":material/warning:")
        where_b = (f"B ran on {run.b_device_name}" if settings.source == "device" else
                   "both ran live on this CPU" + (" (B is a reordered stand-in for another device)"
                                                  if settings.source in STAND_IN else ""))
        st.markdown(f"**After step {last.step}** · B differs by: {SOURCES[settings.source].lower()} · {where_b}.")
        a_col, b_col = st.columns(2)
        loss_dtype = "float64" if settings.dtype == "float64" else "float32"
        a_col.markdown("Loss A " + _value_and_bits(last.loss_a, loss_dtype), unsafe_allow_html=True)
        b_dtype = "float64" if settings.source == "float64" else loss_dtype
        b_col.markdown("Loss B " + _value_and_bits(last.loss_b, b_dtype), unsafe_allow_html=True)
        m1, m2, m3, m4 = st.columns(4)
        m1.metric("First step that differs", summary.first_difference or "none yet")
        m2.metric("Loss gap above 1% from step", summary.first_rel_1pct or "not yet")
        m3.metric("‖Δθ‖ doubles every", f"{summary.doubling_steps:.1f} steps" if summary.doubling_steps else "—",
                  help="A least-squares line through ln‖θA − θB‖ over its growth phase "
                  f"(steps {summary.fit_range[0]}–{summary.fit_range[1]})" if summary.fit_range else None)
        m4.metric("Parameter bits that differ", f"{last.differing_bits / last.total_bits:.1%}")
        df = records_frame(recs)
        what = SOURCES[settings.source].split(":")[0].lower()
        kind = "real GPU" if settings.source == "device" else (
            "reordered stand-in" if settings.source in STAND_IN else "live on this CPU")
        st.altair_chart(loss_chart(df, f"Training loss of A and B (B: {what}; {kind})"), width="stretch")
        st.altair_chart(gap_chart(df, summary, f"How far apart: |Δ loss| and ‖θA − θB‖, dashed: fitted growth "
                                  f"(B: {what}; {kind})"), width="stretch")
        st.altair_chart(bits_strip(df), width="stretch")
        if not live:
            download_buttons(df, {"difference": settings.source, "format": settings.dtype,
                                  "optimizer": settings.optimizer, "lr": settings.lr, "steps": settings.steps,
                                  "seed": settings.seed}, "training-pair", "td")
        if live:
            st.caption("Decision boundaries are drawn when the run pauses or ends.")
            return
        gx, gy, pa, pb = run.decision_grid(50)
        left, right = st.columns(2)
        grid_a, pts = boundary_frame(gx, gy, pa, run.x64, run.y)
        grid_b, _ = boundary_frame(gx, gy, pb, run.x64, run.y)
        left.altair_chart(boundary_chart(grid_a, pts, f"Run A at step {last.step}"), width="stretch")
        right.altair_chart(boundary_chart(grid_b, pts, f"Run B at step {last.step}"), width="stretch")


if play:
    st.session_state["td_playing"] = True
if st.session_state.get("td_playing") and not run.finished:
    chunk = max(1, -(-settings.steps // FRAMES))
    while not run.finished:
        run.run(chunk)
        if run.finished:
            break
        draw(live=True)  # each redraw is also where a Pause click interrupts this loop
    st.session_state["td_playing"] = False
draw()  # once per run with live=False: widgets inside (downloads) must have unique keys

st.caption(
    f"Provenance: both runs computed live by torch on {cpu_device().name}"
    + (f"; B on {run.b_device_name}" if settings.source == "device" else "")
    + ". Parameter distance and differing bits compare B mapped back to A's layout (permutations undone exactly)."
)

# ----------------------------------------------------------------------- mitigations
st.header("Mitigations")
st.subheader("Compute in float64")
st.markdown("The same pair, same difference, both runs in float64: each rounding is about 2^29 times smaller, "
            "so the gap starts far lower and needs many more doublings to become visible.")
if settings.dtype == "float64" or settings.source == "float64":
    st.info("This run already uses float64; choose float32 and another difference to compare.")
elif st.button("Run the float32 and float64 pairs", key="td_f64"):
    f32 = _full_pair(settings)
    f64 = _full_pair(replace(settings, dtype="float64"))
    s32, s64 = summarize(f32), summarize(f64)
    st.altair_chart(precision_overlay(f32, f64), width="stretch")
    st.markdown(
        f"float32 pair: more than 1% apart from step **{s32.first_rel_1pct or 'never'}**; "
        f"float64 pair: **{s64.first_rel_1pct or f'not within {settings.steps} steps'}**. "
        f"Final ‖Δθ‖: {f32[-1].param_distance:.3g} (float32) vs {f64[-1].param_distance:.3g} (float64)."
    )

st.subheader("Accept the divergence")
st.markdown("Single trajectories part ways, but the *distribution* of outcomes does not depend on which side "
            "you are on. Train several seeds per side and compare what matters: final loss and accuracy.")
k = st.number_input("Seeds per side", min_value=2, max_value=16, value=6, key="td_k")
if st.button("Train the seeds", key="td_seeds"):
    with st.spinner(f"Training {2 * int(k)} runs…"):
        study = _seeds(settings, int(k))
    sdf = seed_frame(study)
    cl, cr = st.columns(2)
    cl.altair_chart(seed_chart(sdf, "final loss"), width="stretch")
    cr.altair_chart(seed_chart(sdf, "accuracy"), width="stretch")
    st.dataframe(sdf.groupby("side")[["final loss", "accuracy"]].agg(["mean", "std", "min", "max"]), width="stretch")
    st.caption(f"Seeds {study.seeds[0]}–{study.seeds[-1]}, each trained for {settings.steps} steps on both sides; "
               "accuracy on the whole data set.")
