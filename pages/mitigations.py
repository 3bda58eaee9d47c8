"""Page: Mitigations — what each fix buys, what it costs here, and where it stops."""

from __future__ import annotations

import time

import streamlit as st

from core.arith.formats import FORMATS
from core.arith.hexbits import hex_bits
from core.crowd.budget import training_cost
from core.crowd.bytecache import (
    DETERMINISM,
    MISMATCH_RULE,
    MITIGATION_LABS,
    MITIGATION_SEEDS,
    REPRODUCIBLE_COST,
    REPRODUCIBLE_SUMS,
    THROUGHPUT,
    WIDER_STUDIES,
)
from core.crowd.querystate import Field, FieldKind
from core.kernels.reprosum import compiled_pass_available
from core.machines.devices import available_devices, cpu_device, machine_facts
from core.machines.timing import cpu_load
from core.recordings.store import cached_recordings
from core.studies.mitigations import (
    HARD_VECTOR,
    LAB_ORDERS,
    STORAGE_FORMATS,
    WIDER,
    ReproducibleSumCost,
    ThroughputRun,
    WiderStudy,
    accumulation_errors,
    determinism_study,
    distinct_results,
    lab,
    measure_devices,
    mismatch_check,
    reproducible_study,
    reproducible_sum_cost,
    training_pair,
    wider_study,
)
from core.studies.peak_rates import float64_peak
from core.studies.reproducible import live_costs
from core.training.divergence import DEFAULT_SEEDS, SEED_RULE, seed_verdict
from core.training.mlp import TrainSettings
from core.training.seeds import seed_study
from ui import glossary
from ui import mitigations_view as view
from ui.crowd import folded, heavy_section
from ui.mitigations_view import story_link
from ui.navigation import ensure_app_navigation, next_page_link
from ui.progress import ProgressBar
from ui.render import inert
from ui.talk import presenter
from ui.urlstate import restore, share_box, sync

URL_FIELDS = [Field(key="mi_storage", param="storage", kind=FieldKind.CHOICE, options=STORAGE_FORMATS),
              Field(key="mi_k", param="seeds", kind=FieldKind.INT, low=2, high=12)]

# cited addresses, shown as plain text (a page that takes link parameters shows no live link)
TORCH_SUM_DOC = "https://docs.pytorch.org/docs/stable/generated/torch.sum.html"
THINKING_MACHINES = "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"
SUMMERS_2021 = "https://arxiv.org/abs/2103.04514"


def _measured() -> tuple[ThroughputRun | None, float]:
    """The last float32-vs-float64 measurement on this server and when it was taken, shared by every
    visitor (taken on demand: it needs many seconds, so the page never measures it while loading)."""
    return THROUGHPUT.get("last", (None, 0.0))


def _measure(bar) -> None:
    """Measure again (one measurement at a time: a visitor pressing meanwhile gets that one's result)."""
    THROUGHPUT.refresh("last", lambda: (measure_devices(available_devices(), bar), time.time()))


def punchline(punch) -> None:
    """The insight in one sentence, and float64 on the Training divergence page's pair: the first screen."""
    punch.markdown("**No framework switch makes a CPU and a GPU agree bit for bit (only rewritten code does: "
                   "order-independent sums, the same math functions); each fix buys part of it, at a cost.** "
                   "float64, for one: the same training pair in both formats, trained live here.")
    # The first screen shows at once; the two trainings (seconds on a fresh server, cached afterwards) fill it in.
    bar = punch.progress(0.0, "Training the pair (hidden units reordered) in float32, live on this server…")
    p32 = training_pair("float32")  # kept in core.crowd.bytecache.RESULTS
    bar.progress(0.5, "Training the same pair in float64…")
    p64 = training_pair("float64")
    bar.empty()
    t1, t2 = punch.columns(2)
    t1.metric("float32 pair: first 1% apart at step", p32.first_rel_1pct or "never",
              help="The Training divergence page's default pair (hidden units reordered), trained in float32: the "
                   "first step where the two losses are more than 1% apart.")
    t2.metric("The same pair in float64", p64.first_rel_1pct or f"not within {p64.steps} steps",
              help=f"Final ‖θA − θB‖: {p32.final_distance:.3g} in float32, {p64.final_distance:.3g} in float64.")
    if p64.first_rel_1pct is None:  # said from the pair's own numbers: float64 may outlast a run, or only postpone
        what = (f"in float64 this pair stays together for all {p64.steps} steps here: its gap stopped growing before "
                "float64's 2²⁹ head start ran out; where the gap keeps growing, float64 only postpones the parting")
    else:
        what = f"in float64 the same pair parts later, at step {p64.first_rel_1pct}: postponed, not cured"
    punch.caption(f"The Training divergence page's default pair (hidden units reordered), trained live here; {what}. "
                  "Every cost below is × the default's time (1.0× = as fast).")


