"""Page: Training divergence — the same training run twice, drifting apart step by step."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from core.arith.metrics import ulps_count
from core.crowd.budget import training_advice, training_cost
from core.crowd.bytecache import PAIR_OUTCOMES, SEED_STREAMS, SEEDS
from core.crowd.querystate import Field, FieldKind
from core.crowd.runner import current_run, pair_outcome
from core.crowd.sharedrun import RunView
from core.machines.devices import available_devices, cpu_device
from core.recordings.compare import machine_partings
from core.recordings.store import cached_recordings
from core.studies.mitigations import training_pair
from core.training.differences import PLAIN, SOURCES
from core.training.divergence import (
    DEFAULT_SEEDS,
    DEFAULT_SPEED,
    HEAD_START_BITS,
    SEED_RULE,
    SPEEDS,
    boundary_flip,
    changed_settings,
    frames_for,
    postponement,
    seed_streams,
    seed_verdict,
    threads_note,
)
from core.training.mlp import (
    DEFAULT_PRESET,
    DTYPES,
    MAX_STEPS,
    OPTIMIZERS,
    PRESETS,
    TrainSettings,
    network_name,
)
from core.training.pair import validate
from core.training.seeds import seed_study
from ui.crowd import folded, heavy_section, over_budget
from ui.navigation import ensure_app_navigation, next_page_link
from ui.progress import ProgressBar
from ui.render import inert
from ui.talk import presenter, talk_folded
from ui.training_view import (
    NUMBERS_CSS,
    PairSlots,
    apply_preset_link,
    draw_pair,
    play_requested,
    precision_overlay,
    recorded_partings,
    replay,
    seed_chart,
    seed_frame,
)
from ui.urlstate import restore, share_box, sync

# Sources, shown as plain text (inert): a page that takes link parameters shows no live link
PHAM_2020 = "https://doi.org/10.1145/3324884.3416545"
SUMMERS_2021 = "https://arxiv.org/abs/2103.04514"
TORCH_RANDOMNESS = "https://pytorch.org/docs/stable/notes/randomness.html"
TORCH_ISSUE_2976 = "https://github.com/pytorch/pytorch/issues/2976"
OPT_LABELS = {"sgd_momentum": "SGD with momentum 0.9", "adam": "Adam"}
SETTING_LABELS = {"source": "what differs", "dtype": "format", "optimizer": "optimizer", "lr": "learning rate",
                  "steps": "steps", "seed": "seed"}
HAS_GPU = any(d.kind != "cpu" for d in available_devices())
SOURCE_KEYS = [k for k in SOURCES if k != "device" or HAS_GPU]
URL_FIELDS = [
    Field(key="td_preset", param="preset", kind=FieldKind.CHOICE, options=tuple(PRESETS)),
    Field(key="td_source", param="difference", kind=FieldKind.CHOICE, options=tuple(SOURCE_KEYS)),
    Field(key="td_dtype", param="format", kind=FieldKind.CHOICE, options=tuple(DTYPES)),
    Field(key="td_opt", param="optimizer", kind=FieldKind.CHOICE, options=OPTIMIZERS),
    Field(key="td_lr", param="lr", kind=FieldKind.FLOAT, low=0.0, high=10.0),
    Field(key="td_steps", param="steps", kind=FieldKind.INT, low=1, high=MAX_STEPS),
    Field(key="td_seed", param="seed", kind=FieldKind.INT, low=0, high=2**31 - 1),
    Field(key="td_speed", param="speed", kind=FieldKind.CHOICE, options=SPEEDS),
]
# The step the pair had reached travels in the URL too, so a reload (F5) replays the new pair to it. Only a
# link or a reload sets it (ui.urlstate.restore); the page writes it after each run and then forgets it.
REACHED = Field(key="td_reached", param="step", kind=FieldKind.INT, low=0, high=MAX_STEPS)
WRITTEN = "_td_reached_written"
GOTO = "_td_goto"  # the step a reload asked for, kept until the pair is back there (a rerun may come first)


def _preset_values(name: str) -> dict:
    s = PRESETS[name].settings
    return {"td_preset": name, "td_source": s.source, "td_dtype": s.dtype, "td_opt": s.optimizer,
            "td_lr": s.lr, "td_steps": s.steps, "td_seed": s.seed}


def _load_preset() -> None:
    st.session_state.update(_preset_values(st.session_state["td_preset"]))


def _settings() -> TrainSettings:
    ss = st.session_state
    return TrainSettings(source=ss["td_source"], dtype=ss["td_dtype"], optimizer=ss["td_opt"],
                         lr=float(ss["td_lr"]), steps=int(ss["td_steps"]), seed=int(ss["td_seed"]))


def _session_run(fresh: bool = False) -> RunView | None:
    """This session's view of the pair for the current settings (core.crowd.runner owns creating and replacing it:
    the room's run of a preset, shared by every viewer, or a run of its own for other settings)."""
    try:
        s = _settings()
        validate(s)
        return current_run(st.session_state, "td_run", s, fresh=fresh)
    except (ValueError, RuntimeError, KeyError):
        return None


