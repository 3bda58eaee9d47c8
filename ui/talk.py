"""Talk mode: a presenter toggle (larger type, fewer controls) and curated scenarios."""

from __future__ import annotations

import streamlit as st

from core.kernels.orders import DEFAULT_ORDERS
from core.studies.sumlab import differing_tree_seed

KEY = "presenter"

# (title, page file, link parameters, what the audience sees), in the story's order, then the deep dives
SCENARIOS: list[tuple[str, str, dict, str]] = [
    ("0.1 + 0.2 + 0.3", "pages/non_associativity.py", {"preset": "0.1 + 0.2 + 0.3 (float64)"},
     "Two groupings of three decimals, one ULP apart, every rounding shown."),
    ("1 vs all threads", "pages/cpu_vs_gpu.py", {"vector": "normal", "n": "1000000", "format": "float32"},
     "A million float32 values summed by this CPU and in a GPU's order (a labelled model), then on 1 and all "
     "threads: see whether the bits change."),
    ("Your GPUs, the room's", "pages/cpu_vs_gpu.py",
     {"vector": "normal", "n": "1000000", "format": "float32", "room": "on"},
     "Everyone's own GPU sums the same million values in their browser; the speaker's screen counts the different "
     "answers, by vendor and architecture."),
    ("Watch two runs diverge", "pages/training_divergence.py", {"preset": "Hidden units reordered (SGD, lr 0.5)"},
     "Same network, reordered sums: press Play."),
    ("Same prompt, two answers", "pages/serving.py", {},
     "Identical requests to a tiny language model at temperature 0, batched with others: they fork."),
    ("Does float64 save the day?", "pages/mitigations.py", {},
     "The same sums and training pair in float64, with what it costs here."),
    ("Sum of a million float32", "pages/summation_lab.py", {"n": "1000000", "storage": "float32"},
     f"Deep dive: {len(DEFAULT_ORDERS)} summation orders of the same vector against the exact sum."),
    # the seed is chosen by computation (core.studies.sumlab.differing_tree_seed): the two trees give different sums
    ("GPU block tree", "pages/summation_lab.py",
     {"n": "32", "seed": str(differing_tree_seed(32, "pairwise")),
      "orders": "sequential,pairwise,torch_all,cuda_model,correct", "permutations": "0", "tree": "pairwise"},
     "Deep dive: 32 values through a GPU's block reduction, beside the CPU's pairwise tree."),
]

# Streamlit sizes most text in rem (scaled by the html font size below), but code, bit strings and
# metric values carry their own sizes, and a metric cuts a long value or label with "…": each is
# set here so the back of a room reads them (charts draw their text themselves: see ``styled``).
CSS = """
<style>
html { font-size: 20px; }
.stMainBlockContainer { padding-top: 4rem; max-width: 100%; }  /* below the 3.75rem header */
h1 { font-size: 2.2rem !important; }
[data-testid="stCaptionContainer"] { font-size: 0.95rem; }
code, pre, .fp-bits, [data-testid="stCode"] * { font-size: 1.0rem !important; }
[data-testid="stMetricValue"] { font-size: 1.7rem !important; }
[data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *, [data-testid="stMetricValue"],
[data-testid="stMetricLabel"] { white-space: normal !important; overflow: visible !important;
  text-overflow: clip !important; overflow-wrap: anywhere; height: auto !important; }
[data-testid="stMetricLabel"] p { font-size: 0.95rem !important; }
[data-testid="stDataFrame"] { font-size: 1.0rem; }
</style>
"""

# Chart text in presenter mode (px: Vega draws its own text, which the page's CSS cannot scale).
# mark_text: text drawn as data (a tree's leaf values, a rule's note) that sets no size of its own
PRESENTER_CHART_TEXT = {"axis_label": 18, "axis_title": 19, "legend_label": 18, "legend_title": 19, "title": 22,
                        "mark_text": 16}


def presenter() -> bool:
    return bool(st.session_state.get(KEY, False))


PARAM = "talk"  # the URL parameter that holds presenter mode while it is on
_SEEN = "_talk_url_seen"  # the value of PARAM this session last applied or wrote


def apply_from_link() -> None:
    """?talk=1 (or 0) switches presenter mode when the address brings a value this session has not
    seen: a link, or a reload (a new session). The parameter stays in the address while presenter
    mode is on (``keep_in_url``), so F5 and a shared link keep it; a page switch, which drops the
    address's parameters, keeps the session's mode."""
    url = st.query_params.get(PARAM)
    if url is not None and url != st.session_state.get(_SEEN):
        st.session_state[KEY] = url == "1"
        st.session_state[_SEEN] = url


def url_params() -> dict[str, str]:
    """What presenter mode adds to this view's address and to its shared link."""
    return {PARAM: "1"} if presenter() else {}


def keep_in_url() -> None:
    """Write presenter mode into the address (after the toggle: the speaker may just have changed it)."""
    if presenter():
        if st.query_params.get(PARAM) != "1":
            st.query_params[PARAM] = "1"
        st.session_state[_SEEN] = "1"
    else:
        if PARAM in st.query_params:
            del st.query_params[PARAM]
        st.session_state[_SEEN] = None


def sidebar_toggle() -> None:
    st.sidebar.toggle("Presenter mode", key=KEY, help="Larger type and fewer controls, for a projector.")
    keep_in_url()
    if presenter():
        st.html(CSS)


