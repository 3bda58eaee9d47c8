"""The app's technical terms, each defined once where the story first uses it, and linked from elsewhere.

ULP first appears on the Non-associativity page (the first page of the story); the condition
number κ and the γ(n) bounds first appear in the Summation lab. ``define`` draws the definition
there, under a small heading whose anchor the other pages link to (``link``); ``help_text`` is the
same definition for tooltips (metrics, column headers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True, kw_only=True)
class Term:
    name: str  # as the text writes it
    heading: str  # the defining heading; its markdown anchor is what ``link`` points to
    page: str  # url path (file stem) of the page that defines it
    text: str  # the definition, plain words first

    @property
    def anchor(self) -> str:
        """Streamlit's anchor for a markdown heading: lower case, words joined by '-', punctuation dropped."""
        kept = "".join(ch if ch.isalnum() or ch in " -" else "" for ch in self.heading.lower())
        return "-".join(kept.split())


TERMS: dict[str, Term] = {
    "ulp": Term(
        name="ULP", heading="What is a ULP", page="non_associativity",
        text="**ULP** (unit in the last place): the gap between two neighbouring numbers of a format at a given "
        "size. Between 1 and 2 a float32 ULP is 2⁻²³ ≈ 1.2·10⁻⁷ and a float64 ULP 2⁻⁵² ≈ 2.2·10⁻¹⁶; it doubles "
        "with every power of two. An error of 1 ULP is one such gap. Where the exact answer is itself a number of "
        "the format, a result 1 ULP off is its neighbour; otherwise even the correctly rounded result is up to half "
        "a ULP away. Errors in this app are counted in ULPs of the exact result, unless a page names another "
        "value whose ULP it uses.",
    ),
    "kappa": Term(
        name="κ", heading="What is the condition number κ", page="summation_lab",
        text="**Condition number κ = Σ|x| / |Σx|**: how much the sum magnifies rounding. With κ = 10⁸ large values "
        "cancel, and an error that is tiny next to Σ|x| is 10⁸ times larger next to the answer. κ = 1 (all values "
        "of one sign) means no cancellation, not no error: the error still grows with the number of additions. In "
        "float32, 16,777,216 + 1 rounds back to 16,777,216 (2²⁴), so a left-to-right sum of 2·10⁷ ones stops "
        "there. Relative error ≲ κ × (the rounding of one addition × the depth of the order's tree).",
    ),
    "gamma": Term(
        name="γ(n)", heading="What is the bound γ(n)", page="summation_lab",
        text="**γ(n) = n·u / (1 − n·u)**, with u the unit roundoff (half a ULP of 1: 2⁻²⁴ in float32, 2⁻⁵³ in "
        "float64): roughly n roundings' worth of relative error. A sum whose additions are nested at most n "
        "deep (its tree depth) has |error| ≤ γ(n)·Σ|x| (Higham, *Accuracy and Stability of Numerical "
        "Algorithms*, ch. 4): left to right n − 1 deep, pairwise only ⌈log₂ n⌉ deep. The lab states each bound "
        "in ULPs beside the error it bounds.",
    ),
    "split_k": Term(
        name="split-K", heading="What is split-K", page="gpu_arithmetic",
        text="**Split-K**: a matrix product's inner dimension K (the length of each dot product) is cut into s slices "
        "that run in parallel (on different thread blocks); each slice's partial dot product is rounded on its "
        "own, and the s partials are added at the end. Another s, another grouping, other bits.",
    ),
    "rna": Term(
        name="rna", heading="What is rna", page="gpu_arithmetic",
        text="**rna** (round to nearest, ties away from zero): how CUTLASS converts a float32 input to TF32 by "
        "default, keeping 10 of its 23 mantissa bits; a value exactly half-way between two TF32 values goes to the one "
        "farther from zero. **rne** sends ties to the even one (IEEE's default), **rz** simply truncates.",
    ),
    "eta": Term(
        name="η", heading="What is η", page="gpu_arithmetic",
        text="**η**: half the smallest positive subnormal number of the format (2⁻¹⁵⁰ in float32, 2⁻¹⁰⁷⁵ in float64), "
        "the most that one rounding can be off in absolute terms when its result underflows. Error bounds add "
        "m·η for m roundings so they also hold for tiny products.",
    ),
}


def help_text(key: str) -> str:
    """The definition as plain text for a tooltip (``help=``)."""
    return TERMS[key].text.replace("*", "")


def define(key: str) -> None:
    """The definition, on the page that introduces the term: a small heading (the link target) and a caption."""
    term = TERMS[key]
    st.markdown(f"###### {term.heading}?")
    st.caption(term.text)


def link(key: str, label: str | None = None) -> str:
    """Markdown for a mention on another page: the term, linked to its definition (a relative link, so it also
    works under a base URL path), with the definition as the link's tooltip."""
    term = TERMS[key]
    return f"[{label or term.name}]({term.page}#{term.anchor} \"{help_text(key)}\")"


def kappa_metric(col, kappa: float, formula: str) -> None:
    """The condition number as a metric: 'undefined' (NaN: a zero sum of zeros), ∞ (an exact zero sum of
    nonzero terms) or three digits, with the definition as its tooltip."""
    if math.isnan(kappa):
        col.metric("Condition number κ", "undefined", help=help_text("kappa"))
    else:
        col.metric(f"Condition number κ = {formula}", "∞" if math.isinf(kappa) else f"{kappa:.3g}",
                   help=help_text("kappa"))
