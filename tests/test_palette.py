"""Every colour is named once, in ui/palette.py: no colour literal anywhere else in ui/, pages/ or app.py.

A view names a colour by what it shows (ui.palette.LIVE, RUN_A...), so one meaning has one colour
on every page and a change of colour is one edit. Streamlit's theme (.streamlit/config.toml) is not
Python and is not checked here."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PALETTE = ROOT / "ui" / "palette.py"
CHECKED = sorted([*ROOT.glob("ui/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])
# #rgb, #rgba, #rrggbb, #rrggbbaa, and rgb()/rgba()/hsl()/hsla(); an HTML entity (&#8202;) is not a colour
COLOUR = re.compile(r"(?<![&\w])#(?:[0-9a-fA-F]{8}|[0-9a-fA-F]{6}|[0-9a-fA-F]{3,4})\b|\b(?:rgba?|hsla?)\(")


def colour_literals(text: str) -> list[str]:
    return [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group()}" for m in COLOUR.finditer(text)]


@pytest.mark.parametrize("path", [p for p in CHECKED if p != PALETTE], ids=lambda p: str(p.relative_to(ROOT)))
def test_no_colour_literal_outside_the_palette(path):
    found = colour_literals(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}: name these colours in ui/palette.py: {found}"


def test_the_check_sees_every_form_of_a_colour():
    text = 'a = "#1f5fa8"\nb = "#fff"\nc = "#ffffffd0"\nd = "background:rgba(28,131,225,0.13)"\n'
    assert [c.split(": ")[1] for c in colour_literals(text)] == ["#1f5fa8", "#fff", "#ffffffd0", "rgba("]
    assert colour_literals("x = '&#8202;'  # a hair space, step #12 of the list") == []


def test_the_palette_names_each_colour_once():
    """One hue, one literal: a meaning that shares a hue names the hue's constant, not its value again."""
    hues = [m.group().lower() for m in COLOUR.finditer(PALETTE.read_text())]
    assert len(hues) == len(set(hues)), sorted(h for h in set(hues) if hues.count(h) > 1)