def float64_section() -> None:
    with folded("1 · Compute in float64: measured here, and the vendors' ratios", "mi_open_float64") as open_:
        if open_:
            _float64_detail()


def _float64_detail() -> None:
    st.markdown("Each float64 rounding is 2²⁹ times finer than float32's. What it costs depends on the hardware: "
                "the vendors' peak rates below, and a measurement on this server when you ask for one.")
    run, at = _measured()
    if st.button("Measure float32 against float64 on this server" + (" again" if run else ""), key="mi_measure",
                 icon=":material/speed:", help="A 1024² matrix product and a sum of 2²⁴ values in both formats, "
                 "7 interleaved repeats: many seconds on a busy server, so it runs only when asked."):
        bar = ProgressBar(st, "Measuring…", say=lambda p: f"Measuring… {p.what}")
        _measure(bar)
        bar.empty()
        run, at = _measured()
    if run and run.rows:
        view.throughput_table(run)
        mm, sm = run.first("matmul"), run.first("sum")
        st.caption(f"Measured on this server {(time.time() - at) / 60:.0f} min ago (by whichever visitor pressed "
                   f"the button) with torch {run.torch_version}: both formats timed back to back in each of "
                   f"{run.rows[0].repeats} repeats after a warm-up. The cost is float64's time over float32's for "
                   "the same values: the reciprocal of the per-repeat speed ratio's median, its quartiles' "
                   "reciprocals in brackets. Per value, a matrix product is limited by arithmetic and a large sum "
                   "by memory bandwidth (float64 moves twice the bytes): both would take about twice the time"
                   + (f"; here {view.time_ratio(mm.ratio):.2f}× and {view.time_ratio(sm.ratio):.2f}×."
                      if mm and sm else "."))
    else:
        st.info("Not measured since this server started: the button above times both formats here (it takes "
                "many seconds, so the page does not do it while loading).", icon=":material/speed:")
    for failure in run.failures if run else ():
        st.warning(failure)
    recs = [r for r in cached_recordings()[0] if r.throughput]
    if recs:
        st.markdown("Recorded on other machines with `python -m scripts.capture` (each row names the machine "
                    "and the date):")
        view.recorded_throughput_table(recs)
    view.vendor_table()
    with st.spinner(f"Summing 10⁶ values in {len(LAB_ORDERS)} orders, in float32 and float64, against the exact "
                    "sum…"):
        errors = accumulation_errors(MITIGATION_LABS.call(lab, "same"), MITIGATION_LABS.call(lab, "float64"))
    st.markdown("The Summation lab's default vector (10⁶ normal float32 values), summed in float32 and in "
                "float64. Each float64 rounding is 2²⁹ times finer:")
    view.error_table(errors)
    st.caption("Absolute errors against the exact sum, computed live; the float64 sums are of the same float32 "
               "values.")


