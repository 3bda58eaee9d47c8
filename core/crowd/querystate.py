"""Page settings to and from URL query parameters: strict, bounded decoding.

A page declares its fields; ``decode`` turns untrusted query parameters into values,
rejecting anything malformed, out of range or unknown with a note instead of an error,
and ``encode`` writes the current values back as short strings. ``encode_bounded`` leaves
out every value too long for its field, so a link never carries what ``decode`` would
refuse (a long paste stays out of the URL), and ``query_string`` percent-encodes the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote, urlencode

MAX_PARAM_LENGTH = 2000
# The most characters of free text (a paste) a link carries: about 100 numbers, a URL of a few
# kB at most once percent-encoded, which browsers, proxies and chat apps pass on intact.
# Longer text stays out of the link; the page offers it as a download instead.
LINK_TEXT_CHARS = 1_500


class FieldKind(StrEnum):
    """What a field's parameter holds."""

    CHOICE = "choice"  # one of ``options``
    MULTI = "multi"  # several of ``options``, comma-separated
    INT = "int"  # an integer in [low, high]
    FLOAT = "float"  # a finite number in [low, high]
    TEXT = "text"  # free text of at most ``max_length`` characters


@dataclass(frozen=True, kw_only=True)
class Field:
    key: str  # the widget's session_state key
    param: str  # the name in the URL
    kind: FieldKind
    options: tuple = ()  # for choice / multi
    low: float | None = None
    high: float | None = None
    max_length: int = 200

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FieldKind(self.kind))  # a misspelt kind fails where it is declared

    @property
    def limit(self) -> int:
        """The longest value (in characters) a link may carry for this field."""
        return min(self.max_length, MAX_PARAM_LENGTH)

    def decode(self, raw: str):
        """The value a parameter denotes, or ValueError with a short reason."""
        if len(raw) > self.limit:
            raise ValueError(f"too long for a link: {len(raw):,} characters, at most {self.limit:,}")
        if self.kind == FieldKind.CHOICE:
            for o in self.options:
                if str(o) == raw:
                    return o
            raise ValueError("not one of the choices")
        if self.kind == FieldKind.MULTI:
            parts = [p for p in raw.split(",") if p]
            chosen = []
            for p in parts:
                match = next((o for o in self.options if str(o) == p), None)
                if match is None:
                    raise ValueError(f"{p[:20]!r} is not one of the choices")
                if match not in chosen:
                    chosen.append(match)
            if not chosen:
                raise ValueError("empty")
            return chosen
        if self.kind == FieldKind.INT:
            if not raw.lstrip("-").isdigit() or len(raw) > 20:
                raise ValueError("not a whole number")
            value = int(raw)
        elif self.kind == FieldKind.FLOAT:
            try:
                value = float(raw)
            except ValueError:
                raise ValueError("not a number") from None
            if not math.isfinite(value):
                raise ValueError("not finite")
        elif self.kind == FieldKind.TEXT:
            return raw
        else:  # pragma: no cover - a programming error in a page's declaration
            raise ValueError(f"unknown field kind {self.kind!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"outside {self.low:g} to {self.high:g}")
        return value

    def encode(self, value) -> str:
        if self.kind == FieldKind.MULTI:
            return ",".join(str(v) for v in value)
        if self.kind == FieldKind.FLOAT:
            return repr(float(value))
        return str(value)


def decode(params: Mapping[str, str], fields: Sequence[Field]) -> tuple[dict, list[str]]:
    """(values by widget key, notes about every parameter that was ignored)."""
    values, notes = {}, []
    known = {f.param for f in fields}
    for f in fields:
        if f.param not in params:
            continue
        raw = params[f.param]
        if not isinstance(raw, str):
            notes.append(f"“{f.param}” was ignored (not text).")
            continue
        try:
            values[f.key] = f.decode(raw)
        except ValueError as err:
            notes.append(f"“{f.param}={raw[:40]}” was ignored ({err}); the default is used.")
    for name in params:
        if name not in known:
            notes.append(f"Unknown link parameter “{str(name)[:40]}” was ignored.")
    return values, notes


def encode(values: Mapping, fields: Sequence[Field]) -> dict[str, str]:
    """The link's parameters; a setting at None (a view that is off) is left out of the link."""
    return {f.param: f.encode(values[f.key]) for f in fields if values.get(f.key) is not None}


def encode_bounded(values: Mapping, fields: Sequence[Field]) -> tuple[dict[str, str], dict[str, int]]:
    """(parameters, {name: length} of the values left out because they are longer than their field allows)."""
    params, omitted = {}, {}
    for name, text in encode(values, fields).items():
        field = next(f for f in fields if f.param == name)
        if len(text) > field.limit:
            omitted[name] = len(text)
        else:
            params[name] = text
    return params, omitted


def query_string(params: Mapping[str, str]) -> str:
    """``a=1&b=x%20y``: every reserved character percent-encoded, so any value survives the trip."""
    return urlencode(params, quote_via=quote, safe=",")
