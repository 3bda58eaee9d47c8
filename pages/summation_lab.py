"""Page: Summation lab — one vector, many summation orders, errors measured exactly."""

from __future__ import annotations

import math

import streamlit as st

from core.arith.exact import abbreviate, exact_decimal, shortest_repr
from core.arith.formats import FORMATS, exact_sums_below, working_format
from core.arith.loader import MAX_UPLOAD_BYTES
from core.arith.user_vectors import MAX_PASTED, parse_pasted, parse_upload
from core.arith.vectors import (
    GENERATORS,
    MAX_N,
    Vector,
    VectorError,
    VectorSpec,
    describe_spec,
)
from core.crowd.budget import permutations_note
from core.crowd.bytecache import RESULTS
from core.crowd.querystate import LINK_TEXT_CHARS, Field, FieldKind
from core.kernels.orders import DEFAULT_ORDERS, ORDERS
from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.kernels.trees import MAX_TREE_N, TREE_ORDERS
from core.studies.sumlab import (
    MAX_PERMUTATIONS,
    WORKING_CHOICES,
    LabOutcome,
    LabRequest,
    LabResult,
    LabStudy,
    LabTree,
    RunningError,
    cached_outcome,
    cached_study,
    lab_outcome,
    lab_study,
    lab_trees,
    thread_split,
)
from ui import charts, glossary
from ui import sumlab_view as view
from ui.crowd import folded, over_budget
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import abs_rel_text, inert, ulps_short, ulps_text
from ui.talk import more_settings
from ui.urlstate import restore, share_box, sync

PASTE = "paste"
UPLOAD = "upload"
SOURCES = {**GENERATORS, PASTE: "Your numbers: paste them", UPLOAD: "Your numbers: upload a .csv or .npy file"}
CONDITIONS = [10.0**k for k in range(2, 17, 2)]
WORKING_LABELS = {"same": "same as storage", "float32": "float32", "float64": "float64"}
CPU_TREE_ORDERS = [k for k in TREE_ORDERS if k != "cuda"]


# Session state keeps the vector's recipe (a VectorSpec) or the visitor's own numbers (small by
# their limits), never a generated array: vectors and results live in core.crowd.bytecache's caches,
# bounded in bytes and shared by every session.
def _described(v: VectorSpec | Vector) -> str:
    return describe_spec(v) if isinstance(v, VectorSpec) else v.source


DEFAULT_PASTE = "1e8, 1, -1e8, 0.1, 0.2, 0.3"
# The box takes at most what the parser accepts; the browser cuts a longer paste there, so the
# text never reaches the server's message limit (server.maxMessageSize) and a message says so.
MAX_PASTE_CHARS = MAX_UPLOAD_BYTES
URL_FIELDS = [
    Field(key="sl_source", param="vector", kind=FieldKind.CHOICE, options=tuple(SOURCES)),
    Field(key="sl_storage", param="storage", kind=FieldKind.CHOICE, options=tuple(FORMATS)),
    Field(key="sl_working", param="accumulate", kind=FieldKind.CHOICE, options=WORKING_CHOICES),
    Field(key="sl_n", param="n", kind=FieldKind.INT, low=1, high=MAX_N),
    Field(key="sl_seed", param="seed", kind=FieldKind.INT, low=0, high=2**32 - 1),
    Field(key="sl_cond", param="condition", kind=FieldKind.CHOICE, options=tuple(CONDITIONS)),
    Field(key="sl_orders", param="orders", kind=FieldKind.MULTI, options=tuple(ORDERS)),
    Field(key="sl_k", param="permutations", kind=FieldKind.INT, low=0, high=MAX_PERMUTATIONS),
    Field(key="sl_pseed", param="perm_seed", kind=FieldKind.INT, low=0, high=2**32 - 1),
    Field(key="sl_paste", param="numbers", kind=FieldKind.TEXT, max_length=LINK_TEXT_CHARS),
    Field(key="sl_tree_order", param="tree", kind=FieldKind.CHOICE, options=tuple(CPU_TREE_ORDERS)),
]
DEFAULTS = {"sl_source": "normal", "sl_storage": "float32", "sl_working": "same", "sl_n": 1_000_000, "sl_seed": 0,
            "sl_cond": 1e8, "sl_orders": list(DEFAULT_ORDERS), "sl_k": 20, "sl_pseed": 0, "sl_paste": DEFAULT_PASTE,
            "sl_tree_order": "sequential"}


