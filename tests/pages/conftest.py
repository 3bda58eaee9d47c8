from __future__ import annotations

import pathlib

import pytest
from streamlit.testing.v1 import AppTest

TIMEOUT = 60
ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def app() -> AppTest:
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=TIMEOUT).run()


# The keys of each page's sections that are made only once a visitor opens them (ui.crowd.folded)
FOLDED_KEYS = {
    "non_associativity": ("na_open_bits", "na_open_exact", "na_open_devices", "na_open_search"),
    "summation_lab": ("sl_open_columns", "sl_open_additions"),
    "training_divergence": ("td_open_equal", "td_open_seed", "td_open_float64", "td_open_jump"),
    "serving": ("sv_open_completions", "sv_open_rarity", "sv_open_cost", "sv_open_more", "sv_open_model"),
    "cpu_vs_gpu": ("cg_open_server", "cg_open_causes", "cg_open_model", "cg_open_pair", "cg_open_libraries",
                   "cg_open_training"),
    "mitigations": ("mi_open_float64", "mi_open_determinism", "mi_open_order"),
}


def reader(stem: str, timeout: float = TIMEOUT) -> AppTest:
    """The page ``pages/<stem>.py`` as a reader who has opened its folded sections (not yet run)."""
    at = AppTest.from_file(str(ROOT / "pages" / f"{stem}.py"), default_timeout=timeout)
    for key in FOLDED_KEYS.get(stem, ()):
        at.session_state[key] = True
    return at


@pytest.fixture
def na() -> AppTest:
    """The Non-associativity page, run on its own, its folded sections open."""
    return reader("non_associativity").run()


def all_text(at: AppTest) -> str:
    """Everything the page wrote as text: markdown, captions, alerts, metrics, titles."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "error", "warning", "success", "info"):
        parts += [str(e.value) for e in getattr(at, kind)]
    parts += [f"{m.label}: {m.value}" for m in at.metric]
    return "\n".join(parts)


def shown(source: str) -> str:
    """The text a viewer sees for markdown source written by ui.render.inert: escapes and joiners gone."""
    import re

    from ui.render import WORD_JOINER

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source).replace(WORD_JOINER, "")
