"""Page: Mitigations — what each fix buys, what it costs here, and where it stops."""

from __future__ import annotations

import statistics
import time

import numpy as np
import pandas as pd
import streamlit as st
import torch

from core.budget import training_cost
from core.devices import available_devices, cpu_device
from core.exact import shortest_repr
from core.formats import FORMATS, hex_bits
from core.metrics import exact_value
from core.mitigations import (
    VENDOR_RATIOS,
    determinism,
    measure_throughput,
    reproducible_sum,
    reproducible_sum_cost,
    reproducible_sum_devices,
    wider_accumulation,
)
from core.orders import ORDERS, run_order
from core.querystate import Field
from core.recordings import cached_recordings
from core.sumlab import run_lab
from core.training import TrainSettings, seed_study
from core.vectors import VectorSpec, generate
from ui.crowd import heavy_section
from ui.navigation import ensure_app_navigation, next_page_link
from ui.urlstate import restore, share_box, sync

DEFAULT_VECTOR = VectorSpec("normal", 1_000_000, 0, "float32")
LAB_ORDERS = ("sequential", "reverse", "sorted_abs", "pairwise", "numpy", "torch_1", "torch_all", "kahan")


@st.cache_resource(show_spinner=False)
def _throughput_store() -> dict:
    """The last float32-vs-float64 measurement on this server, shared by every visitor (taken on demand:
    it needs many seconds, so the page never measures it while loading). "lock": one measurement at a time."""
    import threading

    return {"lock": threading.Lock()}


def _measure_throughput(bar) -> None:
    store = _throughput_store()
    with store["lock"]:
        out, devices = [], available_devices()
        for i, d in enumerate(devices):
            try:
                out += measure_throughput(
                    d, progress=lambda f, text, i=i: bar.progress((i + f) / len(devices), f"Measuring… {text}"))
            except RuntimeError as err:  # a GPU that fails must not take the CPU numbers down
                out.append(f"{d.name}: {err}")
        store.update(rows=out, at=time.time(), torch=torch.__version__)


HARD_VECTOR = VectorSpec("ill_conditioned", 100_000, 0, "float32", 1e12)


@st.cache_data(max_entries=4, ttl=3600, show_spinner=False)
def _lab(working: str, spec: VectorSpec = DEFAULT_VECTOR):
    v = generate(spec)
    return run_lab(v.values, "float32", working, LAB_ORDERS)


@st.cache_data(max_entries=4, ttl=1800, show_spinner=False)
def _wider(storage: str):
    v = generate(VectorSpec("normal", 1_000_000, 0, storage))
    t = torch.from_numpy(v.values.astype(np.float32)).to(FORMATS[storage].torch_dtype)
    return wider_accumulation(t, torch.float64 if storage == "float32" else torch.float32)


@st.cache_data(max_entries=2, ttl=1800, show_spinner=False)
def _determinism():
    x = torch.from_numpy(generate(DEFAULT_VECTOR).values.copy())
    return determinism(x)


@st.cache_data(max_entries=2, ttl=3600, show_spinner=False)
def _reproducible():
    v = generate(DEFAULT_VECTOR).values
    rows = []
    for key in LAB_ORDERS:
        out = run_order(key, v, "float32")
        rows.append({"how the sum was ordered": ORDERS[key].name, "ordinary sum": shortest_repr(
            exact_value(out.value, FORMATS["float32"]), FORMATS["float32"])})
    rng = np.random.default_rng(7)
    repro = set()
    for i in range(5):
        perm = v if i == 0 else v[rng.permutation(v.size)]
        repro.add(float(reproducible_sum(torch.from_numpy(np.array(perm)))))
    devices = reproducible_sum_devices(torch.from_numpy(v.copy()))
    return rows, repro, devices


@st.cache_data(max_entries=2, ttl=3600, show_spinner=False)
def _training_pair(dtype: str):
    from core.training import PairedRun, summarize

    run = PairedRun(TrainSettings(dtype=dtype))
    recs = run.run(run.settings.steps)
    return summarize(recs), recs[-1].param_distance


@st.cache_data(max_entries=4, ttl=3600, show_spinner=False)
def _seeds(k: int):
    return seed_study(TrainSettings(steps=300), k)


URL_FIELDS = [Field("mi_storage", "storage", "choice", ("float32", "float16", "bfloat16")),
              Field("mi_k", "seeds", "int", low=2, high=12)]
ensure_app_navigation()
url_notes = restore("mi", URL_FIELDS, {"mi_storage": "float32", "mi_k": 4})
st.title("Mitigations and what they cost")
st.markdown(
    "Three ways to live with floating-point non-determinism, plus one that goes further than the brief. "
    "Every timing below is **measured live on this server** (and may be disturbed by other visitors); "
    "the vendor ratios are **cited**, not measured."
)
here = cpu_device()

