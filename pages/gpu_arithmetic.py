"""Page: GPU arithmetic — dot products as FMA, TF32, half-precision inputs, tiles, split-K and
atomics compute them, each exact on this CPU and compared with the exact result."""

from __future__ import annotations

import math

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.arith.formats import ARITHMETIC, FORMATS
from core.arith.vectors import VectorError
from core.crowd.bytecache import ATOMICS, DOT_CURVES, DOT_LABS, DOT_PAIRS
from core.crowd.querystate import Field, FieldKind
from core.kernels import dot_fp8
from core.kernels.dot import (
    DOT_MODELS,
    MAX_K,
    TENSOR_CORE_NOTE,
    TF32_ROUNDINGS,
    TF32_SOURCES,
    ModelNotApplicable,
    check_formats,
)
from core.kernels.dot_trace import MAX_TRACE_K, trace
from core.studies.atomics import ATOMIC_FORMATS, AtomicsSpec, simulate_atomics
from core.studies.gpu_arithmetic import (
    DOT_GENERATORS,
    DotLab,
    DotLabSettings,
    DotPair,
    DotSpec,
    applicable_models,
    batch_dependence,
    bound_violations,
    gpu_device,
    make_pair,
)
from ui import glossary
from ui import gpu_arithmetic_view as view
from ui.elementwise_view import draw_other_causes
from ui.export import download_buttons
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import inert
from ui.talk import more_settings
from ui.urlstate import restore, share_box, sync

CONDITIONS = [10.0**k for k in range(2, 31, 2)]
# cited addresses, shown as plain text (a page that takes link parameters shows no live link)
PTX_MMA = "https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#warp-level-matrix-instructions-mma"
TORCH_REDUCED_PRECISION = "https://pytorch.org/docs/stable/notes/cuda.html#reduced-precision-reduction-in-fp16-gemms"
DEFAULT_MODELS = list(DotLabSettings().models)
TILES = [1, 2, 4, 8, 16, 32, 64, 128, 256]
TF32_LABELS = {"rna": "nearest, ties away (CUTLASS default)", "rne": "nearest, ties even", "rz": "truncation"}
URL_FIELDS = [
    Field(key="ga_kind", param="vectors", kind=FieldKind.CHOICE, options=tuple(DOT_GENERATORS)),
    Field(key="ga_k", param="K", kind=FieldKind.INT, low=1, high=MAX_K),
    Field(key="ga_seed", param="seed", kind=FieldKind.INT, low=0, high=2**32 - 1),
    Field(key="ga_cond", param="condition", kind=FieldKind.CHOICE, options=tuple(CONDITIONS)),
    Field(key="ga_storage", param="inputs", kind=FieldKind.CHOICE, options=tuple(FORMATS)),
    Field(key="ga_acc", param="accumulate", kind=FieldKind.CHOICE, options=tuple(ARITHMETIC)),
    Field(key="ga_models", param="models", kind=FieldKind.MULTI, options=tuple(DOT_MODELS)),
    Field(key="ga_tile", param="tile", kind=FieldKind.CHOICE, options=tuple(TILES)),
    Field(key="ga_slices", param="slices", kind=FieldKind.INT, low=1, high=64),
    Field(key="ga_tf32", param="tf32", kind=FieldKind.CHOICE, options=tuple(TF32_ROUNDINGS)),
    Field(key="ga_buckets", param="buckets", kind=FieldKind.INT, low=1, high=64),
    Field(key="ga_values", param="values", kind=FieldKind.INT, low=1, high=1_000_000),
    Field(key="ga_runs", param="runs", kind=FieldKind.INT, low=1, high=10_000),
    Field(key="ga_aformat", param="atomic_format", kind=FieldKind.CHOICE, options=ATOMIC_FORMATS),
]
DEFAULTS = {"ga_kind": "normal", "ga_k": 4096, "ga_seed": 0, "ga_cond": 1e8, "ga_storage": "float32",
            "ga_acc": "float32", "ga_models": list(DEFAULT_MODELS), "ga_tile": 8, "ga_slices": 4, "ga_tf32": "rna",
            "ga_buckets": 4, "ga_values": 4096, "ga_runs": 500, "ga_aformat": "float32"}


