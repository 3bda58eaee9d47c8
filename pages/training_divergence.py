"""Page: Training divergence — the same training run twice, drifting apart step by step."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from fractions import Fraction

import streamlit as st

from core.budget import training_advice, training_cost
from core.devices import available_devices, cpu_device
from core.exact import exact_decimal
from core.formats import FORMATS
from core.querystate import Field, decode
from core.recordings import cached_recordings, recorded_outcomes
from core.runner import PAIR_MEMO, SEED_MEMO, current_run, pair_outcome
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
from ui.crowd import heavy_section, over_budget
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import bits_html, inert
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

FRAMES = 10  # chart redraws during one Play of the whole run (fewer redraws keep it fast)
PLAY_CHUNK = 10  # steps applied at once while playing: tens of milliseconds between yield points (idle core)
YIELD_EVERY = 0.1  # seconds between two progress updates (each is where a click or a closed tab stops a run)
OPT_LABELS = {"sgd_momentum": "SGD with momentum 0.9", "adam": "Adam"}
HAS_GPU = any(d.kind != "cpu" for d in available_devices())
SOURCE_KEYS = [k for k in SOURCES if k != "device" or HAS_GPU]


def _preset_values(name: str) -> dict:
    s = PRESETS[name].settings
    return {"td_preset": name, "td_source": s.source, "td_dtype": s.dtype, "td_opt": s.optimizer,
            "td_lr": s.lr, "td_steps": s.steps, "td_seed": s.seed}


def _load_preset() -> None:
    st.session_state.update(_preset_values(st.session_state["td_preset"]))


URL_FIELDS = [
    Field("td_preset", "preset", "choice", tuple(PRESETS)),
    Field("td_source", "difference", "choice", tuple(SOURCE_KEYS)),
    Field("td_dtype", "format", "choice", tuple(DTYPES)),
    Field("td_opt", "optimizer", "choice", OPTIMIZERS),
    Field("td_lr", "lr", "float", low=0.0, high=10.0),
    Field("td_steps", "steps", "int", low=1, high=MAX_STEPS),
    Field("td_seed", "seed", "int", low=0, high=2**31 - 1),
]


def _apply_preset_link() -> bool:
    """A link that names a preset sets every setting of that preset; True when one was applied.

    Settings named in the same link win over the preset's. A link that already carries every
    setting is one this page wrote itself (``sync``) and is left to ``restore``.
    """
    params = dict(st.query_params)
    if "preset" not in params or all(f.param in params for f in URL_FIELDS):
        return False
    values, _ = decode(params, URL_FIELDS)
    if "td_preset" not in values:
        return False  # a rejected preset name: restore's note says so
    st.session_state.update({**_preset_values(values["td_preset"]), **values})
    return True


if "td_source" not in st.session_state:
    st.session_state.update(_preset_values(DEFAULT_PRESET))
url_notes = restore("td", URL_FIELDS, {})
opened_from_link = _apply_preset_link()


def _settings() -> TrainSettings:
    ss = st.session_state
    return TrainSettings(source=ss["td_source"], dtype=ss["td_dtype"], optimizer=ss["td_opt"],
                         lr=float(ss["td_lr"]), steps=int(ss["td_steps"]), seed=int(ss["td_seed"]))


def _session_run(fresh: bool = False) -> PairedRun | None:
    """This session's pair for the current settings (core.runner owns creating and replacing it)."""
    try:
        s = _settings()
        s.validate()
        return current_run(st.session_state, "td_run", s, fresh=fresh)
    except (ValueError, RuntimeError, KeyError):
        return None


# Button callbacks run before the script, so the buttons below are drawn knowing their effect
# (Reset re-enables Play at once). They only ask for steps; the script below applies what was asked
# in short chunks, each an atomic PairedRun.advance under the pair's own lock, with a yield point
# between chunks, so a later click, or a closed tab, stops this script run within one chunk.
def _ask(how) -> None:
    run = _session_run()
    if run is not None:
        how(run)


def _on_reset() -> None:
    _session_run(fresh=True)


def _value_and_bits(v: float, bits: int, dtype: str) -> str:
    """A loss and its bit pattern, as the record carries them (core.training reads the bits)."""
    fmt = FORMATS[dtype]
    digits = f"{v:.9g}" if dtype == "float32" else repr(v)
    return f"<code>{digits}</code> {bits_html(bits, fmt)}<br><small>exactly {exact_decimal(Fraction(v))}</small>"


class _Progress:
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


ensure_app_navigation()
st.title("Training divergence")
punch = st.container(key="punchline")  # what differs, the buttons and the key numbers: in the first screen
punch.markdown(f"Runs A and B start bit-identical and see the same batches; **B differs only in: "
               f"{SOURCES[st.session_state['td_source']].lower()}**.")
