"""Charts drawn from a Vega-Lite specification built once per result, not once per viewer.

``st.altair_chart`` converts its chart to a Vega-Lite specification on every run of every session:
Altair builds the chart objects, validates the whole specification against its schema, and Streamlit
does the conversion under one process-wide lock (Altair's theme and data-transformer settings are
global). When a room opens one talk link, that was most of each view's cost, and the lock serialised
the views. ``show`` builds a chart once per (builder, result key, presenter mode), keeps its
specification in ``core.crowd.bytecache.CHART_SPECS`` (bounded in bytes), and draws it with
``st.vega_lite_chart``, which takes a specification as it is.

The conversion is Streamlit's own, so the chart a viewer sees is the one ``st.altair_chart`` would have
drawn, its data sent as Arrow tables: Streamlit offers it only as a private function
(``streamlit.elements.vega_charts._convert_altair_to_vega_lite_spec``, in 1.67), so where it is missing
``show`` falls back to ``st.altair_chart`` and the chart is simply built per view again.
Altair's public ``Chart.to_dict()`` is not a way round it: it applies Altair's active theme (its default
sizes) and inlines the data as JSON rows (at most 5,000), and the theme and data transformer that would
make it Streamlit's are process-wide settings that Streamlit swaps under a private lock, so a conversion
of our own would race with every ``st.altair_chart`` of other sessions.
tests/pages/test_charts.py holds both behaviours, and fails when the public route draws the same chart.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import streamlit as st

from core.crowd.bytecache import CHART_SPECS
from ui.talk import presenter

try:  # no public way: see the module's docstring
    from streamlit.elements.vega_charts import _convert_altair_to_vega_lite_spec as _to_spec
except ImportError:  # another Streamlit: every view converts its own chart
    _to_spec = None


def spec(build: Callable[..., Any], *args: Any, key: Hashable) -> dict | None:
    """The Vega-Lite specification of ``build(*args)`` for this viewer's drawing mode, built once per ``key``
    (None where Streamlit offers no conversion)."""
    if _to_spec is None:
        return None
    whose = (build.__module__, build.__qualname__, key, presenter())
    return CHART_SPECS.get_or_compute(whose, lambda: _to_spec(build(*args)))


def show(build: Callable[..., Any], *args: Any, key: Hashable, where: Any = None, width: str | int = "stretch") -> None:
    """Draw ``build(*args)`` (an Altair chart) in ``where`` (the page by default). ``key`` names the result the
    chart shows (a frozen settings object, say): two calls with one key and one builder draw one chart. The key
    must compare equal from one run to the next: a record with ``eq=False`` compares by identity, so its key
    would miss every time (the Summation lab's requests give their ``orders_key()`` instead)."""
    where = st if where is None else where
    made = spec(build, *args, key=key)
    if made is None:
        where.altair_chart(build(*args), width=width)
        return
    # Streamlit copies the specification's top level before it takes the data out of it: the cached one stays whole
    where.vega_lite_chart(spec=made, width=width)