# ------------------------------------------------------------------------------ controls
def generated_vector(source: str, storage: str) -> VectorSpec | None:
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
        return None
    try:
        vector = VectorSpec(kind=source, n=int(n), seed=int(seed), storage=storage, condition=float(condition))
        vector.validate()
    except VectorError as err:
        g1.error(inert(err))
        return None
    return vector


def pasted_vector(storage: str) -> Vector | None:
    text = st.text_area(f"Numbers separated by commas, spaces or new lines (at most {MAX_PASTED:,})",
                        key="sl_paste", height=100, max_chars=MAX_PASTE_CHARS)
    if len(text) >= MAX_PASTE_CHARS:
        st.error(f"This paste fills the box's limit of {MAX_PASTE_CHARS:,} characters, so the browser may have cut "
                 "off the rest: the numbers were not used. Upload them as a .csv or .npy file instead (at most "
                 f"{MAX_UPLOAD_BYTES / 2**20:.0f} MB), or paste fewer.")
        return None
    try:
        return parse_pasted(text, storage)
    except VectorError as err:
        st.error(inert(err))  # quotes the pasted text
        return None


def uploaded_vector(storage: str) -> Vector | None:
    up = st.file_uploader("A .csv (one column or row of numbers) or .npy (1-D array) file, at most 5 MB",
                          type=["csv", "npy", "txt"], key="sl_upload")
    if up is None:
        st.info("Upload a file to sum its numbers. Until then the lab keeps the last vector it had.")
        return None
    try:
        return parse_upload(up.name, up.getvalue(), storage)
    except VectorError as err:
        st.error(inert(err))  # names the file and quotes its content
        return None


def controls(url_notes: list[str]) -> LabRequest | None:
    """The vector, its formats, the orders and the permutation study, with the share box; the
    request to compute (the last valid vector while the input is wrong), or None when there is none."""
    c1, c2, c3 = st.columns([3, 1, 1])
    source = c1.selectbox("Vector", list(SOURCES), format_func=SOURCES.get, key="sl_source")
    storage = c2.selectbox("Storage format", list(FORMATS), key="sl_storage")
    working_choice = c3.selectbox(
        "Accumulate in", WORKING_CHOICES, format_func=WORKING_LABELS.get, key="sl_working",
        help="Like torch.sum(x, dtype=...): the stored values are cast to this format, then every addition "
        "rounds to it.",
    )
    if working_choice == "same" and not FORMATS[storage].arithmetic:
        acc = working_format(storage, "same")
        q, e = exact_sums_below(FORMATS[storage], FORMATS[acc])
        c3.caption(f"{storage} has no addition of its own: its sums accumulate in {acc}, as "
                   f"torch.sum(x, dtype=torch.float32) does. Its values are whole multiples of 2^{q}, so {acc} holds "
                   f"every partial sum below 2^{e} exactly: a sum that stays below it is exact in every order.")
    if source in GENERATORS:
        vector = generated_vector(source, storage)
    elif source == PASTE:
        vector = pasted_vector(storage)
    else:
        vector = uploaded_vector(storage)

    advanced = more_settings()
    orders = advanced.multiselect("Summation orders", list(ORDERS), format_func=lambda k: ORDERS[k].name,
                                  key="sl_orders")
    p1, p2 = advanced.columns(2)
    k_perm = p1.number_input(f"Random permutations (0 to {MAX_PERMUTATIONS:,})", min_value=0,
                             max_value=MAX_PERMUTATIONS, key="sl_k",
                             help="Sequential sums of randomly shuffled copies; at most 2·10^7 elements of work in "
                             "total.")
    perm_note = p1.empty()  # what the lab really sums, when the work budget caps the count: filled below
    perm_seed = p2.number_input("Permutation seed", min_value=0, max_value=2**32 - 1, key="sl_pseed")
    share_box(sync(URL_FIELDS), url_notes,
              {"numbers": ("the pasted numbers", "numbers.txt", st.session_state["sl_paste"])})

    if vector is not None:
        st.session_state["sl_last"] = vector
    elif "sl_last" in st.session_state:
        vector = st.session_state["sl_last"]
        st.warning(f"Showing the last valid vector ({inert(_described(vector), line_start=False)}) until the input "
                   "above is fixed.", icon=":material/history:")
    if vector is None:
        return None
    note = permutations_note(int(k_perm), vector.n)
    if note:
        perm_note.caption(note)
    if not orders:
        st.warning("Choose at least one summation order.")
        return None
    return LabRequest(
        source=vector,
        working_choice=working_choice,
        orders=tuple(orders),
        permutations=int(k_perm),
        perm_seed=int(perm_seed),
    )