st.markdown(
    "Two training runs of the same small network on the same data, from bit-identical weights, "
    "seeing bit-identical batches. Run **B** differs from run **A** in exactly one way, chosen below. "
    "Watch the losses agree, then drift, then go their separate ways."
)

st.selectbox("Preset", list(PRESETS), key="td_preset", on_change=_load_preset)
preset = PRESETS[st.session_state["td_preset"]]
st.caption(preset.note)
for label, step, steps in recorded_outcomes(cached_recordings()[0], preset.name):
    who = inert(label[:1].upper() + label[1:])
    st.caption(f"{who}: this pair more than 1% apart from step {step}" if step else
               f"{who}: this pair never more than 1% apart within {steps} steps")
note_slot = st.empty()
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

settings = _settings()
try:
    settings.validate()
except ValueError as err:
    st.error(str(err))
    st.stop()
if settings != preset.settings:
    pairs = {"what differs": "source", "format": "dtype", "optimizer": "optimizer", "learning rate": "lr",
             "steps": "steps", "seed": "seed"}
    changed = [label for label, attr in pairs.items() if getattr(settings, attr) != getattr(preset.settings, attr)]
    note_slot.caption(f":material/edit: Changed from this preset: {', '.join(changed)}. The note above describes "
                      "the preset's own settings; the results below are for the settings shown.")

try:
    run = current_run(st.session_state, "td_run", settings, fresh=opened_from_link)
except (ValueError, RuntimeError) as err:
    st.error(f"Run B could not be set up: {err}")
    st.stop()
# (a scenario link makes a fresh pair above: it opens ready to play)

b1, b2, b3, b4, b5 = punch.columns(5)
b1.button("Play", icon=":material/play_arrow:", type="primary", key="td_play", disabled=run.finished,
          on_click=_ask, args=(PairedRun.request_to_end,))
b2.button("Pause", icon=":material/pause:", key="td_pause", on_click=_ask, args=(PairedRun.cancel_requests,))
b3.button("Step", icon=":material/skip_next:", key="td_step", disabled=run.finished, on_click=_ask,
          args=(lambda r: r.request(1),))
b4.button("+10 steps", key="td_step10", disabled=run.finished, on_click=_ask, args=(lambda r: r.request(10),))
b5.button("Reset", icon=":material/restart_alt:", key="td_reset", on_click=_on_reset)

progress = punch.empty()
numbers = punch.empty()  # the punchline's key numbers, redrawn with every frame
charts = st.empty()


def show_progress(done: int) -> None:
    progress.progress(done / settings.steps, text=f"step {done:,} of {settings.steps:,}")


def draw(live: bool = False) -> None:
    """Everything below the buttons, from one atomic snapshot of the pair."""
    recs, grid = run.snapshot(None if live else 50)
    show_progress(len(recs))
    with charts.container():
        if not recs:
            numbers.info("Press Play to train both runs live, or Step to apply one update at a time.")
            return
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
        a_col.markdown("Loss A " + _value_and_bits(last.loss_a, last.loss_a_bits, loss_dtype), unsafe_allow_html=True)
        b_dtype = "float64" if settings.source == "float64" else loss_dtype
        b_col.markdown("Loss B " + _value_and_bits(last.loss_b, last.loss_b_bits, b_dtype), unsafe_allow_html=True)
        m1, m2, m3, m4 = numbers.container().columns(4)
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
        if live or grid is None:
            st.caption("Decision boundaries are drawn when the run pauses or ends.")
            return
        download_buttons(df, {"difference": settings.source, "format": settings.dtype,
                              "optimizer": settings.optimizer, "lr": settings.lr, "steps": settings.steps,
                              "seed": settings.seed}, "training-pair", "td")
        gx, gy, pa, pb = grid
        left, right = st.columns(2)
        grid_a, pts = boundary_frame(gx, gy, pa, run.x64, run.y)
        grid_b, _ = boundary_frame(gx, gy, pb, run.x64, run.y)
        left.altair_chart(boundary_chart(grid_a, pts, f"Run A at step {last.step}"), width="content")
        right.altair_chart(boundary_chart(grid_b, pts, f"Run B at step {last.step}"), width="content")
        st.caption("Decision boundaries: the pale cells are the class each run predicts there, the dots are the "
                   "data points in their true class (both runs saw the same points).")