# Button callbacks run before the script, so the buttons below are drawn knowing their effect
# (Reset re-enables Play at once). They only ask for steps; the script applies what was asked
# in short chunks (ui.training_view.play_requested), each an atomic RunView.advance under the
# view's own lock (steps no viewer computed yet are computed then, once for the room), with a yield
# point between chunks, so a later click, or a closed tab, stops this script run within one chunk.
def _ask(how) -> None:
    run = _session_run()
    if run is not None:
        how(run)


def _on_reset() -> None:
    _session_run(fresh=True)


def links() -> tuple[list[str], bool, int | None]:
    """Settings from the page's link: restore's notes, whether the link named a preset, and the step a reloaded
    link asks the pair to be back at (None: none asked)."""
    if "td_source" not in st.session_state:
        st.session_state.update(_preset_values(DEFAULT_PRESET))
    url_notes = restore("td", [*URL_FIELDS, REACHED], {"td_speed": DEFAULT_SPEED})
    reached = st.session_state.pop(REACHED.key, None)
    if reached and reached != st.session_state.get(WRITTEN):  # a link's step, not the one this page wrote
        st.session_state[GOTO] = reached
    return url_notes, apply_preset_link(URL_FIELDS, _preset_values), st.session_state.get(GOTO)


def keep_step(done: int):
    """Write the step the pair has reached into the URL (with every setting), then forget it (see REACHED);
    the query string (ui.urlstate.sync)."""
    if done:
        st.session_state[REACHED.key] = done
    query = sync([*URL_FIELDS, REACHED])
    st.session_state.pop(REACHED.key, None)
    st.session_state[WRITTEN] = done
    return query


# the question and its short answer are the section's label: a reader sees the answer without opening it
EQUALLY_GOOD = ("Do A and B end equally good? In the study cited inside, about as far apart as two seeds: train "
                "several seeds per side here")


def intro(punch) -> None:
    """The insight in one sentence, then the network and the one difference (the first screen)."""
    name = network_name(_settings())
    punch.markdown(f"**One difference in the last bit can grow with every training step until two runs of the same "
                   f"network part ways.** Runs A and B train the same {name} on noisy spirals from bit-identical "
                   f"weights on identical batches. {PLAIN[st.session_state['td_source']]}.")


def where_it_parts(slot, settings: TrainSettings) -> None:
    """The evidence on the first screen before a first step: where the default pair parts, trained once to the end
    on this server (the Mitigations page's pair: the same settings, so the same bits Play will draw)."""
    if settings != TrainSettings():
        return
    slot.info("Press Play to train both runs live. Meanwhile this pair is trained once to the end here, to say "
              "where it parts (seconds, once per server)…")
    pair = training_pair(settings.dtype)  # shared by every viewer; the server's warm-up trains it at its start
    parted = (f"are first more than 1% apart at step **{pair.first_rel_1pct}** of {pair.steps}" if pair.first_rel_1pct
              else f"stay within 1% for all {pair.steps} steps")
    slot.info(f"Trained once to the end on this server, the losses of A and B {parted}. Press Play to train both "
              "runs live and watch, or Step for one update at a time.")


