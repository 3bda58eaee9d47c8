"""The page table (declared once: app.py builds the navigation and home links from it, tests
open every page from it), a guard against Streamlit's first-session fallback to
directory-based pages, and the browser's history kept to one entry per page visit (the
section "the browser's history" below says why), with each page's address.

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
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import streamlit as st

from core.crowd.querystate import query_string

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


# ------------------------------------------------------------------ the browser's history
#
# Streamlit 1.67's frontend pushes a history entry whenever a script run changes the query string
# (``handlePageInfoChanged``: ``pushState`` unless the run was started by Back or Forward), and
# another when a run switches pages (``maybeUpdatePageUrl``). Pages write their settings into the
# query string on every run (ui.urlstate.sync, presenter mode's ``talk``), so every change of a
# setting, every step of a training run played, and every page's first run added entries: Back
# stayed on the page. Worse, a run that switches pages may write the query string before the
# frontend has moved to the new page's path, and that entry names the old page with the new
# page's settings (Back from a talk link landed on ``/?preset=…&talk=1``). Streamlit has no
# setting for this, so the app's own script, run once per browser tab, keeps to one entry per
# page visit:
# * a push that keeps the path (a run rewrote this page's settings) replaces the current entry;
# * a push to another path (a page visit) pushes; if the old entry was rewritten since the
#   visitor's last click or key press, that rewrite belonged to the page being opened: the old
#   entry gets its address back and the new entry takes the rewritten settings;
# * a page visit (a link clicked, a push to another path, Back or Forward to another page) starts
#   at the top of the page: Streamlit keeps the scroll offset of the page it leaves.
# tests/e2e/test_phone_browser.py counts the entries and walks them back.
HISTORY_POLICY = """<script>
(() => {
  const w = window, h = w.history;
  if (w.__fpOneEntryPerVisit) return;
  w.__fpOneEntryPerVisit = true;
  const push = h.pushState.bind(h), replace = h.replaceState.bind(h);
  let before = null;  // this entry's address before a rewrite made since the visitor's last action
  let path = w.location.pathname;
  const top = () => {
    for (const box of [document.querySelector('[data-testid="stMain"]'), document.scrollingElement]) {
      if (box) box.scrollTo(0, 0);
    }
  };
  const acted = () => { before = null; };
  w.addEventListener('pointerdown', acted, true);
  w.addEventListener('keydown', acted, true);
  w.addEventListener('click', (e) => {
    const link = e.target.closest && e.target.closest('[data-testid="stPageLink"] a, [data-testid="stSidebarNav"] a');
    if (link) top();
  }, true);
  w.addEventListener('popstate', () => {
    before = null;
    if (w.location.pathname !== path) { path = w.location.pathname; top(); }
  }, true);
  h.pushState = function (state, unused, url) {
    const next = new URL(url, w.location.href);
    if (next.pathname === w.location.pathname) {
      if (before === null) before = w.location.href;
      return replace(state, unused, next.href);
    }
    if (before !== null) {
      next.search = w.location.search;
      replace(h.state, '', before);
      before = null;
    }
    path = next.pathname;
    top();
    return push(state, unused, next.href);
  };
})();
</script>"""

_HISTORY_KEY = "_app_history"  # None: no policy in this session (a page run alone); "sent"; "ready"


def history_policy() -> None:
    """Called by app.py on every run, before anything writes the address: the history policy above, in the
    sidebar (it takes no room in the page)."""
    st.sidebar.html(HISTORY_POLICY, unsafe_allow_javascript=True)
    st.session_state.setdefault(_HISTORY_KEY, "sent")


def history_ready() -> None:
    """Called by app.py once a run has ended: the policy reached the browser a run ago, so the next run's
    address writes happen under it."""
    if st.session_state.get(_HISTORY_KEY) == "sent":
        st.session_state[_HISTORY_KEY] = "ready"


_PENDING_KEY = "_app_address_pending"  # a write left for later: (page, the address it replaces, the new one)


def _set_quietly(params: Mapping[str, str]) -> bool:
    """Make ``params`` the query parameters this run reads, without a message to the browser (its address
    stays). Streamlit has no public call for this: False where its session state no longer offers one."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx()
        with ctx.session_state.query_params() as qp:
            qp.clear_with_no_forward_msg(preserve_embed=True)
            for key, value in params.items():
                qp.set_with_no_forward_msg(key, value)
    except (ImportError, AttributeError, TypeError):  # no run context, or another Streamlit
        return False
    return True


