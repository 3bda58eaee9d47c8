"""The visitor's own GPU: the WebGPU component (its script and shaders, served with the page) and the drawing of
what core.studies.your_gpu judged of its report."""

from __future__ import annotations

import datetime
import json
import pathlib

import pandas as pd
import streamlit as st

from core.arith.exact import shortest_repr
from core.arith.formats import FloatFormat, value_of_bits
from core.studies.your_gpu import WGSL_ACCURACY, RoomSummary, TripleOnGpu, Unavailable, YourGpu, as_recording
from ui.render import error_cells, error_table, inert

KERNELS = pathlib.Path(__file__).parent / "gpu_kernels"
SHADER_NAMES = ("sequential", "tree", "subgroup", "atomic", "elementwise", "triple")
LANE_KERNELS = ("tree", "subgroup", "atomic")


def component_source() -> str:
    """The component's JavaScript: the NumPy replay, the shaders as a JSON table, and the runner, in one module
    (a component's inline module cannot import its neighbours)."""
    stream = (KERNELS / "numpy_stream.js").read_text().replace("export function", "function").replace(
        "export async function", "async function")
    lanes = (KERNELS / "lanes.wgsl").read_text()  # the strided lane the tree, subgroup and atomic kernels share
    shaders = {name: (KERNELS / f"{name}.wgsl").read_text() + (lanes if name in LANE_KERNELS else "")
               for name in SHADER_NAMES}
    return ((KERNELS / "yourgpu.js").read_text().replace("/*__STREAM__*/", stream)
            .replace("/*__SHADERS__*/", json.dumps(shaders)))


# While the script has nothing to say (it has answered, or not begun), its element takes no room and no gap: the
# first screen keeps its height. Its box is in the page's own DOM (no shadow root), so the rule can see it.
# (Over several lines: Streamlit takes a one-line string with brackets in it for a file's path.)
HIDE_WHEN_SILENT = '[data-testid="stElementContainer"]:has(.yourgpu:empty) {\n  display: none;\n}\n'
_COMPONENT = st.components.v2.component("sameseed.your_gpu", js=component_source(), css=HIDE_WHEN_SILENT,
                                        isolate_styles=False)


def run_in_browser(job: dict, done: bool, key: str):
    """Mounts the runner; returns the browser's last report (a dict from the visitor's browser: untrusted), or
    None before it answers. ``done``: the report for this job is in, so the script does not run again."""
    result = _COMPONENT(key=key, data={**job, "done": done}, default={"report": None},
                        on_report_change=lambda: None, height="content")
    return result.report


def unavailable(u: Unavailable) -> None:
    st.caption(f"**Your GPU, live:** not here: {inert(u.reason, line_start=False)}.",
               help="The page runs its kernels on your own GPU where the browser offers WebGPU: Chrome and Edge 113 "
                    "and newer, Chrome on Android, Safari 26. Nothing else on this page needs it.")


def refused(message: str) -> None:
    st.warning(f"Your browser's GPU results were refused: {inert(message, line_start=False)}.",
               icon=":material/block:")


def sums_table(r: YourGpu):
    rows = [({"kernel": s.kernel, "order": s.order}, s.errors[0],
             {"checked": s.check, "runs": len(s.bits)}) for s in r.sums]
    return error_table(rows, ("value", "bits", "error (ULPs)"))


def functions_table(r: YourGpu):
    return pd.DataFrame([{
        "function": f.name, "correctly rounded": f"{f.exact_share:.0%}", "worst error (ULPs)": f.worst_ulps,
        "WGSL allows": f.allowance, "beyond the allowance": f.beyond} for f in r.functions])


def live_metric(col, r: YourGpu, caption: str = "", short: bool = False) -> None:
    """The visitor's GPU beside the first screen's CPU, model and exact sum: its workgroup tree's sum (``caption``:
    the page's sentence on how far apart they are, repeated in the help)."""
    tree = r.sums[1]
    cells = error_cells(tree.errors[0])
    col.metric("Your GPU, live" if short else f"Your GPU, live ({r.adapter})", cells["value"],  # short: the
               # adapter is named on the kernels' line just below
               help=f"Bits {cells['bits']}, {cells['error (ULPs)']} ULPs from the exact sum. Computed in your browser "
                    f"through WebGPU ({r.browser}) by the workgroup-tree kernel; {tree.check}. {caption}")