# ----------------------------------------------------------------------------- float64
st.header("1 · Compute in float64")
st.markdown("Each float64 rounding is 2²⁹ times finer than float32's. What it costs depends on the hardware: "
            "the vendors' peak ratios below, and a measurement on this server when you ask for one.")
with st.spinner("Training the pair in float32 and in float64 (500 steps each)…"):
    (s32, d32), (s64, d64) = _training_pair("float32"), _training_pair("float64")
punch = st.container(key="punchline")  # the talk scenario's message: in the first screen
t1, t2 = punch.columns(2)
t1.metric("Training pair (hidden units reordered), float32: more than 1% apart from step",
          s32.first_rel_1pct or "never")
t2.metric("The same pair in float64", s64.first_rel_1pct or "not within 500 steps",
          help=f"Final ‖θA − θB‖: {d32:.3g} in float32, {d64:.3g} in float64.")
punch.caption("Both pairs trained live here with the Training divergence page's default settings.")
store = _throughput_store()
tp = store.get("rows", [])
if st.button("Measure float32 against float64 on this server" + (" again" if tp else ""), key="mi_measure",
             icon=":material/speed:", help="A 1024² matrix product and a sum of 2²⁴ values in both formats, "
             "7 interleaved repeats: many seconds on a busy server, so it runs only when asked."):
    bar = st.progress(0.0, "Measuring…")
    _measure_throughput(bar)
    bar.empty()
    tp = store.get("rows", [])
rows = [{"device": t.device, "operation": f"{t.op} ({t.size:,}{'²' if t.op == 'matmul' else ' values'})",
         "float32": f"{t.rate32:,.2f} {t.unit}", "float64": f"{t.rate64:,.2f} {t.unit}",
         "float64 speed / float32 speed, per value (quartiles)":
             f"{t.ratio:.2f} ({t.ratio_quartiles[0]:.2f}–{t.ratio_quartiles[1]:.2f})",
         "what it means": t.verdict()} for t in tp if not isinstance(t, str)]
if rows:
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(f"Measured on this server {(time.time() - store['at']) / 60:.0f} min ago (by whichever visitor pressed "
               f"the button) with torch {store['torch']}: both formats timed back to back in each of "
               f"{next(t.repeats for t in tp if not isinstance(t, str))} repeats after a warm-up, the ratio "
               "taken per repeat; median, quartiles in brackets. Per value, a matrix product is limited by arithmetic "
               "and a large sum by memory bandwidth (float64 moves twice the bytes): both give about half.")
else:
    st.info("Not measured since this server started: the button above times both formats here (it takes many "
            "seconds, so the page does not do it while loading).", icon=":material/speed:")
for t in tp:
    if isinstance(t, str):
        st.warning(t)
recorded = [{"device": r.label, "operation": f"{t.op} ({t.size:,})",
             "float32": f"{t.rate_float32:,.1f} {t.unit}", "float64": f"{t.rate_float64:,.1f} {t.unit}",
             "float64 speed / float32 speed, per value": f"{t.seconds_float32 / t.seconds_float64:.2f}"}
            for r in cached_recordings()[0] for t in r.throughput]
if recorded:
    st.markdown("Recorded with `python -m scripts.capture` (each row names the machine and the date):")
    st.dataframe(pd.DataFrame(recorded), hide_index=True, width="stretch")
st.dataframe(pd.DataFrame(VENDOR_RATIOS, columns=["hardware", "peak FP64 : FP32", "source"]), hide_index=True,
             width="stretch")
with st.spinner("Summing 10⁶ values in 8 orders, in float32 and float64, against the exact sum…"):
    lab32, lab64 = _lab("same"), _lab("float64")
err = [{"order": r32.order.name,
        "error, float32 accumulation": f"{float(r32.metrics.abs_error):.3e}",
        "error, float64 accumulation": f"{float(r64.metrics.abs_error):.3e}",
        "shrink factor": (f"{float(r32.metrics.abs_error / r64.metrics.abs_error):.2e}"
                          if r64.metrics.abs_error else "exact in float64")}
       for r32, r64 in zip(lab32.rows, lab64.rows, strict=True)]
st.markdown("The Summation lab's default vector (10⁶ normal float32 values), summed in float32 and in float64. "
            "Each float64 rounding is 2²⁹ times finer:")
st.dataframe(pd.DataFrame(err), hide_index=True, width="stretch")
st.caption("Absolute errors against the exact sum, computed live; the float64 sums are of the same float32 values.")

