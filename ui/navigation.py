"""The page table (declared once: app.py builds the navigation and home links from it, tests
open every page from it), and a guard against Streamlit's first-session fallback to
directory-based pages.

Streamlit decides once per server process, when the first session starts, whether the
app "uses the pages/ directory" (``PagesManager.uses_pages_directory``). Because our page
modules live in ``pages/``, the very first session after a server start runs in the old
directory mode: the sidebar lists file names, app.py's page config and navigation are
skipped, and a deep link whose path differs from a file name shows "Page not found".
Only the public ``st.navigation`` (run by app.py) turns that mode off, and in directory
mode a deep link never runs app.py, so the mode would stick for every later visitor too.
The guard below sets the flag to the value app.py's ``st.navigation`` sets anyway, then
reruns once, so the first visitor gets the real navigation. (Measured with streamlit
1.67.0; the browser test opens a deep link on a fresh server and checks the sidebar.)

Streamlit offers no public way to do this. The mode is decided when the first session's
page manager is made, from whether a folder named ``pages`` sits beside the entrypoint
(``streamlit/runtime/pages_manager.py`` in 1.67), before any script runs, so no public call
in app.py can come first; ``st.navigation`` ends the mode only once a run reaches it, and the
first run has by then drawn under the other mode. The public route is to keep the page
scripts in a folder with another name: Streamlit's docs call ``pages/`` "a legacy way to
create multipage apps" (https://docs.streamlit.io/develop/concepts/multipage-apps/overview),
and ``st.Page`` takes a script from any folder. That move renames the pages package across
code, tests, docs and the import contracts, and would make this guard unnecessary.
tests/pages/test_navigation.py holds the behaviour the guard keeps, and says when a Streamlit
upgrade stops deciding the mode this way.
"""

from __future__ import annotations

import pathlib

import streamlit as st

# Each page's URL path is its file name. Streamlit decides once per process, on the first
# session, whether the app "uses the pages/ directory"; a first visitor who opens a deep
# link whose path differs from the file name then gets a "Page not found" dialog.
# (Measured with streamlit 1.67; the browser test opens a deep link on a fresh server.)
# Icons: :material/...: names draw with the Material Symbols font that Streamlit serves itself;
# only the favicon would come from outside (see app.py's page_icon, an emoji for that reason).
#
# The sidebar has three sections. The story is read in order in about fifteen minutes, each page
# answering one question a learner brings; a visitor's own data, models and setup come next; the labs,
# for the curious, last. The table's order is the reading order: each page's "Next" link follows it.
STORY, OWN_RUNS, DEEP_DIVES = "The story", "Your own runs", "Deep dives"
SECTIONS = (STORY, OWN_RUNS, DEEP_DIVES)

# (file stem, title, icon, what the home page says about it, section)
PAGE_TABLE = [
    ("non_associativity", "Non-associativity", ":material/swap_horiz:",
     "the same three numbers added in two groupings give two answers, and why", STORY),
    ("cpu_vs_gpu", "CPU vs GPU", ":material/memory:",
     "why a CPU and a GPU add in different orders, and what that does to one sum", STORY),
    ("training_divergence", "Training divergence", ":material/show_chart:",
     "train a tiny network twice and watch the runs drift apart, step by step", STORY),
    ("serving", "Serving an LLM", ":material/chat:",
     "identical requests to a tiny language model at temperature 0 fork when a server batches them with others",
     STORY),
    ("mitigations", "Mitigations", ":material/build:",
     "what you can do, what each fix costs, and when a mismatch is normal", STORY),
    ("reproducible", "Make my runs reproducible", ":material/checklist:",
     "your framework, hardware and what must match: the settings to copy, what each promises and costs", OWN_RUNS),
    ("diagnose", "Diagnose a mismatch", ":material/troubleshoot:",
     "your own CPU-vs-GPU difference: rounding noise, reduced precision or a bug, and the tolerance to use",
     OWN_RUNS),
    ("traces", "Where two runs part", ":material/alt_route:",
     "two runs of a whole model traced op by op: the first op that differs, and whether rounding explains it",
     OWN_RUNS),
    ("summation_lab", "Summation lab", ":material/functions:",
     "one vector, many summation orders (NumPy, torch, a GPU model, Kahan), each error measured exactly",
     DEEP_DIVES),
    ("gpu_arithmetic", "GPU arithmetic", ":material/calculate:",
     "dot products as GPUs compute them (FMA, TF32, 16-bit inputs, split-K, atomic adds), each modelled exactly",
     DEEP_DIVES),
    ("many_devices", "Many devices", ":material/hub:",
     "data-parallel training on a real process group, and the all-reduce orders of 2 to 1,024 devices",
     DEEP_DIVES),
]

