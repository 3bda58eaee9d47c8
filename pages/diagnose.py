"""Page: Diagnose a mismatch — is my CPU-vs-GPU difference normal, and what tolerance should my test use?"""

from __future__ import annotations

import streamlit as st

from core.crowd.bytecache import CALM_LOGS, DIAGNOSE_EXAMPLES, LOG_DIAGNOSES
from core.crowd.querystate import Field, FieldKind
from core.crowd.runner import session_value
from core.diagnose.examples import (
    CALM_LR,
    EXAMPLES,
    LOG_EXAMPLES,
    LOG_LR,
    LOG_POINTS,
    LOG_STEPS,
    at_calm_lr,
    diagnosed_example,
    diagnosed_log_example,
    log_network,
)
from core.diagnose.inputs import prepare_inputs
from core.diagnose.loaders import (
    ARRAY_TYPES,
    LOG_TYPES,
    MAX_PASTED_NUMBERS,
    MAX_UPLOAD_BYTES,
    DiagnoseSettings,
    LoadError,
    load_array,
    load_input,
    load_reference,
    pair_problem,
    parse_log,
    reduction_length_problem,
    reference_problem,
)
from core.diagnose.logs import LogDiagnosis, diagnose_logs
from core.diagnose.measure import ASSUMED_K, MAX_ELEMENTS
from core.diagnose.results import Diagnosis
from core.diagnose.verdict import diagnose
from ui import diagnose_view as view
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.urlstate import restore, share_box, sync

SOURCES = {"example": "A bundled example", "upload": "Upload two tensors", "paste": "Paste two lists",
           "logs": "Two training loss logs"}
LOG_SOURCES = {"example": "A bundled pair", "upload": "Upload two CSV files", "paste": "Paste two columns"}
FORMAT_CHOICES = ("auto", "float32", "float16", "bfloat16", "float64")
FORMAT_LABELS = {"auto": "the arrays' own (float32 for text)", "float32": "float32", "float16": "float16",
                 "bfloat16": "bfloat16", "float64": "float64"}
MAX_K = 1_000_000_000
MB = MAX_UPLOAD_BYTES // (1024 * 1024)

URL_FIELDS = [
    Field(key="dg_source", param="source", kind=FieldKind.CHOICE, options=tuple(SOURCES)),
    Field(key="dg_example", param="example", kind=FieldKind.CHOICE, options=tuple(EXAMPLES)),
    Field(key="dg_k", param="k", kind=FieldKind.INT, low=0, high=MAX_K),
    Field(key="dg_format", param="format", kind=FieldKind.CHOICE, options=FORMAT_CHOICES),
    Field(key="dg_reduced", param="reduced", kind=FieldKind.CHOICE, options=(True, False)),
    Field(key="dg_log_source", param="logs", kind=FieldKind.CHOICE, options=tuple(LOG_SOURCES)),
    Field(key="dg_log_example", param="log_example", kind=FieldKind.CHOICE, options=tuple(LOG_EXAMPLES)),
]
DEFAULTS = {"dg_source": "example", "dg_example": "batch", "dg_k": 0, "dg_format": "auto", "dg_reduced": True,
            "dg_log_source": "example", "dg_log_example": "reordered"}
TF32_DOCS = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"
REFERENCE_HELP = ("Optional. The same computation done more accurately, e.g. in float64 (a.double() @ b.double()): "
                  "both results are then judged against it, in ULPs of the reference. Read in float64.")




def _cached(key: str, compute):
    """This session's last result for the same data and options (uploads are not shared across sessions)."""
    return session_value(st.session_state, "_dg_result", key, compute)


def controls():
    """What to diagnose and the options every source shares; with the place under K for its problems."""
    source = st.radio("What to diagnose", list(SOURCES), format_func=SOURCES.get, key="dg_source", horizontal=True)
    reduced, k, k_slot = True, None, None
    if source != "logs":
        o1, o2, o3 = st.columns(3)
        reduced = o3.checkbox("TF32 / autocast may have been on", key="dg_reduced",
                              help="Consider reduced precision as an explanation: TF32 tensor cores on NVIDIA GPUs "
                                   "(float32 matrix products where torch.backends.cuda.matmul.allow_tf32 or "
                                   "set_float32_matmul_precision allows it; convolutions by default, through "
                                   f"cuDNN: {TF32_DOCS}), bfloat16 or float16 autocast. Untick when neither side can "
                                   "have used it.")
        if source != "example":
            k = o1.number_input("K: terms summed into each element (0 = unknown)", min_value=0, max_value=MAX_K,
                                step=1, key="dg_k",
                                help="The inner dimension of a matrix product, or the length of the summed axis.")
            k_slot = o1.empty()
            if not k:
                o1.caption(f"K = 0 means unknown: without the inputs the envelopes assume K = {ASSUMED_K:,}, "
                           "which the results say. Give K when you know it.")
            o2.selectbox("The format the computation ran in", FORMAT_CHOICES, format_func=FORMAT_LABELS.get,
                         key="dg_format")
    settings = DiagnoseSettings(source=source, reduced=bool(reduced), k=(int(k) or None) if k is not None else None,
                                format_choice=st.session_state["dg_format"])
    return settings, k_slot


