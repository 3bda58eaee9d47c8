"""Page: CPU vs GPU — live devices, recorded GPUs, and the model of a GPU reduction."""

from __future__ import annotations

import os

import altair as alt
import pandas as pd
import streamlit as st
import torch

from core.budget import cpu_vs_gpu_cost
from core.bytecache import VECTORS, vector_for
from core.cuda_model import cuda_config_for, cuda_launch, cuda_sum_model
from core.cuda_published import published_evidence_sentence
from core.devices import available_devices, device_info
from core.exact import correctly_rounded_sum, distinguishing_reprs
from core.fingerprint import op_fingerprint
from core.formats import FORMATS, bits_of, bits_of_value, hex_bits, ulp_distance, value_of_bits
from core.globalstate import PROCESS_THREADS, current_settings
from core.querystate import Field
from core.recordings import (
    SUITE_DTYPES,
    SUITE_GENERATORS,
    SUITE_SIZES,
    cached_recordings,
    compare_recordings,
    default_pair,
    live_sum_bits,
    model_fidelity,
    recordings_dir,
    replay,
)
from core.torch_cpu_model import GRAIN_SIZE, default_lanes, thread_chunks
from core.vectors import GENERATORS, VectorSpec
from ui import glossary
from ui import machines_view as mv
from ui.crowd import heavy_section
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.urlstate import restore, share_box, sync

H100_SMS = 132


@st.cache_data(max_entries=8, ttl=3600, show_spinner=False)
def _fidelity(path: str, mtime: float):
    recs, _ = cached_recordings(recordings_dir())
    rec = next(r for r in recs if r.path == path)
    return model_fidelity(rec, max_n=100_000)  # sizes up to 10^5 on the page: bounded memory for every visitor


URL_FIELDS = [
    Field("cg_gen", "vector", "choice", SUITE_GENERATORS),
    Field("cg_n", "n", "choice", SUITE_SIZES),
    Field("cg_dtype", "format", "choice", SUITE_DTYPES),
]
ensure_app_navigation()
url_notes = restore("cg", URL_FIELDS, {"cg_gen": "normal", "cg_n": 1_000_000, "cg_dtype": "float32"})
st.title("CPU vs GPU")
punch = st.container(key="punchline")  # one CPU thread against all of them, filled below: in the first screen
st.markdown(
    "The same vector summed by `torch.sum` on every device this server can reach, next to results **recorded** on "
    "real GPUs and a **model** of how a GPU orders the reduction. Three honest tiers: live on a GPU when one is "
    "present; recorded on a GPU (replayed only after the vector is regenerated bit for bit); and the model, with "
    "its measured match rate."
)

devices = available_devices()
gpus = [d for d in devices if d.kind != "cpu"]
recs, problems = cached_recordings(recordings_dir())
gpu_recs = [r for r in recs if r.is_gpu]
st.subheader("What this server has")
mv.facts_table({f"this server: {d.name}": device_info(d) for d in devices})
with st.spinner("Fingerprinting this server: 27 fixed operations, once per server start…"):
    live_ops = op_fingerprint()
mv.fingerprint_line(live_ops)
st.caption("The fingerprint hashes the result bits of 27 fixed operations on fixed inputs (sums, matrix products, "
           "tanh/exp/log-softmax, and one training step piece by piece), computed live on this server with its "
           f"configured {PROCESS_THREADS} threads. Two machines with the same fingerprint gave the same bits in all of "
           "them; where the group hashes differ, the machines part in that kind of operation. The recordings below "
           "carry the same hashes, compared here operation by operation:")
mv.live_vs_recordings(live_ops, recs)
live_threads, deterministic = current_settings()
st.caption(f"Process-wide torch settings of this server: {live_threads} intra-op threads, deterministic "
           f"algorithms {'on' if deterministic else 'off'}. No page changes them for a viewer except under a lock "
           "that restores them.")
if not gpus:
    st.info("No GPU is visible to torch on this server: GPU results below can only be recorded ones or the model.",
            icon=":material/info:")
for p in problems:
    st.warning(f"Recording refused: {inert(p)}")