def wider_section() -> WiderStudy:
    with st.expander("2 · Accumulate in a wider format: torch.sum(x, dtype=…)"):
        storage = st.selectbox("Stored format", list(STORAGE_FORMATS), key="mi_storage")
        study = WIDER_STUDIES.call(wider_study, storage)
        wide = WIDER[storage]
        st.markdown(
            f"`torch.sum(x, dtype=torch.{wide})` casts the input to {wide} before it reduces (torch.sum's "
            f"documentation, {inert(TORCH_SUM_DOC, line_start=False)}): a full copy, here "
            f"{study.copy_bytes / 1e6:,.0f} MB for the {study.n:,} values beside their own "
            f"{study.input_bytes / 1e6:,.0f} MB. "
            + _sixteen_bit_note(study))
        view.wider_table(study)
        st.caption(f"Live on {cpu_device().name}: 10⁶ normal values stored as {storage}. Each of 7 repeats times "
                   "every row back to back (rotating the order), each row as the fastest of 3 calls; a time is the "
                   "median over the repeats, a ratio the median of the per-repeat ratios with their quartiles in "
                   "brackets.")
        slow = study.threads_slower
        if slow:
            cores, load = cpu_load()
            st.caption(
                "Why more threads are slower here: "
                + ", ".join(f"{r.accumulate} on {r.threads} threads takes {r.vs_base:.1f}×" for r in slow)
                + f" the plain one-thread time. This server has {cores} core{'s' if cores > 1 else ''} for "
                + (f"a load of {load:.1f} runnable processes (1-minute average, read live)" if load is not None
                   else "every visitor and process")
                + ": a multi-threaded sum waits at its end for its slowest thread, and a thread that finds no free "
                "core waits for one (milliseconds) while the one-thread sum of 10⁶ values is over sooner. "
                "On an idle machine with free cores the extra threads can help instead.")
        hard = MITIGATION_LABS.call(lab, "float64", HARD_VECTOR)
        st.markdown(
            "Still order-dependent: "
            + ("above, the wider sums with different thread counts already differ. "
               if study.wide_differs_across_threads else "above, the wider sums happen to agree across thread counts. ")
            + f"On an ill-conditioned float32 vector (10⁵ values, {glossary.link('kappa', 'κ')} ≈ {hard.kappa:.1e}) "
            f"the same {len(hard.rows)} "
            f"orders, all accumulating in float64, give **{distinct_results(hard)} different float64 results**."
        )
    return study


def _sixteen_bit_note(study: WiderStudy) -> str:
    """What a wider dtype adds, with the plain sum's own error (in ULPs of its result) as the evidence."""
    if study.storage == "float32":
        return "The float64 sum's error collapses, but it is still a rounded sum whose last bits depend on the order."
    errors, fmt = study.threads_errors, study.storage
    most = max(errors)
    once = errors[1] <= 0.5  # within the one rounding of an exact (or float32) total to the stored format
    note = ((f"For {fmt} data torch already accumulates in float32: the plain sum on one thread is off by "
             f"{errors[1]:.2f} ULPs of its {fmt} result, no more than the one rounding of the total to {fmt}. ")
            if once else f"The plain {fmt} sum on one thread is off by {errors[1]:.2f} ULPs of its result. ")
    note += "What dtype=float32 adds is a result, and per-thread partial sums, no longer rounded to 16 bits"
    if most > 1 and errors[most] > max(errors[1], 0.5):
        return note + (f": on {most} threads the plain sum is off by {errors[most]:.2f} ULPs, as when each thread's "
                       f"partial sum is rounded to {fmt} before they are combined.")
    return note + "."


def determinism_section() -> None:
    with folded("3 · Deterministic is not the same as reproducible", "mi_open_determinism") as open_:
        if open_:
            _determinism_detail()