def controls(url_notes, step: int) -> TrainSettings:
    """The preset and every setting; stops the page with a message next to them when they do not fit."""
    st.selectbox("Preset", list(PRESETS), key="td_preset", on_change=_load_preset)
    preset = PRESETS[st.session_state["td_preset"]]
    st.caption(preset.note)
    if preset.settings.source == "threads":  # why the pair can stay identical here, computed live
        st.caption(threads_note(preset.settings).text())
    recorded_partings(machine_partings(cached_recordings()[0], preset.name))  # each recorded machine's step
    note_slot = st.empty()
    c1, c2, c3 = st.columns([3, 1, 1])
    c1.selectbox("What differs in run B", SOURCE_KEYS, format_func=SOURCES.get, key="td_source")
    c2.selectbox("Format", list(DTYPES), key="td_dtype")
    c3.selectbox("Optimizer", list(OPTIMIZERS), format_func=OPT_LABELS.get, key="td_opt")
    c4, c5, c6 = st.columns(3)  # the whole of controls() folds in presenter mode (main)
    c4.number_input("Learning rate", min_value=0.0, max_value=10.0, step=0.05, format="%.4g", key="td_lr")
    c5.number_input(f"Steps (at most {MAX_STEPS:,})", min_value=1, max_value=MAX_STEPS, step=50, key="td_steps")
    c6.number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key="td_seed")
    share_box(keep_step(step), url_notes)  # the step as last written (or asked for by a reload)
    if not HAS_GPU:
        st.caption("No GPU is visible to this server, so “a real GPU” is not offered; the reordering sources stand "
                   "in for one of another device's differences: same mathematics, other summation order (a GPU "
                   "may also differ in its math library, tensor-core formats and random streams).")
    settings = _settings()
    try:
        validate(settings)
    except ValueError as err:
        st.error(str(err))
        st.stop()
    if settings != preset.settings:
        changed = [SETTING_LABELS[name] for name in changed_settings(settings, preset.settings)
                   if name in SETTING_LABELS]
        note_slot.caption(f":material/edit: Changed from this preset: {', '.join(changed)}. The note above "
                          "describes the preset's own settings; the results below are for the settings shown.")
    return settings


def _speed_label(n: int) -> str:
    return f"Speed: {n} step{'s' if n != 1 else ''}/frame"


def buttons(where, run: RunView, settings: TrainSettings) -> None:
    """Play, Pause, Step, +10, Reset and the speed, in rows that wrap to the width they get."""
    row = where.container(horizontal=True, gap="small", vertical_alignment="center")
    row.button("Play", icon=":material/play_arrow:", type="primary", key="td_play", disabled=run.finished,
               on_click=_ask, args=(RunView.request_to_end,))
    row.button("Pause", icon=":material/pause:", key="td_pause", on_click=_ask, args=(RunView.cancel_requests,))
    row.button("Step", icon=":material/skip_next:", key="td_step", disabled=run.finished, on_click=_ask,
               args=(lambda r: r.request(1),))
    row.button("+10 steps", key="td_step10", disabled=run.finished, on_click=_ask, args=(lambda r: r.request(10),))
    row.button("Reset", icon=":material/restart_alt:", key="td_reset", on_click=_on_reset)
    row.selectbox("Speed: steps per frame", SPEEDS, format_func=_speed_label, key="td_speed",
                  label_visibility="collapsed", width=260,
                  help=f"Play draws both runs every this many steps: 1 shows each update (slow to watch), "
                       f"{SPEEDS[-1]} draws {settings.steps:,} steps in {frames_for(settings.steps, SPEEDS[-1])} "
                       "frames. A change while playing takes effect at once.")


