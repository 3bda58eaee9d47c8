"""Other causes than a sum's order: the live ULP errors of exp, log, tanh and sigmoid, the recorded CPUs'
elementwise hashes, and the causes named with their sources (core.studies.elementwise); no numerics here."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.studies.elementwise import (
    CUDA_MATH_API,
    CUDA_MATH_SOURCE,
    IMPLEMENTATIONS,
    OTHER_CAUSES,
    OtherCauses,
    cached_other_causes,
    headline,
    recorded_sentence,
    subnormal_sentence,
)
from ui import glossary
from ui.render import inert


def _missed(wrong: int, total: int, most: int) -> str:
    """"15 of 321, ≤ 1": how many results were not correctly rounded, and the most ULPs off."""
    return f"{wrong} of {total}, ≤ {most}" if wrong else f"0 of {total}"


def results_table(result: OtherCauses) -> pd.DataFrame:
    """One row per function and format: each library's misses and largest error, where they disagree, CUDA's
    bound. Short columns, so that the table fits the page at 1280 px."""
    rows = []
    for d in result.disagreements:
        row = {"function": f"{d.function} ({d.fmt})"}
        for impl in IMPLEMENTATIONS:
            r = result.row(d.function, d.fmt, impl.key)
            row[f"{impl.label.split()[0]} missed, ≤ ULPs"] = _missed(r.not_correctly_rounded, r.inputs, r.max_ulps)
        row["torch ≠ NumPy"] = f"{d.differing} of {d.inputs}"
        documented = result.row(d.function, d.fmt, IMPLEMENTATIONS[0].key).cuda_documented
        row["CUDA: ≤ ULPs"] = "—" if documented is None else str(documented)
        rows.append(row)
    return pd.DataFrame(rows)


def recorded_table(result: OtherCauses) -> pd.DataFrame:
    """One row per recorded machine, one column per operation: A for the first machine's bits, B for other
    bits, and so on."""
    machines: list[str] = []
    for r in result.recorded:
        for group in r.groups:
            machines += [m for m in group if m not in machines]
    rows = []
    for m in machines:
        row = {"recorded CPU": m}
        for r in result.recorded:
            row[r.op] = next((chr(ord("A") + i) for i, g in enumerate(r.groups) if m in g), "—")
        rows.append(row)
    return pd.DataFrame(rows)


def draw_other_causes() -> None:
    """The whole section: one cached computation (well under a second, once per server process)."""
    with st.spinner("Measuring exp, log, tanh and sigmoid against correctly rounded results…"):
        result = cached_other_causes()
    st.markdown(headline(result))
    st.dataframe(results_table(result), hide_index=True, width="stretch")
    st.caption(
        f"{result.provenance[:1].upper()}{result.provenance[1:]}. Correctly rounded results: mpmath, to as many "
        "bits as it takes to decide each rounding. "
        f"Missed: results other than the correctly rounded one; ≤ {glossary.link('ulp', 'ULPs')}: the largest "
        "distance from the correctly rounded result (CUDA's measure) where that result is a normal number. "
        f"{subnormal_sentence(result)} NumPy has no sigmoid: its row is 1/(1 + exp(−x)) in the argument's format. "
        "The grid: thresholds of overflow, underflow and saturation with their neighbours, tiny arguments, seeded "
        "random ones and, in float32, arguments whose results lie nearest a half-way point. CUDA's column: the "
        "maximum errors the CUDA C++ Programming Guide tabulates (Mathematical Functions, "
        f"{inert(CUDA_MATH_SOURCE, line_start=False)}; CUDA Math API, {inert(CUDA_MATH_API, line_start=False)}), "
        "from extensive but not exhaustive tests; not measured here. sigmoid is no CUDA function."
    )
    st.markdown(recorded_sentence(result))
    if result.recorded:
        st.dataframe(recorded_table(result), hide_index=True, width="stretch")
        st.caption("Recorded: the op fingerprint hashes the bits of tanh and exp of "
                   "100,000 fixed float32 values and of a log_softmax, on each recorded machine. In a column, one "
                   "letter means the same bits; the recordings do not say which part of the machine made the "
                   "difference.")
    st.markdown("Three more causes that are not a sum's order (not measured here):\n\n" + "\n".join(
        f"- **{name}**: {inert(text, line_start=False)} (source: {inert(url, line_start=False)})"
        for name, text, url in OTHER_CAUSES))
