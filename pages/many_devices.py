"""Page: Many devices — data-parallel training on a real gloo process group, and all-reduce orders at scale."""

from __future__ import annotations

import streamlit as st

from core.crowd.querystate import Field, FieldKind
from core.kernels.collectives import COLLECTIVE_MODELS
from core.studies.many_devices import (
    PUNCH_RANKS,
    emulate_missing,
    finished_emulations,
    finished_order_study,
    missing_emulations,
    punch_allreduce,
    record_live_time,
    run_order_study,
    seconds_per_k,
)
from core.training.data_parallel import DP_SETTINGS, EMULATED_KS, WORLD_SIZES, first_divergence
from core.training.emulate import EmulationSettings, earliest_apart, emulate_run, run_pairs, study_ks
from core.training.gloo import (
    GLOO_ALGORITHM,
    Busy,
    DataParallelError,
    DataParallelResult,
    LiveSettings,
    NoRoom,
    room_for,
    run_data_parallel,
)
from ui import glossary
from ui.many_devices_view import (
    between_frame,
    divergence_frame,
    emulation_rows,
    gap_chart,
    gated,
    live_facts,
    live_progress,
    live_wait_text,
    megabytes,
    models_frame,
    outcomes_frame,
    pairs_frame,
    parting,
    short_step,
    study_chart,
    study_estimate,
    study_frame,
    study_progress,
)
from ui.navigation import ensure_app_navigation, next_page_link
from ui.progress import ProgressBar
from ui.render import inert
from ui.urlstate import restore, share_box, sync

STEP_RANGE = (10, 200)  # live and emulated runs on this page
KMAX_CHOICES = (16, 64, 256, 1024)
URL_FIELDS = [
    Field(key="md_world", param="workers", kind=FieldKind.CHOICE, options=WORLD_SIZES),
    Field(key="md_steps", param="steps", kind=FieldKind.INT, low=STEP_RANGE[0], high=STEP_RANGE[1]),
    Field(key="md_kmax", param="largest_k", kind=FieldKind.CHOICE, options=KMAX_CHOICES),
    Field(key="md_model", param="model", kind=FieldKind.CHOICE, options=tuple(COLLECTIVE_MODELS)),
    Field(key="md_ks", param="devices", kind=FieldKind.MULTI, options=EMULATED_KS),
    Field(key="md_esteps", param="emulated_steps", kind=FieldKind.INT, low=STEP_RANGE[0], high=STEP_RANGE[1]),
]
DEFAULTS = {"md_world": 2, "md_steps": 100, "md_kmax": 1024, "md_model": "ring_gloo", "md_ks": list(EMULATED_KS),
            "md_esteps": 100}


def _workers(n: int) -> str:
    return f"{n} worker process{'es' if n > 1 else ''}"


# ---------------------------------------------------------------------------------------- 1 · live


def live_controls() -> LiveSettings:
    c1, c2 = st.columns(2)
    c1.radio("Worker processes W", WORLD_SIZES, key="md_world", horizontal=True)
    c2.slider("Training steps", STEP_RANGE[0], STEP_RANGE[1], key="md_steps", step=10)
    return LiveSettings(int(st.session_state["md_world"]), int(st.session_state["md_steps"]))


def start_live_run(settings: LiveSettings) -> None:
    """The room check, and the button that starts the workers; a finished run goes to the session."""
    world, steps = settings.world, settings.steps
    ok, why = room_for(world)
    if ok:
        st.caption(f":material/memory: {why}")
    else:
        st.warning(f"Not enough free memory on this server for {world} worker processes right now: {why} "
                   "The emulated devices below need no extra processes.", icon=":material/memory:")
        with st.expander("Run the same training on your own machine", icon=":material/terminal:"):
            st.code(f"python -m scripts.data_parallel --world-size {world} --steps {steps}", language="bash")
    if not st.button(f"Start {_workers(world)} and train {steps} steps", key="md_run",
                     disabled=not ok, icon=":material/play_arrow:"):
        return
    bar = ProgressBar(st, "Starting the worker processes (each one imports torch)…")
    try:
        with gated("the live run"):
            st.session_state["md_live"] = run_data_parallel(world, steps, on_progress=live_progress(bar), wait=False)
        record_live_time(st.session_state["md_live"])
        st.session_state.pop("md_check", None)
    except Busy as err:
        st.info(inert(err), icon=":material/hourglass_top:")
    except NoRoom as err:
        st.warning(inert(err), icon=":material/memory:")
    except DataParallelError as err:
        st.error(f"The live run did not finish, and all its processes were stopped: {inert(err)}",
                 icon=":material/error:")
    bar.empty()