def write_address(params: Mapping[str, str]) -> bool:
    """Make ``params`` the query string of the browser's address; False when the browser is told later.

    Until a run has ended since the history policy was sent (a session's first run), the browser may not
    run the policy before a write reaches it, and that write would push an entry. Then the run reads
    ``params`` as if written, the browser's address stays as the visitor opened it, and the next runs of
    the same page at that address read ``params`` too (``flush_address``), the first run after it
    writing them. A page run on its own (no app.py) writes at once."""
    if st.session_state.get(_HISTORY_KEY) == "sent":
        page = current_page_path()
        pending = st.session_state.get(_PENDING_KEY)
        shown = pending[1] if pending and pending[0] == page else dict(st.query_params)
        if _set_quietly(params):
            if page is not None:  # a page's own address; presenter mode's part is written again by every run
                st.session_state[_PENDING_KEY] = (page, shown, dict(params))
            return False
    st.query_params.from_dict(params)
    return True


def flush_address(url_path: str, aside: str) -> None:
    """Called by app.py before it runs the page: the address a run before the policy was ready left to write
    (``write_address``), when this run shows the same page at the address that write replaces (not after a
    switch, Back or a new link): written once the policy is ready, read quietly until then. The parameter
    ``aside`` (presenter mode's, which app.py writes before) keeps its value in the address."""
    pending = st.session_state.get(_PENDING_KEY)
    if pending is None:
        return
    page, shown, params = pending
    now = dict(st.query_params)

    def settings(address: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in address.items() if k != aside}

    address = settings(params) | ({aside: now[aside]} if aside in now else {})
    if page != url_path or settings(now) != settings(shown):
        del st.session_state[_PENDING_KEY]
    elif st.session_state.get(_HISTORY_KEY) != "sent":
        del st.session_state[_PENDING_KEY]
        st.query_params.from_dict(address)
    else:
        _set_quietly(address)


# ------------------------------------------------------------------ page visits and addresses
_PAGE_PATH_KEY = "_app_page_path"  # the url path of the page this run shows ("" for the overview)
_VISIT_KEY = "_app_visit"  # how many page visits this session has made; a rerun of the same page is no visit


def enter_page(url_path: str) -> None:
    """Called by app.py before it runs the page: a run that shows another page than the last run is a visit."""
    if st.session_state.get(_PAGE_PATH_KEY) != url_path or _VISIT_KEY not in st.session_state:
        st.session_state[_VISIT_KEY] = st.session_state.get(_VISIT_KEY, 0) + 1
    st.session_state[_PAGE_PATH_KEY] = url_path


def page_visit() -> int | None:
    """This page visit's number in the session (None when a page runs on its own, without app.py)."""
    return st.session_state.get(_VISIT_KEY)


def current_page_path() -> str | None:
    """The url path of the page this run shows (None when a page runs on its own)."""
    return st.session_state.get(_PAGE_PATH_KEY)


def page_address(url_path: str | None, params: Mapping[str, str]) -> str:
    """The address of a page of this app (``url_path``: "" for the overview) with ``params``, as the
    visitor's browser reaches the app; only the query string when the browser's address is unknown.

    The browser reports its address when a run starts, so a run that switches pages sees the page it
    leaves: the page's own path replaces that last part, and ``url_path`` None keeps the path as reported."""
    query = query_string(params)
    url = urlsplit(getattr(st.context, "url", "") or "")
    if not url.netloc:
        return f"?{query}"
    path = url.path
    if url_path is not None:
        stems = {stem for stem, *_ in PAGE_TABLE}
        head, _, last = path.rstrip("/").rpartition("/")
        root = f"{head}/" if last in stems else path.rstrip("/") + "/"
        path = root + url_path
    return urlunsplit((url.scheme, url.netloc, path, query, ""))
