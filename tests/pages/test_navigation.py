"""ui.navigation's guard against Streamlit's first-session directory mode (its docstring says why Streamlit
offers no public way). AppTest starts every run as the first session of a fresh process (it resets the mode
and makes a new page manager), so each run below meets the mode; a later session is one whose page manager
finds the mode already ended (app.py's st.navigation ends it for the whole process)."""

from __future__ import annotations

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
