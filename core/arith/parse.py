"""Parsing typed numbers exactly, without eval, with messages a person can act on.

Accepted: decimal and scientific notation (``0.1``, ``-2.5e-3``, ``1E8``, ``1_000``),
exact fractions (``1/3``), and C99 hexadecimal floats (``0x1.8p-3``).  The text is
converted to an exact rational first and rounded to the target format once, so there is
no double rounding through float64.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from core.arith.exact import shortest_repr
from core.arith.formats import FloatFormat, round_to_format
from core.arith.loader import clip

MAX_TEXT_LENGTH = 200
MAX_DECIMAL_EXPONENT = 10_000  # beyond this every format over- or underflows anyway

_DECIMAL = re.compile(
    r"^(?P<sign>[+-]?)(?P<int>\d[\d_]*)?(?:\.(?P<frac>\d[\d_]*)?)?(?:[eE](?P<exp>[+-]?\d+))?$"
)
_RATIONAL = re.compile(r"^[+-]?\d+\s*/\s*\d+$")
_HEX = re.compile(r"^[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?$")
_NAN = {"nan", "+nan", "-nan", "snan", "qnan"}
_INF = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "∞", "-∞", "+∞"}


class ParseError(ValueError):
    """A typed value that cannot be used; ``str(err)`` is the message for the user."""


@dataclass(frozen=True, kw_only=True)
class ParsedNumber:
    text: str
    exact: Fraction  # the number the text denotes
    stored: Fraction  # the nearest value of the format
    fmt: FloatFormat

    @property
    def was_rounded(self) -> bool:
        return self.stored != self.exact

    @property
    def underflowed(self) -> bool:
        return self.exact != 0 and self.stored == 0


def parse_exact(text: str) -> Fraction:
    """The exact rational a piece of text denotes, or ParseError with the reason."""
    if text is None:
        raise ParseError("Enter a number.")
    s = text.strip()
    if not s:
        raise ParseError("Enter a number (for example 0.1, -2.5e-3, 1/3 or 0x1.8p-3).")
    if len(s) > MAX_TEXT_LENGTH:
        raise ParseError(f"That is {len(s)} characters long; at most {MAX_TEXT_LENGTH} are accepted.")
    low = s.lower().replace(" ", "")
    if low in _NAN:
        raise ParseError("NaN is not a number you can add meaningfully: any sum with it is NaN. Enter a finite number.")
    if low in _INF:
        raise ParseError("Infinity swamps every grouping (inf + x = inf). Enter a finite number.")
    m = _DECIMAL.match(s)
    if m and (m.group("int") or m.group("frac")):
        exp = int(m.group("exp") or 0)
        if abs(exp) > MAX_DECIMAL_EXPONENT:
            raise ParseError(
                f"The exponent {exp} is far outside every supported format "
                f"(float64 spans about 1e-324 to 1.8e308)."
            )
        return Fraction(s.replace("_", ""))
    if _RATIONAL.match(s):
        num, den = (part.strip() for part in s.split("/"))
        if int(den) == 0:
            raise ParseError("Division by zero: the denominator of a fraction must not be 0.")
        return Fraction(int(num), int(den))
    if _HEX.match(s):
        return _parse_hex(s)
    raise ParseError(
        f"“{clip(s)}” is not a number. Use decimal or scientific notation (0.1, 1e-8), "
        "a fraction (1/3) or a hex float (0x1.8p-3)."
    )


def _parse_hex(s: str) -> Fraction:
    sign = -1 if s.startswith("-") else 1
    body = s.lstrip("+-")[2:]
    exp = 0
    if "p" in body.lower():
        body, exp_text = re.split("[pP]", body)
        exp = int(exp_text)
        if abs(exp) > 4 * MAX_DECIMAL_EXPONENT:
            raise ParseError(f"The binary exponent {exp} is far outside every supported format.")
    int_part, _, frac_part = body.partition(".")
    digits = (int_part or "0") + frac_part
    value = Fraction(int(digits, 16)) * Fraction(2) ** (exp - 4 * len(frac_part))
    return sign * value


def parse_number(text: str, fmt: FloatFormat) -> ParsedNumber:
    """Parse and round to ``fmt``; overflow to infinity is an error, underflow is not."""
    exact = parse_exact(text)
    stored = round_to_format(exact, fmt)
    if isinstance(stored, float) and math.isinf(stored):
        raise ParseError(
            f"{clip(text.strip())} overflows {fmt.name}: the largest finite {fmt.name} is "
            f"±{shortest_repr(fmt.max_finite, fmt)}, so it would be stored as "
            f"{'-' if exact < 0 else ''}inf."
        )
    return ParsedNumber(text=text.strip(), exact=exact, stored=stored, fmt=fmt)