c1, c2, c3 = st.columns(3)
gen = c1.selectbox("Vector", SUITE_GENERATORS, format_func=GENERATORS.get, key="cg_gen")
n = c2.selectbox("n", SUITE_SIZES, format_func=lambda v: f"{v:,}", key="cg_n")
dtype = c3.selectbox("Format", SUITE_DTYPES, key="cg_dtype")
share_box(sync(URL_FIELDS), url_notes)
st.caption("Seed 0, the seed every recording uses, so recorded and live results refer to the same vector.")
fmt = FORMATS[dtype]
spec = VectorSpec(gen, int(n), 0, dtype)  # the vector lives in core.bytecache, shared and bounded in bytes
cost = cpu_vs_gpu_cost(int(n), dtype, gen, len(recs), len(gpus), cached=spec in VECTORS)
with heavy_section(cost, "these sums"):  # a few heavy computations at once, server-wide
    values = vector_for(spec).values
    cr = correctly_rounded_sum(values, fmt)
rows: list[dict] = []


def _row(where: str, tier: str, bits: int | None, note: str = "") -> None:
    rows.append({"where": where, "tier": tier, "bits": bits, "note": note})


threads = PROCESS_THREADS
for t in sorted({1, threads}):
    _row(f"CPU, {t} thread{'s' if t > 1 else ''}", "live", live_sum_bits(values, devices[0], t),
         f"torch {torch.__version__}")
for d in gpus:
    if not d.supports(fmt.torch_dtype):
        st.warning(f"{d.name} has no {dtype}: no live GPU result for this format.")
        continue
    try:
        _row(d.name, "live", live_sum_bits(values, d))
    except torch.cuda.OutOfMemoryError:
        st.error(f"{d.name} ran out of memory for n = {n:,}; the CPU results are still shown.")
    except RuntimeError as err:
        st.error(f"{d.name} failed ({err}); it may have disappeared. The CPU results are still shown.")
found_recording = False
for rec in recs:  # GPU recordings, and CPU recordings from other machines (labelled as such)
    rp = replay(rec, gen, 0, int(n), dtype)
    if rp is None:
        continue
    found_recording = True
    if not rp.vector_matches:
        st.error(f"{inert(rec.label)}: its vector's SHA-256 differs from the one regenerated here, so the result is "
                 "not comparable and is not shown.")
        continue
    _row(rec.machine, "recorded", rp.recorded_bits, rec.label)
    if rp.model_bits is not None:
        _row(f"CUDA model, SM count {rec.provenance['sm_count']}", "model", rp.model_bits,
             "our model of the GPU's reduction order for that device")
if not found_recording:
    st.info(
        f"No recording for {GENERATORS[gen].split(':')[0]}, n = {n:,}, {dtype}"
        + (" is bundled." if not recs else " among the bundled recordings.")
        + " Nothing is shown in its place; capture one with `python -m scripts.capture` on a machine with a GPU."
    )
cfg = cuda_config_for(int(n), values.dtype, sm_count=H100_SMS)
_row(f"CUDA model, SM count {H100_SMS} (H100/H200-like)", "model", bits_of(cuda_sum_model(values, cfg)),
     "a model of the order, not a measurement" + ("" if gpu_recs else "; not yet checked against a real GPU "
                                                   "recording, only against published GPU results"))
exact_bits = bits_of_value(cr, fmt)
_row("Exact sum, rounded once", "exact", exact_bits, "exact rational sum, one rounding")

shown = iter(distinguishing_reprs([value_of_bits(r["bits"], fmt) for r in rows if r["bits"] is not None]))
table = []
for r in rows:
    b = r["bits"]
    table.append({
        "where": r["where"], "tier": r["tier"],
        "value": next(shown) if b is not None else "—",
        "bits": hex_bits(b, fmt) if b is not None else "—",
        "ULPs from the correctly rounded sum": ulp_distance(b, exact_bits, fmt) if None not in (b, exact_bits) else "—",
        "note": r["note"],
    })
