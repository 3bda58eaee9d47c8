"""ui.render.inert: any text becomes markdown source that Streamlit renders as exactly that text.

The checks model what Streamlit 1.67's frontend does with markdown source: CommonMark + GFM parsing
(where a backslash before ASCII punctuation makes it literal), then transforms on the decoded text
nodes: GFM autolink literals, :material_x: / :streamlit: / emoji shortcodes and typographic arrows
(their regular expressions are copied from the frontend bundle). The real renderer is checked in a
browser by tests/e2e/test_inert_browser.py.
"""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from ui.render import MARKDOWN_SPECIAL, WORD_JOINER, inert, mono

FRAGMENTS = [
    "[", "]", "(", ")", "![", "](", "<", ">", "`", "``", "*", "_", "~", "~~", "|", "#", "$", "$$", "&", "&amp;",
    "&#60;", ":", "@", "\\", "\n", "\r\n", "\t", "    ", "-", "+", "=", "1.", "2)", "www.", "WWW.", "http://",
    "https://", "mailto:", "javascript:", "a@b.co", ":material/lock:", ":material_lock:", ":streamlit:",
    ":smile:", ":red[", "]{", "<img src=x>", "<a href=", "</", "<!--", "-->", "->", "<-", "--", ">=", "<=",
    "~=", "\u2028", "\x00", "example.com", "[x](https://example.com)", "![t](https://example.com/t.png)",
]
hostile_text = st.lists(st.one_of(st.text(max_size=8), st.sampled_from(FRAGMENTS)), max_size=12).map("".join)

URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.I | re.A)
EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.A)
SHORTCODE = re.compile(r":[\w+-][\w+-]*:", re.A)  # :material_x:, :streamlit:, emoji
ARROW = re.compile(r"(^|\s)(<->|->|<-|--|>=|<=|~=)(\s|$)")
LINE_BREAK = re.compile(r"[\r\n\t\v\f\x85\u2028\u2029]")


def decoded(source: str) -> str:
    """CommonMark's text for inline source: the backslash of an escaped ASCII punctuation mark goes."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source)


def unescaped_specials(source: str) -> list[str]:
    out, i = [], 0
    while i < len(source):
        if source[i] == "\\":
            i += 2  # this backslash escapes the next character
            continue
        if source[i] in MARKDOWN_SPECIAL:
            out.append(source[i])
        i += 1
    return out


def expected_text(text: str) -> str:
    s = LINE_BREAK.sub(" ", text)
    return re.sub(r"^ {2,}", " ", s).replace(WORD_JOINER, "")


@settings(max_examples=500, deadline=None)
@given(hostile_text)
@example("[Sign in again](https://example.com)")
@example("![t](https://example.com/t.png)")
@example('<img src="https://example.com/x.png">')
@example("see www.example.com or me@example.com, https://example.com")
@example(":material/lock: :streamlit: :smile: :red[alert]")
@example("- item")
@example("1. item")
@example("    indented")
@example("a -> b -- c <= d")
@example("\\[not escaped]\\(https://example.com)")
def test_no_markdown_construct_or_transform_survives(text):
    source = inert(text)
    assert unescaped_specials(source) == []  # no link, image, HTML, code, emphasis, math, entity, directive
    assert ":material/" not in source  # Streamlit rewrites this in the raw source, before parsing
    shown = decoded(source)
    assert not URL.search(shown) and not EMAIL.search(shown)  # no autolink literal
    assert not SHORTCODE.search(shown) and not ARROW.search(shown)
    assert "\n" not in source and "\r" not in source
    assert not re.match(r" {0,3}([-+=*]|\d{1,9}[.)])", source)  # no list item or setext line at the start
    assert shown.replace(WORD_JOINER, "") == expected_text(text)  # and the visitor sees exactly the text


@settings(max_examples=200, deadline=None)
@given(hostile_text)
def test_mono_is_inert_inside_its_html_tag(text):
    html = mono(text)
    inner = html[html.index(">") + 1: html.rindex("</code>")]
    assert unescaped_specials(inner) == []
    assert decoded(inner).replace(WORD_JOINER, "") == LINE_BREAK.sub(" ", text).replace(WORD_JOINER, "")


def test_ordinary_text_is_unchanged():
    for text in ("0.1, 0.2, 0.3", "“n=ten” was ignored", "-0.3", "1e-8", "1/3", "0x1.8p-3", "float32"):
        assert inert(text, line_start=False) == text
