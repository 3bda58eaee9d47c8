"""Drawing for the CPU vs GPU page: the sum everywhere, the reduction stages, machine facts,
fingerprints, two recorded machines side by side."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from core.arith.hexbits import hex_bits
from core.recordings.compare import (
    RESULT_GROUPS,
    ConfigurationEffect,
    MachineComparison,
    MostDifferent,
    PairDifferences,
    Parting,
    RecordedNote,
)
from core.recordings.fidelity import Fidelity
from core.recordings.fingerprint import GROUPS, OTHER_BITS, OpComparison, compare_ops, fingerprint, group_fingerprints
from core.recordings.store import UPLOADED, Recording, TrainingEntry
from core.studies.cpu_vs_gpu import Notice, ReductionStages, SumsEverywhere
from ui.palette import LEGEND_FILL, PARTING, RUN_A, RUN_B
from ui.render import inert
from ui.talk import styled

FACT_ROWS = (
    ("device_name", "device"), ("cpu_model", "CPU model"), ("cpu_vendor", "CPU vendor"),
    ("cpu_family_model_stepping", "CPU family / model / stepping"), ("cpu_simd_flags", "SIMD flags"),
    ("cpu_capability", "torch CPU capability (kernel dispatch)"), ("logical_cores", "logical cores"),
    ("threads", "torch intra-op threads"), ("blas", "BLAS"), ("onednn", "oneDNN"),
    ("torch_version", "torch"), ("numpy_version", "NumPy"), ("python_version", "Python"), ("os", "OS"),
    ("architecture", "architecture"), ("sm_count", "GPU SM count"), ("compute_capability", "GPU compute capability"),
    ("driver", "GPU driver"), ("cuda_version", "CUDA"), ("cublas_version", "cuBLASLt"),
    ("environment", "numeric environment variables"), ("captured_at", "captured"),
)


def _cell(v) -> str:
    if v is None or v == {}:
        return "—"
    if isinstance(v, dict):
        return ", ".join(f"{k}={val}" for k, val in sorted(v.items()))
    return str(v)


def facts_table(columns: dict[str, dict]) -> None:
    """One row per fact, one column per machine (the values are shown as plain table text)."""
    rows = [{"fact": label, **{name: _cell(p.get(key)) for name, p in columns.items()}} for key, label in FACT_ROWS
            if any(p.get(key) not in (None, {}) for p in columns.values())]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def fingerprint_line(ops: dict[str, str]) -> None:
    groups = group_fingerprints(ops)
    st.markdown(f"Fingerprint of this server: **`{fingerprint(ops)}`** — " + ", ".join(
        f"{g} `{h}`" for g, h in groups.items()))


def live_vs_recordings(ops: dict[str, str], recs: list[Recording]) -> None:
    """For each recording with operation hashes: same bits as this server, or where they part."""
    rows = []
    for rec in recs:
        if not rec.op_fingerprint:
            continue
        cmp = compare_ops(ops, rec.op_fingerprint)
        both = [c for c in cmp if c.verdict != "not recorded on both"]
        differ = [c.name for c in both if c.verdict == OTHER_BITS]
        rows.append({"recording": rec.label, "operations compared": len(both),
                     "same bits": len(both) - len(differ),
                     "other bits in": ", ".join(differ) if differ else "none"})
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def comparison_summary(cmp: MachineComparison) -> None:
    rows = [
        {"results": "torch.sum of the suite's vectors", "compared": cmp.sums_compared,
         "bit-identical": cmp.sums_identical},
        {"results": "torch.sum(x, dtype=wider)", "compared": cmp.wider_compared, "bit-identical": cmp.wider_identical},
        {"results": "matrix products (SHA-256 of all result bits)", "compared": cmp.matmuls_compared,
         "bit-identical": cmp.matmuls_identical},
        {"results": "single operations (per-operation fingerprint)", "compared": cmp.ops_compared,
         "bit-identical": cmp.ops_compared - len(cmp.ops_differing)},
    ]
    for t in cmp.training:
        rows.append({"results": f"training pair “{t.preset}”: run A's loss, step by step", "compared": t.steps,
                     "bit-identical": (t.first_step_machines_differ - 1) if t.first_step_machines_differ else t.steps})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def op_table(comparisons: tuple[OpComparison, ...], left: str, right: str) -> None:
    df = pd.DataFrame([{"operation": c.name, "group": c.group, left: c.left or "—", right: c.right or "—",
                        "verdict": c.verdict} for c in comparisons])
    df["group"] = pd.Categorical(df["group"], categories=list(GROUPS), ordered=True)
    st.dataframe(df.sort_values("group", kind="stable"), hide_index=True, width="stretch")


def training_chart(entry: TrainingEntry, title: str) -> None:
    """Both runs' losses on one machine, with the step at which the pair is first more than 1% apart."""
    la, lb = entry.losses_a, entry.losses_b
    steps = list(range(1, len(la) + 1))
    df = pd.DataFrame({"step": steps * 2, "loss": la + lb, "run": ["run A"] * len(la) + ["run B"] * len(lb)})
    lines = alt.Chart(df).mark_line().encode(
        x=alt.X("step:Q", title="training step"),
        y=alt.Y("loss:Q", scale=alt.Scale(type="log"), title="loss (log scale)"),
        # the Training divergence page's colours: A blue, B orange and dashed (Okabe-Ito, colour-blind safe)
        color=alt.Color("run:N", title=None, scale=alt.Scale(domain=["run A", "run B"], range=[RUN_A, RUN_B]),
                        legend=alt.Legend(orient="top-right", fillColor=LEGEND_FILL)),
        strokeDash=alt.StrokeDash("run:N", legend=None, scale=alt.Scale(domain=["run A", "run B"],
                                                                        range=[[1, 0], [6, 3]])),
    )
    layers = [lines]
    part = entry.first_rel_1pct
    if part is not None:
        rule = pd.DataFrame({"step": [part], "label": [f"first more than 1% apart at step {part}"]})
        layers.append(alt.Chart(rule).mark_rule(color=PARTING).encode(x="step:Q", tooltip=["label"]))
        layers.append(alt.Chart(rule).mark_text(align="left", dx=4, dy=-6, color=PARTING).encode(
            x="step:Q", y=alt.value(12), text="label"))
    st.altair_chart(styled(alt.layer(*layers).properties(height=300, title=title)), width="stretch")