def the_pair(punch, run: RunView, settings: TrainSettings, goto: int | None) -> None:
    """Controls and key numbers beside the two live charts (the first screen), the details below; replay to the
    step a reloaded link asks for (``goto``), Play what was asked for, then draw the pair once (live=False:
    widgets inside need unique keys).

    In presenter mode (the sidebar folded away, the whole width) the buttons take one row above,
    and the two charts stand side by side, taller; otherwise the buttons sit in the narrow column."""
    wide = presenter()
    if wide:
        buttons(punch, run, settings)
    left, right = punch.columns([1, 2.6] if wide else [1.1, 2], gap="small")
    if not wide:
        buttons(left, run, settings)
    slots = PairSlots(progress=left.empty(), numbers=left.container(key="td_numbers").empty(),
                      charts=right.empty(), details=st.container(key="td_details").empty(), side_by_side=wide)
    st.caption(
        f"Provenance: both runs computed live by torch on {cpu_device().name}"
        + (f"; B on {run.b_device_name}" if settings.source == "device" else "")
        + (", once for everyone viewing this preset on this server: every viewer's Play shows the same steps, "
           "bit for bit a pair of their own" if run.for_room else "")
        + ". Parameter distance and differing bits compare B mapped back to A's layout (permutations undone exactly)."
    )
    if goto and goto > run.done:
        replay(run, min(goto, settings.steps), slots)
    play_requested(run, settings, slots, int(st.session_state["td_speed"]), on_details=keep_step)
    draw_pair(run, settings, slots)
    if not run.done:  # before a first step the charts are empty: the evidence in words
        where_it_parts(slots.numbers, settings)


# Results of the buttons below are kept in the session (small summaries, with the settings they
# belong to), so each section keeps showing its result while another one is used.
def equally_good(settings: TrainSettings) -> None:
    """Do A and B end equally good? The seed study, and what its verdict supports."""
    st.markdown("**Not always equally good, but in the study cited here about as far apart as two seeds.** In "
                "Summers and Dinneen's "
                "study a one-bit change in the initial weights spread the final models about as widely as a new seed, "
                "shuffling or cuDNN did, on the models they studied (ICML 2021, "
                f"{inert(SUMMERS_2021, line_start=False)}). Test it here for this network:")
    st.markdown("One pair's trajectories say little about outcomes. Train several seeds per side and compare what "
                "matters, final loss and accuracy, with the spread that the seed alone causes. Whether small "
                "differences grow at all depends on the learning rate, the optimizer and the model, and some pairs "
                "never part: “Control: nothing differs” by construction, “One thread vs all threads” wherever torch "
                "does not split this small model's work across threads (its note says whether it does on this "
                "server), and a smaller learning rate can keep a reordered pair together: choose “Small steps: "
                "hidden units reordered (SGD, lr 0.1)” and press Play to see whether it does here.")
    k = int(st.number_input("Seeds per side", min_value=2, max_value=16, value=DEFAULT_SEEDS, key="td_k"))
    cost = training_cost(settings.steps, k, settings.dtype, settings.optimizer)  # core.crowd.budget
    if not cost.fits:
        over_budget(cost, training_advice(settings.steps, k, settings.dtype, settings.optimizer), kept=False)
    if st.button("Train the seeds", key="td_seeds", disabled=not cost.fits):
        with heavy_section(cost, "this training"):  # a few heavy computations at once, server-wide
            bar = ProgressBar(st, f"Training {k} seeds per side ({2 * k} runs):")
            study = seed_study(settings, k, bar.update, memo=SEEDS)
            bar.empty()
        st.session_state["td_seed_result"] = (settings, study)
    result = st.session_state.get("td_seed_result")
    if not (result and result[0] == settings):
        return
    study = result[1]
    sdf = seed_frame(study)
    cl, cr = st.columns(2)
    cl.altair_chart(seed_chart(sdf, "final loss"), width="stretch")
    cr.altair_chart(seed_chart(sdf, "accuracy"), width="stretch")
    st.dataframe(sdf.groupby("side")[["final loss", "accuracy"]].agg(["mean", "std", "min", "max"]), width="stretch")
    verdict = seed_verdict(study)
    st.markdown(f"**Verdict:** the gap between the mean final losses of A and B ({verdict.gap:.3g}) is "
                f"{verdict.words()} (largest standard deviation over seeds on one side: {verdict.spread:.3g}).")
    st.markdown(verdict.outcome_words(len(study.seeds)))
    st.caption(SEED_RULE)
    st.caption(f"Seeds {study.seeds[0]}–{study.seeds[-1]}, each trained for {settings.steps} steps on both sides; "
               "accuracy on the whole data set. A published study of real networks measured more: identical training "
               "runs differed by up to 10.8% in accuracy (among models that were not weak: they left those out), and "
               "implementation nondeterminism alone by up to 2.9% "
               "(Pham et al., “Problems and Opportunities in Training Deep Learning Software Systems: An Analysis "
               f"of Variance”, ASE 2020, {inert(PHAM_2020, line_start=False)}).")