def live_result(live: DataParallelResult | None) -> None:
    if live is None:
        st.caption("Press the button to start the workers. " + live_wait_text() + " One run at a time on this "
                   "server.")
        return
    s = live.summary
    st.subheader(f"{_workers(live.world_size)} against one process, {live.steps} steps")
    m1, m2, m3 = st.columns(3)
    m1.metric("First differs from one process", short_step(s.first_difference, live.steps))
    m2.metric("Losses more than 1% apart", short_step(s.first_rel_1pct, live.steps))
    m3.metric("Peak memory of the group (PSS)", megabytes(live.peak_pss_bytes or live.peak_rss_bytes))
    st.code(live.line(), language=None, wrap_lines=True)
    st.markdown(f"**{live.world_size} gloo worker process{'es' if live.world_size > 1 else ''}**: "
                f"{parting(s, live.steps)}")
    if s.first_difference is None:
        st.success("One worker all-reduces with itself (gloo copies the gradient), so it computes exactly what "
                   "one process computes: every bit agrees.", icon=":material/check_circle:")
    else:
        st.altair_chart(gap_chart(divergence_frame({f"{live.world_size} workers": live.records}),
                                  "Distance between the weights of the workers and of one process"),
                        width="stretch")
    st.dataframe(live_facts(live), hide_index=True, width="stretch")
    st.caption(f"All-reduce algorithm: {GLOO_ALGORITHM}. Memory: RSS counts the torch libraries once per "
               "process; PSS splits shared pages between the processes that share them.")
    if live.world_size >= 2:
        replay(live)


def replay(live: DataParallelResult) -> None:
    """The live run replayed by the ring model, and whether the weights agree bit for bit."""
    if st.button(f"Replay this run with the ring model ({live.world_size} emulated devices)", key="md_check_go",
                 icon=":material/compare_arrows:"):
        bar = ProgressBar(st, "Emulating…", say=lambda p: f"Step {p.done} of {p.total}")
        with gated("the replay"):
            emu = emulate_run(live.world_size, "ring_gloo", live.steps, on_progress=bar)
        bar.empty()
        st.session_state["md_check"] = (live.pids, first_divergence(live.digests, emu.digests))
    check = st.session_state.get("md_check")
    if check is None or check[0] != live.pids:
        return
    if check[1] is None:
        st.success(f"The emulation (per-shard gradients in one process, summed in the ring model's order) "
                   f"gives the live run's weights bit for bit at all {live.steps} steps.",
                   icon=":material/check_circle:")
    else:
        st.info(f"The emulation's weights first differ from the live run's at step {check[1]}: the "
                "emulation computes the shard gradients batched (batched matrix products), which may round "
                "differently from a worker's own backward pass on this machine.", icon=":material/info:")


def live_section() -> DataParallelResult | None:
    st.header("1 · A real process group on this server")
    st.markdown(
        "Each worker is a separate process with one torch thread. Rank *r* takes examples *r*, *r*+W, *r*+2W, … "
        "of every batch (as `DistributedSampler` splits them), computes the gradient of its mean loss, multiplies "
        "it by 1/W and `dist.all_reduce` sums the W gradients, which is what `DistributedDataParallel` does. "
        "Rank 0 also trains one copy alone on the whole batch and compares the two after every step. The workers "
        "talk over 127.0.0.1 only; the whole group is stopped if one of them fails, stalls or uses too much memory."
    )
    start_live_run(live_controls())
    live: DataParallelResult | None = st.session_state.get("md_live")
    live_result(live)
    return live


# ---------------------------------------------------------------------------------- 2 · models