def upload_section(s: DiagnoseSettings, k_slot) -> Diagnosis | None:
    with st.expander("File formats, and how to save a tensor", icon=":material/description:"):
        st.caption(f"Each file at most {MB} MB and {MAX_ELEMENTS:,} elements: .npy (read with allow_pickle=False), "
                   ".pt or .pth (torch.save's zip format, read with torch.load(weights_only=True)), or .csv "
                   "(numbers, one row per matrix row). Save with np.save('a.npy', t.cpu().numpy()) or "
                   "torch.save(t.cpu(), 'a.pt'). Nothing is kept after your session.")
    u1, u2 = st.columns(2)
    help_text = f"At most {MB} MB and {MAX_ELEMENTS:,} elements."
    fmt = s.text_format
    got_a, raw_a = view.upload(u1, "Result A (e.g. from the GPU)", "dg_up_actual", ARRAY_TYPES, load_array, fmt,
                               help_text)
    got_e, raw_e = view.upload(u2, "Result B (e.g. from the CPU)", "dg_up_expected", ARRAY_TYPES, load_array, fmt,
                               help_text)
    ref_box = st.expander("Optional: a reference, e.g. the same computation in float64", icon=":material/balance:")
    got_r, raw_r = view.upload(ref_box, "Reference", "dg_up_reference", ARRAY_TYPES, load_reference, fmt,
                               REFERENCE_HELP)
    inputs_box = st.expander("Optional: the inputs, for a rigorous bound and a simulation", icon=":material/science:")
    inputs_box.caption("The two factors of a matrix product (each result ≈ a @ b), or one array whose last axis was "
                       "summed (leave the second empty). Same formats; at most 4·10⁶ values in all. With them, both "
                       "results are also judged against the exact result.")
    i1, i2 = inputs_box.columns(2)
    got_x, raw_x = view.upload(i1, "first factor a, or the summed array", "dg_up_a", ARRAY_TYPES, load_input, fmt,
                               help_text)
    got_y, raw_y = view.upload(i2, "second factor b (for a @ b)", "dg_up_b", ARRAY_TYPES, load_input, fmt,
                               help_text)
    if got_a is None or got_e is None:
        if got_a is None and got_e is None:
            st.info("Upload the two results to compare (or choose a bundled example above).", icon=":material/upload:")
        return None
    problem = pair_problem(got_a, got_e)
    if problem:
        u2.error(problem, icon=":material/block:")
        return None
    inputs = None
    if got_y is not None and got_x is None:
        i2.error("The second factor needs a first factor.", icon=":material/block:")
    elif got_x is not None:
        try:
            inputs = prepare_inputs((got_x.values, got_y.values) if got_y is not None else got_x.values, got_a.shape)
        except (ValueError, TypeError) as err:
            inputs_box.error(inert(err), icon=":material/block:")
    problem = reduction_length_problem(s.k, inputs)
    if problem:
        k_slot.error(problem, icon=":material/block:")
        return None
    reference = _checked_reference(ref_box, got_r, got_a, pasted=False)
    key = view.digest(raw_a, raw_e, raw_x if inputs is not None else b"", raw_y if inputs is not None else b"",
                      raw_r if reference is not None else b"", s.k, s.fmt, s.reduced_precision)
    try:
        with st.spinner("Diagnosing…"):
            return _cached(key, lambda: diagnose(got_a.values, got_e.values, reduction_length=s.k, dtype=s.fmt,
                                                 reduced_precision=s.reduced_precision, inputs=inputs,
                                                 reference=reference))
    except (ValueError, TypeError) as err:
        st.error(inert(err), icon=":material/block:")
        return None


def _checked_reference(where, got_r, got_a, pasted: bool):
    """The reference's values when it fits the results, else None with the reason under its widget (the two
    results are diagnosed all the same)."""
    if got_r is None or got_a is None:
        return None
    problem = reference_problem(got_r, got_a, pasted=pasted)
    if problem:
        where.error(problem, icon=":material/block:")
        return None
    return got_r.values