with punch:
    live_cpu = [(r, t) for r, t in zip(rows, table, strict=True)
                if r["tier"] == "live" and r["where"].startswith("CPU")]
    cols = st.columns(3)
    for col, (r, t) in zip(cols, live_cpu, strict=False):
        col.metric(f"torch.sum, {r['where']}", t["value"], help=f"Bits {t['bits']}, computed live on this server.")
    apart = ulp_distance(live_cpu[0][0]["bits"], live_cpu[-1][0]["bits"], fmt) if len(live_cpu) == 2 else None
    if apart is None:
        cols[2].metric("Threads here", "1", help="This server runs torch with one thread: nothing to compare.")
        st.caption("This server gives torch one thread, so the split cannot differ here; the table below compares "
                   "the recorded machines and the GPU model.")
    else:
        cols[2].metric("Apart", f"{apart:,} ULP" if apart else "same bits", help=glossary.help_text("ulp"))
        st.caption(f"The same {int(n):,} {dtype} values, summed live on this server's CPU with one thread and with "
                   f"{threads}: each thread sums its own contiguous chunk, so the split decides the grouping "
                   f"({'different' if apart else 'here the same'} bits; {glossary.link('ulp', 'what is a ULP?')}).")
st.subheader("The same sum, everywhere")
st.dataframe(pd.DataFrame(table), hide_index=True, width="stretch")
download_buttons(pd.DataFrame(table), {"vector": gen, "n": int(n), "format": dtype, "seed": 0}, "cpu-vs-gpu", "cg")
names = [r["where"] for r in rows if r["bits"] is not None]
bits = [r["bits"] for r in rows if r["bits"] is not None]
matrix = pd.DataFrame([[ulp_distance(a, b, fmt) for b in bits] for a in bits], index=names, columns=names)
st.markdown("ULP distance between every pair of results:")
st.dataframe(matrix, width="stretch")

# ---------------------------------------------------------------------------- fidelity
st.subheader("How faithful is the GPU model?")
if not gpu_recs:
    st.info("No real-GPU recording is bundled yet, so the CUDA model's match rate against a recording is "
            "**unmeasured**. It follows the Reduce.cuh that torch 2.13.0 ships (read from the installed wheel) and "
            "is labelled a model everywhere in this app.")
st.markdown(published_evidence_sentence())
for rec in recs:
    fid = _fidelity(rec.path, os.path.getmtime(rec.path))  # a replaced file is measured again
    rate = fid.matched / fid.compared if fid.compared else float("nan")
    st.markdown(f"**{inert(rec.label)}**: {fid.matched} of {fid.compared} sums bit-identical ({rate:.0%}); "
                f"{inert(fid.conditions)}.")
    if fid.mismatches:
        st.dataframe(pd.DataFrame(fid.mismatches, columns=["vector", "n", "format", "ULPs apart"]), hide_index=True)
        st.caption("Where the model misses, it is missing a detail of the real kernel or of its launch rules "
                   "(for example another torch release's, or a block count this model does not choose).")

# ---------------------------------------------------------------------------- diagrams
st.subheader("How each device orders the reduction")
launch = cuda_launch(int(n), cfg)
lanes = default_lanes(values.dtype)
chunks = thread_chunks(int(n), threads)
cpu_stages = [
    ("values", int(n)),
    (f"{len(chunks)} contiguous chunk{'s' if len(chunks) > 1 else ''}, one per thread", len(chunks) * lanes * 4),
    ("each chunk: 4 accumulators × SIMD lanes, cascade", len(chunks) * lanes),
    ("lanes added in order: one slot per thread", len(chunks)),
    ("slots added", 1),
]
gpu_stages = [
    ("values", int(n)),
    (f"{launch.blocks} blocks × {launch.threads_per_block} threads, strided, {launch.accumulators} accumulators",
     launch.threads * launch.accumulators),
    ("accumulators combined per thread", launch.threads),
    ("shared-memory tree per block, down to 32", launch.blocks * min(32, launch.threads_per_block)),
    ("warp shuffle (offsets 16, 8, 4, 2, 1)", launch.blocks),
    ("last block combines the partials", 1),
]
stages = pd.DataFrame(
    [{"device": "CPU (this machine)", "stage": i, "what happens": s, "values left": v} for i, (s, v) in
     enumerate(cpu_stages)]
    + [{"device": f"GPU model ({H100_SMS} SMs)", "stage": i, "what happens": s, "values left": v} for i, (s, v) in
       enumerate(gpu_stages)]
)
chart = (
    alt.Chart(stages)
    .mark_line(point=alt.OverlayMarkDef(size=70))
    .encode(
        x=alt.X("stage:O", title="reduction stage"),
        y=alt.Y("values left:Q", scale=alt.Scale(type="log"), title="partial sums left"),
        color=alt.Color("device:N", title=None),
        tooltip=["device", "what happens", alt.Tooltip("values left:Q", format=",")],
    )
    .properties(height=280, title=f"Reducing {n:,} values: how many partial sums exist after each stage")
)
st.altair_chart(chart, width="stretch")
cpu_split = (f"below the grain size of {GRAIN_SIZE:,} values one thread does everything" if n < GRAIN_SIZE
             else f"{len(chunks)} threads each take one contiguous chunk")