def models_section() -> None:
    st.header("2 · The all-reduce's order on 2 to 1,024 devices (models)")
    st.markdown(
        "The vectors summed here are real: the training's first-step gradients on *k* ranks (rank *r*'s shard, "
        "times 1/*k*). Each model sums them in float32 in its algorithm's order; every element's exact sum "
        "(rational arithmetic) is the reference, and the error is counted in "
        f"{glossary.link('ulp', 'ULPs')} of that exact sum. The gloo "
        "ring model gives torch's real gloo all-reduce bit for bit (checked with 3 and 4 processes in the app's "
        "tests); the others follow NCCL's and gloo's source code but were not run against those libraries here."
    )
    with st.expander("The four models: their order, their source, and what they were checked against",
                     icon=":material/account_tree:"):
        st.dataframe(models_frame(), hide_index=True, width="stretch")
    st.selectbox("Largest number of ranks k", KMAX_CHOICES, key="md_kmax", format_func=lambda k: f"{k:,}")
    ks = study_ks(int(st.session_state["md_kmax"]))
    study = finished_order_study(ks)
    if study is None and st.button(f"Compute the orders for k = 2 … {ks[-1]:,} ({len(ks)} values of k)",
                                   key="md_study_go", icon=":material/calculate:"):
        bar = ProgressBar(st, "Summing…")
        with gated("the order study"):
            study = run_order_study(ks, on_progress=study_progress(bar))
        bar.empty()
    if study is None:
        st.caption("Press the button to compute every model's sums for each k: "
                   f"{study_estimate(len(ks), seconds_per_k(punch_allreduce().seconds))} A bar shows each k as it "
                   "is done; "
                   "the result is kept for every visitor of this server.")
        return
    df = study_frame(study)
    a, b = st.columns(2)
    a.altair_chart(study_chart(df, "mean |error| (ULPs)", "Mean error against the exact sum", True),
                   width="stretch")
    b.altair_chart(study_chart(df, "correctly rounded", "Elements equal to the exact sum rounded once", False),
                   width="stretch")
    by_ranks = {c.ranks: c for c in study}
    if st.session_state.get("md_kshow") not in by_ranks:
        st.session_state["md_kshow"] = study[-1].ranks
    c = by_ranks[st.select_slider("Details for k =", list(by_ranks), key="md_kshow")]
    st.dataframe(outcomes_frame(c), hide_index=True, width="stretch")
    st.dataframe(pairs_frame(c), hide_index=True, width="stretch")
    st.caption(f"{c.elements:,} gradient elements summed over {c.ranks:,} ranks. A ring adds k − 1 times in a "
               "row, so its rounding errors pile up with k; trees and halving-doubling add about log₂ k partial "
               "sums deep. For two ranks every order is one rounding of a + b and they all agree.")


# ---------------------------------------------------------------------------------- 3 · emulation


def emulation_controls() -> EmulationSettings:
    e1, e2, e3 = st.columns(3)
    e1.selectbox("All-reduce model", tuple(COLLECTIVE_MODELS), key="md_model",
                 format_func=lambda m: COLLECTIVE_MODELS[m].name)
    e2.multiselect("Devices k", EMULATED_KS, key="md_ks", format_func=lambda k: f"{k:,}")
    e3.slider("Training steps", STEP_RANGE[0], STEP_RANGE[1], key="md_esteps", step=10)
    return EmulationSettings(st.session_state["md_model"], tuple(int(k) for k in st.session_state["md_ks"]),
                             int(st.session_state["md_esteps"]))


def emulation_section(live: DataParallelResult | None) -> None:
    st.header("3 · Training on 8, 64 and 1,024 devices, emulated in one process")
    st.markdown(
        "No processes here: the batch is cut into *k* shards, each shard's gradient is computed (all shards at "
        "once, through batched matrix products), multiplied by 1/*k* and summed in the chosen model's order, and "
        "one optimizer step follows, every step. Like the models above, this is an emulation of the arithmetic, "
        "not a run on real devices."
    )
    settings = emulation_controls()
    keys = settings.keys()
    missing = missing_emulations(keys)
    if not keys:
        st.caption("Choose at least one number of devices.")
    elif missing and st.button(f"Run the emulation ({len(missing)} run{'s' if len(missing) > 1 else ''} of "
                               f"{settings.steps} steps)", key="md_emulate", icon=":material/play_arrow:"):
        bar = ProgressBar(st, "Emulating…", say=lambda p: p.what)
        with gated("the emulation"):
            emulate_missing(missing, bar)
        bar.empty()
    runs = finished_emulations(keys)
    if keys and len(runs) < len(keys):
        st.caption("Press the button to run the emulation (k = 1,024 takes longest; finished runs are kept for "
                   "every visitor of this server).")
    if runs:
        emulation_results(settings, runs, live)


