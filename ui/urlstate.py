"""Keep a page's settings in its URL: apply every new link, write back on every run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import streamlit as st

from core.crowd.querystate import Field, decode, encode_bounded, query_string
from ui import talk
from ui.navigation import current_page_path, page_address, page_visit, write_address
from ui.render import inert

_PAGE_KEY = "_url_page"  # the page whose restore ran last in this session (sync writes for it)


@dataclass(frozen=True, kw_only=True)
class Query:
    """The query string of this view (``str(query)``), the parameters too long to be in it
    ({name: length}), and the longest value each parameter may carry ({name: length})."""

    text: str
    omitted: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.text


def restore(page: str, fields: Sequence[Field], defaults: dict) -> list[str]:
    """Before the widgets: defaults, then the link's values whenever the link is new to this page.

    A link is new when the URL's parameters differ from the ones this page last wrote (``sync``)
    or applied in this session: a scenario link clicked again after the visitor changed things, a
    link to the same page with other settings, an address reopened by the back button. Then the
    link's values are set, and every setting with a default that the link does not name goes back
    to that default (a link describes its whole view). On a rerun (a widget changed) the URL is
    still the one ``sync`` wrote, so the visitor's own changes stay.

    An address with no settings at all, in a session that has shown this page before, is a return
    to it (a page switch drops the address's parameters, and Streamlit drops the widgets' values of a
    page it leaves): the page comes back as the visitor left it (kept by ``sync``), not at its
    defaults. An address with settings that opens a new visit of the page (Back or Forward to the
    page's entry, whose address this page wrote itself) is applied again: the widgets' values went
    with the last visit. Presenter mode's parameter (ui.talk) is not a setting of the page.

    Returns the notes about what the link held that was ignored, on every run of the session
    (kept in session state: a rerun right after the restore, such as the navigation guard's,
    must not lose them)."""
    for key, value in defaults.items():
        st.session_state.setdefault(key, value)
    st.session_state[_PAGE_KEY] = page
    seen_key, notes_key, kept_key = f"_url_seen_{page}", f"_url_notes_{page}", f"_url_kept_{page}"
    params = {k: v for k, v in st.query_params.items() if k != talk.PARAM}
    visit, visit_key = page_visit(), f"_url_visit_{page}"
    entered = visit is not None and st.session_state.get(visit_key) != visit
    st.session_state[visit_key] = visit
    if st.session_state.get(seen_key) != params or entered:
        kept = st.session_state.get(kept_key)
        values, notes = (dict(kept), []) if not params and kept is not None else decode(params, fields)
        for f in fields:
            if f.key in values:
                st.session_state[f.key] = values[f.key]
            elif f.key in defaults:
                st.session_state[f.key] = defaults[f.key]
        st.session_state[notes_key] = notes
        st.session_state[seen_key] = params
    return list(st.session_state.get(notes_key, []))


def sync(fields: Sequence[Field]) -> Query:
    """After the widgets: write the current settings into the URL; return the query string.

    A value longer than its field allows (a long paste) stays out of the URL, so the
    browser's address and the shared link stay short enough to open; ``share_box`` says so.
    A session's first run leaves the address as it was opened, and the next run writes it first
    (ui.navigation.write_address).
    """
    values = {f.key: st.session_state[f.key] for f in fields if f.key in st.session_state}
    params, omitted = encode_bounded(values, fields)
    address = params | talk.url_params()
    if dict(st.query_params) != address:
        write_address(address)
    page = st.session_state.get(_PAGE_KEY)
    if page is not None:  # the next run with this URL is a rerun, not a new link
        st.session_state[f"_url_seen_{page}"] = dict(params)
        st.session_state[f"_url_kept_{page}"] = values  # what a return to the page brings back
    return Query(text=query_string(address), omitted=omitted, limits={f.param: f.limit for f in fields})


def share_box(query: Query, notes: list[str], downloads: Mapping[str, tuple[str, str, str]] | None = None) -> None:
    """Show link notes and a copyable link to exactly this view.

    Notes quote what the link held (rejected values, unknown names): shown as inert text.
    For a setting left out of the link, ``downloads`` maps its parameter to (what it is,
    file name, data): a download button offers that data instead."""
    for note in notes:
        st.caption(f":material/link_off: {inert(note, line_start=False)}")
    for name, length in query.omitted.items():  # next to the link box, not hidden inside it
        most = query.limits.get(name, 0)
        what, file_name, data = (downloads or {}).get(name, (f"“{name}”", "", ""))
        subject = f"{inert(what[:1].upper() + what[1:])} {'are' if what.endswith('s') else 'is'}"
        st.warning(
            f"{subject} too long for a link ({length:,} characters; a link carries at most {most:,}), "
            "so the link below opens the page with the default instead."
            + (" Download them to share, then paste or upload them after opening the link." if data else ""),
            icon=":material/link_off:",
        )
        if data:
            st.download_button(f"Download {what} ({file_name})", data, file_name, "text/plain",
                               key=f"_url_download_{name}", on_click="ignore", icon=":material/download:")
    base = page_address(current_page_path(), {})  # the page's address: a page switch reports the page left
    with st.expander("Link to this view", icon=":material/link:"):
        st.code(f"{base.rstrip('?')}?{query}", language=None)
        st.caption("Copy it (button at the right of the box): the link reopens this page with these settings.")