# ------------------------------------------------------------------ wider accumulation
st.header("2 · Accumulate in a wider format")
st.markdown("`torch.sum(x, dtype=torch.float64)` casts the input to float64 and reduces there; for float16 or "
            "bfloat16 data, `dtype=torch.float32` does the same one step up. The error collapses, but the result is "
            "still a rounded sum whose last bits depend on the order.")
storage = st.selectbox("Stored format", ["float32", "float16", "bfloat16"], key="mi_storage")
wrows = _wider(storage)
base = next(r for r in wrows if r.accumulate == storage and r.threads == 1)
st.dataframe(pd.DataFrame([{
    "torch.sum accumulates in": r.accumulate, "threads": r.threads,
    "result": shortest_repr(r.value, FORMATS[r.accumulate]), "|error|": f"{float(r.abs_error):.3e}",
    "time (ms)": f"{r.seconds * 1e3:.3f}", "time vs plain torch.sum, 1 thread": f"{r.seconds / base.seconds:.1f}x",
} for r in wrows]), hide_index=True, width="stretch")
st.caption(f"Live on {here.name}: 10⁶ normal values stored as {storage}. Times are medians of 5.")
wide_values = {r.threads: r.value for r in wrows if r.accumulate != storage}
hard = _lab("float64", HARD_VECTOR)
distinct_hard = len({r.metrics.value for r in hard.rows})
st.markdown(
    "Still order-dependent: "
    + ("above, the wider sums with different thread counts already differ. " if len(set(wide_values.values())) > 1
       else "above, the wider sums happen to agree across thread counts. ")
    + f"On an ill-conditioned float32 vector (10⁵ values, κ ≈ {hard.kappa:.1e}) the same {len(hard.rows)} orders, "
    f"all accumulating in float64, give **{distinct_hard} different float64 results**."
)

# --------------------------------------------------------------------- determinism
st.header("3 · Deterministic is not the same as reproducible")
det = _determinism()
cols = st.columns(len(det.distinct_by_threads))
for col, (threads, distinct) in zip(cols, det.distinct_by_threads.items(), strict=True):
    col.metric(f"torch.sum, {threads} thread{'s' if threads > 1 else ''}: distinct results in {det.repeats} runs",
               distinct)
bits = {t: hex_bits(b, FORMATS["float32"]) for t, b in det.values_by_threads.items()}
same = len(set(det.values_by_threads.values())) == 1
st.markdown(
    "Run to run, with a fixed thread count, the CPU sum repeats itself bit for bit. Across thread counts: "
    + ", ".join(f"{t} thread{'s' if t > 1 else ''} → `{b}`" for t, b in bits.items())
    + (" — identical here." if same else " — **different bits**.")
)
m, k, n = det.mm_shape
st.markdown(
    f"Batch size changes the kernel: on this CPU `mm(a[:1], b)` and `mm(a, b)[:1]` (a: {m}×{k}, b: {k}×{n}, "
    f"float32) differ in **{det.mm_differing:,} of {n:,}** outputs (at most {det.mm_max_ulps:,} ULPs apart). "
    "One row goes through a matrix-vector kernel, a batch through a blocked matrix-matrix kernel with other "
    "reduction splits (Thinking Machines, “Defeating Nondeterminism in LLM Inference”, 2025)."
)
st.info(
    "`torch.use_deterministic_algorithms(True)` makes torch refuse or replace kernels whose results can change "
    "from run to run on the same device (mostly atomics on GPUs). It does not make a CPU and a GPU agree, and it "
    "does not fix thread-count or batch-size effects. It is a process-wide switch, so this shared server explains "
    "it instead of toggling it.",
    icon=":material/info:",
)

# ------------------------------------------------------------ order-independent sum
st.header("4 · An order-independent sum (beyond the brief)")
st.markdown(
    "Sum the values in float64 rows, in whatever order the hardware likes, and bound the error that any such "
    "order can make. If both ends of that error interval round to the same float32, so does the exact sum: that "
    "is the answer. Where the bound cannot decide (a sum right at a rounding boundary), split every value at one "
    "power of two into a high part and a remainder: the high parts are multiples of that power with few enough "
    "bits that float64 adds them **exactly in any order**; repeat on the remainders, combine the exact totals "
    "and round once. The result is the correctly rounded sum: the same bits for every order, thread count and "
    "device. It is written in torch, so a GPU runs the same code."
)
order_rows, repro_values, devices = _reproducible()
df = pd.DataFrame(order_rows)
df["order-independent sum"] = shortest_repr(exact_value(np.float32(next(iter(repro_values))), FORMATS["float32"]),
                                            FORMATS["float32"])