def float64_postpones(settings: TrainSettings) -> None:
    """The float32 and the float64 pair on one chart, with what float64 should buy and what it bought."""
    st.markdown(f"The same pair, the same difference, both runs in float64: each rounding is 2^{HEAD_START_BITS} "
                "times smaller, so the gap starts far lower and needs many more doublings to become visible.")
    if settings.dtype == "float64" or settings.source == "float64":
        st.info("This run already uses float64; choose float32 and another difference to compare.")
        return
    if st.button("Run the float32 and float64 pairs", key="td_f64"):
        pairs_cost = training_cost(settings.steps, 1, "float64", settings.optimizer, pairs=2)
        with heavy_section(pairs_cost, "this training"):  # a few heavy computations at once, server-wide
            bar = ProgressBar(st, "Training the float32 pair:")
            f32 = pair_outcome(settings, bar.update, PAIR_OUTCOMES)
            bar.text = "Training the float64 pair:"
            f64 = pair_outcome(replace(settings, dtype="float64"), bar.update, PAIR_OUTCOMES)
            bar.empty()
        st.session_state["td_f64_result"] = (f32, f64)
    result = st.session_state.get("td_f64_result")
    if result and result[0].settings == settings:
        f32, f64 = result
        st.altair_chart(precision_overlay(f32, f64), width="stretch")
        st.markdown(
            "float32 pair: " + (f"first more than 1% apart at step **{f32.first_rel_1pct}**"
                                if f32.first_rel_1pct else f"never more than 1% apart within {settings.steps} steps")
            + f"; float64 pair: **{f64.first_rel_1pct or f'not within {settings.steps} steps'}**. "
            f"Final ‖Δθ‖: {f32.final_distance:.3g} (float32) vs {f64.final_distance:.3g} (float64)."
        )
        plan = postponement(settings.steps, f32.distances, f32.first_rel_1pct, f64.distances, f64.first_rel_1pct)
        for sentence in plan.words(PLAIN[settings.source]):
            st.markdown(sentence)


def jump_at_once(settings: TrainSettings) -> None:
    """A discontinuity: one input whose predicted class differs right after the weights first differ."""
    st.markdown("Growth is not the only way a tiny difference matters. A prediction is an argmax: at an input on "
                "the decision boundary, logits a few ULPs apart can name another class at once, with no growth "
                "before it (so can a ReLU's kink, a gradient-clipping threshold or an early-stopping rule).")
    if st.button("Find such an input for these settings", key="td_flip"):
        with st.spinner("Training a fresh pair to its first differing step and searching its decision boundary…"):
            st.session_state["td_flip_result"] = (settings, boundary_flip(settings))
    result = st.session_state.get("td_flip_result")
    if not (result and result[0] == settings):
        return
    flip = result[1]
    if not flip.differs:
        st.markdown(f"Here A and B are still bit-identical after {flip.step} steps (losses and weights), so no input "
                    "can get two classes: nothing differs to be turned into a jump.")
    elif flip.point is None:
        st.markdown(f"After step {flip.step} the weights differ, but none of the {flip.segments} boundary points "
                    "searched gets two classes.")
    else:
        x1, x2 = flip.point
        st.markdown(f"After step **{flip.step}**, the first whose weights differ, A and B are "
                    f"{flip.relative_distance:.1e} apart relative to the size of A's weights, and their losses "
                    + ("are bit-identical" if flip.rel_loss_gap == 0 else f"{flip.rel_loss_gap:.1e} apart relative")
                    + f". At the input ({x1:.9g}, {x2:.9g}) their logits differ by at most "
                    f"{ulps_count(flip.logit_ulps)}, yet A predicts class "
                    f"**{flip.class_a}** and B class **{flip.class_b}**: a whole class, at once.")
        st.caption(f"Computed live: bisection to A's decision boundary along {flip.segments} segments between data "
                   "points of two classes, inputs rounded to A's format, both runs tested either side and the "
                   "input confirmed on its own.")


