"""Page: CPU vs GPU — live devices, recorded GPUs, and the model of a GPU reduction."""

from __future__ import annotations

import hashlib
import json
import os
import secrets

import streamlit as st

from core.arith.hexbits import hex_bits
from core.arith.vectors import GENERATORS
from core.crowd.budget import cpu_vs_gpu_cost
from core.crowd.bytecache import FIDELITIES, RESULTS, VECTORS, vector_for
from core.crowd.querystate import Field, FieldKind
from core.crowd.room import the_room
from core.kernels.cuda_published import published_evidence_sentence
from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.machines.devices import Device, available_devices, device_info
from core.machines.globalstate import PROCESS_THREADS, current_settings
from core.recordings.compare import (
    INTEL_MKL_NOTE,
    compare_recordings,
    configuration_effects,
    default_pair,
    machine_partings,
    most_different_pair,
    pair_differences,
    same_dispatch_differences,
)
from core.recordings.fidelity import model_fidelity
from core.recordings.fingerprint import op_fingerprint
from core.recordings.store import (
    SUITE_DTYPES,
    SUITE_GENERATORS,
    SUITE_SIZES,
    TRAINING_PRESETS,
    Recording,
    cached_recordings,
    recordings_dir,
)
from core.recordings.upload import (
    MAX_CAPTURE_BYTES,
    MAX_CAPTURE_MB,
    UploadError,
    recording_from_upload,
    upload_fidelity,
)
from core.studies.cpu_vs_gpu import (
    CpuVsGpuSettings,
    SumsEverywhere,
    sums_everywhere,
    tf32_product_difference,
)
from core.studies.your_gpu import (
    ReportError,
    Unavailable,
    YourGpu,
    browser_job,
    expected,
    judge,
    live_sentence,
    room_entry,
    room_summary,
    supported,
)
from ui import charts, glossary
from ui import cpu_vs_gpu_view as view
from ui import your_gpu as gpu_view
from ui.crowd import folded, heavy_section
from ui.elementwise_view import draw_other_causes
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.talk import presenter
from ui.urlstate import restore, share_box, sync

URL_FIELDS = [
    Field(key="cg_gen", param="vector", kind=FieldKind.CHOICE, options=SUITE_GENERATORS),
    Field(key="cg_n", param="n", kind=FieldKind.CHOICE, options=SUITE_SIZES),
    Field(key="cg_dtype", param="format", kind=FieldKind.CHOICE, options=SUITE_DTYPES),
    Field(key="cg_room", param="room", kind=FieldKind.CHOICE, options=("on",)),  # the room's GPUs shown; None: not
]
ROOM_TOKEN = "_yg_room_token"  # a random name for this session in the room: nothing that identifies a person
HELD = "_cg_upload"  # this session's uploaded recording: {"digest", "recording", "fidelity"}
REFUSED = "_cg_upload_refused"  # (digest, message) of the last file refused, so it is not parsed on every rerun
GENERATION = "_cg_upload_gen"  # part of the uploader's key: a new key empties the uploader
PAIR_KEYS = ("cg_left", "cg_right")


def _fidelity(path: str, mtime: float):
    recs, _ = cached_recordings(recordings_dir())
    rec = next(r for r in recs if r.path == path)
    return model_fidelity(rec, max_n=100_000)  # sizes up to 10^5 on the page: bounded memory for every visitor


def gpu_line(recs: list[Recording], devices: list[Device]) -> None:
    st.caption(view.gpu_status(recs, [d.name for d in devices if d.kind != "cpu"]))


def this_server(devices: list[Device], recs: list[Recording], problems: list[str]) -> None:
    for p in problems:
        st.warning(f"Recording refused: {inert(p)}")
    with folded("What this server has: its facts, fingerprint and hashes", "cg_open_server", ":material/dns:") as open_:
        if open_:
            server_facts(devices, recs)


