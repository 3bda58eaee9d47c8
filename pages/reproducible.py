"""Page: Make my runs reproducible — the settings for your own setup, what each guarantees, what it costs."""

from __future__ import annotations

import streamlit as st

from core.crowd.querystate import Field, FieldKind
from core.diagnose.tolerances import GUARANTEE_KIND, TYPICAL_KIND
from core.serving.kernels import BATCH_INVARIANT, DEFAULT
from core.studies.reproducible import (
    TOLERANCE_DTYPES,
    TOLERANCE_OPS,
    Generations,
    ReproPage,
    ReproSettings,
    gpu_generations,
    peak_costs,
    reproducible_page,
)
from core.studies.reproducible_rules import CITED, HARDWARE, PT_RANDOMNESS, SEED_ISSUE, TARGETS, WORKLOADS
from ui import reproducible_view as view
from ui.crowd import folded
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.talk import presenter
from ui.urlstate import restore, share_box, sync

URL_FIELDS = [Field(key="rp_run", param="run", kind=FieldKind.CHOICE, options=tuple(WORKLOADS)),
              Field(key="rp_on", param="on", kind=FieldKind.CHOICE, options=tuple(HARDWARE)),
              Field(key="rp_match", param="match", kind=FieldKind.CHOICE, options=tuple(TARGETS)),
              Field(key="rp_dtype", param="dtype", kind=FieldKind.CHOICE, options=TOLERANCE_DTYPES),
              Field(key="rp_k", param="k", kind=FieldKind.INT, low=1, high=10**9),
              Field(key="rp_scale", param="scale", kind=FieldKind.FLOAT, low=1e-30, high=1e30),
              Field(key="rp_op", param="op", kind=FieldKind.CHOICE, options=TOLERANCE_OPS)]
DEFAULTS = {"rp_run": "eager", "rp_on": "gpu", "rp_match": "run_to_run", "rp_dtype": "bfloat16", "rp_k": 4096,
            "rp_scale": 1.0, "rp_op": "sum"}
# short enough for the select box at 1280 px; the answer's sentence says each in full (TARGETS)
MATCH_LABELS = {"run_to_run": "Bits, run to run", "batch": "Bits, any batch size", "threads": "Bits, any thread or "
                "GPU count", "machines": "Bits, another machine", "gpu_models": "Bits, another GPU model",
                "cpu_gpu": "Bits, CPU and GPU", "close": "Close enough (tolerance)"}
OP_LABELS = {"sum": "A sum (torch.sum, np.sum, a GPU reduction)", "matmul": "A matrix product, or a loop"}
SNIPPET_HEIGHT = {False: 300, True: 240}  # px
LINE_PX = 24  # about one line of code, in either mode
DTYPE_LABELS = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "float64": "float64",
                "tf32": "TF32 (float32 matmul on tensor cores)"}


def controls() -> ReproSettings:
    c1, c2, c3 = st.columns(3)
    run = c1.selectbox("What you run", list(WORKLOADS), format_func=WORKLOADS.get, key="rp_run")
    on = c2.selectbox("On what", list(HARDWARE), format_func=lambda k: HARDWARE[k][0].upper() + HARDWARE[k][1:],
                      key="rp_on")
    match = c3.selectbox("What must match", list(TARGETS), format_func=MATCH_LABELS.get, key="rp_match")
    return ReproSettings(workload=run, hardware=on, target=match, dtype=st.session_state["rp_dtype"],
                         length=int(st.session_state["rp_k"]), scale=float(st.session_state["rp_scale"]),
                         op=st.session_state["rp_op"])


