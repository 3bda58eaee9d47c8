"""Page: Summation lab — one vector, many summation orders, errors measured exactly."""

from __future__ import annotations

import math

import streamlit as st

from core.bytecache import vector_for
from core.exact import abbreviate, exact_decimal, shortest_repr
from core.formats import FORMATS, error_in_ulps
from core.orders import DEFAULT_ORDERS, ORDERS, available_threads
from core.querystate import LINK_TEXT_CHARS, Field
from core.sumlab import (
    MAX_PERMUTATIONS,
    WORKING_CHOICES,
    cached_outcome,
    lab_advice,
    lab_cost,
    lab_outcome,
    resolve_working,
)
from core.torch_cpu_model import GRAIN_SIZE, thread_chunks
from core.trees import MAX_TREE_N, TREE_ORDERS, build_tree
from core.vectors import (
    GENERATORS,
    MAX_N,
    MAX_PASTED,
    MAX_UPLOAD_BYTES,
    Vector,
    VectorError,
    VectorSpec,
    describe_spec,
    parse_pasted,
    parse_upload,
)
from ui import charts, glossary
from ui.crowd import heavy_section, over_budget
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert, ulps_text
from ui.sumlab_view import error_frame, permutation_frames, results_table, running_frame, tree_frames
from ui.talk import more_settings
from ui.urlstate import restore, share_box, sync

PASTE = "paste"
UPLOAD = "upload"
SOURCES = {**GENERATORS, PASTE: "Your numbers: paste them", UPLOAD: "Your numbers: upload a .csv or .npy file"}
CONDITIONS = [10.0**k for k in range(2, 17, 2)]
WORKING_LABELS = {"same": "same as storage", "float32": "float32", "float64": "float64"}


# Session state keeps the vector's recipe (a VectorSpec) or the visitor's own numbers (small by
# their limits), never a generated array: vectors and results live in core.bytecache's caches,
# bounded in bytes and shared by every session.
def _described(v: VectorSpec | Vector) -> str:
    return describe_spec(v) if isinstance(v, VectorSpec) else v.source


DEFAULT_PASTE = "1e8, 1, -1e8, 0.1, 0.2, 0.3"
# The box takes at most what the parser accepts; the browser cuts a longer paste there, so the
# text never reaches the server's message limit (server.maxMessageSize) and a message says so.
MAX_PASTE_CHARS = MAX_UPLOAD_BYTES
URL_FIELDS = [
    Field("sl_source", "vector", "choice", tuple(SOURCES)),
    Field("sl_storage", "storage", "choice", tuple(FORMATS)),
    Field("sl_working", "accumulate", "choice", WORKING_CHOICES),
    Field("sl_n", "n", "int", low=1, high=MAX_N),
    Field("sl_seed", "seed", "int", low=0, high=2**32 - 1),
    Field("sl_cond", "condition", "choice", tuple(CONDITIONS)),
    Field("sl_orders", "orders", "multi", tuple(ORDERS)),
    Field("sl_k", "permutations", "int", low=0, high=MAX_PERMUTATIONS),
    Field("sl_pseed", "perm_seed", "int", low=0, high=2**32 - 1),
    Field("sl_paste", "numbers", "text", max_length=LINK_TEXT_CHARS),
    Field("sl_tree_order", "tree", "choice", tuple(k for k in TREE_ORDERS if k != "cuda")),
]
DEFAULTS = {"sl_source": "normal", "sl_storage": "float32", "sl_working": "same", "sl_n": 1_000_000, "sl_seed": 0,
            "sl_cond": 1e8, "sl_orders": list(DEFAULT_ORDERS), "sl_k": 20, "sl_pseed": 0, "sl_paste": DEFAULT_PASTE,
            "sl_tree_order": "sequential"}

ensure_app_navigation()
url_notes = restore("sl", URL_FIELDS, DEFAULTS)
st.title("Summation lab")
punch = st.container(key="punchline")  # the message and its key numbers (or the two trees), filled below
st.markdown(
    "Pick a vector, the format it is stored in, the format the sum accumulates in, and a set "
    "of summation orders. Each order adds the same numbers; only the grouping differs. Every "
    "result is compared with the **exact** sum of the stored values (rational arithmetic), "
    f"in {glossary.link('ulp', 'ULPs')} of the result's format, next to the worst case the order's error bound "
    "allows."
)

