"""The Streamlit side of the per-request budget (core.crowd.budget) and the heavy gate (core.crowd.gate)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from core.crowd import budget
from core.crowd.gate import HEAVY


def over_budget(cost: budget.Cost, advice: list[budget.Suggestion], kept: bool) -> None:
    """Say, next to the controls, that a request is over budget, why, and what would fit.

    ``kept``: whether the last result that fit stays shown below."""
    parts = ", ".join(f"{what} ({budget.amount(work)})" for what, work in cost.parts[:3])
    lines = [f"**These settings need more than one request may use on this shared server:** "
             f"{'; '.join(cost.over())}. Nothing was computed for them.",
             f"Estimated by the app's cost model: {cost.summary()}; the largest parts: {parts}."]
    if advice:
        lines.append("Any one of these fits: " + "; ".join(a.text for a in advice) + ".")
    lines.append("The last result that fit stays shown below." if kept else
                 "Reduce the settings above to see a result.")
    st.error("  \n".join(lines), icon=":material/speed:")


def _others(k: int) -> str:
    return f"{k} other heavy computation{'s' if k != 1 else ''}"


@contextmanager
def heavy_section(cost: budget.Cost, what: str) -> Iterator[None]:
    """Run the block through the server-wide gate when ``cost`` is heavy, saying whom it waits for.

    Cheap requests run at once. While waiting, the message is updated every quarter second;
    each update is where Streamlit stops this run if the visitor left or changed a setting."""
    if not cost.heavy:
        yield
        return
    slot = st.empty()

    def waiting(k: int) -> None:
        slot.info(f"Waiting for {_others(k)} to finish before {what} starts: at most {HEAVY.slots} heavy "
                  f"computation{'s run' if HEAVY.slots > 1 else ' runs'} at once on this server, so that everyone "
                  f"else's pages stay fast. This one needs {cost.summary()}.", icon=":material/hourglass_top:")

    started = time.monotonic()
    with HEAVY.hold(on_wait=waiting) as ahead:
        if ahead:
            slot.caption(f":material/hourglass_bottom: Waited {time.monotonic() - started:.0f} s for a free slot "
                         f"({_others(ahead)} were ahead).")
        else:
            slot.empty()
        yield


@contextmanager
def folded(label: str, key: str, icon: str | None = None, expanded: bool = False) -> Iterator[bool]:
    """A collapsed section whose content is made only once a visitor opens it (opening reruns the page): inside
    ``with folded(...) as open_:``, draw only ``if open_``. A closed section then costs a view nothing, and holds
    no chart laid out unseen (a closed expander's chart is drawn at zero size). The open state is the session's,
    under ``key``."""
    section = st.expander(label, expanded=expanded, icon=icon, key=key, on_change="rerun")
    with section:
        yield bool(section.open)