def answer_section(page: ReproPage, punch) -> None:
    punch.markdown(view.headline(page))
    # a long snippet scrolls in a box of fixed height, so the answer stays inside the first screen (the copy button
    # copies every line); a short one takes the height of its lines
    height, lines = SNIPPET_HEIGHT[presenter()], page.snippet.count("\n") + 1
    punch.code(page.snippet, language="python", wrap_lines=True, height=height if lines > height // LINE_PX else None)
    view.cannot(page)
    st.subheader("What each setting guarantees, what it does not, what it costs")
    view.settings_list(page)


def costs_section(page: ReproPage) -> None:
    cited = [(c.label, c.text, c.what, c.source) for c in (*CITED.values(), *peak_costs())]
    with st.expander("Every cost in one table, in × the default's time: measured here and cited",
                     icon=":material/speed:"):
        view.costs_table(page, cited)


def random_streams() -> None:
    with st.expander("Random streams are not rounding: the same seed, other numbers on a GPU"):
        st.markdown(
            "A seed fixes a generator's stream, not the numbers every device draws: torch's CPU generator is a "
            "Mersenne Twister and the CUDA one a Philox counter, so `torch.manual_seed(0)` then `torch.randn(3)` "
            f"gives other values on a CPU and on a GPU ({inert(SEED_ISSUE, line_start=False)}). PyTorch's "
            "reproducibility notes say results need not match between CPU and GPU executions even with identical "
            f"seeds ({inert(PT_RANDOMNESS, line_start=False)}). That "
            "difference is the stream, not rounding; rounding makes the rest differ even with equal inputs.\n\n"
            "What to do: draw random tensors on one device's generator and move them "
            "(`torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device)`), or always use the same "
            "device's generator; seed DataLoader workers and pass a generator (the snippet above does for training).")


def generations_section() -> None:
    # modelling 4·10^6 values on four launches takes about 50 MB for a moment: only for a visitor who opens it
    with folded("Across GPU generations: one torch.sum as four GPUs would compute it (a MODEL)", "rp_open_generations",
                ":material/memory:") as open_:
        if open_:
            generations_body(gpu_generations())


def generations_body(generations: Generations) -> None:
    st.markdown("The same `torch.sum` of standard normal float32 values (seed 0) as torch 2.13's CUDA reduction "
                "would compute it on four GPUs: the app's MODEL of that kernel (not run on these GPUs here; its "
                "match rate on a real GPU is unmeasured), given each GPU's SM count and threads per SM.")
    view.generations_table(generations)
    st.markdown(view.agreement(generations))
    st.caption("SM counts from NVIDIA's data sheets (A100 108; H100 SXM and H200 132; RTX 4090 128); threads per SM "
               "from the CUDA programming guide (2,048 for compute capability 8.0 and 9.0, 1,536 for 8.9). cuBLAS "
               "likewise promises equal bits only for the same architecture and SM count.")


def tolerance_section(page: ReproPage) -> None:
    st.subheader("A tolerance for your test, before you have a mismatch")
    c1, c2, c3 = st.columns(3)
    c1.selectbox("Result format", list(TOLERANCE_DTYPES), format_func=DTYPE_LABELS.get, key="rp_dtype")
    c2.number_input("K: terms per output", min_value=1, max_value=10**9, step=1, key="rp_k",
                    help="The length of each reduction: a sum's length, or a matrix product's inner dimension.")
    c3.number_input("RMS of the terms", min_value=1e-30, max_value=1e30, format="%g", key="rp_scale",
                    help="The root mean square of what is added up: the values, or for a matrix product the products.")
    st.radio("What adds the K terms", list(TOLERANCE_OPS), format_func=OP_LABELS.get, key="rp_op", horizontal=True)
    tol, s = page.tolerance, page.settings
    command = f"python -m scripts.tolerance --dtype {s.dtype} --length {s.length} --scale {s.scale:g} --op {s.op}"
    if tol is None:
        st.warning(page.no_tolerance)
    else:
        st.markdown(f"**{TYPICAL_KIND}**")
        view.tolerance_code(tol)
        st.caption(f"{tol.typical_words().removeprefix(TYPICAL_KIND + ': ')} In this app's tests, sums of normal "
                   "values in other library orders (NumPy, torch at 1 and 2 threads, the modelled GPU order) pass it "
                   "and an error 100 times the largest difference they showed fails it; sorted against unsorted "
                   "float32 sums of 10⁶ values exceed the float32 one, about 3×.")
        st.markdown(f"**{GUARANTEE_KIND}**")
        view.tolerance_code(tol, guarantee=True)
        st.caption(tol.guarantee_words().removeprefix(GUARANTEE_KIND + ": "))
    with st.expander("The same in CI"):
        st.code(f"{command}\n{command} --guarantee", language="bash")
        st.caption("Run in a checkout of this app: one line says which kind it prints, the last is rtol=R atol=A; "
                   "where no tolerance can mean anything it says so in one line and exits with status 2. An "
                   "implementation that accumulates float16 or bfloat16 in that format itself needs --accumulate "
                   "bfloat16 (or float16).")


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("rp", URL_FIELDS, DEFAULTS)
    st.title("Make my runs reproducible")
    s = controls()
    punch = st.container(key="punchline")  # the answer: the sentence and the snippet, on the first screen
    with punch, st.spinner("Measuring the costs on this server (the first time, seconds: it compiles the "
                           "order-independent sum)…"):
        page = reproducible_page(s, (DEFAULT.linear, BATCH_INVARIANT.linear))
    answer_section(page, punch)
    costs_section(page)
    random_streams()
    generations_section()
    tolerance_section(page)
    share_box(sync(URL_FIELDS), url_notes)
    next_page_link("reproducible")


main()