def server_facts(devices: list[Device], recs: list[Recording]) -> None:
    view.facts_table({f"this server: {d.name}": device_info(d) for d in devices})
    with st.spinner("Fingerprinting this server: 27 fixed operations, once per server start…"):
        live_ops = op_fingerprint()
    view.fingerprint_line(live_ops)
    st.caption("The fingerprint hashes the result bits of 27 fixed operations on fixed inputs (sums, matrix products, "
               "tanh/exp/log-softmax, and one training step piece by piece), computed live on this server with its "
               f"configured {PROCESS_THREADS} threads. Two machines with the same fingerprint gave the same bits in "
               "all of them; where the group hashes differ, the machines part in that kind of operation. The "
               "recordings below carry the same hashes, compared here operation by operation:")
    view.live_vs_recordings(live_ops, recs)
    live_threads, deterministic = current_settings()
    st.caption(f"Process-wide torch settings of this server: {live_threads} intra-op threads, deterministic "
               f"algorithms {'on' if deterministic else 'off'}. No page changes them for a viewer except under a lock "
               "that restores them.")
    if not any(d.kind != "cpu" for d in devices):
        st.info("No GPU is visible to torch on this server: GPU results below can only be recorded ones or the "
                "model.", icon=":material/info:")


def uploader_key() -> str:
    return f"cg_upload_{st.session_state.get(GENERATION, 0)}"


def _remove_upload() -> None:
    """The Remove button: forget the upload, empty the uploader, and let the pair open where it did before."""
    held = st.session_state.pop(HELD, None)
    st.session_state.pop(REFUSED, None)
    st.session_state[GENERATION] = st.session_state.get(GENERATION, 0) + 1
    if held is not None and any(st.session_state.get(k) == held["index"] for k in PAIR_KEYS):
        for k in PAIR_KEYS:
            st.session_state.pop(k, None)


def accept_upload(name: str, data: bytes, bundled: list[Recording]) -> str | None:
    """Read uploaded bytes into this session's recording (one at a time: a new file replaces the last).
    Returns the reason a file is refused (an earlier upload is kept), or None."""
    digest = hashlib.sha256(data).hexdigest()
    held = st.session_state.get(HELD)
    if held is not None and held["digest"] == digest:
        return None
    refused = st.session_state.get(REFUSED)
    if refused is not None and refused[0] == digest:
        return refused[1]
    try:
        rec = recording_from_upload(name, data)
    except UploadError as err:
        st.session_state[REFUSED] = (digest, str(err))
        return str(err)
    index = len(bundled)  # the upload follows the bundled recordings in every list
    st.session_state[HELD] = {"digest": digest, "recording": rec, "fidelity": None, "index": index}
    st.session_state["cg_left"] = index  # the pair comparison opens on it
    if st.session_state.get("cg_right") not in range(index):
        st.session_state["cg_right"] = default_pair(bundled)[0] if bundled else 0
    return None


def your_recording(bundled: list[Recording]) -> Recording | None:
    """The uploader for a visitor's own capture file, its problems right under it, and the recording this
    session holds (its file and device, labelled unverified), with a button that removes it."""
    held = st.session_state.get(HELD)
    problem = None
    with st.expander("Bring your own GPU: compare a capture of your machine here",
                     expanded=held is not None, icon=":material/upload_file:"):
        st.markdown(view.CAPTURE_HOWTO)
        up = st.file_uploader(
            "Capture file, written by `python -m scripts.capture`", type=["json"], key=uploader_key(),
            help=f"At most {MAX_CAPTURE_MB} MB ({MAX_CAPTURE_BYTES:,} bytes; a capture is about 55 kB). "
                 "Read as JSON "
                 "and checked against the same schema as the bundled recordings; nothing is run from it. This "
                 "server has not verified what it says and keeps it for your session only, one file at a time.")
        if up is not None:
            problem = accept_upload(up.name, up.getvalue(), bundled)
            held = st.session_state.get(HELD)
            if problem:
                st.error(inert(problem), icon=":material/block:")  # quotes the file's name and content
                if held is not None:
                    st.caption(f"Still using your earlier upload, {inert(held['recording'].name, line_start=False)}"
                               ".")
    if held is None:
        return None
    view.uploaded_card(held["recording"])
    st.button("Remove your recording", key="cg_upload_remove", on_click=_remove_upload, icon=":material/delete:")
    return held["recording"]