def _determinism_detail() -> None:
    det = DETERMINISM.call(determinism_study)
    cols = st.columns(len(det.distinct_by_threads))
    for col, (threads, distinct) in zip(cols, det.distinct_by_threads.items(), strict=True):
        col.metric(f"torch.sum, {threads} thread{'s' if threads > 1 else ''}: results in {det.repeats} runs",
                   distinct)
    bits = {t: hex_bits(b, FORMATS["float32"]) for t, b in det.values_by_threads.items()}
    same = len(set(det.values_by_threads.values())) == 1
    st.markdown(
        "Run to run, with a fixed thread count, the CPU sum repeats itself bit for bit. Across thread counts: "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} → `{b}`" for t, b in bits.items())
        + (" — identical here." if same else " — **different bits**.")
    )
    m, k, n = det.mm_shape
    blas = machine_facts().get("blas")
    st.markdown(
        f"Batch size changes the result: on this CPU `mm(a[:1], b)` and `mm(a, b)[:1]` (a: {m}×{k}, b: {k}×{n}, "
        f"float32) differ in **{det.mm_differing:,} of {n:,}** outputs (at most {det.mm_max_ulps:,} "
        f"{glossary.link('ulp', 'ULPs')} apart), so the two shapes were not computed the same way "
        "(another order of the additions, or other instructions). torch hands "
        f"both to the BLAS{f' ({blas})' if blas else ''}, whose choice of kernel is not documented: likely a "
        "matrix-vector kernel for one row and a blocked matrix-matrix kernel with other reduction splits for the "
        f"batch (Thinking Machines, “Defeating Nondeterminism in LLM Inference”, 2025, "
        f"{inert(THINKING_MACHINES, line_start=False)})."
        if det.mm_differing else
        f"Batch size: on this CPU `mm(a[:1], b)` and `mm(a, b)[:1]` (a: {m}×{k}, b: {k}×{n}, float32) gave the "
        "same bits here; on GPUs and other CPUs they can differ (Thinking Machines, 2025, "
        f"{inert(THINKING_MACHINES, line_start=False)})."
    )
    st.info(
        "`torch.use_deterministic_algorithms(True)` makes torch use a deterministic kernel where one exists and "
        "raise where none does, for operations whose results can change from run to run on the same device "
        "(mostly atomics on GPUs; PyTorch 2.9 and older also need `CUBLAS_WORKSPACE_CONFIG=:4096:8` for CUDA matrix "
        "products, 2.10 and newer do not). It does not make a CPU and a "
        "GPU agree, and it does not fix thread-count or batch-size effects. It switches the whole process: this "
        "server turns it on for one small training step, times it, and turns it off again (its cost is in the table "
        "above).",
        icon=":material/info:",
    )


def order_independent_section() -> None:
    with folded("4 · An order-independent sum: the same bits in every order", "mi_open_order") as open_:
        if open_:  # 10^6 on the page (bounded memory); the benchmark: 10^7
            _order_independent_detail(REPRODUCIBLE_COST.call(reproducible_sum_cost, n=1_000_000, budget_s=3.0))


def _order_independent_detail(cost: ReproducibleSumCost) -> None:
    st.markdown(
        "Sum the values in float64 rows, in whatever order the hardware likes, and bound the error that any "
        "such order can make. If both ends of that error interval round to the same float32, so does the exact "
        "sum: that is the answer. Where the bound cannot decide (a sum right at a rounding boundary), split "
        "every value at one power of two into a high part and a remainder: the high parts are multiples of that "
        "power with few enough bits that float64 adds them **exactly in any order**; repeat on the remainders, "
        "combine the exact totals and round once. The result is the correctly rounded sum: the same bits for "
        "every order, thread count and device. A GPU computes the float64 partial sums with torch reductions; "
        + ("on this CPU, large float32 vectors take one compiled pass (numba) that widens each value as it reads "
           "it. Either way the same error bound decides, so both give the same bits."
           if compiled_pass_available() else
           "so does this CPU here (numba, which would read large float32 vectors in one compiled pass, could not "
           "be imported on this server).")
    )
    study = REPRODUCIBLE_SUMS.call(reproducible_study)
    view.reproducible_table(study)
    values = len(study.shuffled_bits)
    st.markdown(
        f"{study.distinct_ordinary} different ordinary results; the order-independent sum gave "
        f"**{values} value{'s' if values > 1 else ''}** over {study.shuffles} shuffles and on "
        f"{view.device_bits(study)}."
    )
    st.caption(f"Cost, measured live on this server ({cost.threads} thread{'s' if cost.threads > 1 else ''}, "
               f"10⁶ float32; the median of {cost.repeats} interleaved repeats, quartiles in brackets, measured "
               f"as benchmarks/bench_reprosum.py measures 10⁷): {cost.vs_torch:.1f}× the time of torch.sum "
               f"({cost.vs_torch_iqr[0]:.1f}–{cost.vs_torch_iqr[1]:.1f}×) and {cost.vs_numpy:.1f}× "
               f"np.sum ({cost.vs_numpy_iqr[0]:.1f}–{cost.vs_numpy_iqr[1]:.1f}×). The ratio depends on the "
               "size: while the values fit in the CPU's last-level cache, arithmetic sets the pace, and one "
               "vector instruction adds twice as many float32 values as float64 values; once they exceed it, "
               "both sums wait for memory and the gap narrows. A sum within the error bound of a rounding "
               "boundary (rare, except under heavy cancellation) takes the exact folds and costs more.")
    if cost.threads > 1 and cost.vs_torch_iqr[1] > 2 * cost.vs_torch_iqr[0]:
        cores, load = cpu_load()
        st.caption(f"The quartiles are wide because torch.sum runs on {cost.threads} threads here and this "
                   f"server has {cores} core{'s' if cores > 1 else ''}"
                   + (f" for a load of {load:.1f} runnable processes (1-minute average, read live)"
                      if load is not None else "") + ": in some repeats a thread of torch.sum waited for a core "
                   "another process held, which makes that repeat's ratio small. The median is the typical "
                   "repeat.")


