"""Talk mode: a presenter toggle (larger type, fewer controls) and curated scenarios."""

from __future__ import annotations

import streamlit as st

KEY = "presenter"

# (title, page file, link parameters, what the audience sees)
SCENARIOS: list[tuple[str, str, dict, str]] = [
    ("0.1 + 0.2 + 0.3", "pages/non_associativity.py", {"preset": "0.1 + 0.2 + 0.3 (float64)"},
     "Two groupings of three decimals, one ULP apart, every rounding shown."),
    ("Sum of a million float32", "pages/summation_lab.py", {"n": "1000000", "storage": "float32"},
     "Eight summation orders of the same vector against the exact sum."),
    ("1 vs all threads", "pages/cpu_vs_gpu.py", {"vector": "normal", "n": "1000000", "format": "float32"},
     "torch.sum on this server's CPU with one thread and with all of them: the bits depend on the split."),
    ("GPU block tree", "pages/summation_lab.py",
     {"n": "32", "orders": "sequential,pairwise,torch_all,cuda_model,correct", "permutations": "0", "tree": "pairwise"},
     "32 values: the GPU's block reduction (threads, warp shuffles) drawn beside the CPU's pairwise tree."),
    ("Watch two runs diverge", "pages/training_divergence.py", {"preset": "Hidden units reordered (SGD, lr 0.5)"},
     "Same network, reordered sums: press Play."),
    ("float64 saves the day", "pages/mitigations.py", {},
     "The same sums and training pair in float64, with what it costs here."),
]

CSS = """
<style>
html { font-size: 20px; }
.stMainBlockContainer { padding-top: 1.5rem; max-width: 100%; }
h1 { font-size: 2.4rem !important; }
[data-testid="stCaptionContainer"] { font-size: 0.95rem; }
</style>
"""


def presenter() -> bool:
    return bool(st.session_state.get(KEY, False))


def apply_from_link() -> None:
    """?talk=1 (or 0) switches presenter mode, then leaves the URL to the page."""
    if "talk" in st.query_params:
        st.session_state[KEY] = st.query_params["talk"] == "1"
        del st.query_params["talk"]


def sidebar_toggle() -> None:
    st.sidebar.toggle("Presenter mode", key=KEY, help="Larger type and fewer controls, for a projector.")
    if presenter():
        st.html(CSS)


def more_settings():
    """Where secondary controls go: an expander in presenter mode, the page itself otherwise."""
    return st.expander("More settings") if presenter() else st.container()