def _pasted_inputs(x_slot, y_slot, got_x, got_y, got_a):
    """The pasted inputs of one sum or dot product, checked (None, with the reason under its box, when they do
    not fit; the two results are diagnosed all the same)."""
    if got_x is None and got_y is None:
        return None
    if got_x is None:
        y_slot.error("The dot's second vector needs its first one, x.", icon=":material/block:")
        return None
    if got_a.values.size != 1:
        x_slot.error(f"Inputs can be pasted for one result (one sum or dot product); these results hold "
                     f"{got_a.values.size:,} numbers. Upload the inputs as files for more.", icon=":material/block:")
        return None
    x = got_x.values
    try:
        if got_y is None:
            return prepare_inputs(x, (1,))
        return prepare_inputs((x.reshape(1, -1), got_y.values.reshape(-1, 1)), (1, 1))
    except (ValueError, TypeError) as err:
        (y_slot if got_y is not None else x_slot).error(inert(err), icon=":material/block:")
        return None


def paste_section(s: DiagnoseSettings, k_slot) -> Diagnosis | None:
    p1, p2 = st.columns(2)
    cap = f"at most {MAX_PASTED_NUMBERS:,} numbers; commas, spaces or new lines; a printed tensor([...]) works"
    text_a = p1.text_area(f"Result A ({cap})", key="dg_paste_actual", height=140,
                          placeholder="tensor([0.1234567, -2.5000001, 3.0])")
    text_e = p2.text_area(f"Result B ({cap})", key="dg_paste_expected", height=140,
                          placeholder="tensor([0.1234566, -2.5, 3.0000002])")
    ref_box = st.expander("Optional: a reference, e.g. the same computation in float64", icon=":material/balance:")
    text_r = ref_box.text_area("Reference (read in float64)", key="dg_paste_reference", height=100,
                               help=REFERENCE_HELP, placeholder="0.12345665, -2.50000004, 3.00000011")
    in_box = st.expander("Optional: the inputs of one sum or dot product", icon=":material/science:")
    in_box.caption("When each result is one sum or one dot product (a single number), paste what it added: the "
                   "values of the sum, or the dot's two vectors. Their exact result then judges both results.")
    i1, i2 = in_box.columns(2)
    text_x = i1.text_area("x: the values summed, or the dot's first vector", key="dg_paste_x", height=100)
    text_y = i2.text_area("y: the dot's second vector (empty for a sum)", key="dg_paste_y", height=100)
    got_a = view.pasted(p1, text_a, s.text_format, "result A")
    got_e = view.pasted(p2, text_e, s.text_format, "result B")
    got_r = view.pasted(ref_box, text_r, "float64", "reference")
    got_x = view.pasted(i1, text_x, s.text_format, "x")
    got_y = view.pasted(i2, text_y, s.text_format, "y")
    if got_a is None or got_e is None:
        if not text_a.strip() and not text_e.strip():
            st.info("Paste the two results, in the same order.", icon=":material/content_paste:")
        return None
    problem = pair_problem(got_a, got_e, pasted=True)
    if problem:
        p2.error(problem, icon=":material/block:")
        return None
    reference = _checked_reference(ref_box, got_r, got_a, pasted=True)
    inputs = _pasted_inputs(i1, i2, got_x, got_y, got_a)
    problem = reduction_length_problem(s.k, inputs)
    if problem:  # the inputs are left out; the two results are diagnosed all the same
        k_slot.error(problem, icon=":material/block:")
        inputs = None
    a, e = got_a.values, got_e.values
    if inputs is not None and inputs.kind == "matmul":  # one dot product: a (1, K) @ (K, 1) product
        a, e = a.reshape(1, 1), e.reshape(1, 1)
        reference = reference.reshape(1, 1) if reference is not None else None
    key = view.digest(text_a, text_e, text_r if reference is not None else "",
                      text_x + "\0" + text_y if inputs is not None else "", s.text_format, s.k, s.fmt,
                      s.reduced_precision)
    try:
        return _cached(key, lambda: diagnose(a, e, reduction_length=s.k, dtype=s.fmt,
                                             reduced_precision=s.reduced_precision, reference=reference,
                                             inputs=inputs))
    except (ValueError, TypeError) as err:
        st.error(inert(err), icon=":material/block:")
        return None