def controls() -> tuple[DotLabSettings, str | None, DeltaGenerator]:
    """The vectors, the formats and (under more settings) the models; with any format problem and
    the place under K for a problem with the vectors."""
    c1, c2, c3 = st.columns([3, 1, 1])
    kind = c1.selectbox("Vectors", list(DOT_GENERATORS), format_func=DOT_GENERATORS.get, key="ga_kind")
    storage = c2.selectbox("Input format", list(FORMATS), key="ga_storage",
                           help="The format x and y are stored in (the format a real kernel is given).")
    acc = c3.selectbox("Accumulate in", list(ARITHMETIC), key="ga_acc",
                       help="The format of the running sum for the multiply-add, tile and split-K models "
                            "(tensor-core models always accumulate in float32).")
    format_error = check_formats(storage, acc)
    if format_error:
        c3.error(inert(format_error))

    g1, g2, g3 = st.columns(3)
    k = g1.number_input(f"K, terms (1 to {MAX_K:,})", min_value=1, max_value=MAX_K, step=1024, key="ga_k")
    k_slot = g1.empty()
    seed = g2.number_input("Seed", min_value=0, max_value=2**32 - 1, key="ga_seed")
    condition = 1e8
    if kind == "ill_conditioned_dot":
        condition = g3.select_slider("Target condition number", CONDITIONS, key="ga_cond",
                                     format_func=lambda c: f"1e{round(math.log10(c))}")

    advanced = more_settings()
    models = advanced.multiselect("Arithmetic models", list(DOT_MODELS), format_func=lambda m: DOT_MODELS[m].name,
                                  key="ga_models")
    a1, a2, a3 = advanced.columns(3)
    tile = a1.select_slider("Tile width T", TILES, key="ga_tile",
                            help="Terms added per step by the tile model (an idealised matrix instruction); also "
                                 "used inside each split-K slice.")
    slices = a2.number_input("Split-K slices s (1 to 64)", min_value=1, max_value=64, key="ga_slices",
                             help=glossary.help_text("split_k"))
    tf32 = a3.selectbox("TF32 conversion", list(TF32_ROUNDINGS), key="ga_tf32", format_func=TF32_LABELS.get,
                        help=glossary.help_text("rna"))
    if slices > k:
        a2.warning(f"s = {int(slices)} is more than K = {int(k):,}: {int(slices) - int(k)} slices get no terms "
                   "and add +0.")
    spec = DotSpec(kind=kind, k=int(k), seed=int(seed), storage=storage, condition=float(condition))
    return (
        DotLabSettings(
            spec=spec, accumulate=acc, models=tuple(models), tile=int(tile), slices=int(slices), tf32_mode=tf32
        ),
        format_error,
        k_slot,
    )


def summary(pair: DotPair, lab: DotLab) -> None:
    st.subheader("The vectors and their exact dot product")
    for note in pair.notes:
        st.warning(inert(note), icon=":material/info:")
    st.caption(f"Vectors: {inert(pair.source, line_start=False)}.")
    m1, m2, m3 = st.columns(3)
    m1.metric("K", f"{pair.k:,}")
    glossary.kappa_metric(m2, lab.kappa, "Σ|xᵢyᵢ| / |x·y|")
    m3.metric("Accumulation format", lab.accumulate)
    if isinstance(lab.exact, float):
        st.error(f"The data contain non-finite values: the IEEE dot product is {view.exact_text(lab)}, so errors "
                 "and bounds are undefined.")
    else:
        st.markdown(
            f"Exact dot product of the stored values (exact rational arithmetic): "
            f"`{view.exact_text(lab, 120)}`  \n"
            f"Correctly rounded to {lab.accumulate}: `{view.correctly_rounded_text(lab)}`"
        )


