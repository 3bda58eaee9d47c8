"""Page: Non-associativity playground, (a + b) + c versus a + (b + c)."""

from __future__ import annotations

import streamlit as st

from core.arith.exact import shortest_repr
from core.arith.formats import FORMATS
from core.arith.parse import ParsedNumber, ParseError, parse_number
from core.crowd.bytecache import COUNTEREXAMPLES
from core.crowd.querystate import Field, FieldKind
from core.machines.devices import cpu_device
from core.studies.assoc import (
    DISTRIBUTIONS,
    MAX_TRIPLES,
    SearchSettings,
    TripleResult,
    evaluate_triple,
    search_counterexamples,
)
from core.studies.sumlab import relative_error
from core.studies.your_gpu import ReportError, Unavailable, judge_triple, triple_job
from ui import glossary
from ui import non_associativity_view as view
from ui import your_gpu as gpu_view
from ui.crowd import folded
from ui.navigation import ensure_app_navigation, next_page_link
from ui.render import bits_html, bits_legend, inert, mono, ulps_text
from ui.talk import presenter, talk_folded
from ui.urlstate import restore, share_box, sync

# label -> (format, a, b, c, what it shows)
PRESETS: dict[str, tuple[str, str, str, str, str]] = {
    "0.1 + 0.2 + 0.3 (float64)": (
        "float64", "0.1", "0.2", "0.3",
        "None of the three is stored exactly; the two groupings round differently.",
    ),
    "1e16 − 1e16 + 1 (float64)": (
        "float64", "1e16", "-1e16", "1",
        "Near 1e16 float64 numbers are 2 apart: cancel first and the 1 survives; "
        "add it to −1e16 first and it is rounded away.",
    ),
    "1e16 + 1 − 1e16 (float64)": (
        "float64", "1e16", "1", "-1e16",
        "Here both groupings lose the 1 (1e16 + 1 is a tie and rounds to even): "
        "they agree with each other, and both are wrong by the whole answer.",
    ),
    "1e8 − 1e8 + 1 (float32)": (
        "float32", "1e8", "-1e8", "1",
        "The same swamping in float32, where numbers near 1e8 are 8 apart.",
    ),
    "2048 + 1 + 1 (float16)": (
        "float16", "2048", "1", "1",
        "float16 has 11 bits of precision: 2049 is not representable, 2050 is.",
    ),
    "256 + 1 + 1 (bfloat16)": (
        "bfloat16", "256", "1", "1",
        "bfloat16 keeps only 8 bits of precision: above 256 the spacing is 2.",
    ),
    "60000 + 10000 − 10000 (float16)": (
        "float16", "60000", "10000", "-10000",
        "The exact sum fits in float16, but 60000 + 10000 overflows to infinity.",
    ),
}
CUSTOM = "Custom"
DEFAULT_PRESET = next(iter(PRESETS))
FORMAT_NAMES = list(FORMATS)
KEYS = ("na_a", "na_b", "na_c")


def _init_state() -> None:
    if "na_fmt" not in st.session_state:
        _load_preset(DEFAULT_PRESET)
        st.session_state["na_preset"] = DEFAULT_PRESET


def _load_preset(label: str) -> None:
    fmt, a, b, c, _ = PRESETS[label]
    st.session_state["na_fmt"] = fmt
    for key, value in zip(KEYS, (a, b, c), strict=True):
        st.session_state[key] = value


def _on_preset() -> None:
    label = st.session_state["na_preset"]
    if label in PRESETS:
        _load_preset(label)


def _mark_custom() -> None:
    st.session_state["na_preset"] = CUSTOM


def _load_example(fmt_name: str, example: tuple[str, str, str]) -> None:
    st.session_state["na_fmt"] = fmt_name
    for key, value in zip(KEYS, example, strict=True):
        st.session_state[key] = value
    st.session_state["na_preset"] = CUSTOM


URL_FIELDS = [
    Field(key="na_preset", param="preset", kind=FieldKind.CHOICE, options=(*PRESETS, CUSTOM)),
    Field(key="na_fmt", param="format", kind=FieldKind.CHOICE, options=tuple(FORMAT_NAMES)),
    Field(key="na_a", param="a", kind=FieldKind.TEXT),
    Field(key="na_b", param="b", kind=FieldKind.TEXT),
    Field(key="na_c", param="c", kind=FieldKind.TEXT),
]


