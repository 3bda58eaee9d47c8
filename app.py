"""Entry point: page config, navigation, and the home page that tells the story."""

from __future__ import annotations

import streamlit as st

import core.machines.native  # first, before anything loads torch: OpenMP and oneDNN read their settings then
from core.studies.reproducible import headline_rows
from core.studies.talk import scenarios
from ui.crowd import counted_run
from ui.navigation import (
    HOME_PAGE_KEY,
    PAGE_TABLE,
    SECTIONS,
    STORY,
    ensure_app_navigation,
    enter_page,
    flush_address,
    history_policy,
    history_ready,
    leave_directory_mode,
    mark_app_navigation,
    page_file,
)
from ui.overview_view import gpu_note, live_hook
from ui.talk import PARAM as TALK_PARAM
from ui.talk import (
    apply_from_link,
    presenter,
    room_address,
    room_link,
    sidebar_state,
    sidebar_toggle,
    talk_folded,
)

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

PAGES = [(st.Page(page_file(f"pages/{stem}.py"), title=title, icon=icon, url_path=stem), title, icon, blurb, section)
         for stem, title, icon, blurb, section in PAGE_TABLE]


def introduction() -> None:
    st.markdown(
        """
Train one model twice with the same data, seed and code, once on a CPU and once on a GPU, and the
losses can agree for a while, then drift apart. Nothing is broken: the two machines round
differently (in other places, and in their math libraries), and their random generators are different
algorithms (one seed, other dropout on a GPU from step 0). The pages below show where.
"""
    )


def three_causes() -> None:
    c1, c2, c3 = st.columns(3)
    with c1.container(border=True):
        st.markdown(
            """
**1 · Same formats, other groupings.** float32 is the same IEEE 754 format on CPUs and GPUs, but
rounding makes addition non-associative: `(a + b) + c` need not equal `a + (b + c)`.
"""
        )
    with c2.container(border=True):
        st.markdown(
            """
**2 · Hardware chooses the order.** A CPU gives a sum's chunks to a few threads; a GPU spreads it
over thousands and adds their results in trees. Even one CPU regroups with its thread count.
"""
        )
    with c3.container(border=True):
        st.markdown(
            """
**3 · Training can amplify.** A last-bit difference can change every later step. Whether the gap
grows depends on the learning rate, the optimizer and the model: some pairs part, others never do.
"""
        )


def what_to_do() -> None:
    title = "What you can do, and what it costs"
    if not presenter():  # the speaker's overview holds the talk's links and the room's code: three screens
        st.subheader(title)
    with talk_folded(title):
        rows = headline_rows()  # the same figures as Make my runs reproducible: measured here, or cited there
        head = "| Mitigation | What it buys | Cost, × the default's time |\n| --- | --- | --- |\n"
        st.markdown(head + "\n".join(f"| {r.mitigation} | {r.effect} | {r.cost} |" for r in rows))
        st.page_link(page_file("pages/reproducible.py"),
                     label="Make my runs reproducible: the settings for your setup", icon=":material/checklist:")


def sections() -> None:
    """The pages by section, in reading order: the story first."""
    cols = st.columns(len(SECTIONS))
    for col, section in zip(cols, SECTIONS, strict=True):
        with col:
            st.markdown(f"**{section}**")
            for page, title, icon, blurb, where in PAGES:
                if where == section:  # what the page does is the link's tooltip: the list stays one screen
                    st.page_link(page, label=title, icon=icon, help=blurb[:1].upper() + blurb[1:] + ".")


def talk_mode() -> None:
    st.subheader("Talk mode")
    if not presenter():  # how to get larger type, told to those who do not have it yet: the page stays in 3 screens
        st.caption("Prepared scenarios that follow the story: each opens a page with its settings in the link. "
                   "**Presenter mode** in the sidebar (or `?talk=1` on a link) gives larger type and fewer controls, "
                   "and a link and QR code for the room.")
    talk_links()


def talk_links() -> None:
    per_row = 3  # a link is one line, cut where its column ends: four columns cut the titles
    links = scenarios()
    for first in range(0, len(links), per_row):  # row by row: the reading order is the story's
        for col, (title, page, params, what) in zip(st.columns(per_row), links[first:first + per_row], strict=False):
            with col:  # what the room will see is the link's tooltip: the list stays short
                st.page_link(page_file(page), label=title, icon=":material/slideshow:", query_params=params,
                             help=what)


def provenance() -> None:
    st.caption(
        "Every number in this app says where it came from: computed live on this server "
        "(which device, how many threads), recorded on real hardware (which device, versions, date), a model of a "
        "library's or device's order (labelled as such), or exact rational arithmetic."
    )


def home() -> None:
    """The story's first page: why runs differ, its three causes, where to go next, and the talk's scenarios.

    In presenter mode the talk's scenarios come right under the live numbers, on the speaker's first screen,
    with the room's link and QR code below them; a reader finds them after the story's pages."""
    ensure_app_navigation()
    st.title("Same model, same seed, different numbers")
    live_hook()
    if presenter():
        talk_links()
        room_link(room_address(""), "this overview on a phone, in normal type; each page's sidebar holds its own "
                  "link and code.", beside=True)
    gpu_note()
    introduction()
    three_causes()
    what_to_do()
    if not presenter():  # the speaker walks the talk's scenarios; a reader picks pages from the sections
        sections()
        talk_mode()
    provenance()
    page, title, icon, *_ = PAGES[0]  # like every page of the story, the first ends with the way on
    st.page_link(page, label=f"Next: {title}", icon=icon)


HOME = st.Page(home, title="Overview", icon=":material/home:", default=True)
st.session_state[HOME_PAGE_KEY] = HOME  # the last page of the story links back to it

with counted_run():  # a visitor who arrives with a crowd is told the wait before anything else is drawn
    history_policy()  # before anything writes the address: one history entry per page visit
    sidebar_toggle()
    PAGE = st.navigation({section: [HOME] * (section == STORY) + [page for page, *_, where in PAGES
                                                                  if where == section] for section in SECTIONS})
    mark_app_navigation()
    enter_page(PAGE.url_path)
    flush_address(PAGE.url_path, aside=TALK_PARAM)
    try:
        PAGE.run()
        if presenter() and PAGE is not HOME:  # the overview shows the room's link on the page itself
            with st.sidebar:
                room_link(room_address(PAGE.url_path), "this page with these settings, on a phone, in normal type.")
        history_ready()
    finally:
        core.machines.native.release_freed_memory()
        core.machines.native.freeze_after_first_run()