st.markdown(
    f"**CPU**: {cpu_split}; inside a chunk, "
    f"{lanes}-lane SIMD vectors feed 4 interleaved accumulators with a multi-level cascade. **GPU**: "
    f"{launch.threads:,} threads each add every {launch.threads:,}-th vector of {launch.vec}, then trees inside each "
    "block and a warp shuffle, then one block combines the blocks' partials. Different groupings, so different "
    "roundings, even though each single addition is IEEE-correct on both."
)

# ------------------------------------------------------------------- two machines, recorded
st.subheader("Two real machines side by side")
if len(recs) < 2:
    st.info("Fewer than two recordings are bundled, so there is nothing to set side by side.")
else:
    names = [r.label for r in recs]
    c1, c2 = st.columns(2)
    first, second = default_pair(recs)
    li = c1.selectbox("Machine", range(len(recs)), index=first, format_func=names.__getitem__, key="cg_left")
    ri = c2.selectbox("against", range(len(recs)), index=second, format_func=names.__getitem__, key="cg_right")
    left, right = recs[li], recs[ri]
    if li == ri:
        st.info("Pick two different recordings.")
    else:
        cmp = compare_recordings(left, right)
        st.markdown(mv.verdict(cmp, left.machine, right.machine))
        mv.comparison_summary(cmp)
        mv.facts_table({f"{r.machine} ({r.name})": r.provenance for r in (left, right)})
        for r in (left, right):
            if r.provenance.get("facts_note"):
                st.caption(f"{inert(r.name)}: {inert(r.provenance['facts_note'])}")
        with st.expander("Operation by operation"):
            mv.op_table(cmp.ops, left.machine, right.machine)
        for tc in cmp.training:
            cols = st.columns(2)
            for col, r in zip(cols, (left, right), strict=True):
                with col:
                    entry = next(t for t in r.training if t.preset == tc.preset)
                    mv.training_chart(entry, f"{r.machine}: {entry.preset}")
                    st.caption(f"{inert(r.label)}; {inert(entry.note)}.")
        st.caption("Each chart is one machine's own A/B pair (B differs from A as the preset says); the red rule marks "
                   "the first step at which the pair's losses are more than 1% apart on that machine.")

st.subheader("The training pair on a GPU")
if not gpu_recs:
    st.info("No GPU training recording is bundled. On this server the Training divergence page shows the same "
            "pair with B reordered on the CPU, labelled as a stand-in.")
for rec in gpu_recs:
    for entry in rec.training:
        mv.training_chart(entry, f"{rec.machine}: {entry.preset}")
        st.caption(f"{inert(rec.label)}; {inert(entry.note)}.")
if any(d.kind == "cuda" for d in gpus):
    from core.globalstate import cuda_tf32

    a = torch.randn(256, 256, generator=torch.Generator().manual_seed(0)).to("cuda")  # no global RNG
    with cuda_tf32(False):
        exact32 = (a @ a).cpu()
    with cuda_tf32(True):
        tf32 = (a @ a).cpu()
    st.markdown(f"TF32 on this GPU: a 256×256 float32 product differs in {(exact32 != tf32).sum().item():,} of "
                f"{exact32.numel():,} entries with `allow_tf32` on (set and restored under a lock).")

next_page_link("cpu_vs_gpu")