def within_budget(request: LabRequest) -> LabRequest | None:
    """The request, or over the per-request budget (core.crowd.budget) the last one that fit, if any,
    after saying what to reduce."""
    cost = request.cost()
    if cost.fits:
        return request
    over_budget(cost, request.advice(), kept="sl_run" in st.session_state)
    return st.session_state.get("sl_run")


# ------------------------------------------------------------------- the two computations
# The orders come first: the punchline and the table need only them. The permutation study and
# the running error follow below the table, each stage through the heavy gate when it is heavy.
def orders_outcome(request: LabRequest) -> LabOutcome:
    outcome = cached_outcome(request)
    if outcome is None:
        with view.computing(request.stage_costs()[0], "this summation") as on_progress:
            outcome = lab_outcome(request, on_progress)
    st.session_state["sl_run"] = request
    return outcome


def study_of(request: LabRequest, outcome: LabOutcome) -> LabStudy:
    study = cached_study(request)
    if study is None:
        with view.computing(request.stage_costs()[1], "the random-order study") as on_progress:
            study = lab_study(request, outcome, on_progress)
    return study


# ------------------------------------------------------------------------------ sections
def punchline(request: LabRequest, result: LabResult) -> tuple[LabTree, LabTree] | None:
    """The two trees for a small vector (returned), else the spread of the orders' errors."""
    if result.shows_trees:
        cpu_col, gpu_col = st.columns(2)
        cpu_order = cpu_col.selectbox("CPU order", CPU_TREE_ORDERS, format_func=TREE_ORDERS.get, key="sl_tree_order")
        # the same trees for every viewer of this request: built once, with their one colour scale
        trees, scale = RESULTS.get_or_compute(("sumlab-trees", request.orders_key(), cpu_order), lambda: (
            (t := lab_trees(request, result, cpu_order)), view.largest_rounding(t[0].tree, t[1].tree)))
        for col, tree, title in ((cpu_col, trees[0], "CPU"), (gpu_col, trees[1], "GPU (model)")):
            if tree.order == "cuda":
                col.markdown(f"**{TREE_ORDERS['cuda']}**")
            charts.show(lambda t, m: view.tree_picture(t, height=300, max_abs_ulps=m), tree.tree, scale,
                        key=("sumlab-tree", request.orders_key(), cpu_order, tree.order), where=col)
            col.caption(f"{title}: result {shortest_repr(tree.tree.result, result.fmt)}, error "
                        f"{ulps_text(tree.error.ulps)} ({abs_rel_text(tree.error.abs_error, tree.error.rel_error)}); "
                        f"{tree.additions} additions, depth {tree.depth}.")
        return trees
    q1, q2, q3 = st.columns(3)
    q1.metric("Different results", f"{result.distinct_results} of {len(result.rows)} orders",
              help="Orders whose sums differ in at least one bit.")
    best, worst = result.smallest_error, result.largest_error
    if best is not None and worst is not None:
        for col, label, row in ((q2, "Smallest error", best), (q3, "Largest error", worst)):
            col.metric(label, ulps_short(row.metrics.ulps), help=f"{row.order.name}, against the exact sum.")
            col.caption(f"{row.order.name}: {abs_rel_text(row.metrics.abs_error, row.metrics.rel_error)}.")
    st.caption(f"The same {result.n:,} values summed in {len(result.rows)} orders, accumulating in {result.working}: "
               + ("only the grouping (or a compensated or exact sum) differs, and so do the last bits."
                  if result.distinct_results > 1 else
                  "only the grouping (or a compensated or exact sum) differs; here every order gives the same bits.")
               + " Each error is exact (rational arithmetic).")
    return None


def error_chart(result: LabResult, request: LabRequest) -> None:
    errors = RESULTS.get_or_compute(("sumlab-error-frame", request.orders_key()), lambda: view.error_frame(result))
    if not errors.empty:  # one specification per request, whoever opens it (ui.charts)
        charts.show(view.error_bars, errors, key=("sumlab-errors", request.orders_key()))