# ------------------------------------------------------------------------------ controls
c1, c2, c3 = st.columns([3, 1, 1])
source = c1.selectbox("Vector", list(SOURCES), format_func=SOURCES.get, key="sl_source")
storage = c2.selectbox("Storage format", list(FORMATS), key="sl_storage")
working_choice = c3.selectbox(
    "Accumulate in", WORKING_CHOICES, format_func=WORKING_LABELS.get, key="sl_working",
    help="Like torch.sum(x, dtype=...): the stored values are cast to this format, then every addition "
    "rounds to it.",
)
working = resolve_working(storage, working_choice)

vector: VectorSpec | Vector | None = None  # the recipe of a generated vector, or the visitor's numbers
error_here = None
if source in GENERATORS:
    g1, g2, g3 = st.columns(3)
    n = g1.number_input(f"n (1 to {MAX_N:,})", min_value=1, step=100_000, key="sl_n")
    seed = g2.number_input("Seed", min_value=0, max_value=2**32 - 1, key="sl_seed")
    condition = 1e8
    if source == "ill_conditioned":
        condition = g3.select_slider("Target condition number", CONDITIONS, key="sl_cond",
                                     format_func=lambda c: f"1e{round(math.log10(c))}")
    if n > MAX_N:
        g1.error(f"n = {int(n):,} is more than this lab allows ({MAX_N:,}): a vector that long would need "
                 f"{int(n) * 8 / 1e9:.1f} GB in float64 before rounding. Choose n ≤ {MAX_N:,}.")
        error_here = "n"
    else:
        try:
            vector = VectorSpec(source, int(n), int(seed), storage, float(condition))
            vector.validate()
        except VectorError as err:
            g1.error(inert(err))
            error_here = "n"
elif source == PASTE:
    text = st.text_area(f"Numbers separated by commas, spaces or new lines (at most {MAX_PASTED:,})",
                        key="sl_paste", height=100, max_chars=MAX_PASTE_CHARS)
    if len(text) >= MAX_PASTE_CHARS:
        st.error(f"This paste fills the box's limit of {MAX_PASTE_CHARS:,} characters, so the browser may have cut "
                 "off the rest: the numbers were not used. Upload them as a .csv or .npy file instead (at most "
                 f"{MAX_UPLOAD_BYTES / 2**20:.0f} MB), or paste fewer.")
        error_here = "paste"
    else:
        try:
            vector = parse_pasted(text, storage)
        except VectorError as err:
            st.error(inert(err))  # quotes the pasted text
            error_here = "paste"
else:
    up = st.file_uploader("A .csv (one column or row of numbers) or .npy (1-D array) file, at most 5 MB",
                          type=["csv", "npy", "txt"], key="sl_upload")
    if up is None:
        st.info("Upload a file to sum its numbers. Until then the lab keeps the last vector it had.")
        error_here = "upload"
    else:
        try:
            vector = parse_upload(up.name, up.getvalue(), storage)
        except VectorError as err:
            st.error(inert(err))  # names the file and quotes its content
            error_here = "upload"

advanced = more_settings()
orders = advanced.multiselect("Summation orders", list(ORDERS), format_func=lambda k: ORDERS[k].name,
                              key="sl_orders")
p1, p2 = advanced.columns(2)
k_perm = p1.number_input(f"Random permutations (0 to {MAX_PERMUTATIONS:,})", min_value=0,
                         max_value=MAX_PERMUTATIONS, key="sl_k",
                         help="Sequential sums of randomly shuffled copies; at most 2·10^7 elements of work in total.")
perm_seed = p2.number_input("Permutation seed", min_value=0, max_value=2**32 - 1, key="sl_pseed")
query = sync(URL_FIELDS)

share_box(query, url_notes, {"numbers": ("the pasted numbers", "numbers.txt", st.session_state["sl_paste"])})
if vector is not None:
    st.session_state["sl_last"] = vector
elif "sl_last" in st.session_state:
    last = st.session_state["sl_last"]
    st.warning(f"Showing the last valid vector ({inert(_described(last), line_start=False)}) until the input above is "
               "fixed.",
               icon=":material/history:")
    vector = last
if vector is None:
    st.stop()
if not orders:
    st.warning("Choose at least one summation order.")
    st.stop()

# The per-request budget (core.budget): over it, say what to reduce and keep showing the last
# request that fit. Heavy requests run a few at a time server-wide (ui.crowd.heavy_section).
request = (vector, working_choice, tuple(orders), int(k_perm), int(perm_seed))
cost = lab_cost(*request)
if not cost.fits:
    over_budget(cost, lab_advice(*request[:4]), kept="sl_run" in st.session_state)
    if "sl_run" not in st.session_state:
        st.stop()
    request = st.session_state["sl_run"]
    cost = lab_cost(*request)