def accept_divergence_section() -> None:
    with st.expander("5 · Accept the divergence: compare against the seed spread"):
        st.markdown("Compare final aggregate metrics across runs and devices, not step-by-step trajectories. The "
                    "spread between seeds is the yardstick: if the CPU-versus-reordered difference is no larger, it "
                    "counts as seed noise.")
        k = int(st.number_input("Seeds", min_value=2, max_value=12, key="mi_k"))
        if st.button("Train the seeds (300 steps each, both sides)", key="mi_seeds"):
            with heavy_section(training_cost(300, k), "this training"), st.spinner("Training…"):
                verdict = seed_verdict(MITIGATION_SEEDS.call(seed_study, TrainSettings(steps=300), k))
            c1, c2, c3, c4 = st.columns(4)
            c1.metric("|mean loss A − B|", f"{verdict.gap:.2e}", help="|mean final loss of A − mean of B|")
            c2.metric("Seed spread of loss", f"{verdict.spread:.2e}",
                      help="The larger standard deviation of the final loss over the seeds of one side.")
            c3.metric("|mean accuracy A − B|", f"{verdict.acc_gap:.2%}")
            c4.metric("Seed spread of accuracy", f"{verdict.acc_spread:.2%}",
                      help="The larger standard deviation of the final accuracy over the seeds of one side.")
            st.markdown(f"**Verdict ({verdict.seeds} seeds per side):** the gap between the mean final losses of A "
                        f"and B is {verdict.words()}.")
            st.caption(f"{SEED_RULE} The Training divergence page's seed study applies the same rule. Live on this "
                       "CPU; B is the hidden-unit reordering of A (a stand-in for another device's order). Summers and "
                       "Dinneen (ICML 2021) found, on the models they studied, that each source of nondeterminism "
                       "(initialisation, data order, augmentation, cuDNN) varied the trained models about as much as "
                       f"the others ({inert(SUMMERS_2021, line_start=False)}).")


def _range(xs: list[float]) -> str:
    lo, hi = min(xs), max(xs)
    return f"{lo:.0f}×" if round(lo) == round(hi) else f"{lo:.0f}–{hi:.0f}×"