def vector_and_exact_sum(outcome: LabOutcome) -> None:
    result = outcome.result
    st.subheader("The vector and its exact sum")
    for note in outcome.notes:
        st.warning(inert(note), icon=":material/info:")  # may name an uploaded file
    st.caption(f"Vector: {inert(outcome.source, line_start=False)}.")
    m1, m2, m3 = st.columns(3)
    m1.metric("n", f"{result.n:,}")
    glossary.kappa_metric(m2, result.kappa, "Σ|x| / |Σx|")
    m3.metric("Accumulation format", result.working)
    glossary.define("kappa")  # the story's first use of κ
    if isinstance(result.exact, float):
        st.error(
            f"The data contain non-finite values: the IEEE sum is {exact_decimal(result.exact)}, so errors and bounds "
            "are undefined. Only the bit patterns below are meaningful."
        )
    else:
        st.markdown(
            f"Exact sum of the stored values (`mpmath.mpf`, {result.exact_bits} bits, no rounding): "
            f"`{abbreviate(exact_decimal(result.exact), 120)}`  \n"
            f"Correctly rounded to {result.working}: `{shortest_repr(result.correctly_rounded, result.fmt)}`"
        )
        if result.exact == 0:
            st.info("The exact sum is 0, so relative errors are undefined: errors are shown in ULPs of the "
                    "smallest subnormal and as absolute values.")
    if result.cast_note:
        st.info(result.cast_note)
    if result.working != result.storage:
        st.caption(f"torch.sum(x, dtype=torch.{result.working}) casts the {result.storage} input to {result.working} "
                   "before reducing; this lab does the same, so the accumulation format is also the format of every "
                   "partial sum.")


def results(request: LabRequest, outcome: LabOutcome) -> None:
    result = outcome.result
    st.subheader("Results")
    # the table's exact digits are made once per request for every viewer (the same for each)
    table = RESULTS.get_or_compute(("sumlab-table", request.orders_key()), lambda: view.results_table(result))
    shown = RESULTS.get_or_compute(("sumlab-compact", request.orders_key()), lambda: view.compact(table))
    st.dataframe(shown, hide_index=True, width="stretch")
    with folded("Every column: bits, relative and absolute errors, provenance, time", "sl_open_columns") as open_:
        if open_:  # made only once opened: a room opening the link pays for its first screen
            st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(table, {"vector": outcome.source, "storage": result.storage, "accumulate": result.working,
                             "orders": ",".join(request.orders), "permutations": request.permutations,
                             "permutation_seed": request.perm_seed},
                     "summation-lab", "sl")
    if result.outside_bound:
        st.error("Outside the a-priori bound (this would be a bug): " + ", ".join(result.outside_bound))
    st.caption(
        "origin — live: the real library ran on this machine; model: our reimplementation of a library's or a "
        "device's order (the CUDA model is not checked against a GPU here); algorithm: a textbook order computed "
        "here; exact: rational arithmetic. Bounds (Higham, ch. 4): sequential γ(n−1)·Σ|x|, pairwise "
        "γ(⌈log2 n⌉)·Σ|x|, compensated 2u·Σ|x| + (1+u)·γ(m−1)·u·m·(1+γ(m))·Σ|x| with m values per lane (proved for "
        "Neumaier, checked for Kahan), NumPy and the CUDA model γ(depth of their tree)·Σ|x|; for torch the "
        "sequential bound γ(n−1)·Σ|x|, which holds for every order (its tree depth is not derived here). "
        "The bound's column in ULPs divides it by one ULP of the exact sum, like the error's."
    )
    glossary.define("gamma")  # the story's first use of the γ bounds
    if result.shows_trees:  # a long vector's chart is at the top of the page, under its numbers
        error_chart(result, request)


def threads_note(result: LabResult) -> None:
    split = thread_split(result.n)
    if split.threads == 1:
        st.caption(f"torch.sum runs on one thread on this server, so it adds the {result.n:,} values in one chunk; "
                   "with more threads (and n above its grain size, "
                   f"{GRAIN_SIZE:,}) it gives each thread a contiguous chunk and adds the slots: a different grouping, "
                   "hence possibly different bits.")
    elif split.serial:
        st.caption(f"With n = {result.n:,} {'below' if result.n < GRAIN_SIZE else 'at'} torch's grain size "
                   f"({GRAIN_SIZE:,}), torch.sum runs serially, so 1 thread and {split.threads} threads give the same "
                   "bits.")
    else:
        spans = ", ".join(f"[{a:,}, {b:,})" for a, b in split.chunks[:4]) + (" …" if len(split.chunks) > 4 else "")
        st.caption(f"With {split.threads} threads torch.sum gives each thread a contiguous chunk ({spans}), sums each "
                   "in its own slot, then adds the slots: a different grouping from one thread, hence possibly "
                   "different bits.")