def controls() -> tuple[ParsedNumber, ParsedNumber, ParsedNumber] | None:
    """The preset, the format and three numbers; the last three that parsed (None before any did)."""
    c_preset, c_fmt = st.columns([3, 2])
    c_preset.selectbox(
        "Preset", [*PRESETS, CUSTOM], key="na_preset", on_change=_on_preset,
        help="Loads a format and three numbers. Editing any field switches to Custom.",
    )
    c_fmt.selectbox("Format (dtype)", FORMAT_NAMES, key="na_fmt", on_change=_mark_custom)
    if st.session_state["na_preset"] in PRESETS:
        st.caption(PRESETS[st.session_state["na_preset"]][4])

    fmt = FORMATS[st.session_state["na_fmt"]]
    parsed, errors = [], False
    for col, key, name in zip(st.columns(3), KEYS, "abc", strict=True):
        col.text_input(name, key=key, on_change=_mark_custom, max_chars=200,
                       help="Decimal (0.1), scientific (1e-8), fraction (1/3) or hex float (0x1.8p-3).")
        try:
            number = parse_number(st.session_state[key], fmt)
        except ParseError as err:
            col.error(inert(err), icon=":material/error:")  # quotes the typed text
            errors = True
            continue
        parsed.append(number)
        if number.underflowed:
            col.warning(f"Underflows: the nearest {fmt.name} value is 0.", icon=":material/info:")

    if not errors:
        st.session_state["na_last_good"] = tuple(parsed)
    elif "na_last_good" in st.session_state:
        good = st.session_state["na_last_good"]
        st.warning(
            "Fix the highlighted input to update. Still showing the last valid numbers: "
            f"{inert(', '.join(n.text for n in good), line_start=False)} in {good[0].fmt.name}.",
            icon=":material/history:",
        )
    return st.session_state.get("na_last_good")


def punchline(punch, result: TripleResult) -> None:
    fmt = result.fmt
    with punch:
        p_left, p_right, p_gap = st.columns([3, 2, 2])  # room for 0.6000000000000001 on one line
        for col, g in ((p_left, result.left), (p_right, result.right)):
            col.metric(f"{g.name} in {fmt.name}", shortest_repr(g.result, fmt),
                       help=f"Error against the exact sum: {ulps_text(g.error_ulps)}.")
        if not result.differ:
            p_gap.metric("Apart", "same bits")
        elif result.ulps_apart is None:
            p_gap.metric("Apart", "one is not finite")
        else:
            p_gap.metric("Apart", view.apart_text(result), help=glossary.help_text("ulp"))
        st.caption("Same three numbers, two groupings: every addition rounds, and the roundings differ."
                   if result.differ else "Same three numbers, two groupings, the same bits here.")


def what_is_stored(result: TripleResult) -> None:
    st.markdown(bits_legend(result.fmt), unsafe_allow_html=True)
    st.markdown(view.stored_html(result), unsafe_allow_html=True)


def two_groupings(result: TripleResult) -> None:
    st.subheader("Two groupings, two roundings each")
    for col, g in zip(st.columns(2), (result.left, result.right), strict=True):
        with col.container(border=True):
            st.markdown(f"#### {g.name}")
            for step in (g.inner, g.outer):
                st.markdown(view.step_html(result, step), unsafe_allow_html=True)
            st.markdown(f"Result {bits_html(g.bits, result.fmt)}", unsafe_allow_html=True)
            st.metric("Error against the exact sum", view.error_text(g.error_ulps, g.result, result.exact_sum),
                      help=f"{ulps_text(g.error_ulps, relative_error(g.result, result.exact_sum))} of the exact "
                           "sum's format spacing. " + glossary.help_text("ulp"))
    if presenter():  # the room reads the verdict in the metrics above it: the page stays in three screens
        return
    # an expected result, not a failure: a neutral box, never an error's red
    st.container(key="na_verdict").info(view.verdict_text(result), icon=":material/call_split:" if result.differ
                                        else ":material/check_circle:")