def _uploaded_fidelity(rec: Recording):
    """The models against this session's upload, measured once per upload (kept with it, per session)."""
    held = st.session_state[HELD]
    if held["fidelity"] is None:
        held["fidelity"] = upload_fidelity(rec, max_n=100_000)
    return held["fidelity"]


def controls(url_notes) -> CpuVsGpuSettings:
    c1, c2, c3 = st.columns(3)
    gen = c1.selectbox("Vector", SUITE_GENERATORS, format_func=GENERATORS.get, key="cg_gen")
    n = c2.selectbox("n", SUITE_SIZES, format_func=lambda v: f"{v:,}", key="cg_n")
    dtype = c3.selectbox("Format", SUITE_DTYPES, key="cg_dtype")
    share_box(sync(URL_FIELDS), url_notes)
    if not presenter():  # on a slide, the line on the visitor's own GPU takes its place within three screens
        st.caption("Seed 0, the seed every recording uses, so recorded and live results refer to the same vector.")
    return CpuVsGpuSettings(gen, int(n), dtype)


def punchline(punch, result: SumsEverywhere, live: YourGpu | None) -> None:
    """This server's CPU against a GPU's order (live, recorded or modelled, whichever exists, labelled), the
    visitor's own GPU once it has answered, and the correctly rounded sum that neither device is."""
    face = result.headline()
    with punch:
        st.markdown(f"**{face.insight}**")
        # four labels on one line each in presenter type: the model's label is the longest
        cols = st.columns([1, 1.3, 0.95, 1.05] if live else 3)
        places = (cols[0], cols[1], cols[-1])  # the visitor's GPU, once it answers, stands before the exact sum
        for col, row, label in zip(places, (face.cpu, face.gpu, face.exact), face.labels, strict=True):
            col.metric(label, row.value, help=f"Bits {hex_bits(row.bits, result.settings.fmt)}. {row.note}".strip())
        if live:
            gpu_view.live_metric(cols[2], live, live_sentence(live, face.cpu.bits, face.exact.bits),
                                 short=presenter())
        st.caption(face.sentence + f" ({glossary.link('ulp', 'what is a ULP?')})")
        if live and not presenter():  # on a slide the speaker says it; the metric's help holds the distances
            st.caption(inert(live_sentence(live, face.cpu.bits, face.exact.bits)))


JUDGED = "_yg_judged"  # (job, the report's JSON, what core made of it): judged once per report, not per rerun


def your_gpu(settings: CpuVsGpuSettings) -> YourGpu | None:
    """The same vector on the visitor's own GPU, through WebGPU: the browser builds it from a recipe and runs the
    kernels; the server judges what comes back."""
    spec = settings.spec
    if not supported(spec):
        st.caption("**Your GPU, live** runs float32 (WebGPU's format) on the normal, uniform, lognormal and "
                   "alternating vectors: choose float32 to run this vector on your own GPU.")
        return None
    job = RESULTS.get_or_compute(("your-gpu-job", spec), lambda: browser_job(spec))  # one recipe for the room
    held = st.session_state.get(JUDGED)
    report = gpu_view.run_in_browser(job, done=held is not None and held[0] == job["job"], key="yg_runner")
    if isinstance(report, dict) and report.get("job") == job["job"]:  # a report for another vector is stale
        text = json.dumps(report, sort_keys=True, default=str)[:200_000]
        if held is None or held[:2] != (job["job"], text):
            try:
                exp = RESULTS.get_or_compute(("your-gpu-expected", spec),
                                             lambda: expected(spec, vector_for(spec).values))
                outcome = judge(report, exp)
            except ReportError as err:
                outcome = err
            held = (job["job"], text, outcome)
            st.session_state[JUDGED] = held
    if held is None or held[0] != job["job"]:
        return None  # the browser has not answered for this vector yet: its script shows its progress
    outcome = held[2]
    if isinstance(outcome, ReportError):
        gpu_view.refused(str(outcome))
    elif isinstance(outcome, Unavailable):
        gpu_view.unavailable(outcome)
    else:
        details, room = st.columns([3, 1], vertical_alignment="center")  # one row: the slide stays within three screens
        with details:
            gpu_view.draw(outcome)
        with room:
            add_to_room(outcome)
        return outcome
    return None


