"""Extreme but allowed settings and hostile link values: clear messages, never an exception."""

from __future__ import annotations

import ast
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT
from ui.glossary import TERMS
from ui.navigation import PAGE_TABLE
from ui.render import WORD_JOINER, cited_addresses, inert


def run(page: str, params: dict, click: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    if click:
        at.button(key=click).click().run()
    return at


@pytest.mark.parametrize(
    ("page", "params", "click"),
    [
        ("training_divergence", {"lr": "10", "steps": "40"}, "td_play"),
        ("training_divergence", {"lr": "10", "steps": "40", "optimizer": "adam", "format": "float64"}, "td_play"),
        ("training_divergence", {"lr": "0", "steps": "5"}, "td_play"),
        ("summation_lab", {"vector": "tiny_huge", "storage": "float16", "n": "100000"}, None),
        ("summation_lab", {"vector": "ill_conditioned", "storage": "bfloat16", "n": "2", "condition": "1e+16"}, None),
        ("summation_lab", {"vector": "one_then_tiny", "storage": "bfloat16", "n": "1"}, None),
        ("summation_lab", {"vector": "paste", "numbers": "\x00\x01 ½ 1e999999 0x"}, None),
        ("non_associativity", {"a": "1e-5000", "b": "0x1p-20000", "c": "1/3", "format": "float16"}, None),
        ("non_associativity", {"a": "9" * 199, "b": "-0", "c": "nan"}, None),
        ("cpu_vs_gpu", {"n": "10000000000", "format": "float128", "vector": "../../etc/passwd"}, None),
        ("mitigations", {"storage": "float8", "seeds": "-1"}, None),
    ],
)
def test_no_exception(page, params, click):
    at = run(page, params, click)
    assert not at.exception, at.exception


# --------------------------------------------------- what a link holds is shown as inert text
# Streamlit's markdown (st.markdown, st.caption, st.error, st.warning, st.info, ...) turns [t](url) into a
# link, ![t](url) into an image every viewer's browser fetches, and bare https://..., www.x.y and a@b.c
# into links. Every page echoes rejected link values and unknown parameter names; none may come out live.
HOST = "example.com"
PAYLOADS = (
    f"[Sign in again](https://{HOST})",
    f"![t](https://{HOST}/t.png)",
    f'<img src="https://{HOST}/h.png">',
    f"https://{HOST}/x www.{HOST} me@{HOST}",
)
PAGES = [stem for stem, *_ in PAGE_TABLE]  # every page of the app, as declared once
_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.I | re.A)  # the frontend's autolink literal
_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.A)
_MARKDOWN_ELEMENTS = ("title", "header", "subheader", "markdown", "caption", "error", "warning", "info", "success")


def url_params(page: str) -> list[str]:
    """The link parameters a page declares: the ``param=`` of each Field(...) in its URL_FIELDS."""
    tree = ast.parse((ROOT / "pages" / f"{page}.py").read_text())
    return [kw.value.value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Field"
            for kw in node.keywords if kw.arg == "param" and isinstance(kw.value, ast.Constant)]