def verdict(cmp: MachineComparison, left: str, right: str) -> str:
    """The comparison in one sentence, in inert text (machine names come from files)."""
    differ = cmp.ops_differing
    parts = [t for t in cmp.training if t.first_step_machines_differ]
    if not differ and not parts and cmp.sums_identical == cmp.sums_compared and (
            cmp.matmuls_identical == cmp.matmuls_compared):
        return (f"{inert(left)} and {inert(right)} gave the same bits in every result they both recorded: "
                f"{cmp.sums_compared} sums, {cmp.matmuls_compared} matrix products, {cmp.ops_compared} single "
                "operations and every compared training step.")
    text = f"{inert(left)} and {inert(right)} part"
    if differ:
        text += f" first in **{cmp.first_differing_group}**: {inert(', '.join(differ))} give other bits"
    for t in parts:
        text += (f"; run A of “{inert(t.preset)}” has other bits from step {t.first_step_machines_differ}, and each "
                 f"machine's own pair is first more than 1% apart at step {t.left_1pct} and {t.right_1pct}")
    return text + "."


def notice(n: Notice) -> None:
    """A source the page could not use, said next to the table (a recording's label shown inert)."""
    text = f"{inert(n.subject)}: {n.text}" if n.subject else n.text
    {"warning": st.warning, "error": st.error, "info": st.info}[n.kind](text)


def sums_frame(result: SumsEverywhere) -> pd.DataFrame:
    """One row per source: its value, bits, ULPs from the correctly rounded sum, and where it comes from."""
    fmt = result.settings.fmt
    # the key column next to the value it judges: at 1280 px a column after the bits was off-screen
    return pd.DataFrame([{"where": r.where, "value": r.value, "ULPs from the correctly rounded sum": r.ulps_from_exact,
                          "origin": r.origin, "bits": hex_bits(r.bits, fmt), "note": r.note}
                         for r in result.rows])


def ulp_frame(result: SumsEverywhere) -> pd.DataFrame:
    names, matrix = result.ulp_matrix()
    return pd.DataFrame(matrix, index=names, columns=names)


def sums_tables(result: SumsEverywhere) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The page's two tables of ``result``: one row per source, and the ULP distance between every pair."""
    return sums_frame(result), ulp_frame(result)


def ulp_matrix(frame: pd.DataFrame) -> None:
    st.markdown("ULP distance between every pair of results:")
    st.dataframe(frame, width="stretch")