def logs_section(s: DiagnoseSettings) -> LogDiagnosis | None:
    l1, l2 = st.columns([2, 1])
    log_source = l1.radio("Logs", list(LOG_SOURCES), format_func=LOG_SOURCES.get, key="dg_log_source",
                          horizontal=True)
    l2.selectbox("The format the losses were computed in", FORMAT_CHOICES, format_func=FORMAT_LABELS.get,
                 key="dg_format", help="Sets what counts as a rounding-sized first difference (1024 ULPs).")
    fmt = s.text_format
    if log_source == "example":
        ex_key = st.selectbox("Bundled pair", list(LOG_EXAMPLES), format_func=LOG_EXAMPLES.get, key="dg_log_example")
        with st.spinner("Training both runs…"):
            logs = LOG_DIAGNOSES.call(diagnosed_log_example, ex_key, fmt)
            how, result = logs.how, logs.diagnosis
        st.caption(f"Computed live: the Training divergence page's tanh network ({log_network()}: its layers, "
                   f"initial weights and noisy spirals) trained on {LOG_POINTS} points for {LOG_STEPS} full-batch "
                   f"steps of gradient descent (learning rate {LOG_LR:g}) in float32 (torch), run A as is; run B: "
                   f"{how}.")
        if ex_key == "reordered":
            with st.spinner("Training the pair at another learning rate…"):
                calm = CALM_LOGS.call(at_calm_lr, fmt)
            st.caption(f"Whether training amplifies a rounding difference depends on the learning rate, the "
                       f"optimizer and the model: at learning rate {CALM_LR:g} (the Training divergence page's "
                       f"default) the same pair {calm}. Computed live.")
        return result
    c1, c2 = st.columns(2)
    if log_source == "upload":
        st.caption(f"CSV as TensorBoard exports it (Wall time, Step, Value), or step,value rows, or one value per "
                   f"line; at most {MB} MB each.")
        logs = [view.upload(where, label, key, LOG_TYPES, lambda n, d, f: parse_log(n, d), fmt, f"At most {MB} MB.")
                for where, label, key in ((c1, "run A", "dg_log_a"), (c2, "run B", "dg_log_b"))]
    else:
        logs = [view.pasted_log(c1, "run A: step,value lines (or one value per line)", "dg_log_paste_a"),
                view.pasted_log(c2, "run B", "dg_log_paste_b")]
    (log_a, raw_a), (log_b, raw_b) = logs
    if log_a is None or log_b is None:
        st.info("Give both logs.", icon=":material/upload:")
        return None
    try:
        return _cached(view.digest(raw_a, raw_b, fmt), lambda: diagnose_logs(log_a, log_b, fmt))
    except LoadError as err:
        c2.error(inert(err), icon=":material/block:")
        return None


def example_result(s: DiagnoseSettings) -> Diagnosis:
    with st.spinner("Computing the example on this server…"):
        ex = DIAGNOSE_EXAMPLES.call(diagnosed_example, st.session_state["dg_example"], s.reduced_precision)
    st.code(ex.code, language="python")
    st.caption(f"Computed live on this server. {ex.live_note}")
    return ex.diagnosis


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("dg", URL_FIELDS, DEFAULTS)
    st.title("Diagnose a mismatch")
    punch = st.container(key="punchline")  # the verdict and its numbers, filled once the diagnosis is made
    st.markdown(
        "`torch.allclose` failed between a CPU and a GPU run, two GPUs, or two batch sizes. Is the difference the "
        "rounding noise of another summation order, the effect of reduced precision (TF32, bfloat16, float16), or "
        "too large for any rounding, so probably a bug? And what tolerance should the test use? Neither result is "
        "the reference: give a reference or the inputs, and both are judged against it."
    )
    settings, k_slot = controls()
    diagnosis, log_result = None, None
    if settings.source == "example":
        st.selectbox("Bundled example", list(EXAMPLES), format_func=EXAMPLES.get, key="dg_example")
    elif settings.source == "upload":
        diagnosis = upload_section(settings, k_slot)
    elif settings.source == "paste":
        diagnosis = paste_section(settings, k_slot)
    else:
        log_result = logs_section(settings)
    share_box(sync(URL_FIELDS), url_notes)

    if settings.source == "example":
        diagnosis = example_result(settings)
    if diagnosis is not None:
        with punch:
            view.headline(diagnosis)
        view.show_diagnosis(diagnosis, with_headline=False)
    elif log_result is None:
        punch.caption("The verdict appears here once both results are given (or choose a bundled example).")
    if log_result is not None:
        view.show_log_diagnosis(log_result, punch)
    next_page_link("diagnose")


main()
