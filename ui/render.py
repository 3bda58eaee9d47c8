"""Small renderers: colour-coded bit patterns, and ``inert`` for text that came from outside."""

from __future__ import annotations

import re

from core.arith.formats import FloatFormat, hex_bits, split_bits
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
    icon, emoji or formatting can come out of it. Line breaks become spaces.

    ``line_start=False`` skips escaping a leading list marker, for text that is never at
    the start of a markdown line (inside an inline HTML tag, after a prefix)."""
    s = _LINE_BREAKS.sub(" ", str(text))
    s = _JOIN_AFTER.sub(WORD_JOINER, s)
    s = _JOIN_WWW.sub(WORD_JOINER, s)
    s = _JOIN_ARROWS.sub(WORD_JOINER, s)
    s = _SPECIAL.sub(r"\\\1", s)
    if line_start:
        s = _LEADING_SPACES.sub(" ", s)
        s = _LINE_MARKER.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], s)
    return s


def ulps_text(ulps: float, relative: float | None = None) -> str:
    """An error in ULPs as text; from core.studies.sumlab.HUGE_ULPS on, with its relative error beside it (an error of
    4.5e15 ULPs means little until it reads 'relative error 1', the whole answer)."""
    import math

    from core.studies.sumlab import HUGE_ULPS

    if math.isnan(ulps):
        return "undefined"
    if math.isinf(ulps):
        return "∞ (overflowed)"
    text = f"{ulps:+.4g} ULP"
    if abs(ulps) >= HUGE_ULPS and relative is not None:
        text += f" (relative error {relative:.3g})"
    return text


def ulps_short(ulps: float) -> str:
    """An error in ULPs short enough for a metric ("-6.264e+07 UL…" was cut): 4 significant digits
    below 10^5, else three with a bare exponent ("-6.26e7 ULP")."""
    import math

    if math.isnan(ulps):
        return "undefined"
    if math.isinf(ulps):
        return "∞ (overflowed)"
    if abs(ulps) < 1e5:
        return f"{ulps:+.4g} ULP"
    mantissa, exponent = f"{ulps:+.2e}".split("e")
    return f"{mantissa}e{int(exponent)} ULP"


def abs_rel_text(abs_error, rel_error: float | None) -> str:
    """The absolute and the relative error, shown beside ULPs: after cancellation one ULP of the result is tiny,
    so an answer off by 1 reads "-1.05e6 ULP" and says little without these two."""
    import math

    a = float(abs_error)
    if math.isinf(a):
        return "absolute error ∞"
    text = f"absolute error {a:.3g}"
    if rel_error is None:
        return text + ", relative error undefined (the exact sum is 0)"
    return text + (f", relative error {rel_error:.3g}" if math.isfinite(rel_error) else ", relative error undefined")