def exact_answer(result: TripleResult) -> None:
    st.markdown(view.exact_html(result), unsafe_allow_html=True)
    winners = result.correct_groupings
    st.markdown(
        ("Correctly rounded: " + " and ".join(f"`{w}`" for w in winners))
        if winners
        else "Neither grouping is correctly rounded here."
    )
    st.caption(view.ulp_caption(result))
    mismatches = result.model_mismatches
    if mismatches:
        st.warning(
            "torch's result differs from exact round-to-nearest-even for: " + ", ".join(mismatches)
            + ". This device does not round these additions as IEEE 754 specifies."
        )


GPU_ROUNDING = ("https://docs.nvidia.com/cuda/floating-point/index.html",
                "NVIDIA, Floating Point and IEEE 754 Compliance for NVIDIA GPUs")
# torch.backends.cudnn.allow_tf32 is True by default (float32 matrix products: False since 1.12)
TF32_DEFAULT = "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"


FP8_SATURATES = ("https://github.com/pytorch/pytorch/pull/178817",
                 "PyTorch pull request 178817: E4M3 casts saturate on finite overflow")
FP8_NAN = ("https://github.com/jax-ml/ml_dtypes/issues/400", "ml_dtypes issue 400: float8_e4m3fn overflow gives NaN")


def same_on_a_gpu(result: TripleResult) -> None:
    """Is float32 different on a GPU? The format and each addition's rounding are not; the grouping is."""
    live = ", ".join(d.device.name for d in result.devices)
    if not result.fmt.arithmetic:
        st.markdown(
            f"**How does {result.fmt.name} add?** torch has no {result.fmt.name} addition (it stores the format "
            "and casts to it). Each sum here is taken exactly, in float64, and cast once to "
            f"{result.fmt.name} by torch's rule"
            + (f": past the largest value it saturates to ±{float(result.fmt.max_finite):g} "
               f"([PyTorch]({FP8_SATURATES[0]} \"{FP8_SATURATES[1]}\")), where ml_dtypes gives NaN "
               f"([ml_dtypes]({FP8_NAN[0]} \"{FP8_NAN[1]}\"))" if result.fmt.overflow == "saturate" else
               ": past the largest value it overflows to infinity")
            + f". The grouping decides the bits, as in every format. (Live here on: {live}.)")
        return
    st.markdown(
        f"**Is float32{'' if result.fmt.name == 'float32' else f' (or {result.fmt.name})'} different on a GPU?** No: "
        "the same IEEE 754 format, and one addition is correctly "
        "rounded on CPUs and NVIDIA GPUs alike, subnormals kept (no flush-to-zero) "
        f"([NVIDIA]({GPU_ROUNDING[0]} \"{GPU_ROUNDING[1]}\")), so the same grouping gives the same bits. "
        f"Devices differ in the groupings they choose for long sums: the next page. One exception by default: "
        f"PyTorch lets float32 convolutions on Ampere and later GPUs round their inputs to TF32 (10 "
        f"mantissa bits, not 23; [PyTorch]({TF32_DEFAULT})). (Live here on: {live}.)")


def on_each_device(result: TripleResult) -> None:
    st.dataframe(view.devices_table(result), hide_index=True, width="stretch")
    if len(result.devices) == 1:
        st.caption("No GPU is visible to this server, so only the CPU ran live.")
    on_your_gpu(result)


GPU_TRIPLE = "_na_gpu_judged"  # (job, what core made of the browser's report)


def on_your_gpu(result: TripleResult) -> None:
    """The same two groupings on the visitor's own GPU, through WebGPU (float32: WGSL's format)."""
    if result.fmt.name != "float32":
        st.caption("Your own GPU runs these additions through your browser in float32 (WebGPU's format): choose "
                   "float32 to see them there.")
        return
    job = triple_job(result.stored_bits)
    held = st.session_state.get(GPU_TRIPLE)
    report = gpu_view.run_in_browser(job, done=held is not None and held[0] == job["job"], key="na_gpu_runner")
    if isinstance(report, dict) and report.get("job") == job["job"] and (held is None or held[0] != job["job"]):
        try:
            outcome = judge_triple(report, result.stored_bits, (result.left.bits, result.right.bits))
        except ReportError as err:
            outcome = err
        held = (job["job"], outcome)
        st.session_state[GPU_TRIPLE] = held
    if held is None or held[0] != job["job"]:
        return
    outcome = held[1]
    if isinstance(outcome, ReportError):
        gpu_view.refused(str(outcome))
    elif isinstance(outcome, Unavailable):
        gpu_view.unavailable(outcome)
    else:
        gpu_view.triple_line(outcome, result.fmt)


