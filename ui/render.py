"""Small renderers: colour-coded bit patterns, ``inert`` for text that came from outside, and the one table of
results against their exact value (``error_table``)."""

from __future__ import annotations

import ast
import math
import pathlib
import re
from collections.abc import Iterable, Sequence

import pandas as pd

from core.arith.exact import shortest_repr
from core.arith.formats import FloatFormat
from core.arith.hexbits import hex_bits, split_bits
from core.arith.metrics import ErrorReport, bound_cell, ulps_cell
from core.arith.metrics import ulps_short as ulps_short  # re-exported: pages write their metrics with these
from core.arith.metrics import ulps_text as ulps_text
from ui.palette import EXPONENT_BITS, MANTISSA_BITS, SIGN_BIT


def bits_html(bits: int, fmt: FloatFormat) -> str:
    """Sign | exponent | mantissa, coloured, with the hex pattern in a tooltip."""
    sign, exponent, mantissa = split_bits(bits, fmt)
    return (
        f'<span class="fp-bits" title="{fmt.name} bit pattern {hex_bits(bits, fmt)}" '
        'style="font-family:monospace;font-size:0.92em;letter-spacing:0.02em;word-break:break-all">'
        f'<span style="color:{SIGN_BIT};font-weight:700">{sign}</span>&#8202;'
        f'<span style="color:{EXPONENT_BITS};font-weight:700">{exponent}</span>&#8202;'
        f'<span style="color:{MANTISSA_BITS}">{mantissa}</span></span>'
    )


def bits_legend(fmt: FloatFormat) -> str:
    return (
        f'<span style="font-size:0.85em">{fmt.name}: '
        f'<span style="color:{SIGN_BIT};font-weight:700">1 sign bit</span> · '
        f'<span style="color:{EXPONENT_BITS};font-weight:700">{fmt.exponent_bits} exponent bits</span> · '
        f'<span style="color:{MANTISSA_BITS}">{fmt.mantissa_bits} mantissa bits</span> '
        f"(precision p = {fmt.precision} with the implicit leading 1)</span>"
    )


def mono(text: str) -> str:
    """Inert monospace text that wraps (long exact decimals must not overflow)."""
    return (
        '<code style="white-space:normal;overflow-wrap:anywhere;word-break:break-all">'
        f"{inert(text, line_start=False)}</code>"
    )


# ------------------------------------------------------------------------ untrusted text
# Anything that came from a visitor, a link or a file (rejected link values, unknown
# parameter names, pasted numbers, file names, recording fields) goes through ``inert``
# before it reaches st.markdown / st.caption / st.error / st.warning / st.info, which all
# render Streamlit's markdown. Streamlit 1.67's markdown is CommonMark + GFM (remark) plus
# transforms that run on the *decoded* text, after backslash escapes are gone: GFM autolink
# literals (https://..., www.x.y, a@b.c), :material_icon: and :streamlit: shortcodes, emoji
# shortcodes, and typographic arrows (->, --, <=). Backslash escapes stop the parser's
# constructs (links, images, raw HTML, code, emphasis, directives, math, entities); an
# invisible WORD JOINER after ":" and "@", before the "." of "www." and inside arrow pairs
# stops the text transforms. What the visitor sees is exactly the text (line breaks as spaces).
WORD_JOINER = "\u2060"
MARKDOWN_SPECIAL = "\\`*_[]()!<>&~|$:{}#^@"
_SPECIAL = re.compile("([" + re.escape(MARKDOWN_SPECIAL) + "])")
_LINE_BREAKS = re.compile(r"[\r\n\t\v\f\x85\u2028\u2029]")
_JOIN_AFTER = re.compile(r"(?<=[:@])")  # https://, :shortcode:, :material/..., a@b.c
_JOIN_WWW = re.compile(r"(?i)(?<=www)(?=\.)")  # www.example.com
_JOIN_ARROWS = re.compile(r"(?<=[<>~-])(?=[>=-])")  # ->, <-, --, >=, <=, ~=
_LEADING_SPACES = re.compile(r"^ {2,}")  # four would start an indented code block
_LINE_MARKER = re.compile(r"^( ?)([-+=]|\d{1,9}[.)])")  # list item, setext underline


def inert(text: object, line_start: bool = True) -> str:
    """Markdown source that Streamlit renders as exactly ``text``: no link, image, HTML,
    icon, emoji or formatting can come out of it, except a link to an address the app itself cites (below), whose
    text is the address. Line breaks become spaces.

    ``line_start=False`` skips escaping a leading list marker, for text that is never at
    the start of a markdown line (inside an inline HTML tag, after a prefix)."""
    return _markdown(str(text), line_start, code=False)


def _escaped(s: str, line_start: bool) -> str:
    s = _JOIN_AFTER.sub(WORD_JOINER, s)
    s = _JOIN_WWW.sub(WORD_JOINER, s)
    s = _JOIN_ARROWS.sub(WORD_JOINER, s)
    s = _SPECIAL.sub(r"\\\1", s)
    if line_start:
        s = _LEADING_SPACES.sub(" ", s)
        s = _LINE_MARKER.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], s)
    return s


# ------------------------------------------------------------------------- the app's own prose
# An address the app cites is a link whose text is the address itself, with no invisible character in it: a visitor
# copies it as it is. Only addresses written in the app's own sources become links, so a visitor's text that holds
# another address stays inert. In the app's own sentences (``prose``) a code span (`VAR=value`) stays as it is:
# nothing inside backticks is transformed, so a setting pastes as written.
_ADDRESS = re.compile(r"https?://[^\s<>()\[\]`\"'\\]*[^\s<>()\[\]`\"'\\.,;:!?]")
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_ROOT = pathlib.Path(__file__).resolve().parents[1]