def add_to_room(result: YourGpu) -> None:
    """One button, opt-in: this session's judged results join the room's tally."""
    if not st.button("Add my GPU to the room", key="yg_room_add", icon=":material/group_add:"):
        return
    token = st.session_state.setdefault(ROOM_TOKEN, secrets.token_hex(16))
    refused = the_room().add(token, room_entry(result))
    if refused:
        st.caption(f"Not added: {refused}.")
    else:
        st.caption(":material/check: Added: the speaker's screen counts your GPU (its results, vendor and "
                   "architecture only).")


def the_rooms_gpus(spec) -> None:
    """Everyone's GPU, tallied: on the speaker's screen (presenter mode) it refreshes itself every few seconds."""
    live = presenter()

    def tally() -> None:
        gpu_view.room_view(room_summary(the_room().entries(), spec), live)
        c1, c2 = st.columns(2)
        c1.button("Refresh", key="yg_room_refresh", icon=":material/refresh:")
        if live and c2.button("Empty the room", key="yg_room_reset", icon=":material/delete_sweep:"):  # the speaker
            the_room().reset()
            st.rerun(scope="fragment")

    st.fragment(tally, run_every=3 if live else None)()


def why_orders(result: SumsEverywhere) -> None:
    """Why the two devices add in different orders: each splits the sum to fit its hardware."""
    st.subheader("Why the orders differ")
    stages = result.stages
    launch = stages.launch
    left, right = st.columns([3, 2])
    with left:  # one specification per vector and thread count, whoever opens the page
        charts.show(view.stages_chart, stages, key=("stages", result.settings, result.threads))
    talk = presenter()  # the speaker explains the terms: the slide stays within three screens
    cpu_split = (f"below torch's grain size of {GRAIN_SIZE:,} values"
                 + ("" if talk else " (the least it gives a thread)") + " one thread does everything"
                 if stages.below_grain
                 else f"{stages.threads} threads each take one contiguous chunk")
    right.markdown(
        f"**A CPU** splits a sum over its few cores: {cpu_split}, and inside a chunk {stages.lanes}-lane SIMD registers"
        + ("" if talk else " (one instruction adds several values at once)")
        + " keep running partial sums that are folded together at the end.\n\n"
        f"**A GPU** splits it over thousands of threads: in the modelled launch ({stages.sm_count} SMs"
        + ("" if talk else ", the GPU's multiprocessors") + "), "
        f"{launch.threads:,} threads each add every {launch.threads:,}-th group of {launch.vec} values, then each "
        "block adds its threads' sums in a tree, and one block adds the blocks' results.\n\n"
        "Each single addition is correctly rounded on both; the groupings differ, so the roundings do.")


def threads_second(result: SumsEverywhere) -> None:
    """One CPU, two thread counts: the split moves with the thread count too."""
    rows = result.live_cpu
    if len(rows) < 2:
        st.caption("This server gives torch one thread, so a thread-count split cannot be shown live here.")
        return
    apart = result.cpu_threads_apart
    parts = "; ".join(f"{r.where}: **{r.value}**" for r in rows)
    st.markdown(f"**Even one CPU changes its grouping with its thread count** (live): {parts}; "
                + (f"{apart:,} ULP apart." if apart else "here the same bits."))


def the_same_sum(result: SumsEverywhere, tables: tuple) -> None:
    """The sums of every source and their ULP distances (``tables``: ui.cpu_vs_gpu_view.sums_tables of result)."""
    s = result.settings
    table, ulps = tables
    st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(table, {"vector": s.generator, "n": s.n, "format": s.dtype, "seed": 0}, "cpu-vs-gpu", "cg")
    view.ulp_matrix(ulps)