st.dataframe(df, hide_index=True, width="stretch")
st.markdown(
    f"{len({r['ordinary sum'] for r in order_rows})} different ordinary results; the order-independent sum gave "
    f"**{len(repro_values)} value** over 5 shuffles and on "
    + ", ".join(f"{where} (`{hex_bits(b, FORMATS['float32'])}`)" for where, b in devices) + "."
)
_repro_cost = st.cache_data(max_entries=1, ttl=1800, show_spinner=False)(reproducible_sum_cost)
repro_cost = _repro_cost(n=1_000_000, budget_s=3.0)  # 10^6 on the page (bounded memory); the benchmark: 10^7
st.caption(f"Cost, measured live on this server ({repro_cost.threads} thread{'s' if repro_cost.threads > 1 else ''}, "
           f"10⁶ float32; the median of {repro_cost.repeats} interleaved repeats, quartiles in brackets, measured "
           f"as benchmarks/bench_reprosum.py measures 10⁷): {repro_cost.vs_torch:.1f}x the time of torch.sum "
           f"({repro_cost.vs_torch_iqr[0]:.1f}–{repro_cost.vs_torch_iqr[1]:.1f}x) and {repro_cost.vs_numpy:.1f}x "
           f"np.sum ({repro_cost.vs_numpy_iqr[0]:.1f}–{repro_cost.vs_numpy_iqr[1]:.1f}x). A sum within the error "
           "bound of a rounding boundary (rare, except under heavy cancellation) takes the exact folds and costs more.")

# --------------------------------------------------------------- accept divergence
st.header("5 · Accept the divergence")
st.markdown("Compare final aggregate metrics across runs and devices, not step-by-step trajectories. The spread "
            "between seeds is the yardstick: if the CPU-versus-reordered difference is no larger, it is noise.")
k = st.number_input("Seeds", min_value=2, max_value=12, key="mi_k")
share_box(sync(URL_FIELDS), url_notes)
if st.button("Train the seeds (300 steps each, both sides)", key="mi_seeds"):
    with heavy_section(training_cost(300, int(k)), "this training"), st.spinner("Training…"):
        study = _seeds(int(k))
    loss_spread = statistics.pstdev(study.final_loss_a)
    loss_gap = statistics.mean(abs(a - b) for a, b in zip(study.final_loss_a, study.final_loss_b, strict=True))
    acc_spread = statistics.pstdev(study.final_acc_a)
    acc_gap = statistics.mean(abs(a - b) for a, b in zip(study.final_acc_a, study.final_acc_b, strict=True))
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Seed-to-seed spread of final loss (std, A)", f"{loss_spread:.2e}")
    c2.metric("Mean |loss A − loss B| (same seed)", f"{loss_gap:.2e}")
    c3.metric("Seed-to-seed spread of accuracy (std, A)", f"{acc_spread:.2%}")
    c4.metric("Mean |accuracy A − accuracy B|", f"{acc_gap:.2%}")
    st.caption("Live on this CPU; B is the hidden-unit reordering of A (a stand-in for another device). Summers and "
               "Dinneen (ICML 2021) found every source of nondeterminism gives about the same spread as seeds.")

# ------------------------------------------------------------------------- summary
st.header("Summary")
cpu_mm = next((t for t in tp if not isinstance(t, str) and t.op == "matmul"), None)
cpu_cost = (f"matmul at {cpu_mm.ratio:.2f}x float32 speed on {cpu_mm.device} (measured, section 1)" if cpu_mm
            else "about half the float32 speed on x86 CPUs (measure it here in section 1)")
wide = next(r for r in wrows if r.accumulate != storage and r.threads == 1)
st.dataframe(pd.DataFrame([
    {"mitigation": "float64 everywhere", "fixes": "errors 2²⁹ times smaller; divergence much later",
     "does not fix": "order dependence; still diverges eventually",
     "cost": f"{cpu_cost}; 1/32 to 1/64 on consumer GPUs (cited)"},
    {"mitigation": "wider accumulation (torch.sum dtype=)", "fixes": "the reduction's own error",
     "does not fix": "order dependence (far smaller); errors elsewhere in the model",
     "cost": f"{wide.seconds / base.seconds:.1f}x a plain torch.sum ({storage} input, 1 thread; measured)"},
    {"mitigation": "deterministic algorithms", "fixes": "run-to-run changes on one device",
     "does not fix": "CPU vs GPU, thread count, batch size", "cost": "not toggled on a shared server"},
    {"mitigation": "order-independent sum", "fixes": "sums: same bits everywhere",
     "does not fix": "other operations (matmuls, convolutions) unless rewritten likewise",
     "cost": f"{repro_cost.vs_torch:.1f}x torch.sum for 10⁶ float32 (measured live, section 4)"},
    {"mitigation": "accept the divergence", "fixes": "nothing, by design", "does not fix": "bit-level comparisons",
     "cost": "nothing at run time; K seeds per side to compare"},
]), hide_index=True, width="stretch")

next_page_link("mitigations")
