"""The Streamlit side of the per-request budget (core.crowd.budget), the heavy gate (core.crowd.gate) and the
count of page runs in progress (core.crowd.arrivals)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from core.crowd import budget
from core.crowd.arrivals import ARRIVALS
from core.crowd.gate import HEAVY

NOTICE_S = 1.0  # an estimated wait from this long on is told, so that a wait over 2 s is never silent


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


@contextmanager
def counted_run() -> Iterator[None]:
    """Count this script run among the server's runs in progress; when the runs ahead of it are estimated to
    hold the server for ``NOTICE_S`` or more, say so first, in a toast (it goes by itself once read)."""
    with ARRIVALS.run() as crowd:
        if crowd.wait_s >= NOTICE_S:
            st.toast(f"{crowd.ahead} other page view{'s are' if crowd.ahead != 1 else ' is'} being made on this server "
                     f"right now: this one may take about {max(round(crowd.wait_s), 1)} s (an estimate from the "
                     "server time the last views took).", icon=":material/groups:", duration="long")
        yield
