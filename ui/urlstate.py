"""Keep a page's settings in its URL: restore once per session, write back on every run."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from core.querystate import Field, decode, encode
from ui.render import inert


def restore(page: str, fields: Sequence[Field], defaults: dict) -> list[str]:
    """Before the widgets: defaults, then (once per session) values from the link.

    Returns the notes about what the link held that was ignored, on every run of the session
    (kept in session state: a rerun right after the restore, such as the navigation guard's,
    must not lose them)."""
    for key, value in defaults.items():
        st.session_state.setdefault(key, value)
    flag, notes_key = f"_url_restored_{page}", f"_url_notes_{page}"
    if not st.session_state.get(flag):
        st.session_state[flag] = True
        values, notes = decode(dict(st.query_params), fields)
        for key, value in values.items():
            st.session_state[key] = value
        st.session_state[notes_key] = notes
    return list(st.session_state.get(notes_key, []))


def sync(fields: Sequence[Field]) -> str:
    """After the widgets: write the current settings into the URL; return the query string."""
    params = encode({f.key: st.session_state[f.key] for f in fields if f.key in st.session_state}, fields)
    if dict(st.query_params) != params:
        st.query_params.from_dict(params)
    return "&".join(f"{k}={v}" for k, v in params.items())


def share_box(query: str, notes: list[str]) -> None:
    """Show link notes and a copyable link to exactly this view.

    Notes quote what the link held (rejected values, unknown names): shown as inert text."""
    for note in notes:
        st.caption(f":material/link_off: {inert(note, line_start=False)}")
    base = (getattr(st.context, "url", "") or "").split("?")[0]
    with st.expander("Link to this view", icon=":material/link:"):
        st.code(f"{base}?{query}" if base else f"?{query}", language=None)
        st.caption("Copy it (button at the right of the box): the link reopens this page with these settings.")