APP_ROOT = pathlib.Path(__file__).resolve().parents[1]


def page_file(path: str) -> str:
    """A page script (``"pages/x.py"``) as an absolute path. st.Page and st.page_link resolve a relative
    path against the entrypoint's folder, which is ``deploy/`` for the Community Cloud entrypoint
    (deploy/streamlit_app.py), so every page is named from the repository root instead."""
    return str(APP_ROOT / path)


APP_NAV_KEY = "_app_navigation_ran"
HOME_PAGE_KEY = "_app_home_page"  # app.py's overview page object, for the story's last link
HEALED_KEY = "_app_navigation_healed"


def mark_app_navigation() -> None:
    """Called by app.py just before it runs the selected page."""
    st.session_state[APP_NAV_KEY] = True


def leave_directory_mode() -> None:
    """Called by app.py before any widget: on the first session after a server start, rerun at once.

    That session's first run is Streamlit's directory mode (``_mpa_v1``), which runs app.py as a
    page of its own, so every widget app.py draws (the sidebar's Presenter toggle) gets another
    element id (ids include the active page's hash) than in every later run. A click on such a
    widget then names an id the next run does not know, and the click is lost: the first click on
    Presenter mode did nothing. Leaving the mode before any widget is drawn keeps the ids stable.
    """
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the flag needs no healing
        return
    if getattr(PagesManager, "uses_pages_directory", None):
        PagesManager.uses_pages_directory = False
        st.session_state[HEALED_KEY] = True
        st.rerun()


def ensure_app_navigation() -> None:
    """Called first by every page: rerun once if app.py's navigation did not run."""
    if st.session_state.get(APP_NAV_KEY) or st.session_state.get(HEALED_KEY):
        return
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:  # a future Streamlit without the flag needs no healing
        return
    if not hasattr(PagesManager, "uses_pages_directory"):
        return
    PagesManager.uses_pages_directory = False
    st.session_state[HEALED_KEY] = True
    st.rerun()


def next_page_link(stem: str) -> None:
    """The link that ends a page: the next page of the story (PAGE_TABLE order), or back to the overview."""
    stems = [s for s, *_ in PAGE_TABLE]
    i = stems.index(stem)
    st.divider()
    try:
        if i + 1 < len(stems):
            _, title, icon, blurb, _ = PAGE_TABLE[i + 1]
            # a link is one line, cut where the column ends: the title in it, what the page does below it
            st.page_link(page_file(f"pages/{stems[i + 1]}.py"), label=f"Next: {title}", icon=icon)
            st.caption(blurb[:1].upper() + blurb[1:] + ".")
        elif st.session_state.get(HOME_PAGE_KEY) is not None:
            st.page_link(st.session_state[HOME_PAGE_KEY], label="Back to the overview", icon=":material/home:")
        else:
            raise st.errors.StreamlitAPIException("no overview page in this session")
    except st.errors.StreamlitAPIException:  # the page runs on its own (tests, a bare script run): no navigation
        st.caption(f"Next in the story: {PAGE_TABLE[i + 1][1] if i + 1 < len(stems) else 'the overview'}.")
