"""ui.navigation's guard against Streamlit's first-session directory mode (its docstring says why Streamlit
offers no public way). AppTest starts every run as the first session of a fresh process (it resets the mode
and makes a new page manager), so each run below meets the mode; a later session is one whose page manager
finds the mode already ended (app.py's st.navigation ends it for the whole process)."""

from __future__ import annotations

import pytest
from streamlit.runtime.pages_manager import PagesManager
from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT
from ui.navigation import APP_NAV_KEY, PAGE_TABLE

APP = str(ROOT / "app.py")


def test_streamlit_still_decides_the_mode_from_a_folder_named_pages(monkeypatch):
    """The guard's premise. When this fails, a Streamlit upgrade decides the mode otherwise (or not at all):
    check whether ui.navigation's guard is still needed."""
    monkeypatch.setattr(PagesManager, "uses_pages_directory", None)
    PagesManager(APP)
    assert PagesManager.uses_pages_directory is True  # app.py's folder holds pages/
    PagesManager.uses_pages_directory = None
    PagesManager(str(ROOT / "deploy" / "streamlit_app.py"))
    assert PagesManager.uses_pages_directory is False  # the Community Cloud entrypoint's folder does not


def _first_session() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert PagesManager.uses_pages_directory is False  # left for good: every later session too
    return at


def test_the_first_sessions_widgets_are_the_ones_of_every_later_session(monkeypatch):
    """Directory mode runs app.py as a page of its own, so its widgets got other ids than in every later run:
    the first click on Presenter mode named an id the next run did not know, and was lost."""
    first = _first_session()
    assert first.session_state[APP_NAV_KEY]  # app.py's own navigation ran the page
    assert [p.proto.label for p in first.get("page_link")][-1] == f"Next: {PAGE_TABLE[0][1]}"
    made = PagesManager.__init__

    def later_init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", later_init)
    later = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not later.exception
    assert first.sidebar.toggle[0].id == later.sidebar.toggle[0].id


def test_a_deep_link_in_the_first_session_gets_the_apps_navigation():
    """In directory mode a deep link runs the page's script without app.py (no page config, no sidebar of
    ours): the page reruns once, and app.py's navigation draws it."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/non_associativity.py").run()
    assert not at.exception
    assert at.session_state[APP_NAV_KEY]
    assert at.title[0].value.startswith("Non-associativity")
    assert [t.label for t in at.sidebar.toggle] == ["Presenter mode"]  # app.py's sidebar


PRESET = "256 + 1 + 1 (bfloat16)"


@pytest.fixture
def later_sessions(monkeypatch):
    """Every run as in a server whose first session has ended directory mode (AppTest meets the mode again on
    every run, and in it a page's later runs go without app.py)."""
    made = PagesManager.__init__

    def later_init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    monkeypatch.setattr(PagesManager, "__init__", later_init)


def _non_associativity(**params) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.switch_page("pages/non_associativity.py")
    at.query_params.update(params)
    return at.run()


def test_the_first_run_leaves_the_address_and_the_next_writes_it_before_the_page_reads_it(later_sessions):
    """ui.navigation's history policy reaches the browser with the session's first run, so that run writes no
    address (a write could push a history entry before the policy runs). The next run writes it first: the
    page then reads its full settings, and a bare preset link is not applied again over the visitor's change."""
    at = _non_associativity(preset=PRESET)
    assert not at.exception
    assert at.query_params == {"preset": PRESET}  # as the visitor opened it
    assert any("pushState" in h.proto.body for h in at.sidebar.get("html"))  # the policy, sent first
    at.text_input(key="na_a").set_value("512").run()
    assert not at.exception
    assert at.session_state["na_a"] == "512" and at.query_params["a"] == "512"  # the visitor's change stands
    assert at.query_params["format"] == "bfloat16" and at.query_params["b"] == "1"


def test_back_to_a_page_brings_back_the_settings_of_its_entry(later_sessions):
    """Streamlit drops a page's widget values when the visitor leaves it; Back to the page's entry (an address
    the page wrote itself) applies that address again instead of showing the defaults."""
    at = _non_associativity(preset=PRESET)
    at.run()  # the address written
    entry = dict(at.query_params)
    assert entry["format"] == "bfloat16" and entry["a"] == "256"
    at.switch_page("pages/cpu_vs_gpu.py")
    at.query_params.clear()
    at.run()
    assert not at.exception and at.title[0].value == "CPU vs GPU"
    at.switch_page("pages/non_associativity.py")  # Back: the browser brings the entry's address
    at.query_params.clear()
    at.query_params.update(entry)
    at.run()
    assert not at.exception
    assert (at.session_state["na_fmt"], at.session_state["na_a"]) == ("bfloat16", "256")


def test_runs_before_the_policy_is_ready_read_the_full_settings_and_leave_the_address(later_sessions):
    """A first run cut short (a click while it computed) leaves the policy unconfirmed: the next run still
    leaves the browser's address alone, yet reads the page's full settings, so the visitor's change stands;
    the run after it writes the address."""
    from ui.navigation import _HISTORY_KEY

    at = _non_associativity(preset=PRESET)
    at.session_state[_HISTORY_KEY] = "sent"  # as if the first run had not ended
    at.text_input(key="na_a").set_value("512").run()
    assert not at.exception
    assert at.session_state["na_a"] == "512" and at.query_params == {"preset": PRESET}
    at.run()
    assert at.session_state["na_a"] == "512" and at.query_params["a"] == "512"
    assert at.query_params["format"] == "bfloat16"


def test_a_page_address_names_the_page_shown_not_the_page_left(monkeypatch):
    """The browser reports its address when a run starts: a run that switches pages sees the page it leaves."""
    import types

    import ui.navigation as nav

    def at(url: str):
        monkeypatch.setattr(nav, "st", types.SimpleNamespace(context=types.SimpleNamespace(url=url)))

    at("http://room.example:8501/cpu_vs_gpu")
    assert nav.page_address("mitigations", {"a": "1 + 2"}) == "http://room.example:8501/mitigations?a=1%20%2B%202"
    assert nav.page_address("", {}) == "http://room.example:8501/"
    at("https://x.example/app")  # the overview of an app served under a path
    assert nav.page_address("serving", {}) == "https://x.example/app/serving"
    at("https://x.example/app/serving")
    assert nav.page_address("", {"talk": "1"}) == "https://x.example/app/?talk=1"
    assert nav.page_address(None, {}) == "https://x.example/app/serving"  # the path as reported
    at("")
    assert nav.page_address("serving", {"n": "3"}) == "?n=3"