def draw(r: YourGpu) -> None:
    """The kernels one by one, folded: the first screen already holds the visitor's sum and its distances."""
    seq, tree = r.sums[0], r.sums[1]
    with st.expander(f"Your GPU's kernels one by one ({r.adapter}): {r.distinct_atomic} different atomic sum"
                     f"{'s' if r.distinct_atomic > 1 else ''} in {len(r.sums[-1].bits)} runs",
                     icon=":material/developer_board:"):
        st.markdown(f"Live on your GPU ({inert(r.adapter, line_start=False)}, via WebGPU in "
                    f"{inert(r.browser, line_start=False)}): the page's {r.n:,} float32 values, built in your browser "
                    "from the same seed, summed by each kernel in the order stated.")
        st.dataframe(sums_table(r), hide_index=True, width="stretch", key="yg_sums")
        st.caption(f"Left to right, your GPU {'gave' if seq.matched else 'did not give'} the CPU's bits"
                   + (": float32 is the same format there" if seq.matched else "") + f". The workgroup tree: "
                   f"{tree.check}. The atomic kernel: {r.distinct_atomic} different sum"
                   f"{'s' if r.distinct_atomic > 1 else ''} from {len(r.sums[-1].bits)} runs of the same kernel on "
                   f"the same data. First result after {r.first_ms:,} ms, all after {r.total_ms:,} ms.")
        st.dataframe(functions_table(r), hide_index=True, width="stretch", key="yg_functions")
        fused, unfused = r.mul_add["mul_add"]
        ffused, funfused = r.mul_add["fma"]
        st.caption(f"exp, tanh and log: 256 arguments each, against the correctly rounded result; allowances from "
                   f"[the WGSL specification]({WGSL_ACCURACY}). Additions: {r.add_matches} of 256 bit-identical to "
                   f"the CPU's float32 addition. `a * b + c` as written: {fused} of 256 match one rounding (fused), "
                   f"{unfused} match two (product, then sum); `fma(a, b, c)`: {ffused} fused, {funfused} two "
                   f"roundings. The two ways differ on {r.mul_add['differ']} of these 256 triples, so the counts say "
                   "which your shader compiler did.")
        download(r)


def download(r: YourGpu) -> None:
    """Your GPU's results as a recording file, which the upload on this page and the own-runs pages read back."""
    now = datetime.datetime.now(datetime.UTC)
    data = json.dumps(as_recording(r, now.strftime("%Y-%m-%dT%H:%M:%SZ")), indent=1).encode()
    name = "".join(c if c.isalnum() else "-" for c in r.adapter.lower())[:40]
    st.download_button("Download your GPU's results as a recording", data, key="yg_download", on_click="ignore",
                       file_name=f"webgpu-{name}-{now:%Y%m%dT%H%M%S}.json", mime="application/json",
                       icon=":material/download:")


def room_view(s: RoomSummary, live: bool) -> None:
    """The speaker's screen: how many GPUs answered, how many different sums each kernel gave, and which GPUs."""
    st.markdown(f"**The room's GPUs{' (live)' if live else ''}: {s.gpus:,} answered** for {s.spec.n:,} "
                f"{s.spec.storage} values ({s.spec.kind}). Each ran the same kernels on the same vector.")
    if not s.gpus:
        st.caption("No GPU has been added yet: each viewer's page offers “Add my GPU to the room” once their own "
                   "GPU has answered.")
        return
    left, right = st.columns([3, 2])
    left.dataframe(pd.DataFrame([{"kernel": k, "GPUs": g, "different sums": d} for k, g, d in s.kernels]),
                   hide_index=True, width="stretch", key="yg_room_kernels")
    right.bar_chart(pd.DataFrame({"GPU": [a for a, _ in s.adapters], "GPUs": [c for _, c in s.adapters]}),
                    x="GPU", y="GPUs", horizontal=True, height=max(120, 40 * len(s.adapters)))
    st.caption(f"Left to right, {s.cpu_matches:,} of {s.gpus:,} GPUs gave this server's CPU bits; the workgroup "
               f"tree gave the model's bits on {s.model_matches:,} of {s.gpus:,}. Only results, vendors and "
               "architectures are kept, one entry per browser session."
               + (f" ({s.other_vectors:,} entries for other vectors are not counted here.)" if s.other_vectors
                  else ""))


def triple_line(t: TripleOnGpu, fmt: FloatFormat) -> None:
    """Both groupings of the three numbers on the visitor's GPU, against this server's CPU."""
    left, right = (shortest_repr(value_of_bits(b, fmt), fmt) for b in (t.left, t.right))
    st.markdown(f"**Live on your GPU** ({inert(t.adapter, line_start=False)}, via WebGPU in "
                f"{inert(t.browser, line_start=False)}): (a + b) + c = `{left}`, a + (b + c) = `{right}`: "
                + ("the same bits as this server's CPU, grouping by grouping." if t.same_as_cpu else
                   "not the CPU's bits: your GPU or its shader compiler regrouped the additions, rounded one the "
                   "other way or flushed subnormals (WGSL allows all three)."))
