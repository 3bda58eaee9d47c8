"""The app's technical terms, each defined once where the story first uses it, and linked from elsewhere.

ULP first appears on the Non-associativity page (the first page of the story); the condition
number κ and the γ(n) bounds first appear in the Summation lab. ``define`` draws the definition
there, under a small heading whose anchor the other pages link to (``link``); ``help_text`` is the
same definition for tooltips (metrics, column headers).

Other terms are explained only by a tooltip (``TIPS``): the ``help=`` of the element where a page first
shows the term, so that a reader who meets the word can hover over it there.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import streamlit as st

from core.diagnose.envelopes import ENVELOPE_FACTOR


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


@dataclass(frozen=True, kw_only=True)
class Tip:
    name: str  # as the text writes it
    text: str  # the explanation, plain text: it is shown as a tooltip


TIPS: dict[str, Tip] = {
    "delta_theta": Tip(
        name="‖Δθ‖",
        text="‖Δθ‖ = ‖θA − θB‖: how far apart the weights of runs A and B are, the Euclidean length of the difference "
        "of all their parameters (B's taken into A's layout first), computed in float64.",
    ),
    "doubling": Tip(
        name="doubles every",
        text="Doubles every D steps: a straight line fitted by least squares through ln‖Δθ‖ over its growth phase "
        "(from the first step whose weights differ until ‖Δθ‖ first reaches a tenth of its largest value so far) "
        "rises by ln 2 every D steps: there the distance grows about twofold every D steps. “—”: no growth to fit "
        "(too few steps in that phase so far, or a fitted line that does not rise).",
    ),
    "nats": Tip(
        name="nats",
        text="Nats: the unit of a loss computed with the natural logarithm, as the cross-entropy here is (the mean of "
        "−ln of the probability each example's true class gets). A uniform guess among k classes costs ln k nats; "
        "1 nat = 1/ln 2 ≈ 1.44 bits.",
    ),
    "split_kv": Tip(
        name="split-KV",
        text="Split-KV attention (flash-decoding): a decoding step's attention over a request's cached keys and "
        "values is cut into pieces that run in parallel, each with its own maximum and partial sums; the pieces are "
        "then rescaled and added. A kernel picks the number of pieces to fill the GPU, so it can depend on the "
        "batch: another count, another order of additions, other bits.",
    ),
    "logit_rows": Tip(
        name="logit rows",
        text="Logit rows: each is the model's scores (logits) for every token of its vocabulary (here, characters) "
        "at one position of one request: one row of its output. Greedy decoding picks the token with the largest.",
    ),
    "top2_gap": Tip(
        name="top-2 gap",
        text="Top-2 gap: how far a row's largest logit lies above its second largest (counted here in ULPs of the "
        "larger, or as a fraction of it). A change of the two logits by more than this gap can swap them: greedy "
        "decoding then picks the other token.",
    ),
    "unit_roundoff": Tip(
        name="unit roundoff",
        text="Unit roundoff u: half the gap between 1 and the next number of the format, 2⁻ᵖ for p significant bits "
        "(float32 2⁻²⁴ ≈ 6.0·10⁻⁸, float64 2⁻⁵³ ≈ 1.1·10⁻¹⁶, bfloat16 2⁻⁸). Within the format's normal range, one "
        "correctly rounded operation is off from its exact result by at most u, relatively.",
    ),
    "envelope": Tip(
        name="envelope",
        text=f"Envelope: the largest difference that rounding alone is taken to explain, element by element: "
        f"{ENVELOPE_FACTOR:g} times the typical size that another order of the same additions gives, or the "
        "a-priori bound on any two orders where that is smaller (plus one rounding of a result stored in a narrower "
        "format). Within it, a difference is what reordering does; far beyond it, it is worth a look.",
    ),
}


def help_text(key: str) -> str:
    """The definition as plain text for a tooltip (``help=``): a term of TERMS or TIPS."""
    return TIPS[key].text if key in TIPS else TERMS[key].text.replace("*", "")


def help_for(text: str, *keys: str) -> str | None:
    """The tooltip for an element whose ``text`` may use the terms ``keys``: the definitions of those it uses, one
    paragraph each (None: it uses none of them). A name counts as a whole word, so split-K is not split-KV."""
    used = [key for key in keys if re.search(rf"(?<!\w){re.escape(_name(key))}(?!\w)", text)]
    return help_texts(*used) or None


def help_texts(*keys: str) -> str:
    """The definitions of ``keys`` for one tooltip, a paragraph each."""
    return "\n\n".join(help_text(key) for key in keys)


def _name(key: str) -> str:
    return TIPS[key].name if key in TIPS else TERMS[key].name


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