def random_orders(result: LabResult, request: LabRequest) -> None:
    """``result`` with its permutation study (LabStudy.applied_to); ``requested``: the count asked for."""
    study = result.permutations
    if study is None or isinstance(result.exact, float) or result.exact == 0:
        return
    st.subheader("Random orders")
    st.markdown(f"{study.k:,} random permutations summed left to right gave **{study.distinct:,} different "
                f"{result.working} results** (seed {study.seed}).")
    if request.permutations > study.k:
        st.caption(permutations_note(request.permutations, result.n))
    # the chart's frames are built with the chart, once per result: not per view
    charts.show(lambda r: view.permutation_histogram(*view.permutation_frames(r)), result,
                key=("sumlab-permutations", request.orders_key(), request.study_key()))
    st.caption("Grey bars: how many of the random permutations gave each result (left axis). Dots: each chosen "
               "order's result and the exact sum, one row each (right axis), on the same axis of ULPs.")


def running_error(running: RunningError | None, request: LabRequest) -> None:
    if running is None:
        return
    st.subheader("How the left-to-right error grows")
    charts.show(lambda r: view.running_error_chart(view.running_frame(r)), running,
                key=("sumlab-running", request.study_key()))
    st.caption("Absolute error of the running sum after k values (exact prefix sums), and the bound γ(k−1)·Σ|x|.")


def reduction_tree(result: LabResult, trees: tuple[LabTree, LabTree] | None, request: LabRequest) -> None:
    st.subheader("The reduction tree")
    if result.n > MAX_TREE_N:
        st.info(f"Trees are drawn for n ≤ {MAX_TREE_N}. Set n to 32 or less (or paste a few numbers) to see every "
                "partial sum.")
    elif trees is not None:
        st.caption("Drawn at the top of the page: the chosen CPU order's tree beside the GPU's, each addition "
                   "coloured by its rounding error.")
        st.caption("The GPU's tree: one block of the largest power of two ≤ n threads (torch 2.13 launches that for "
                   "n < 128): thread t adds its elements t and t + T, then the lanes combine by warp shuffles with "
                   "offsets T/2, …, 1 (lane t adds lane t + offset); lane 0 holds the sum. Larger vectors add more "
                   "blocks and vector loads; the CUDA model in the table above runs them all.")
        with folded("Each addition of the CPU order, exactly", "sl_open_additions") as open_:
            if open_:  # made only once opened: a room opening the link pays for its first screen
                # exact rational rounding of every addition: made once per vector and order, shown to every viewer
                table = RESULTS.get_or_compute(("sumlab-additions", trees[0].order, request.orders_key()),
                                               lambda: view.additions_table(trees[0].tree))
                st.dataframe(table, hide_index=True, width="stretch")
                st.caption(f"Each addition of the CPU order: the exact sum of its two rounded inputs, and the "
                           f"{result.working} value it rounds to (exact rational rounding, nearest even).")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("sl", URL_FIELDS, DEFAULTS)
    st.title("Summation lab")
    punch = st.container(key="punchline")  # the message and its key numbers (or the two trees), filled below
    errors_slot = st.container()  # a long vector's error chart, right under its numbers (the first two screens)
    st.markdown(
        "Pick a vector, the format it is stored in, the format the sum accumulates in, and a set "
        "of summation orders. Each order adds the same numbers; only the grouping differs (Kahan's and Neumaier's "
        "sums also carry what each rounding lost; the correctly rounded sum adds exactly and rounds once). Every "
        "result is compared with the **exact** sum of the stored values (rational arithmetic), "
        f"in {glossary.link('ulp', 'ULPs')} of the result's format, next to the worst case the order's error bound "
        "allows."
    )
    request = controls(url_notes)
    if request is not None:
        request = within_budget(request)
    if request is None:
        st.stop()
    outcome = orders_outcome(request)
    with punch:
        trees = punchline(request, outcome.result)
    if not outcome.result.shows_trees:
        with errors_slot:
            error_chart(outcome.result, request)
    vector_and_exact_sum(outcome)
    results(request, outcome)
    threads_note(outcome.result)
    study = study_of(request, outcome)
    random_orders(study.applied_to(outcome.result), request)
    running_error(study.running, request)
    reduction_tree(outcome.result, trees, request)
    next_page_link("summation_lab")


main()