def results(settings: DotLabSettings, pair: DotPair, lab: DotLab) -> None:
    st.subheader("Results")
    table = view.results_table(lab)
    st.dataframe(view.compact(table), hide_index=True, width="stretch")
    with st.expander("Every column: the format, the bits and where each row came from"):
        st.dataframe(table, hide_index=True, width="stretch")
    download_buttons(table, {"vectors": pair.source, "inputs": settings.spec.storage, "accumulate": settings.accumulate,
                             "models": ",".join(settings.models), "tile": settings.tile, "slices": settings.slices,
                             "tf32": settings.tf32_mode}, "gpu-arithmetic", "ga")
    violations = bound_violations(lab)
    if violations:
        st.error("Outside the a-priori bound (this would be a bug): " + ", ".join(violations))
    bars = view.error_bars(lab)
    if not bars.empty:
        st.altair_chart(view.error_bar_chart(bars), width="stretch")
    st.caption(
        "origin — model: the named arithmetic computed exactly on this CPU (integer arithmetic, each rounding to "
        "nearest-even decided exactly); live: torch really ran here; exact: rational arithmetic. Errors are in "
        f"{glossary.link('ulp', 'ULPs')} of the exact dot product in the row's format. Bounds (Higham, ch. 3): "
        f"{glossary.link('gamma', 'γ')}(d)·Σ|xᵢyᵢ| + m·η·(1 + γ(d)), with "
        "d the most roundings any one product passes through (K for a chain, ⌈K/T⌉ for tiles, ⌈K/(sT)⌉ + s − 1 for "
        f"{glossary.link('split_k')}), m the number of roundings and {glossary.link('eta', 'η')} half the smallest "
        "subnormal (underflow); tensor-core models add "
        "the error of converting the inputs; torch's rows use the bound for any order with every operation "
        "possibly rounded twice, γ(2K)."
    )
    batch = batch_dependence(lab)
    if batch is not None and batch.same_bits:
        st.info(f"Batch dependence: here {batch.product} gave the same bits for x as the only row (M = 1) and as the "
                "first of 64 rows (M = 64). On other CPUs or sizes the kernel can change with M.")
    elif batch is not None:
        st.warning(f"Batch dependence, live on this CPU: the same row x times the same column y gave different bits "
                   f"as the only row (M = 1) and as the first of 64 rows (M = 64), {batch.ulps_apart:.4g} "
                   f"{glossary.link('ulp', 'ULPs')} "
                   "apart: the two shapes were not computed the same way (likely another kernel, with another order).",
                   icon=":material/warning:")
    if gpu_device() is None:
        st.info("No GPU on this server: the GPU rows are the models above. On a machine with CUDA this page also "
                "runs torch.dot and torch.mm there, with TF32 off and on (live). Recorded GPU dot products are not "
                "part of the recordings yet.", icon=":material/memory:")
    with st.expander("How NVIDIA converts float32 to TF32, and what the models leave out"):
        st.markdown(
            "The **TF32** model cuts each float32 input to 10 explicit mantissa bits. Three conversions exist:\n\n"
            + "\n".join(f"- **{key}**: {inert(text, line_start=False)}." for key, text in TF32_ROUNDINGS.items())
            + f"\n\nThe default here is **{glossary.link('rna')}** (ties away from zero). Sources: "
            f"{inert(TF32_SOURCES, line_start=False)}\n\n"
            + inert(TENSOR_CORE_NOTE)  # C++ template names hold < and >: shown as text, not taken for HTML
        )


def error_against_k(settings: DotLabSettings, pair: DotPair) -> None:
    st.subheader("Error against K")
    with st.spinner("Running every model on K = 1, 2, 4, …"):
        points = DOT_CURVES.get_or_compute(settings, lambda: settings.curves(pair))  # pair: of settings.spec
    curve = view.curve_frame(points)
    if not curve.empty:
        st.altair_chart(view.error_vs_k_chart(curve), width="stretch")
    st.caption("Each model on the first K terms of the same vectors, against the exact dot product of those terms "
               "(the chains give every prefix in one pass; tiles and split-K are run once per K). torch.dot is "
               "live. TF32 and float16 inputs both keep 11 significant bits, so with a rounding conversion to TF32 "
               "the two curves coincide for inputs in float16's normal range, except where a conversion meets a tie.")