def decoded(source: str) -> str:
    """The text CommonMark makes of markdown source: a backslash before ASCII punctuation is dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source)


def live_syntax(source: str) -> list[str]:
    """Link, image or HTML syntax that would survive into the rendered page."""
    hits = [m.group(0) for m in re.finditer(r"(?<!\\)\]\((?!\s*\))", source)]  # [text](url), ![alt](url)
    hits += [m.group(0) for m in re.finditer(r"(?<!\\)<\s*/?\s*[a-zA-Z]", source)]  # raw HTML
    hits += [m.group(0) for m in re.finditer(r"(?<!\\)<[a-z]+:", source, re.I)]  # <https://...> autolink
    text = decoded(source)
    hits += [m.group(0) for m in _URL.finditer(text)] + [m.group(0) for m in _EMAIL.finditer(text)]
    return hits


# The app's own links to its glossary (ui.glossary.link): a relative link to one of the definitions' anchors,
# with the definition as its title. Only these exact targets are taken out before the check; any other link
# (or one of these wrapped around a visitor's text) still counts.
_GLOSSARY_LINK = re.compile(
    r"\[[^\[\]()]*\]\((?:" + "|".join(re.escape(f"{t.page}#{t.anchor}") for t in TERMS.values()) + r') "[^"]*"\)')


# The app's links to the addresses it cites itself (ui.render.address): only an address written in the app's own
# sources is taken out; a link to any other address, the hostile host's included, still counts.
_CITED_LINK = re.compile(r"\[[^\[\]]*\]\(<([^<>]+)>\)")


def _without_cited_links(source: str) -> str:
    return _CITED_LINK.sub(lambda m: "" if m.group(1) in cited_addresses() else m.group(0), source)


def markdown_sources(at: AppTest) -> list[str]:
    out = []
    for kind in _MARKDOWN_ELEMENTS:
        out += [_without_cited_links(_GLOSSARY_LINK.sub("", str(e.value))) for e in getattr(at, kind)]
    return out


def assert_nothing_live(at: AppTest) -> None:
    assert not at.exception, at.exception
    sources = markdown_sources(at)
    echoed = [s for s in sources if HOST in decoded(s).replace(WORD_JOINER, "")]
    assert echoed, "the page did not echo the hostile values at all (nothing was tested)"
    live = {s[:120]: live_syntax(s) for s in sources if live_syntax(s)}
    assert not live, live


@pytest.mark.parametrize("page", PAGES)
def test_link_values_and_names_render_as_inert_text(page):
    params = url_params(page)
    if not params:
        pytest.skip(f"{page} keeps no settings in its URL")
    query = {name: PAYLOADS[i % len(PAYLOADS)] for i, name in enumerate(params)}
    query.update({payload: "1" for payload in PAYLOADS})  # unknown parameter names
    at = run(page, query)
    assert_nothing_live(at)


@pytest.mark.parametrize(
    ("page", "params"),
    [
        ("mitigations", {"seeds": f"[Sign in again](https://{HOST})"}),
        ("non_associativity", {"a": f"![t](https://{HOST}/t.png)"}),
        ("non_associativity", {"a": f"https://{HOST}", "b": f"<img src=https://{HOST}/b.png>", "c": f"x@{HOST}"}),
        # the numbers' tokeniser splits at brackets and parentheses (a printed tensor pastes as it is), so a
        # markdown link never reaches an error whole: what can is a bare address, an e-mail or an autolink
        ("summation_lab", {"vector": "paste", "numbers": f"1 2 https://{HOST}"}),
        ("summation_lab", {"vector": "paste", "numbers": f"1 x@{HOST}"}),
        ("summation_lab", {"vector": "paste", "numbers": f"1 <https://{HOST}>"}),
    ],
)
def test_links_and_images_in_parameters_are_inert(page, params):
    """A sign-in link and an image from another host (both once rendered live), bare and HTML links, an
    address, and pasted numbers quoted back in a parse error."""
    assert_nothing_live(run(page, params))


def test_the_checker_sees_live_syntax():
    """live_syntax is what the tests above rely on: it must flag what Streamlit would render live."""
    for raw in (*PAYLOADS, f"<https://{HOST}>", f"see https://{HOST}"):
        assert live_syntax(raw), raw
    for raw in (*PAYLOADS, f"<https://{HOST}>"):
        assert not live_syntax(inert(raw)), raw


def test_uploaded_file_names_are_inert():
    """A file name is quoted in the vector's description, in its errors and in the 'last valid' note."""
    at = run("summation_lab", {"vector": "upload"})
    at.file_uploader(key="sl_upload").upload(f"![t](https://{HOST}/t.png).csv", b"value\n0.5\n0.25\n", "text/csv").run()
    assert_nothing_live(at)
    at.file_uploader(key="sl_upload").upload(f"[x](https://{HOST}).npy", b"\x93NUMPY garbage").run()
    assert any("not a readable .npy" in e.value for e in at.error)
    assert_nothing_live(at)
