"""Entry point: page config, navigation, and the home page that tells the story."""

from __future__ import annotations

import streamlit as st

import core.machines.native  # first, before anything loads torch: OpenMP and oneDNN read their settings then
from ui.navigation import (
    HOME_PAGE_KEY,
    PAGE_TABLE,
    ensure_app_navigation,
    leave_directory_mode,
    mark_app_navigation,
    page_file,
)
from ui.overview_view import live_hook
from ui.talk import SCENARIOS, apply_from_link, scroll_to_top_on_page_change, sidebar_state, sidebar_toggle

leave_directory_mode()  # before any widget: the first session's first run would give them other ids
apply_from_link()  # before the page config: presenter mode folds the sidebar away

st.set_page_config(
    page_title="Same seed, different numbers",
    # An emoji becomes an inline data: favicon. A :material/...: page icon would make every browser
    # fetch the favicon from Google's font CDN (Streamlit 1.67), which a room without network lacks.
    page_icon="🧮",
    layout="wide",
    initial_sidebar_state=sidebar_state(),
)

PAGES = [(st.Page(page_file(f"pages/{stem}.py"), title=title, icon=icon, url_path=stem), title, icon, blurb)
         for stem, title, icon, blurb in PAGE_TABLE]


def introduction() -> None:
    st.title("Same model, same seed, different numbers")
    live_hook()
    st.markdown(
        """
Train one model twice, with the same data, the same seed and the same code, once on a
CPU and once on a GPU (or just on another thread count, as above). The losses agree to many
digits for the first steps, then slowly drift apart, and after a few hundred steps the two
runs follow different trajectories. Nothing is broken. This app shows, with exact numbers,
where the difference comes from.
"""
    )


def three_causes() -> None:
    st.header("Three causes")
    c1, c2, c3 = st.columns(3)
    with c1.container(border=True):
        st.markdown(
            """
**1 · Same formats, not the same arithmetic.** float32 and float64 are the same IEEE 754
formats on every CPU and GPU, and a single addition is rounded the same way everywhere.
But rounding makes addition non-associative: `(a + b) + c` need not equal `a + (b + c)`.
"""
        )
    with c2.container(border=True):
        st.markdown(
            """
**2 · Hardware chooses the order.** A sum of a million numbers is split to fit the
machine: a CPU hands contiguous chunks to its threads and folds SIMD lanes; a GPU spreads
the work over thousands of threads and combines them in trees. Different splits mean
different groupings, so different roundings. Even one CPU gives other bits with another
thread count.
"""
        )
    with c3.container(border=True):
        st.markdown(
            """
**3 · Training amplifies.** A difference in the last bit of one gradient changes the
weights slightly, which changes every later step. Training is a chaotic process: tiny
perturbations grow roughly exponentially until the two runs are unrelated, even though
both learn equally well.
"""
        )

    st.info(
        "Takeaway: never expect tensor results to be bit-identical across devices, "
        "libraries, or even thread counts on the same machine. Expect them to be close, "
        "and judge runs by aggregate metrics.",
        icon=":material/lightbulb:",
    )


def what_to_do() -> None:
    st.header("What you can do about it, and what it costs")
    st.markdown(
        """
| Mitigation | Effect | Cost |
| --- | --- | --- |
| Compute in float64 | Each rounding is about 2^29 times smaller than in float32, so visible divergence often disappears for the length of a run | About half the float32 speed per value on x86 CPUs (arithmetic: half as many float64 per SIMD register; large sums: twice the bytes; the Mitigations page measures both on this server) and on data-centre GPUs (A100, H100); 1/32 to 1/64 on consumer and inference GPUs (T4, RTX 4090); Apple's MPS has no float64 at all |
| Accumulate in higher precision, e.g. `torch.sum(x, dtype=torch.float64)` | The reduction's own rounding errors shrink sharply; the order still matters, but far less | torch casts the input to that dtype before reducing, so it costs the memory traffic and arithmetic of the wider type for that one operation |
| Accept the divergence | Runs still differ bit for bit, but judged by aggregate metrics (final loss, accuracy, their spread over seeds) they agree within the seed-to-seed spread | Nothing at run time; several seeds per configuration to measure that spread, and no step-by-step comparison of two runs |
"""
    )


def explore() -> None:
    st.header("Explore")
    for page, title, icon, blurb in PAGES:  # a link is one line, cut where it ends: what the page does goes below
        st.page_link(page, label=title, icon=icon)
        st.caption(blurb[:1].upper() + blurb[1:] + ".")


def talk_mode() -> None:
    st.header("Talk mode")
    st.markdown("Prepared scenarios for a talk: each opens a page with its settings in the link. Switch on "
                "**Presenter mode** in the sidebar for larger type and fewer controls (or add `?talk=1` to a link).")
    cols = st.columns(3)
    for i, (title, page, params, what) in enumerate(SCENARIOS):
        with cols[i % 3].container(border=True):
            st.page_link(page_file(page), label=title, icon=":material/slideshow:", query_params=params)
            st.caption(what)
    st.caption(
        "Every number in this app says where it came from: computed live on this server "
        "(which device, how many threads), recorded on real hardware (which device, versions, date), a model of a "
        "library's or device's order (labelled as such), or exact rational arithmetic."
    )


def home() -> None:
    """The story: why runs differ, the three causes, what to do, the pages, and the talk's scenarios."""
    ensure_app_navigation()
    introduction()
    three_causes()
    what_to_do()
    explore()
    talk_mode()


HOME = st.Page(home, title="Overview", icon=":material/home:", default=True)
st.session_state[HOME_PAGE_KEY] = HOME  # the last page of the story links back to it

sidebar_toggle()
PAGE = st.navigation([HOME, *(page for page, *_ in PAGES)])
mark_app_navigation()
scroll_to_top_on_page_change(PAGE.url_path)
try:
    PAGE.run()
finally:
    core.machines.native.release_freed_memory()