vector, working_choice, orders, k_perm, perm_seed = request
working = resolve_working(vector.storage, working_choice)
outcome = cached_outcome(*request)
if outcome is None:
    with heavy_section(cost, "this summation"), st.spinner("Summing…"):
        progress = st.empty()
        outcome = lab_outcome(*request, on_progress=lambda what: progress.caption(f"Summing: {what}…"))
        progress.empty()
st.session_state["sl_run"] = request
result = outcome.result
fmt = result.fmt
tree_here = result.n <= MAX_TREE_N and not isinstance(result.exact, float)  # the trees are the punchline
with punch:
    if tree_here:
        values_here = (vector_for(vector) if isinstance(vector, VectorSpec) else vector).values
        cpu_col, gpu_col = st.columns(2)
        tree_order = cpu_col.selectbox("CPU order", [k for k in TREE_ORDERS if k != "cuda"],
                                       format_func=TREE_ORDERS.get, key="sl_tree_order")
        for col, order, title in ((cpu_col, tree_order, "CPU"), (gpu_col, "cuda", "GPU (model)")):
            tree = build_tree(values_here, working, order)
            nodes, edges, _ = tree_frames(tree)
            if order == "cuda":
                col.markdown(f"**{TREE_ORDERS['cuda']}**")
            col.altair_chart(charts.tree_chart(nodes, edges, height=330), width="stretch")
            col.caption(f"{title}: result {shortest_repr(tree.result, fmt)}, error "
                        f"{ulps_text(error_in_ulps(tree.result, result.exact, fmt))} against the exact sum; "
                        f"{len(tree.internal())} additions, depth {tree.nodes[tree.root].depth}.")
    else:
        shown_rows = [r for r in result.rows if math.isfinite(r.metrics.ulps)]
        q1, q2, q3 = st.columns(3)
        q1.metric("Different results", f"{len({r.metrics.bits for r in result.rows})} of {len(result.rows)} orders",
                  help="Orders whose sums differ in at least one bit.")
        if shown_rows:
            best = min(shown_rows, key=lambda r: abs(r.metrics.ulps))
            worst = max(shown_rows, key=lambda r: abs(r.metrics.ulps))
            q2.metric("Smallest error", ulps_text(best.metrics.ulps, best.metrics.rel_error),
                      help=f"{best.order.name}, against the exact sum.")
            q3.metric("Largest error", ulps_text(worst.metrics.ulps, worst.metrics.rel_error),
                      help=f"{worst.order.name}, against the exact sum.")
        st.caption(f"The same {result.n:,} values summed in {len(result.rows)} orders, accumulating in {working}: only "
                   "the grouping differs, and so do the last bits. Each error is exact (rational arithmetic).")

# ------------------------------------------------------------------------------ summary
st.subheader("The vector and its exact sum")
for note in outcome.notes:
    st.warning(inert(note), icon=":material/info:")  # may name an uploaded file
st.caption(f"Vector: {inert(outcome.source, line_start=False)}.")
m1, m2, m3 = st.columns(3)
m1.metric("n", f"{result.n:,}")
if math.isnan(result.kappa):
    m2.metric("Condition number κ", "undefined")
else:
    m2.metric("Condition number κ = Σ|x| / |Σx|", "∞" if math.isinf(result.kappa) else f"{result.kappa:.3g}",
              help=glossary.help_text("kappa"))
m3.metric("Accumulation format", working)
glossary.define("kappa")  # the story's first use of κ
if isinstance(result.exact, float):
    st.error(
        f"The data contain non-finite values: the IEEE sum is {exact_decimal(result.exact)}, so errors and bounds "
        "are undefined. Only the bit patterns below are meaningful."
    )
else:
    mpf = result.exact_mpf
    st.markdown(
        f"Exact sum of the stored values (`mpmath.mpf`, {mpf._mpf_[3]} bits, no rounding): "
        f"`{abbreviate(exact_decimal(result.exact), 120)}`  \n"
        f"Correctly rounded to {working}: `{shortest_repr(result.correctly_rounded, fmt)}`"
    )
    if result.exact == 0:
        st.info("The exact sum is 0, so relative errors are undefined: errors are shown in ULPs of the "
                "smallest subnormal and as absolute values.")
if result.cast_note:
    st.info(result.cast_note)
