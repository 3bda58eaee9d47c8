"""AppTest: the Community Cloud entrypoint (deploy/streamlit_app.py) runs the same app with the same pages."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT, all_text
from ui.navigation import PAGE_TABLE

ENTRYPOINT = ROOT / "deploy" / "streamlit_app.py"


def _pages(at: AppTest) -> list[tuple[str, str, str]]:
    """(title, URL path, script file) of every page st.navigation registered in this run."""
    return [(info.get("page_name"), info.get("url_pathname"), str(info.get("script_path")))
            for info in at._registered_pages.values()]


def test_the_cloud_entrypoint_has_the_same_pages_as_app_py():
    deployed = AppTest.from_file(str(ENTRYPOINT), default_timeout=TIMEOUT).run()
    local = AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()
    assert not deployed.exception and not local.exception
    assert _pages(deployed) == _pages(local)
    assert [url for _, url, _ in _pages(deployed)] == ["", *(stem for stem, *_ in PAGE_TABLE)]
    assert all(path == str(ROOT / "pages" / f"{stem}.py")
               for (_, _, path), (stem, *_) in zip(_pages(deployed)[1:], PAGE_TABLE, strict=True))
    assert all_text(deployed) == all_text(local)  # the same overview
    assert [p.proto.label for p in deployed.get("page_link")] == [p.proto.label for p in local.get("page_link")]


def test_a_page_opened_from_the_cloud_entrypoint_links_to_the_next_one():
    at = AppTest.from_file(str(ENTRYPOINT), default_timeout=TIMEOUT).run()
    at.switch_page("../pages/non_associativity.py").run()  # paths are relative to the entrypoint's folder
    assert not at.exception and at.title[0].value.startswith("Non-associativity")
    # the story's next link resolves (a page path relative to deploy/ would not, and fall back to a caption)
    _, title, *_ = PAGE_TABLE[1]
    assert any(p.proto.label.startswith(f"Next: {title}") for p in at.get("page_link"))
