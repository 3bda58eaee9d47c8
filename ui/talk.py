"""Talk mode: a presenter toggle (larger type, fewer controls), presenter-sized charts and the room's link.

The curated scenarios the home page links to are core.studies.talk.scenarios."""

from __future__ import annotations

from urllib.parse import urlsplit

import segno
import streamlit as st

from ui.navigation import page_address, write_address
from ui.palette import QR_DARK, QR_LIGHT

KEY = "presenter"


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
    """Write presenter mode into the address (after the toggle: the speaker may just have changed it). A write
    left for the next run (ui.navigation.write_address) leaves the value seen as the address holds it."""
    address = {k: v for k, v in st.query_params.items() if k != PARAM} | url_params()
    if dict(st.query_params) == address or write_address(address):
        st.session_state[_SEEN] = "1" if presenter() else None


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


def more_settings():
    """Where secondary controls go: an expander in presenter mode, the page itself otherwise."""
    return talk_folded("More settings")


def talk_folded(label: str):
    """Where secondary prose or controls go: an expander named ``label`` in presenter mode (the room
    sees the result, the speaker opens it when needed), the page itself otherwise."""
    return st.expander(label) if presenter() else st.container()


def sidebar_state() -> str:
    """The sidebar's state for st.set_page_config: folded away in presenter mode (the slide gets the
    whole width; the sidebar's arrow opens it again); otherwise open on a wide screen and folded on a
    phone (Streamlit's "auto": an open sidebar covered 300 of a 390 px phone's width)."""
    return "collapsed" if presenter() else "auto"


# Hosts that name the speaker's own computer: a phone in the room cannot open them.
LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}
ROOM_QR_PX = 240  # the code's widest: a 100-character link is 45 modules with the margin, about 5 px each
ROOM_KEY = "room_link"  # the container that holds the room's link and code (tests find it by this key)


def room_address(url_path: str | None) -> str:
    """This view's address for the room: the page and its settings as the address holds them, without
    presenter mode (a phone gets the normal type and controls)."""
    return page_address(url_path, {k: v for k, v in st.query_params.items() if k != PARAM})


def room_link(address: str, what: str, beside: bool = False) -> None:
    """A link for the room and its QR code, drawn here (segno writes the code as SVG: nothing is fetched);
    ``beside``: the code left of the words (a page's width), else above them (the sidebar's)."""
    code = segno.make_qr(address, error="m")  # medium error correction: a projector's glare or a cut corner
    with st.container(key=ROOM_KEY):
        left, right = st.columns([1, 3], vertical_alignment="center") if beside else (st.container(),) * 2
        left.image(code.svg_inline(omitsize=True, border=4, dark=QR_DARK, light=QR_LIGHT), width=ROOM_QR_PX)
        with right:  # the address in a code span: nothing in it is read as markdown, and it wraps where it must
            st.markdown(f"**For the room:** {what}  \n`{address.replace('`', '%60')}`")
            if urlsplit(address).hostname in LOOPBACK:
                st.caption("This address names this computer itself: phones in the room reach the app at this "
                           "computer's address on the room's network, with the same port and path.")