if working != vector.storage:
    st.caption(f"torch.sum(x, dtype=torch.{working}) casts the {vector.storage} input to {working} before reducing; "
               "this lab does the same, so the accumulation format is also the format of every partial sum.")

# ------------------------------------------------------------------------------ results
st.subheader("Results")
table = results_table(result)
st.dataframe(table, hide_index=True, width="stretch")
download_buttons(table, {"vector": outcome.source, "storage": vector.storage, "accumulate": working,
                         "orders": ",".join(orders), "permutations": int(k_perm), "permutation_seed": int(perm_seed)},
                 "summation-lab", "sl")
violations = [r.order.name for r in result.rows if r.metrics.within_bound is False]
if violations:
    st.error("Outside the a-priori bound (this would be a bug): " + ", ".join(violations))
st.caption(
    "origin — live: the real library ran on this machine; model: our reimplementation of a library's or a device's "
    "order (the CUDA model is not checked against a GPU here); algorithm: a textbook order computed here; "
    "exact: rational arithmetic. Bounds (Higham, ch. 4): sequential γ(n−1)·Σ|x|, pairwise γ(⌈log2 n⌉)·Σ|x|, "
    "compensated 2u·Σ|x| + (1+u)·γ(m−1)·u·m·(1+γ(m))·Σ|x| with m values per lane (proved for "
    "Neumaier, checked for Kahan), NumPy and the CUDA model γ(depth of their tree)·Σ|x|; for torch the "
    "sequential bound γ(n−1)·Σ|x|, which holds for every order (its tree depth is not derived here). "
    "The bound's column in ULPs divides it by one ULP of the exact sum, like the error's."
)
glossary.define("gamma")  # the story's first use of the γ bounds

ef = error_frame(result)
if not ef.empty:
    st.altair_chart(charts.error_bars(ef), width="stretch")

threads = available_threads()
chunks = thread_chunks(result.n, threads)
if result.n < GRAIN_SIZE or threads == 1:
    why = (f"With n = {result.n:,} below torch's grain size ({GRAIN_SIZE:,}), torch.sum runs serially, so 1 thread and "
           f"{threads} threads give the same bits.")
else:
    spans = ", ".join(f"[{a:,}, {b:,})" for a, b in chunks[:4]) + (" …" if len(chunks) > 4 else "")
    why = (f"With {threads} threads torch.sum gives each thread a contiguous chunk ({spans}), sums each in its own "
           "slot, then adds the slots: a different grouping from one thread, hence possibly different bits.")
st.caption(why)

# ------------------------------------------------------------------------- permutations
if result.permutations is not None and not isinstance(result.exact, float) and result.exact != 0:
    st.subheader("Random orders")
    study = result.permutations
    hist, marks = permutation_frames(result)
    st.markdown(f"{study.k:,} random permutations summed left to right gave **{study.distinct:,} different "
                f"{working} results** (seed {study.seed}).")
    st.altair_chart(charts.permutation_histogram(hist, marks), width="stretch")

# -------------------------------------------------------------------------- running error
if outcome.running is not None:
    st.subheader("How the left-to-right error grows")
    re = outcome.running
    st.altair_chart(charts.running_error_chart(running_frame(re)), width="stretch")
    st.caption("Absolute error of the running sum after k values (exact prefix sums), and the bound γ(k−1)·Σ|x|.")

# --------------------------------------------------------------------------- the tree
st.subheader("The reduction tree")
if result.n > MAX_TREE_N:
    st.info(f"Trees are drawn for n ≤ {MAX_TREE_N}. Set n to 32 or less (or paste a few numbers) to see every "
            "partial sum.")
elif tree_here:
    st.caption("Drawn at the top of the page: the chosen CPU order's tree beside the GPU's, each addition coloured "
               "by its rounding error.")
    st.caption("The GPU's tree: one block of the largest power of two ≤ n threads (torch 2.13 launches that for "
               "n < 128): thread t adds its elements t and t + T, then the lanes combine by warp shuffles with offsets "
               "T/2, …, 1 (lane t adds lane t + offset); lane 0 holds the sum. Larger vectors add more blocks and "
               "vector loads; the CUDA model in the table above runs them all.")
    st.dataframe(tree_frames(build_tree(values_here, working, tree_order))[2], hide_index=True, width="stretch")
    st.caption(f"Each addition of the CPU order: the exact sum of its two rounded inputs, and the {working} value it "
               "rounds to (exact rational rounding, nearest even).")

next_page_link("summation_lab")