def every_rounding(settings: DotLabSettings, pair: DotPair, lab: DotLab) -> None:
    st.subheader("Every rounding, for a small K")
    if pair.k > MAX_TRACE_K:
        st.info(f"The picture is drawn for K ≤ {MAX_TRACE_K}. Set K to 16, say, to see each product, tile and "
                "partial sum and what it rounds to.")
        return
    if isinstance(lab.exact, float):
        st.info("The data contain non-finite values: there is no exact picture to draw.")
        return
    applicable = applicable_models(lab)
    if not applicable:
        return
    pick = st.selectbox("Model", applicable, key="ga_trace_model", format_func=settings.model_name)
    ops = trace(DOT_MODELS[pick], pair.x, pair.y, settings.accumulate, settings.tile, settings.slices,
                settings.tf32_mode)
    nodes, edges, steps = view.trace_frames(ops, pair.k)
    st.altair_chart(view.trace_chart(nodes, edges), width="stretch")
    st.dataframe(steps, hide_index=True, width="stretch")
    st.caption("Model, exact rational arithmetic: each rounding adds the exact products below it and the "
               "earlier results it points to, and rounds once. Products x_i·y_i are exact (TF32, float16 and "
               "bfloat16 models: of the converted inputs).")


def fp8_note() -> None:
    st.caption(
        f"{FP8_NOTE} The two FP8 tensor-core rows are a model with these two parameters (rounding to nearest "
        f"assumed): {inert(dot_fp8.SOURCE, line_start=False)}. torch._scaled_mm is the FP8 matrix product torch "
        "itself runs, here on this CPU.")


FP8_NOTE = (f"FP8 products are exact, so the accumulation decides the error: the DeepSeek-V3 report measured H800 "
            f"FP8 matrix products keeping about {dot_fp8.LIMITED_BITS} bits while they accumulate, and promotes the "
            f"partial sum to a float32 register every {dot_fp8.PROMOTE_EVERY} products.")


def atomics(seed: int) -> None:
    st.subheader("Atomic adds: the order threads arrive in")
    st.markdown(
        "`index_add_`, `scatter_add_` and several backward passes add many values into a few places with **atomic "
        "adds**: each addition is rounded, in whatever order the threads reach the memory. The order can change "
        "from run to run, so one GPU can give different bits for the same inputs. Below, values fall into buckets; "
        "each simulated run adds every bucket's values in a random arrival order (model: uniformly random orders, one "
        "rounding per add)."
    )
    b1, b2, b3, b4 = st.columns(4)
    buckets = b1.number_input("Buckets (1 to 64)", min_value=1, max_value=64, key="ga_buckets")
    values = b2.number_input("Values (1 to 1,000,000)", min_value=1, max_value=1_000_000, step=1024,
                             key="ga_values")
    runs = b3.number_input("Simulated runs (1 to 10,000)", min_value=1, max_value=10_000, step=100, key="ga_runs")
    aformat = b4.selectbox("Format", ATOMIC_FORMATS, key="ga_aformat")
    try:
        spec = AtomicsSpec(buckets=int(buckets), values=int(values), runs=int(runs), seed=seed, storage=aformat)
        spec.validate()
        with st.spinner("Simulating the runs…"):
            result = ATOMICS.call(simulate_atomics, spec)
    except VectorError as err:
        b3.error(inert(err))
        return
    atoms = view.atomics_table(result)
    st.dataframe(view.atomics_compact(atoms), hide_index=True, width="stretch")
    with st.expander("Every column: the fixed order, index_add_ on this CPU and on a GPU, the exact sums"):
        st.dataframe(atoms, hide_index=True, width="stretch")
    choice = st.selectbox("Bucket to plot", list(range(len(result.buckets))), key="ga_bucket")
    hist, marks = view.atomics_frames(result.buckets[choice])
    st.altair_chart(view.atomics_chart(hist, marks), width="stretch")
    st.caption(
        "Simulated runs: model (random arrival orders, seeded). Fixed index order: model (one thread adding in "
        "turn). torch index_add_ on this CPU: live. Order-independent sum: the app's own exact sum rounded once "
        "(as on Mitigations), the same bits for every order. "
        + (f"GPU: index_add_ live on {inert(result.gpu, line_start=False)}, repeated {int(runs):,} times."
           if result.gpu else "No GPU here, so no live GPU runs; recorded ones are not part of the recordings yet.")
    )


