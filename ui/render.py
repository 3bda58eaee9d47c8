"""Small HTML renderers: colour-coded bit patterns and provenance captions."""

from __future__ import annotations

import html

from core.formats import FloatFormat, hex_bits, split_bits

SIGN_COLOUR = "#c0392b"
EXPONENT_COLOUR = "#1e8449"
MANTISSA_COLOUR = "#1f5fa8"


def bits_html(bits: int, fmt: FloatFormat) -> str:
    """Sign | exponent | mantissa, coloured, with the hex pattern in a tooltip."""
    sign, exponent, mantissa = split_bits(bits, fmt)
    return (
        f'<span class="fp-bits" title="{fmt.name} bit pattern {hex_bits(bits, fmt)}" '
        'style="font-family:monospace;font-size:0.92em;letter-spacing:0.02em;word-break:break-all">'
        f'<span style="color:{SIGN_COLOUR};font-weight:700">{sign}</span>&#8202;'
        f'<span style="color:{EXPONENT_COLOUR};font-weight:700">{exponent}</span>&#8202;'
        f'<span style="color:{MANTISSA_COLOUR}">{mantissa}</span></span>'
    )


def bits_legend(fmt: FloatFormat) -> str:
    return (
        f'<span style="font-size:0.85em">{fmt.name}: '
        f'<span style="color:{SIGN_COLOUR};font-weight:700">1 sign bit</span> · '
        f'<span style="color:{EXPONENT_COLOUR};font-weight:700">{fmt.exponent_bits} exponent bits</span> · '
        f'<span style="color:{MANTISSA_COLOUR}">{fmt.mantissa_bits} mantissa bits</span> '
        f"(precision p = {fmt.precision} with the implicit leading 1)</span>"
    )


def mono(text: str) -> str:
    """Escaped monospace text that wraps (long exact decimals must not overflow)."""
    return (
        '<code style="white-space:normal;overflow-wrap:anywhere;word-break:break-all">'
        f"{html.escape(text)}</code>"
    )