def model_fidelity_section(recs: list[Recording]) -> None:
    if not any(r.is_gpu and not r.uploaded for r in recs):
        st.info("No real-GPU recording is bundled yet, so the CUDA model's match rate against a recording is "
                "**unmeasured**" + (" (the rate against your upload below is measured, but on a file this server "
                                    "has not verified)" if any(r.is_gpu for r in recs) else "")
                + ". It follows the Reduce.cuh that torch 2.13.0 ships (read from the installed wheel) "
                "and is labelled a model everywhere in this app.")
    st.markdown(published_evidence_sentence())
    for rec in recs:
        if rec.uploaded:
            fid = _uploaded_fidelity(rec)
        else:
            fid = FIDELITIES.call(_fidelity, rec.path, os.path.getmtime(rec.path))  # a replaced file is measured again
        rate = fid.matched / fid.compared if fid.compared else float("nan")
        st.markdown(f"**{inert(rec.label)}**: {fid.matched} of {fid.compared} sums bit-identical ({rate:.0%}); "
                    f"{inert(fid.conditions)}.")
        if fid.above_max_n:
            st.caption(f"{fid.above_max_n} recorded sum{'s' if fid.above_max_n > 1 else ''} of more than "
                       f"{fid.max_n:,} values not replayed on this page, which keeps to smaller sums.")
        if fid.mismatches:
            view.mismatch_table(fid)
            st.caption("Where the model misses, it is missing a detail of the real kernel or of its launch rules "
                       "(for example another torch release's, or a block count this model does not choose).")


def two_machines(recs: list[Recording]) -> None:
    if len(recs) < 2:
        st.info("Fewer than two recordings are bundled, so there is nothing to set side by side.")
        return
    bundled = [r for r in recs if not r.uploaded]  # an upload, if any, comes last
    uploaded = len(bundled) < len(recs)
    view.most_different_line(most_different_pair(bundled), recs, uploaded)  # the pair it opens on, and why
    names = [r.label for r in recs]
    c1, c2 = st.columns(2)
    first, second = default_pair(bundled)
    if uploaded:
        first, second = len(bundled), first  # yours against one of the two bundled machines that differ most
    for key, default in zip(PAIR_KEYS, (first, second), strict=True):
        if st.session_state.get(key) not in range(len(recs)):  # first visit, or the upload it showed was removed
            st.session_state[key] = default
    li = c1.selectbox("Machine", range(len(recs)), format_func=names.__getitem__, key="cg_left")
    ri = c2.selectbox("against", range(len(recs)), format_func=names.__getitem__, key="cg_right")
    left, right = recs[li], recs[ri]
    if li == ri:
        st.info("Pick two different recordings.")
        return
    cmp = compare_recordings(left, right)
    st.markdown(view.verdict(cmp, left.machine, right.machine))
    view.differing_results(pair_differences(cmp))  # every differing result, named with its group
    view.comparison_summary(cmp)
    view.facts_table({f"{r.machine} ({r.name})": r.provenance.as_dict() for r in (left, right)})
    for r in (left, right):
        if r.provenance.facts_note:
            st.caption(f"{inert(r.name)}: {inert(r.provenance.facts_note)}")
    if st.toggle("Operation by operation", key="cg_ops"):  # inside an expander: no expander in it
        view.op_table(cmp.ops, left.machine, right.machine)
    for tc in cmp.training:
        cols = st.columns(2)
        for col, r in zip(cols, (left, right), strict=True):
            with col:
                entry = next(t for t in r.training if t.preset == tc.preset)
                view.training_chart(entry, f"{r.machine}: {entry.preset}")
                st.caption(f"{inert(r.label)}; {inert(entry.note)}.")
    st.caption("Each chart is one machine's own A/B pair (B differs from A as the preset says); the red rule marks "
               "the first step at which the pair's losses are more than 1% apart on that machine.")
    st.markdown("Where each training pair parts, on every recorded machine" + (" and on yours" if uploaded else "")
                + ":")
    yours = [r for r in recs if r.uploaded]  # its own row, even where it is a copy of a bundled machine
    view.partings_table({p: machine_partings(bundled, p) + machine_partings(yours, p) for p in TRAINING_PRESETS})


def library_choice(recs: list[Recording]) -> None:
    view.library_choice(configuration_effects(recs), same_dispatch_differences(recs), INTEL_MKL_NOTE)