def emulation_results(settings: EmulationSettings, runs: list, live: DataParallelResult | None) -> None:
    for r in runs:
        st.markdown(f"**{r.ranks:,} emulated devices** ({COLLECTIVE_MODELS[r.model].name}): "
                    f"{parting(r.summary, r.steps)}")
    st.dataframe(emulation_rows(runs), hide_index=True, width="stretch")
    st.altair_chart(gap_chart(divergence_frame({f"{r.ranks:,} devices": r.records for r in runs}),
                              "Distance between the weights of k devices and of one process"),
                    width="stretch")
    pairs = run_pairs(runs, settings.steps, live)
    if pairs:
        st.dataframe(between_frame(pairs), hide_index=True, width="stretch")
    worst = earliest_apart(runs)
    if worst is not None:
        st.caption(f"With the {COLLECTIVE_MODELS[settings.model].name} model, the earliest of these runs to be "
                   f"more than 1% apart from one process is the one on {worst.ranks:,} devices, at step "
                   f"{worst.summary.first_rel_1pct}.")


def punchline() -> None:
    """A computed result without a button: the first-step gradients on 8 ranks summed in each all-reduce order."""
    with st.container(key="punchline"):
        st.markdown(
            "Data-parallel training sums every device's gradient (an **all-reduce**), and the algorithm fixes the "
            "order. A **ring** passes partial sums from device to device around a circle, so each element is "
            "added one device after another; a **tree** adds the devices in pairs, then pairs of those sums, "
            "about log₂ k levels deep."
        )
        with st.spinner(f"Summing the first-step gradients of {PUNCH_RANKS} ranks in every all-reduce order…"):
            c = punch_allreduce().comparison
        pair = next(p for p in c.pairs if {p.a, p.b} == {"ring_gloo", "tree_nccl"})
        ring = next(o for o in c.outcomes if o.model == "ring_gloo")
        tree = next(o for o in c.outcomes if o.model == "tree_nccl")
        m1, m2, m3 = st.columns(3)
        m1.metric(f"Ring vs tree, k = {c.ranks}: elements apart", f"{pair.differing:.0%}",
                  help=f"{COLLECTIVE_MODELS['ring_gloo'].name} against {COLLECTIVE_MODELS['tree_nccl'].name}, "
                  "element by element.")
        m2.metric("Largest gap between the two", f"{pair.max_ulp_distance:,} ULP")
        m3.metric("Equal to the exact sum rounded once",
                  f"{ring.correctly_rounded:.0%} vs {tree.correctly_rounded:.0%}",
                  help="Share of the elements each order gets correctly rounded: ring, then tree.")
        st.caption(f"Models of the all-reduce's order, computed on this server: the training's {c.elements:,} "
                   f"first-step gradient elements on {c.ranks} ranks, summed in float32 by the ring and by the tree, "
                   "each against the exact sum (rational arithmetic). The same gradients, the same additions, "
                   "another order: other bits. The real gloo process group runs below, when you start it.")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("md", URL_FIELDS, DEFAULTS)
    st.title("Many devices")
    punchline()
    st.markdown(
        f"""
Large models are trained **data-parallel**: every device holds a copy of the model, computes the
gradient on its own share of each batch, and an **all-reduce** sums the gradients so that every copy
takes the same step. That sum has an order of its own: which partial sums are formed depends on the
algorithm (ring or tree, above) and on the **number of devices**, so the same training on 8 and on
16 devices can part ways just as a CPU and a GPU do.

Below: a real `torch.distributed` process group on this server (gloo backend, 1, 2 or 4 worker
processes), the all-reduce orders of 2 to 1,024 devices computed exactly, and training runs on 8, 64
and 1,024 devices emulated in one process. Every run trains the Training divergence page's network on
its noisy spirals ({DP_SETTINGS.n_points:,} points) with a global batch of {DP_SETTINGS.batch:,} examples,
SGD with momentum, learning rate {DP_SETTINGS.lr:g}, in float32; "one process" is the same training on
the whole batch at once.
"""
    )
    live = live_section()
    models_section()
    emulation_section(live)
    st.info(
        "**Takeaway:** the number of devices is one more source of a different order. Changing it (or the "
        "collective library, its algorithm, or how it cuts the vector into chunks) changes which partial sums "
        "of the gradients are formed, so the same training run can give other bits from the first step on, and "
        "the gap then behaves like any other rounding difference: it grows where the training amplifies it. "
        "Compare runs on different device counts by their aggregate metrics, never step by step.",
        icon=":material/lightbulb:",
    )
    share_box(sync(URL_FIELDS), url_notes)
    next_page_link("many_devices")


main()