def summary(wider: WiderStudy) -> None:
    """The five mitigations in one table, every cost × the default's time: float64's, the sums' and deterministic
    mode's costs here are the measurement the Overview and Make my runs reproducible show (one figure, one place); the
    sections below time their own set-ups (a stored format, thread counts) and say so."""
    live = live_costs().rows
    det, wide, repro = live["deterministic_cpu"], live["wider"], live["reprosum"]
    here = f"{live['float64'].text} here (a 256×256 matmul, 1 thread; measured)"
    datacentre = [float64_peak(h) for h in ("NVIDIA A100", "NVIDIA H100 (SXM)")]
    consumer = [float64_peak(h) for h in ("NVIDIA T4", "NVIDIA RTX 4090")]
    tensor = [c for p in datacentre for c in p.tensor_cost]
    small = [p.plain_cost for p in consumer] + [c for p in consumer for c in p.tensor_cost]
    float64_cost = (f"{here}; A100, H100: matmuls 1.0× vs the default float32 (FP64 tensor cores), 2× off "
                    f"them, {_range(tensor)} vs TF32–bfloat16 training; T4, RTX 4090: {_range(small)} (upper ends "
                    "vs bfloat16/float16; cited, in 1)")
    view.summary_table([
        {"mitigation": "1 · float64 everywhere", "fixes":
         "errors 2²⁹ times smaller; divergence later, or not within the run",
         "does not fix": "order dependence; where the gap keeps growing, divergence is postponed, not cured",
         "cost, × the default's time": float64_cost},
        {"mitigation": "2 · wider accumulation", "fixes": "the reduction's own error",
         "does not fix": "order dependence (far smaller); errors elsewhere in the model",
         "cost, × the default's time": f"{wide.text} a plain torch.sum (10⁶ float32, 1 thread; measured), plus "
                                       f"a copy of {wider.copy_bytes / 1e6:,.0f} MB per 10⁶ {wider.storage} values"},
        {"mitigation": "3 · deterministic algorithms", "fixes": "run-to-run changes on one device",
         "does not fix": "CPU vs GPU, thread count, batch size",
         "cost, × the default's time": f"{det.text} on this CPU (measured); GPUs: no figure cited"},
        {"mitigation": "4 · order-independent sum", "fixes": "sums: the same bits everywhere",
         "does not fix": "other operations (matmuls, convolutions) unless rewritten likewise",
         "cost, × the default's time": f"{repro.text} torch.sum (10⁶ float32, 1 thread; measured)"},
        {"mitigation": "5 · accept the divergence", "fixes": "nothing, by design", "does not fix": "bit-level "
         "comparisons", "cost, × the default's time": "1.0× per run; k seeded runs per side to compare"},
    ])


# The settings named here are those Make my runs reproducible gives for PyTorch on one NVIDIA GPU, the same bits
# run to run (a test holds them to its snippet)
WHAT_TO_SET = (
    "**What to set.** For the same bits run to run on one machine: `torch.use_deterministic_algorithms(True)` "
    "(with PyTorch 2.9 or older, also `CUBLAS_WORKSPACE_CONFIG=:4096:8` before CUDA starts), "
    "`torch.backends.cudnn.benchmark = False` and every generator seeded (`torch.manual_seed(0)`, the "
    "DataLoader's workers too). For smaller rounding errors: "
    "`torch.sum(x, dtype=torch.float64)`, or the model in float64. No flag makes a CPU and a GPU agree. "
    "Make my runs reproducible, linked below, writes the settings for your own setup in order, with what each "
    "guarantees and what it costs.")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("mi", URL_FIELDS, {"mi_storage": "float32", "mi_k": DEFAULT_SEEDS})
    st.title("Mitigations and what they cost")
    punch = st.container(key="punchline")  # the talk scenario's message: the insight and float64's pair
    punchline(punch)
    st.subheader("Five mitigations, and what each costs")
    summary_slot = st.container()  # filled once the sections below have measured their costs
    if not presenter():  # the room reads "measured" or "cited" in each cell: the page stays in three screens
        st.caption("Measured costs are live on this server (other visitors may disturb them); vendor rates are "
                   "cited. Each in depth:")
    float64_section()
    wider = wider_section()
    determinism_section()
    order_independent_section()
    accept_divergence_section()
    share_box(sync(URL_FIELDS), url_notes)  # the stored format (2) and the seeds (5), in a link
    with summary_slot:
        summary(wider)
        if not presenter():  # the speaker says it; the page stays within three screens at presenter type
            st.markdown(WHAT_TO_SET)
    view.mismatch_rule(MISMATCH_RULE.call(mismatch_check))
    c1, c2 = st.columns(2)
    with c1:
        story_link("pages/diagnose.py", "Diagnose your own mismatch", ":material/troubleshoot:")
    with c2:
        story_link("pages/reproducible.py", "Make my runs reproducible: the checklist", ":material/checklist:")
    next_page_link("mitigations")


main()