def training_on_a_gpu(recs: list[Recording], devices: list[Device]) -> None:
    gpu_recs = [r for r in recs if r.is_gpu]
    if not gpu_recs:
        st.info("No GPU training recording is bundled. On this server the Training divergence page shows the same "
                "pair with B reordered on the CPU, labelled as a stand-in.")
    for rec in gpu_recs:
        for entry in rec.training:
            view.training_chart(entry, f"{rec.machine}: {entry.preset}")
            st.caption(f"{inert(rec.label)}; {inert(entry.note)}.")
    if any(d.kind == "cuda" for d in devices):
        tf32 = tf32_product_difference("cuda")
        st.markdown(f"TF32 on this GPU: a 256×256 float32 product differs in {tf32.differing:,} of "
                    f"{tf32.total:,} entries with `allow_tf32` on (set and restored under a lock).")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("cg", URL_FIELDS, {"cg_gen": "normal", "cg_n": 1_000_000, "cg_dtype": "float32",
                                           "cg_room": None})
    st.title("CPU vs GPU")
    punch = st.container(key="punchline")  # the CPU against the GPU's order: filled once computed, first screen
    room_box = st.container(key="the_room")  # the room's GPUs, where the link asks for them (room=on)
    devices = available_devices()
    bundled, problems = cached_recordings(recordings_dir())
    settings = controls(url_notes)
    if st.session_state.get("cg_room") == "on":
        with room_box:
            the_rooms_gpus(settings.spec)
    with st.container(key="your_gpu"):
        live = your_gpu(settings)
    why, threads, notices = st.container(), st.container(), st.container()
    yours = your_recording(bundled)  # a visitor's own capture, for this session: it joins every list
    with st.expander("Every result: recorded machines, the model and the exact sum, with their bits",
                     icon=":material/table:", expanded=yours is not None):
        everything = st.container()
    recs = bundled + ([yours] if yours is not None else [])
    cost = cpu_vs_gpu_cost(settings.n, settings.dtype, settings.generator, len(recs),
                           sum(d.kind != "cpu" for d in devices),
                           cached=settings.spec in VECTORS)
    with heavy_section(cost, "these sums"):  # a few heavy computations at once, server-wide
        if yours is None:  # the same sums for every viewer of these settings: computed live once, shown to each
            key = ("cpu-vs-gpu", settings, PROCESS_THREADS, tuple(d.name for d in devices), tuple(r.path for r in recs))
            result = RESULTS.get_or_compute(key, lambda: sums_everywhere(settings, devices, recs, PROCESS_THREADS))
            tables = RESULTS.get_or_compute((*key, "tables"), lambda: view.sums_tables(result))  # once, not per view
        else:
            result = sums_everywhere(settings, devices, recs, PROCESS_THREADS)
            tables = view.sums_tables(result)
    punchline(punch, result, live)
    with why:
        why_orders(result)
    with threads:
        threads_second(result)
        if not presenter():  # on a slide the first screen's label ("modelled", "recorded") already says it
            gpu_line(recs, devices)
    with notices:
        for n in result.notices:
            view.notice(n)
    with everything:
        the_same_sum(result, tables)
    # what is folded is computed and drawn only once opened: a room opening the link pays for its first screen
    with folded("Not every difference is a sum's order: exp, tanh, log and sigmoid differ between libraries",
                "cg_open_causes", ":material/function:") as open_:
        if open_:
            draw_other_causes()
    with folded("How faithful is the GPU model?", "cg_open_model", ":material/verified:") as open_:
        if open_:
            model_fidelity_section(recs)
    with folded("Two real machines side by side", "cg_open_pair", ":material/compare:") as open_:
        if open_:
            two_machines(recs)
    with folded("Same wheel, other code: libraries choose by the CPU", "cg_open_libraries",
                ":material/developer_board:") as open_:
        if open_:
            library_choice(bundled)  # the bundled machines' configuration captures and notes
    with folded("The training pair on a GPU", "cg_open_training", ":material/show_chart:") as open_:
        if open_:
            training_on_a_gpu(recs, devices)
    this_server(devices, recs, problems)  # facts and hashes, folded
    next_page_link("cpu_vs_gpu")


main()
