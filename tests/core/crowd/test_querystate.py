"""core.crowd.querystate: untrusted link parameters decode strictly, never raise, and round-trip."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from core.crowd.querystate import MAX_PARAM_LENGTH, Field, FieldKind, decode, encode, encode_bounded, query_string

FIELDS = [
    Field(key="k_choice", param="c", kind=FieldKind.CHOICE, options=("float32", "float64", 1_000_000)),
    Field(key="k_multi", param="m", kind=FieldKind.MULTI, options=("sequential", "pairwise", "kahan")),
    Field(key="k_int", param="n", kind=FieldKind.INT, low=1, high=10_000_000),
    Field(key="k_float", param="lr", kind=FieldKind.FLOAT, low=0.0, high=10.0),
    Field(key="k_text", param="t", kind=FieldKind.TEXT, max_length=50),
]


def test_round_trip():
    values = {"k_choice": 1_000_000, "k_multi": ["kahan", "sequential"], "k_int": 42, "k_float": 0.35,
              "k_text": "1e8, 1, -1e8"}
    decoded, notes = decode(encode(values, FIELDS), FIELDS)
    assert decoded == values and notes == []


def test_bad_values_become_notes_and_defaults():
    decoded, notes = decode({"c": "float8", "m": "sequential,nope", "n": "0", "lr": "nan", "t": "x" * 51,
                             "evil": "<script>"}, FIELDS)
    assert decoded == {}
    assert len(notes) == 6 and any("Unknown link parameter" in n for n in notes)
    decoded, notes = decode({"n": "1e3", "lr": "inf"}, FIELDS)
    assert decoded == {} and len(notes) == 2
    decoded, _ = decode({"n": "99999999999999999999999"}, FIELDS)
    assert decoded == {}


def test_multi_removes_duplicates_and_keeps_order():
    decoded, notes = decode({"m": "pairwise,sequential,pairwise"}, FIELDS)
    assert decoded["k_multi"] == ["pairwise", "sequential"] and not notes


@given(st.dictionaries(st.text(max_size=20), st.text(max_size=MAX_PARAM_LENGTH + 10), max_size=8))
def test_arbitrary_parameters_never_raise_and_stay_in_bounds(params):
    decoded, notes = decode(params, FIELDS)
    assert isinstance(notes, list)
    if "k_int" in decoded:
        assert 1 <= decoded["k_int"] <= 10_000_000
    if "k_float" in decoded:
        assert 0.0 <= decoded["k_float"] <= 10.0
    if "k_choice" in decoded:
        assert decoded["k_choice"] in ("float32", "float64", 1_000_000)
    if "k_text" in decoded:
        assert len(decoded["k_text"]) <= 50


def test_encode_bounded_leaves_out_what_decode_would_refuse():
    values = {"k_int": 3, "k_text": "x" * 51}
    params, omitted = encode_bounded(values, FIELDS)
    assert params == {"n": "3"} and omitted == {"t": 51}
    _, notes = decode({"t": "x" * 51}, FIELDS)
    assert "too long for a link: 51 characters, at most 50" in notes[0]


@given(st.text(min_size=1, max_size=60))
def test_query_string_round_trips_any_text(text):
    from urllib.parse import parse_qs

    params, omitted = encode_bounded({"k_text": text}, FIELDS)
    if len(text) > 50:
        assert params == {} and omitted == {"t": len(text)}
    else:
        assert parse_qs(query_string(params), keep_blank_values=True) == {"t": [text]}
