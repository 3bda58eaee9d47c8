"""Page: Where two runs part — op-by-op traces of two runs, the first op that differs, born or inherited,
and whether its size is what rounding explains."""

from __future__ import annotations

import hashlib

import streamlit as st

from core.crowd.bytecache import TRACE_PAIRS
from core.crowd.querystate import Field, FieldKind
from core.crowd.runner import session_value
from core.traces.compare import Comparison, compare
from core.traces.files import MAX_TRACE_BYTES, TraceFileError, dumps, from_bytes
from core.traces.judge import ELEMENTWISE_ULPS, FORMAT_CHANGE, NOT_COMPARABLE
from core.traces.pairs import DEFAULT_PAIR, PAIRS, provenance, run_pair
from ui import traces_view as view
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.talk import talk_folded
from ui.urlstate import restore, share_box, sync

SOURCES = {"bundled": "A bundled pair, traced live here", "upload": "Upload two trace files"}
MB = MAX_TRACE_BYTES // 2**20
URL_FIELDS = [Field(key="tr_source", param="source", kind=FieldKind.CHOICE, options=tuple(SOURCES)),
              Field(key="tr_pair", param="pair", kind=FieldKind.CHOICE, options=tuple(PAIRS)),
              Field(key="tr_only", param="only_differences", kind=FieldKind.CHOICE, options=(True, False))]
DEFAULTS = {"tr_source": "bundled", "tr_pair": DEFAULT_PAIR, "tr_only": True}
COMMANDS = """# on each machine (a bare GPU image needs torch, NumPy, jsonschema and this app's core/ and scripts/)
python -m scripts.trace run --model tiny-lm --batch 8 --device cuda --out gpu.json
python -m scripts.trace run --model tiny-lm --out laptop.json
# your own model: make(**args) returns (model, inputs); --backward adds the backward pass
python -m scripts.trace run --module my_model.py:make --arg width=256 --backward --out mine.json
# batch invariance: a batch of 4 against its row 0 alone; --dtype casts the model and its inputs
python -m scripts.trace run --module my_model.py:make --arg batch=4 --follow-row 0 --dtype bfloat16 --out b4.json
# a planted difference: --list-ops numbers the ops; 2^-22 is rounding-sized
python -m scripts.trace run --module my_model.py:make --perturb-op 12 --perturb-size 2.4e-7 --out plant.json
# then upload both files here, or
python -m scripts.trace compare gpu.json laptop.json"""


def _upload(where, label: str, key: str) -> dict | None:
    """A validated trace from an uploader (None when empty or refused, with the reason under it)."""
    up = where.file_uploader(label, type=["json"], key=key,
                             help=f"A file written by python -m scripts.trace run, at most {MB} MB. It is read as JSON "
                                  "and checked against the trace schema; nothing in it is run.")
    if up is None:
        return None
    raw = up.getvalue()
    digest = hashlib.sha256(raw).hexdigest()
    try:  # parsed once per file in this session
        return session_value(st.session_state, f"_{key}_parsed", digest, lambda: from_bytes(raw, up.name))
    except TraceFileError as err:
        where.error(inert(err), icon=":material/block:")  # quotes the file name
        return None


def bundled(punch) -> tuple[Comparison, dict, dict, str, str] | None:
    key = st.selectbox("Pair", list(PAIRS), format_func=lambda k: PAIRS[k].label, key="tr_pair")
    pair = PAIRS[key]
    with punch, st.spinner(f"Tracing both runs live on this server: {pair.label}"):
        result = TRACE_PAIRS.call(run_pair, key)
    st.caption(inert(pair.note))
    return result.comparison, result.trace_a, result.trace_b, pair.a_name, pair.b_name