def stages_chart(stages: ReductionStages) -> alt.Chart:
    """Partial sums left after each stage, CPU and modelled GPU on one log axis."""
    df = pd.DataFrame(
        [{"device": "CPU (this machine)", "stage": i, "what happens": s.what, "values left": s.values_left}
         for i, s in enumerate(stages.cpu)]
        + [{"device": f"GPU model ({stages.sm_count} SMs)", "stage": i, "what happens": s.what,
            "values left": s.values_left} for i, s in enumerate(stages.gpu)]
    )
    return styled(
        alt.Chart(df)
        .mark_line(point=alt.OverlayMarkDef(size=70))
        .encode(
            x=alt.X("stage:O", title="reduction stage"),
            y=alt.Y("values left:Q", scale=alt.Scale(type="log"), title="partial sums left"),
            color=alt.Color("device:N", title=None),
            tooltip=["device", "what happens", alt.Tooltip("values left:Q", format=",")],
        )
        .properties(height=280, title=f"{stages.n:,} values: partial sums left")  # a title that fits its column
    )


def mismatch_table(fid: Fidelity) -> None:
    """The sums where the model's bits are not the recording's."""
    st.dataframe(pd.DataFrame(fid.mismatches, columns=["vector", "n", "format", "ULPs apart"]), hide_index=True)


# Shown only inside the page's collapsed "Bring your own GPU" section: a step a visitor takes on their own machine.
CAPTURE_HOWTO = ("In a checkout of this app on a machine with a GPU, run `python -m scripts.capture`: it writes one "
                 "JSON file of fixed sums, products and a training pair, with the machine's provenance. Upload it "
                 "below to set it beside this server's results, for your session only.")


def gpu_status(recs: list[Recording], live_gpus: list[str]) -> str:
    """What GPU results this server can show, computed from the recordings present and the devices torch sees
    (never promise results "recorded on real GPUs" when none are bundled)."""
    gpu = [r for r in recs if r.is_gpu]
    parts = []
    if live_gpus:
        parts.append(f"Live on this server's GPU: {', '.join(live_gpus)}.")
    if gpu:
        parts.append("Recorded on real GPUs: " + "; ".join(inert(r.label, line_start=False) for r in gpu) + ".")
    else:
        parts.append("No GPU recording is bundled" + ("" if live_gpus else " and this server has no GPU")
                     + ": GPU results here come from a **model** of a GPU's reduction order, labelled as such.")
    return " ".join(parts)


# ------------------------------------------------ which machines differ most, in what, and why

GROUP_NOUNS = {"sums": "sums", "matrix products": "matrix products", "fingerprint operations": "single operations",
               "training": "training pairs"}
CHECK_COMMAND = "python -m scripts.fingerprint"  # this machine against every bundled recording, in seconds
CAPTURE_COMMAND = "python -m scripts.capture"  # a full recording of this machine, to commit


def most_different_line(most: MostDifferent | None, recs: list[Recording], uploaded: bool = False) -> None:
    """Which two real machines the section opens on, and why: computed from the recordings (``uploaded``:
    the section opens on the visitor's upload instead)."""
    if most is None:
        return
    d = most.differences
    st.markdown(f"Of the **{most.machines} real machines** in the bundled recordings (captures of one machine "
                "with numeric environment variables set count as that machine), "
                f"**{inert(recs[most.left].machine)}** and **{inert(recs[most.right].machine)}** differ most: "
                f"{d.count} of the {d.compared} sums, matrix products and single operations they both recorded "
                "give other bits. " + ("The comparison below opens on your upload; pick those two to set them "
                                       "side by side." if uploaded else "They are set side by side below."))


# ------------------------------------------------------------------ a visitor's own recording, uploaded


def uploaded_card(rec: Recording) -> None:
    """What the visitor's upload says it is: its file name, device and capture time, labelled as unverified
    (every part inert: it all comes from the file)."""
    p = rec.provenance
    kind = {"cuda": "a CUDA GPU", "mps": "an Apple GPU", "cpu": "a CPU", "webgpu": "a GPU through WebGPU"}.get(
        p.device_kind, "a device")
    facts = ([inert(p.browser or "an unnamed browser", line_start=False)] if p.device_kind == "webgpu"
             else [f"torch {inert(p.torch_version, line_start=False)}"])
    if p.is_gpu and p.sm_count:
        facts.append(f"{p.sm_count:,} SMs")
    st.info(f"**Your recording, {UPLOADED}**: {inert(rec.name, line_start=False)}, recorded on {kind}: "
            f"**{inert(rec.device, line_start=False)}** ({', '.join(facts)}), captured "
            f"{inert(p.captured_at, line_start=False)}. The sections below use it beside this server's results "
            "and the bundled recordings, marked “uploaded by you”; this server keeps it for your session only.",
            icon=":material/upload_file:")


