from __future__ import annotations

import pathlib

import pytest
from streamlit.testing.v1 import AppTest

TIMEOUT = 60
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()


@pytest.fixture
def na() -> AppTest:
    """The Non-associativity page, run on its own, its folded sections open (as a reader who opened them: they
    are made only once opened, ui.crowd.folded)."""
    at = AppTest.from_file(str(ROOT / "pages" / "non_associativity.py"), default_timeout=TIMEOUT)
    for key in NA_FOLDED:
        at.session_state[key] = True
    return at.run()


NA_FOLDED = ("na_open_bits", "na_open_exact", "na_open_devices", "na_open_search")


def all_text(at: AppTest) -> str:
    """Everything the page wrote as text: markdown, captions, alerts, metrics, titles."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "error", "warning", "success", "info"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return "\n".join(parts)


def shown(source: str) -> str:
    """The text a viewer sees for markdown source written by ui.render.inert: escapes and joiners gone."""
    import re

    from ui.render import WORD_JOINER

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source).replace(WORD_JOINER, "")