def _scan_cited() -> frozenset[str]:
    """Every address written in the app's own sources (core, ui, pages)."""
    found: set[str] = set()
    for folder in ("core", "ui", "pages"):
        for path in (_ROOT / folder).rglob("*.py"):  # string constants: a literal split over two lines is one
            source = path.read_text(encoding="utf-8")
            if "://" not in source:
                continue
            for node in ast.walk(ast.parse(source)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and "://" in node.value:
                    found |= set(_ADDRESS.findall(node.value))
    return frozenset(found)


_CITED = _scan_cited()  # once, when the module loads: the app's sources do not change while it runs


def cited_addresses() -> frozenset[str]:
    return _CITED


def address(url: str, text: str | None = None) -> str:
    """A markdown link to ``url``, its text the address itself (or ``text``), with no invisible character."""
    shown = _SPECIAL.sub(r"\\\1", text if text is not None else url)
    return f"[{shown}](<{url}>)"


def prose(text: object, line_start: bool = True) -> str:
    """The app's own sentence as markdown: ``inert``, except that its code spans stay code."""
    return _markdown(str(text), line_start, code=True)


def _markdown(s: str, line_start: bool, code: bool) -> str:
    s = _LINE_BREAKS.sub(" ", s)
    pattern = f"{_CODE_SPAN.pattern}|{_ADDRESS.pattern}" if code else _ADDRESS.pattern
    out, at = [], 0
    for m in re.finditer(pattern, s):
        piece = m.group(0)
        if not piece.startswith("`") and piece not in cited_addresses():
            continue
        out.append(_escaped(s[at:m.start()], line_start and not out))
        out.append(piece if piece.startswith("`") else address(piece))
        at = m.end()
    out.append(_escaped(s[at:], line_start and not out))
    return "".join(out)


# ---------------------------------------------------------------------- errors against the exact value
# Errors in ULPs are written by core.arith.metrics.UlpText, the one formatter (core writes them in sentences too):
# ulps_text for a sentence, ulps_short for a metric.
NO_FINITE_BOUND = "no finite bound"
NOT_APPLICABLE = "does not apply"


def _number(x: float | None, spec: str, none: str) -> str:
    if x is None:
        return none
    if math.isinf(x):
        return "∞"
    if math.isnan(x):
        return "undefined"
    return format(x, spec)


def _within(m: ErrorReport) -> str:
    if m.within_bound is not None:
        return "yes" if m.within_bound else "NO (bug)"
    if m.overflowed:
        return "overflow"
    return "— (no finite bound)" if m.bound is None and math.isfinite(m.abs_error) else "—"


def error_cells(m: ErrorReport | None, bound: str = "bound", no_bound: str = NO_FINITE_BOUND) -> dict[str, str]:
    """A result's cells in an error table: its format, value and bits, its error in ULPs, relative and absolute,
    and its bound (the columns "<bound> (ULPs)" and "<bound> (absolute)") with whether it holds; ``None``: a model
    that does not apply."""
    if m is None:
        cells = dict.fromkeys(("format", "value", "bits", "error (ULPs)", f"{bound} (ULPs)", "relative error",
                               "correct digits", "|error| (absolute)", f"{bound} (absolute)", "within bound"), "—")
        return cells | {"value": NOT_APPLICABLE}
    undefined = "undefined (exact sum is 0)"
    return {
        "format": m.fmt.name,
        "value": "-0" if m.negative_zero else shortest_repr(m.value, m.fmt),
        "bits": hex_bits(m.bits, m.fmt),
        "error (ULPs)": ulps_cell(m.ulps),
        f"{bound} (ULPs)": no_bound if m.bound is None else bound_cell(m.bound_ulps),
        "relative error": _number(m.rel_error, ".3e", undefined),
        "correct digits": _number(m.correct_digits, ".1f", undefined),
        "|error| (absolute)": _number(float(m.abs_error), ".3e", undefined),
        f"{bound} (absolute)": no_bound if m.bound is None else f"{float(m.bound):.3e}",
        "within bound": _within(m),
    }


def error_table(rows: Iterable[tuple[dict, ErrorReport | None, dict]], shown: Sequence[str], bound: str = "bound",
                no_bound: str = NO_FINITE_BOUND) -> pd.DataFrame:
    """The one table of results against their exact value (the Summation lab's orders, GPU arithmetic's models):
    per row, the page's leading cells (name, origin), the ``shown`` cells of ``error_cells``, the trailing ones
    (provenance, time)."""
    out = []
    for head, report, tail in rows:
        cells = error_cells(report, bound, no_bound)
        out.append({**head, **{c: cells[c] for c in shown}, **tail})
    return pd.DataFrame(out)


def fitting(table: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """A wide table's ``columns`` that fit the page at 1280 px (the full table is shown folded below)."""
    return table[[c for c in columns if c in table.columns]]


def abs_rel_text(abs_error, rel_error: float | None) -> str:
    """The absolute and the relative error, shown beside ULPs: after cancellation one ULP of the result is tiny,
    so an answer off by 1 reads "-1.05e6 ULP" and says little without these two."""
    a = float(abs_error)
    if math.isinf(a):
        return "absolute error ∞"
    text = f"absolute error {a:.3g}"
    if rel_error is None:
        return text + ", relative error undefined (the exact sum is 0)"
    return text + (f", relative error {rel_error:.3g}" if math.isfinite(rel_error) else ", relative error undefined")
