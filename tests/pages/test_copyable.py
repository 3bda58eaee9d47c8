"""What a visitor copies pastes as it is: every address the app cites is a link whose text is the address, and no
address, code span or VAR=value setting holds an invisible character. Every page, its folded sections open."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import reader
from ui.navigation import PAGE_TABLE
from ui.render import WORD_JOINER, cited_addresses

INVISIBLE = re.compile("[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]")
LINK = re.compile(r"\[([^\[\]]*)\]\(<([^<>]+)>\)")  # ui.render.address
CODE = re.compile(r"`([^`]+)`")
SETTING = re.compile(r"\b[A-Z][A-Z0-9_]{2,}=\S+")  # CUBLAS_WORKSPACE_CONFIG=:4096:8, MKL_CBWR=AVX2


def sources(at) -> list[str]:
    out = []
    for kind in ("markdown", "caption", "info", "warning", "error", "success"):
        out += [str(e.value) for e in getattr(at, kind)]
    out += [str(c.value) for c in at.code]
    return out


ADDRESS = re.compile("https?:[\u200b-\u200f\u2060-\u2064\ufeff\u00ad]*//\\S+")


@pytest.mark.parametrize("stem", [p[0] for p in PAGE_TABLE])
def test_addresses_and_settings_hold_no_invisible_character(stem):
    """An address is a link (ui.render.address, or a bare address Streamlit links itself); neither it, a code span
    nor a VAR=value setting holds a character a visitor cannot see."""
    at = reader(stem).run()
    assert not at.exception, at.exception
    for src in sources(at):
        text = src.replace("\\", "")
        for found in ADDRESS.findall(text):
            assert not INVISIBLE.search(found), f"{stem}: invisible character in the address {found[:80]!r}"
        for code in CODE.findall(src):
            assert not INVISIBLE.search(code), f"{stem}: invisible character in code {code!r}"
        for setting in SETTING.findall(text):
            assert not INVISIBLE.search(setting), f"{stem}: invisible character in {setting!r}"
        for _shown, url in LINK.findall(src):
            assert url in cited_addresses() or url.startswith(("#", "/")), f"{stem}: a link the app does not cite"


def test_a_visitors_address_stays_inert_and_the_apps_own_is_a_link():
    from ui.render import inert, prose

    cited = sorted(cited_addresses())[0]
    assert inert(f"see {cited}") == f"see [{cited.replace(':', chr(92) + ':')}](<{cited}>)"
    assert WORD_JOINER in inert("see https://example.com/login")  # no link out of a visitor's text
    assert prose("set `CUBLAS_WORKSPACE_CONFIG=:4096:8` first") == "set `CUBLAS_WORKSPACE_CONFIG=:4096:8` first"


# Words about the app's own code or hosting that a visitor should not meet: module paths, the server's memory
# bookkeeping, another view's switches, a repository with no address
DEVELOPER_WORDS = re.compile(r"\bcore\.[a-z_]+\.[a-z_]+|shared server|no other run may switch|this repository")


@pytest.mark.parametrize("stem", [p[0] for p in PAGE_TABLE])
def test_no_developer_words_on_a_visitors_screen(stem):
    at = reader(stem).run()
    text = " ".join(s.replace("\\", "").replace(WORD_JOINER, "") for s in sources(at) if not s.startswith("python"))
    assert DEVELOPER_WORDS.findall(text) == [], stem