# Presenter mode keeps every chart at least this tall (its whole height: title, axes and legend
# included), so the plotting area stays readable with presenter-sized text (a 260 px chart
# kept a strip of about 20 px for its data).
PRESENTER_MIN_HEIGHT = 280
# A chart with one band per label on its y axis (bars named by row) gets this much more height in
# presenter mode: its labels are about 1.5 times as tall (18 px against Streamlit's 12), and rows sized
# for the small labels printed them on top of each other (the Summation lab's error bars).
PRESENTER_BAND_SCALE = 1.5


# Legends stand beside the plot, from its top down; Streamlit's container cuts off whatever runs past
# the chart's height (the Summation lab's marked orders, GPU arithmetic's "where it came from"). One
# entry measured up to 35 px in presenter mode (18 px labels, a line-and-point symbol), 30 px otherwise;
# each legend's title and gap about 30 px; the axis title written above the plot about 45 px.
LEGEND_ROW_PX = {False: 32, True: 36}
LEGEND_TITLE_PX = 30
LEGEND_TOP_PX = 45


def height_for_legends(minimum: int, *rows: int, presenter_mode: bool | None = None) -> int:
    """A chart height (at least ``minimum``) at which legends of ``rows[i]`` entries, stacked beside the
    plot, fit inside the chart's box at this mode's text size."""
    talk = presenter() if presenter_mode is None else presenter_mode
    return max(minimum, LEGEND_TOP_PX + sum(LEGEND_TITLE_PX + LEGEND_ROW_PX[talk] * r for r in rows if r))


def _band_rows(chart) -> bool:
    """True when the chart's y axis (of its first layer) is nominal or ordinal: one band per row label."""
    first = chart.layer[0] if getattr(chart, "layer", None) else chart
    enc = getattr(first, "encoding", None)
    y = getattr(enc, "y", None) if enc is not None else None
    kind = getattr(y, "type", None)
    if not isinstance(kind, str):
        shorthand = getattr(y, "shorthand", None)
        kind = {"N": "nominal", "O": "ordinal"}.get(shorthand.rsplit(":", 1)[-1], "") if isinstance(
            shorthand, str) and ":" in shorthand else ""
    return kind in ("nominal", "ordinal")


def styled(chart, presenter_mode: bool | None = None):
    """An Altair chart with presenter-sized axes, legends and title in presenter mode (unchanged otherwise).

    In presenter mode the chart also keeps PRESENTER_MIN_HEIGHT, its tick labels give way to each
    other (a label that would overlap its neighbour is left out, fewer ticks), and the left axis
    title is written horizontally above the axis: a vertical title longer than the plot made Vega's
    "fit" sizing shrink the plot until the title fitted, down to a thin strip.

    Call it on the chart handed to ``st.altair_chart`` (a top-level chart: Altair refuses a chart
    with its own config inside a layer or a concatenation)."""
    if not (presenter() if presenter_mode is None else presenter_mode):
        return chart
    t = PRESENTER_CHART_TEXT
    height = getattr(chart, "height", None)
    if isinstance(height, int | float):
        wanted = max(PRESENTER_MIN_HEIGHT, round(height * PRESENTER_BAND_SCALE) if _band_rows(chart) else height)
        if wanted != height:
            chart = chart.properties(height=wanted)
    return (chart.configure_axis(labelFontSize=t["axis_label"], titleFontSize=t["axis_title"], labelLimit=360,
                                 labelOverlap="greedy", labelSeparation=8, titleLimit=900)
            .configure_axisQuantitative(tickCount=5)
            .configure_axisLeft(titleAngle=0, titleAlign="left", titleAnchor="end", titleBaseline="bottom",
                                titleX=0, titleY=-10, titlePadding=0)
            .configure_legend(labelFontSize=t["legend_label"], titleFontSize=t["legend_title"], labelLimit=360,
                              titleLimit=600)
            .configure_title(fontSize=t["title"], limit=1200)
            .configure_text(fontSize=t["mark_text"]))


PAGE_KEY = "_talk_last_page"
# Runs in the component's iframe (same origin as the app): the main area's scroll container back to the top.
SCROLL_TOP = """<script>/* {nonce} */
const main = window.parent.document.querySelector('[data-testid="stMain"]');
if (main) {{ main.scrollTo(0, 0); }}
</script>"""


def scroll_to_top_on_page_change(page_id: str) -> None:
    """A page opened from a link low on another page starts at its top (its punchline), not at the old offset.

    Streamlit keeps the main area's scroll position across a page switch: a scenario clicked at the
    bottom of the home page opened about 2,700 px down on a long page. Only on a switch, from the sidebar
    (no room taken in the page)."""
    import streamlit.components.v1 as components

    if st.session_state.get(PAGE_KEY) == page_id:
        return
    st.session_state[PAGE_KEY] = page_id
    with st.sidebar:
        components.html(SCROLL_TOP.format(nonce=f"{page_id} {id(st.session_state)}"), height=0)


def more_settings():
    """Where secondary controls go: an expander in presenter mode, the page itself otherwise."""
    return talk_folded("More settings")


def talk_folded(label: str):
    """Where secondary prose or controls go: an expander named ``label`` in presenter mode (the room
    sees the result, the speaker opens it when needed), the page itself otherwise."""
    return st.expander(label) if presenter() else st.container()


def sidebar_state() -> str:
    """The sidebar's state for st.set_page_config: folded away in presenter mode (the slide gets the
    whole width; the sidebar's arrow opens it again), open otherwise."""
    return "collapsed" if presenter() else "expanded"
