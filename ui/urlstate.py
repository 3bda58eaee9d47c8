"""Keep a page's settings in its URL: restore once per session, write back on every run."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from core.querystate import Field, decode, encode


def restore(page: str, fields: Sequence[Field], defaults: dict) -> list[str]:
    """Before the widgets: defaults, then (once per session) values from the link. Returns notes."""
    for key, value in defaults.items():
        st.session_state.setdefault(key, value)
    flag = f"_url_restored_{page}"
    if st.session_state.get(flag):
        return []
    st.session_state[flag] = True
    values, notes = decode(dict(st.query_params), fields)
    for key, value in values.items():
        st.session_state[key] = value
    return notes


def sync(fields: Sequence[Field]) -> str:
    """After the widgets: write the current settings into the URL; return the query string."""
    params = encode({f.key: st.session_state[f.key] for f in fields if f.key in st.session_state}, fields)
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
    return "&".join(f"{k}={v}" for k, v in params.items())


def share_box(query: str, notes: list[str]) -> None:
    """Show link notes and a copyable link to exactly this view."""
    for note in notes:
        st.caption(f":material/link_off: {note}")
    base = (getattr(st.context, "url", "") or "").split("?")[0]
    with st.expander("Link to this view", icon=":material/link:"):
        st.code(f"{base}?{query}" if base else f"?{query}", language=None)
        st.caption("Copy it (button at the right of the box): the link reopens this page with these settings.")