def search(fmt_name: str, result: TripleResult) -> None:
    st.markdown(
        f"Draw random {fmt_name} triples, add each both ways, and count how often the bits differ."
    )
    with st.form("na_search_form"):
        s1, s2, s3 = st.columns(3)
        dist = s1.selectbox("Distribution", list(DISTRIBUTIONS), format_func=DISTRIBUTIONS.get, key="na_dist")
        n_triples = s2.number_input("Triples", min_value=1, max_value=MAX_TRIPLES, value=100_000, step=10_000,
                                    key="na_n", help=f"At most {MAX_TRIPLES:,}.")
        seed = s3.number_input("Seed", min_value=0, max_value=2**31 - 1, value=0, step=1, key="na_seed")
        submitted = st.form_submit_button("Search random triples", type="primary")
    if submitted:
        search = SearchSettings(fmt_name=fmt_name, n_triples=int(n_triples), seed=int(seed), distribution=dist)
        st.session_state["na_search"] = COUNTEREXAMPLES.call(search_counterexamples, search)

    found = st.session_state.get("na_search")
    if found is None:
        return
    s = found.settings
    lo, hi = found.ci95
    st.markdown(
        f"**{found.fraction:.2%}** of {s.n_triples:,} {s.fmt_name} triples "
        f"({DISTRIBUTIONS[s.distribution]}, seed {s.seed}) give different bits "
        f"({found.n_differ:,} triples; 95% interval {lo:.2%} to {hi:.2%})."
    )
    st.caption(f"Computed {found.device}, vectorized over all triples with a local torch.Generator.")
    if found.example:
        st.markdown("First triple that differs: " + ", ".join(mono(v) for v in found.example),
                    unsafe_allow_html=True)
        st.button("Load this triple into the playground", on_click=_load_example,
                  args=(s.fmt_name, found.example), key="na_load_example")
        if (result.fmt.name, tuple(n.text for n in result.numbers)) == (s.fmt_name, tuple(found.example)):
            # the playground's results are at the top of the page: say here what loading did
            st.success(f"Loaded. At the top of the page now: {view.verdict_text(result)}",
                       icon=":material/arrow_upward:")
    else:
        st.info("No triple differed in this sample. Try more triples or another distribution.")


def main() -> None:
    ensure_app_navigation()
    _init_state()
    url_notes = restore("na", URL_FIELDS, {})
    if url_notes == [] and st.query_params.get("preset") in PRESETS and "a" not in st.query_params:
        _load_preset(st.query_params["preset"])
    st.title("Non-associativity: (a + b) + c ≠ a + (b + c)")
    punch = st.container(key="punchline")  # the two groupings' results, filled below: in the first screen
    with talk_folded("Settings: preset, format and the three numbers"):  # folded in presenter mode: three screens
        st.markdown("Every addition rounds its exact result to the nearest number the format holds; group three "
                    "numbers differently and other intermediate sums get rounded. Pick a format and three numbers.")
        numbers = controls()
        share_box(sync(URL_FIELDS), url_notes)  # beside the settings it links to
    if numbers is None:
        st.stop()
    result = evaluate_triple(numbers)
    punchline(punch, result)
    two_groupings(result)
    same_on_a_gpu(result)
    # what is folded is made only once opened: a room opening the link pays for its first screen
    with folded("What the format actually stores: each number's bits", "na_open_bits", ":material/memory:") as open_:
        if open_:
            what_is_stored(result)
    with folded("The exact answer, and which grouping is correctly rounded", "na_open_exact",
                ":material/functions:") as open_:
        if open_:
            exact_answer(result)
    with folded("The same additions on each device here", "na_open_devices", ":material/devices:") as open_:
        if open_:
            on_each_device(result)
    with folded("Find a counterexample: random triples, both groupings", "na_open_search", ":material/search:",
                expanded=st.session_state.get("na_search") is not None) as open_:
        if open_:
            search(result.fmt.name, result)
    glossary.define("ulp")  # the story's first use of the term, defined where a reader looks it up
    cpu = cpu_device()
    st.caption(f"Sums computed live by torch {cpu.label.split('torch ')[-1]} on {cpu.name}; exact values by "
               "rational arithmetic, each rounding checked against an exact round-to-nearest-even model.")
    next_page_link("non_associativity")


main()