def differing_results(d: PairDifferences) -> None:
    """The results with other bits on the two machines, named, group by group."""
    cmp = d.comparison
    totals = {"sums": cmp.sums_compared + cmp.wider_compared, "matrix products": cmp.matmuls_compared,
              "fingerprint operations": cmp.ops_compared, "training": len(cmp.training)}
    lines = []
    for group in RESULT_GROUPS:
        found = d.in_group(group)
        if group == "fingerprint operations":
            names = ", ".join(f"{x.name} ({x.detail})" for x in found)
        elif group == "training":
            names = ", ".join(f"“{x.name}”: {x.detail}" for x in found)
        else:
            names = ", ".join(x.name for x in found)
        head = f"**{group}**: {len(found)} of {totals[group]} {GROUP_NOUNS[group]} with other bits"
        lines.append(f"- {head}" + (f": {inert(names, line_start=False)}" if found else ""))
    st.markdown("What gives other bits on the two machines, by group:\n" + "\n".join(lines))


def partings_table(partings: dict[str, tuple[Parting, ...]]) -> None:
    """Each recorded machine (then its configuration captures) and the step at which each training pair
    is first more than 1% apart there (plain table text: machine names come from files)."""
    rows: dict[str, dict] = {}
    for preset, found in partings.items():
        for p in found:
            row = rows.setdefault(p.label, {"machine": p.machine, "capture": "configuration: " + p.configuration
                                           if p.configuration else "plain (no numeric environment variable)"})
            row[preset] = f"step {p.step}" if p.step else f"never within {p.steps}"
    if rows:
        st.dataframe(pd.DataFrame(list(rows.values())), hide_index=True, width="stretch")
        st.caption("Each cell: the first step at which that machine's own A/B pair of the preset is more than 1% "
                   "apart, recorded on that machine (500 steps each).")


def library_choice(effects: tuple[ConfigurationEffect, ...], same_dispatch: tuple[PairDifferences, ...],
                   note: RecordedNote) -> None:
    """Where a library chooses its code by the CPU: what the recordings show, the cited notes, and the
    command a visitor runs to check their own machine."""
    st.markdown("Two x86 machines with the same torch wheel can still run other code: torch picks its "
                "vectorized kernels by the CPU's instruction set, and oneMKL, which does torch's matrix products, "
                "picks its own code path by the CPU it finds (the Intel machine's notes below show it choosing "
                "for tanh and exp as well). The recordings show both, result by result:")
    rows = []
    for e in effects:
        cmp = e.changed.comparison
        totals = {"sums": cmp.sums_compared + cmp.wider_compared, "matrix products": cmp.matmuls_compared,
                  "fingerprint operations": cmp.ops_compared, "training": len(cmp.training)}
        for g in RESULT_GROUPS:
            found = e.changed.in_group(g)
            rows.append({"machine": e.machine.name, "setting": e.setting, "steers": e.library, "group": g,
                         "other bits": f"{len(found)} of {totals[g]}",
                         "which": ", ".join(x.name for x in found) or "none"})
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        st.caption("Each setting compares one machine's plain capture with a capture of the same hardware with that "
                   "environment variable set. The recorded matrix products draw their inputs with torch.randn on "
                   "the machine, and torch.randn follows ATEN_CPU_CAPABILITY too, so under the generic kernels "
                   "their inputs already differ; the fingerprint's operations take fixed inputs drawn by NumPy.")
    for d in same_dispatch:
        a, b = d.comparison.left, d.comparison.right
        ops = ", ".join(x.name for x in d.in_group("fingerprint operations"))
        st.markdown(f"**Same torch dispatch, other bits.** {inert(a.machine)} and {inert(b.machine)} ran the same "
                    f"torch {inert(a.provenance.torch_version)} with the same capability and BLAS "
                    f"({inert(a.provenance.blas)}), yet {len(d.in_group('matrix products'))} matrix products and "
                    f"these single operations give other bits: {inert(ops, line_start=False)}. torch dispatched its "
                    "kernels for the same capability on both, so the choice that differs is likely made below that "
                    "dispatch: in the libraries torch calls.")
    st.markdown(f"**From the capturing machine's notes** (recorded as text, not as a capture file): "
                f"{inert(note.text, line_start=False)}")
    st.caption(f"Source: {note.source}.")
    st.markdown("**Check your own machine** (from a clone of this app's repository, with its requirements "
                "installed): the first command hashes the same 27 operations on your CPU and compares them with "
                "every bundled recording in a few seconds; the second writes a full recording that you can add "
                "to `data/recordings/`.")
    st.code(f"{CHECK_COMMAND}\n{CAPTURE_COMMAND}", language="bash")