def uploaded(punch) -> tuple[Comparison, dict, dict, str, str] | None:
    u1, u2 = st.columns(2)
    a = _upload(u1, "Trace A (say, from your GPU machine)", "tr_up_a")
    b = _upload(u2, "Trace B (say, from your laptop)", "tr_up_b")
    if a is None or b is None:
        punch.info(f"Upload two trace files (each at most {MB} MB) to see where they part, or choose a bundled pair. "
                   "\"Trace your own model\" below says how to make them.", icon=":material/upload:")
        return None
    key = (st.session_state["_tr_up_a_parsed"][0], st.session_state["_tr_up_b_parsed"][0])
    try:  # the same two files: no new alignment on a rerun
        c = session_value(st.session_state, "_tr_compared", key, lambda: compare(a, b))
    except (ValueError, TypeError, KeyError, ArithmeticError) as err:  # a valid file with values no run makes
        u2.error("These two traces cannot be compared: " + inert(err), icon=":material/block:")
        return None
    return c, a, b, "A", "B"


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("tr", URL_FIELDS, DEFAULTS)
    st.title("Where two runs part")
    punch = st.container(key="punchline")  # the first difference: first screen
    c1, c2 = st.columns([1, 2])
    source = c1.radio("Traces", list(SOURCES), format_func=SOURCES.get, key="tr_source")
    with c2:
        got = bundled(punch) if source == "bundled" else uploaded(punch)
    share_box(sync(URL_FIELDS), url_notes)
    if got is None:
        explain()
        next_page_link("traces")
        return
    comparison, trace_a, trace_b, a_name, b_name = got
    view.punchline(punch, comparison, a_name, b_name)
    punch.altair_chart(view.timeline_chart(comparison), width="stretch")
    view.details(st, comparison)
    st.caption(f"A: {inert(provenance(trace_a))}.  \nB: {inert(provenance(trace_b))}.  \n"
               + ("Traced live on this server just now." if source == "bundled" else
                  "Uploaded by you: the server checked the files' format, not where they were made."))
    st.subheader("Every op")
    only = st.toggle("Only the ops that differ", key="tr_only")
    st.dataframe(view.rows_table(comparison, only), hide_index=True, width="stretch", height=300, column_config={
        "size": st.column_config.TextColumn(help="Sampled elements whose bits differ, of those sampled, and the "
                                            "largest difference in ULPs of the output's format")})
    view.unmatched(comparison)
    counts = comparison.counts()
    other = ", ".join(f"{counts[s]} {s}" for s in (NOT_COMPARABLE, FORMAT_CHANGE) if counts.get(s))
    st.caption(f"{len(comparison.rows)} matched ops: {counts.get('identical', 0)} identical, "
               f"{counts.get('born here', 0)} born here, {counts.get('inherited', 0)} inherited"
               + (f", {other}" if other else "") + f"; {len(comparison.only_a)} only in A, "
               f"{len(comparison.only_b)} only in B.")
    if source == "bundled":
        d1, d2 = st.columns(2)
        d1.download_button(f"Download trace A ({a_name})", dumps(trace_a), "trace-a.json", "application/json",
                           key="tr_dl_a")
        d2.download_button(f"Download trace B ({b_name})", dumps(trace_b), "trace-b.json", "application/json",
                           key="tr_dl_b")
    explain()
    next_page_link("traces")


def explain() -> None:
    with st.expander("Trace your own model"):
        st.markdown("Trace the same model on the two machines (or thread counts, batch sizes, versions) that "
                    "disagree, then upload both files here or compare them on the command line:")
        st.code(COMMANDS, language="bash")
    with talk_folded("How each op is judged"):
        st.markdown(
            "Every op is recorded (aten's, quantized and custom ones alike; each one left out is named) with its "
            "module, digests of its input and output bits, 32 sampled output "
            "values and its reduction length K (a matrix product's inner dimension, a softmax row's length; a dash "
            "where the op sums nothing). The two op lists are matched by module, op and shapes.\n\n"
            "- **identical**: the same output bits;\n"
            "- **born here**: the same input bits, other output bits: this op made the difference;\n"
            "- **inherited**: an input already differed; through an op with no order to choose (+, × or a copy: "
            "one correctly rounded result, or an exact one), one larger than a rounding-sized few ULPs reads **passed "
            "on**: the inputs' difference, carried;\n"
            "- **format change**: the runs compute in other formats from here (bfloat16 against float32, or a "
            "cast only one run has), so the difference is the format's, not rounding's;\n"
            "- **not comparable**: no element has a partner (two batch sizes; a tensor whose batch is not its "
            "first dimension), or the op reads across the batch's rows (a sort of the whole batch's tokens), "
            "so other rows count in its result.\n\n"
            "A born difference is measured in ULPs on the sampled elements against the envelope of a reordered "
            "sum of K terms (the Diagnose page's): **within rounding** when every sampled element lies inside "
            "min(2·γ_K·Σ|t|, 8·u·√K·‖t‖₂): Higham's bound (eq. 3.4, γ_K = Ku/(1−Ku)) and 8 times the typical "
            "size, with the terms taken from the op's real inputs for matrix products and sums. Correctly rounded ops "
            "(+ − × ÷ √, copies, casts) have no such freedom; exp, tanh and friends need not be "
            f"correctly rounded, and this page treats up to {ELEMENTWISE_ULPS:.0f} ULPs between two libraries as "
            "rounding-sized (a heuristic: fast-math builds can exceed it). Indices, masks and signs have no "
            "rounding at all: when a rounding-sized difference changes one, the page says a choice flips there.\n\n"
            "A GPU that runs float32 products on TF32 tensor cores, or reduces bfloat16/float16 products in reduced "
            "precision (PyTorch's defaults for cuDNN convolutions and half-precision matmul reductions), goes "
            "beyond these float32 envelopes by design: turn those off for the comparison "
            "(`torch.backends.cudnn.allow_tf32 = False`, "
            "`torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False`, and the same for fp16) "
            "or read *beyond rounding* there as their lower precision.")

main()