def other_causes() -> None:
    st.subheader("Not every difference is a sum's order")
    st.markdown("A GPU and a CPU also differ where no sum is reordered: functions such as exp, log and tanh "
                "need not be correctly rounded (IEEE 754 only recommends it), and libraries round them differently. "
                "Measured here, against the "
                "correctly rounded results:")
    draw_other_causes()


def main() -> None:
    ensure_app_navigation()
    url_notes = restore("ga", URL_FIELDS, DEFAULTS)
    st.title("GPU arithmetic")
    punch = st.container(key="punchline")  # the key numbers at the page's settings: filled once the lab has run
    st.markdown("Every entry of a matrix product is a dot product x·y = x₁y₁ + … + x_Ky_K. GPUs compute it with "
                "other arithmetic than a CPU loop: fused multiply-adds (each a·b + c rounded once), tensor cores fed "
                "TF32 or 16-bit inputs, tiles, and **split-K** (the K terms cut into slices that are summed in "
                "parallel, then added). Each kind is computed below exactly on this CPU (a *model*), next to torch's "
                "real result here and the **exact** dot product.")
    with st.expander("What a GPU does differently, and the terms used here"):
        st.markdown(
            "Many CPU-vs-GPU differences come from **matrix products**. A **fused multiply-add** "
            "rounds a·b + c once instead of twice; tensor cores first cut float32 inputs to **TF32** (10 mantissa "
            "bits) or take **float16/bfloat16** inputs; the inner dimension K is cut into **tiles** and **split-K "
            "slices**; and **atomic adds** sum in whatever order threads arrive. Each model is the named arithmetic "
            "done exactly on this CPU (integer arithmetic, every rounding to nearest-even decided exactly).\n\n"
            "The tensor-core models here accumulate in float32, but a GPU need not: float16 tensor-core "
            "instructions can also accumulate in float16 (PTX `mma` with an `.f16` accumulator; PTX ISA, warp-level "
            f"matrix instructions, {inert(PTX_MMA, line_start=False)}), and PyTorch lets cuBLAS reduce float16 and "
            "bfloat16 matrix products, split-K sums included, in reduced precision unless "
            "`torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction` and "
            "`allow_bf16_reduced_precision_reduction` are set to False (PyTorch's CUDA notes, "
            f"{inert(TORCH_REDUCED_PRECISION, line_start=False)})."
        )
        for key in ("split_k", "rna", "eta"):
            glossary.define(key)
    settings, format_error, k_slot = controls()
    share_box(sync(URL_FIELDS), url_notes)

    pair = None
    try:
        pair = DOT_PAIRS.call(make_pair, settings.spec)
    except VectorError as err:
        k_slot.error(inert(err))
    if pair is None or format_error:
        st.stop()
    if not settings.models:
        st.warning("Choose at least one arithmetic model.")
        st.stop()
    with st.spinner("Computing every model exactly…"):
        try:
            lab = DOT_LABS.get_or_compute(settings, lambda: settings.run(pair))
        except ModelNotApplicable as err:
            st.error(inert(err))
            st.stop()

    with punch:
        view.punchline(lab)
    summary(pair, lab)
    if not FORMATS[pair.storage].arithmetic:
        fp8_note()
    results(settings, pair, lab)
    error_against_k(settings, pair)
    every_rounding(settings, pair, lab)
    atomics(settings.spec.seed)
    other_causes()
    next_page_link("gpu_arithmetic")


main()