def same_seed(settings: TrainSettings) -> None:
    """What a seed fixes and what it does not: other generators, other numbers."""
    streams = SEED_STREAMS.call(seed_streams, settings)  # the same for every viewer of these settings
    moved = "; ".join(f"to {name} and back: {'the same bits' if same else 'other bits'}"
                      for name, same in streams.moved)
    st.markdown(
        "A seed fixes a stream of random numbers only for one generator. torch's CPU generator is a Mersenne "
        "Twister and its CUDA generator is Philox, so the same seed draws other numbers on a GPU: an "
        "initialisation or a dropout mask drawn there differs from step 0. That is a difference of random "
        f"streams, not of rounding (PyTorch's reproducibility notes, {inert(TORCH_RANDOMNESS, line_start=False)}; "
        f"{inert(TORCH_ISSUE_2976, line_start=False)}).")
    st.markdown(
        f"What does hold, live on this server with this page's {streams.parameters:,} initial weights (seed "
        f"{streams.seed}, a seeded torch.Generator on the CPU): drawn again, "
        f"{'the same bits' if streams.redrawn_identical else 'other bits'}; with the next seed, "
        f"{'other bits' if streams.other_seed_differs else 'the same bits'}; float32 copied to float64 and back, "
        f"{'the same bits' if streams.widened_identical else 'other bits'}; {moved}. "
        + "".join(f"Drawn by {name}'s own generator with the same seed: {'other' if other else 'the same'} "
                  "numbers. " for name, other in streams.device_stream_differs)
        + "So draw on the CPU, then move the tensor: a copy keeps every bit.")


def main() -> None:
    url_notes, opened_from_link, goto = links()
    ensure_app_navigation()
    st.title("Training divergence")
    st.html(NUMBERS_CSS)
    punch = st.container(key="punchline")  # the insight, the buttons, the key numbers and both losses: first screen
    intro(punch)
    st.markdown("**Why it can grow:** each update is computed from the weights the last one left, so a difference "
                "in them changes the next gradient, which changes the next update. Whether the gap grows or dies "
                "out depends on the learning rate, the optimizer and the model.")
    with talk_folded("Settings: preset, what differs, format, optimizer, steps"):
        settings = controls(url_notes, goto or st.session_state.get(WRITTEN, 0))
    try:  # a scenario link makes a fresh pair: it opens ready to play
        run = current_run(st.session_state, "td_run", settings, fresh=opened_from_link)
    except (ValueError, RuntimeError) as err:
        st.error(f"Run B could not be set up: {err}")
        st.stop()
    the_pair(punch, run, settings, None if opened_from_link else goto)
    st.session_state.pop(GOTO, None)  # the pair is back at the step asked for (or was opened fresh by a link)
    keep_step(run.done)
    # what is folded is made only once opened: a room opening the link pays for its first screen
    with folded(EQUALLY_GOOD, "td_open_equal") as open_:
        if open_:
            equally_good(settings)
    with folded("Same seed, other random numbers?", "td_open_seed") as open_:
        if open_:
            same_seed(settings)
    with folded(f"Does float64 cure it? Roundings 2^{HEAD_START_BITS} times smaller: about {HEAD_START_BITS} "
                "doublings later, if the gap keeps growing", "td_open_float64") as open_:
        if open_:
            float64_postpones(settings)
    with folded("A jump with no growth before it: one input, two classes", "td_open_jump") as open_:
        if open_:
            jump_at_once(settings)
    next_page_link("training_divergence")


main()