if run.requested:
    # What was asked for (Play: the whole run), in chunks with a yield point between them (a click
    # or a closed tab stops this loop within one chunk; the next script run carries on with what is
    # still asked for); the charts are redrawn FRAMES times over a whole run.
    frame = max(1, -(-settings.steps // FRAMES))
    next_frame = run.done + frame
    last_yield = time.monotonic()
    while run.requested:
        run.advance_requested(PLAY_CHUNK)
        done = run.done
        if done >= next_frame and run.requested:
            draw(live=True)
            next_frame = done + frame
            last_yield = time.monotonic()
        elif time.monotonic() - last_yield >= YIELD_EVERY:
            show_progress(done)  # a yield point: raises here when a newer script run took over
            last_yield = time.monotonic()
    if run.finished:
        show_progress(run.done)  # a yield point first: only the current script run may rerun
        st.rerun()  # drawn again from the top, with Play and Step disabled at the end
draw()  # once per run with live=False: widgets inside (downloads) must have unique keys

st.caption(
    f"Provenance: both runs computed live by torch on {cpu_device().name}"
    + (f"; B on {run.b_device_name}" if settings.source == "device" else "")
    + ". Parameter distance and differing bits compare B mapped back to A's layout (permutations undone exactly)."
)

# ----------------------------------------------------------------------- mitigations
# Results of the two buttons below are kept in the session (small summaries, with the settings
# they belong to), so each section keeps showing its result while the other one is used.
st.header("Mitigations")
st.subheader("Compute in float64")
st.markdown("The same pair, same difference, both runs in float64: each rounding is about 2^29 times smaller, "
            "so the gap starts far lower and needs many more doublings to become visible.")
if settings.dtype == "float64" or settings.source == "float64":
    st.info("This run already uses float64; choose float32 and another difference to compare.")
else:
    if st.button("Run the float32 and float64 pairs", key="td_f64"):
        pairs_cost = training_cost(settings.steps, 1, "float64", settings.optimizer, pairs=2)
        with heavy_section(pairs_cost, "this training"):  # a few heavy computations at once, server-wide
            bar = _Progress(st, "Training the float32 pair:")
            f32 = pair_outcome(settings, bar.update, PAIR_MEMO)
            bar.text = "Training the float64 pair:"
            f64 = pair_outcome(replace(settings, dtype="float64"), bar.update, PAIR_MEMO)
            bar.bar.empty()
        st.session_state["td_f64_result"] = (f32, f64)
    f64_result = st.session_state.get("td_f64_result")
    if f64_result and f64_result[0].settings == settings:
        f32, f64 = f64_result
        st.altair_chart(precision_overlay(f32, f64), width="stretch")
        st.markdown(
            f"float32 pair: more than 1% apart from step **{f32.first_rel_1pct or 'never'}**; "
            f"float64 pair: **{f64.first_rel_1pct or f'not within {settings.steps} steps'}**. "
            f"Final ‖Δθ‖: {f32.final_distance:.3g} (float32) vs {f64.final_distance:.3g} (float64)."
        )

st.subheader("Accept the divergence")
st.markdown("Single trajectories part ways, but the *distribution* of outcomes does not depend on which side "
            "you are on. Train several seeds per side and compare what matters: final loss and accuracy.")
k = st.number_input("Seeds per side", min_value=2, max_value=16, value=6, key="td_k")
seeds_cost = training_cost(settings.steps, int(k), settings.dtype, settings.optimizer)  # core.budget
if not seeds_cost.fits:
    over_budget(seeds_cost, training_advice(settings.steps, int(k), settings.dtype, settings.optimizer), kept=False)
if st.button("Train the seeds", key="td_seeds", disabled=not seeds_cost.fits):
    with heavy_section(seeds_cost, "this training"):  # a few heavy computations at once, server-wide
        bar = _Progress(st, f"Training {int(k)} seeds per side ({2 * int(k)} runs):")
        study = seed_study(settings, int(k), bar.update, memo=SEED_MEMO)
        bar.bar.empty()
    st.session_state["td_seed_result"] = (settings, study)
seed_result = st.session_state.get("td_seed_result")
if seed_result and seed_result[0] == settings:
    study = seed_result[1]
    sdf = seed_frame(study)
    cl, cr = st.columns(2)
    cl.altair_chart(seed_chart(sdf, "final loss"), width="stretch")
    cr.altair_chart(seed_chart(sdf, "accuracy"), width="stretch")
    table = sdf.groupby("side")[["final loss", "accuracy"]].agg(["mean", "std", "min", "max"])
    st.dataframe(table, width="stretch")
    gap = abs(table.loc["A", ("final loss", "mean")] - table.loc["B", ("final loss", "mean")])
    spread = max(table.loc["A", ("final loss", "std")], table.loc["B", ("final loss", "std")])
    verdict = ("inside the spread between seeds: which side a run is on matters less than its seed"
               if gap <= spread else
               "larger than the spread between seeds: here the difference between A and B is systematic, "
               "not just a different trajectory")
    st.markdown(f"**Verdict:** the gap between the mean final losses of A and B ({gap:.3g}) is {verdict} "
                f"(largest standard deviation over seeds on one side: {spread:.3g}).")
    st.caption(f"Seeds {study.seeds[0]}–{study.seeds[-1]}, each trained for {settings.steps} steps on both sides; "
               "accuracy on the whole data set.")

next_page_link("training_divergence")
