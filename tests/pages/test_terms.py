"""Each term is explained where a page first shows it: the element that first uses the word carries the
glossary's explanation as its tooltip (``help=``), so a reader who meets it can hover over it there."""

from __future__ import annotations

import json

import pytest

from tests.pages.conftest import reader
from ui.glossary import TERMS, TIPS, help_for, help_text


def _in_order(node):
    """The page's elements in the order a reader meets them (children by their index: a slot filled later
    arrives later but stays where it was made)."""
    yield node
    for index in sorted(getattr(node, "children", {})):
        yield from _in_order(node.children[index])


def _shown(element) -> tuple[str, str]:
    """What an element shows as text and its tooltip ('' where it has none)."""
    proto = getattr(element, "proto", None)
    kind = getattr(element, "type", "")
    if kind in ("markdown", "caption"):
        return proto.body, proto.help
    if kind == "metric":
        return f"{proto.label} {proto.body}", proto.help
    if kind == "arrow_data_frame":
        return " ".join(map(str, element.value.columns)), proto.columns
    if kind == "vega_lite_chart":  # a chart's titles and legends have no tooltip of their own
        return proto.spec + proto.SerializeToString().decode("utf-8", "replace"), ""
    if proto is not None and hasattr(proto, "label") and isinstance(proto.label, str):
        return proto.label, getattr(proto, "help", "")
    return "", ""


def first_use(at, word: str) -> tuple[str, str]:
    """The text and tooltip of the first element in the page's main area that shows ``word``."""
    for node in _in_order(at.main):
        text, tip = _shown(node)
        if word in text:
            return text, tip
    raise AssertionError(f"the page never shows {word!r}")


def assert_explained_at_first_use(at, word: str, key: str) -> None:
    text, tip = first_use(at, word)
    assert help_text(key) in tip or json.dumps(help_text(key))[1:-1] in tip, (
        f"{word!r} first appears without its explanation as a tooltip: {text[:200]!r}")


def test_every_tip_names_the_term_it_explains():
    for key, tip in TIPS.items():
        assert key not in TERMS  # one concept, one place
        assert tip.name.lower() in tip.text.lower()[:80], key


def test_a_tip_counts_whole_words_only():
    assert help_for("split-KV attention", "split_k", "split_kv") == help_text("split_kv")
    assert help_for("split-K matmul, split-KV attention", "split_k", "split_kv") == (
        help_text("split_k") + "\n\n" + help_text("split_kv"))
    assert help_for("no such term", "split_kv") is None


def test_training_explains_the_distance_its_doubling_and_nats_where_first_shown():
    at = reader("training_divergence").run()
    at.button(key="td_step10").click().run()
    assert not at.exception
    assert_explained_at_first_use(at, "‖Δθ‖", "delta_theta")
    assert_explained_at_first_use(at, "doubles every", "doubling")
    assert_explained_at_first_use(at, "nats", "nats")


@pytest.fixture(scope="module")
def serving():
    at = reader("serving").run()
    assert not at.exception
    return at


@pytest.mark.parametrize(("word", "key"), [("split-KV", "split_kv"), ("logit rows", "logit_rows"),
                                           ("top-2 gap", "top2_gap")])
def test_serving_explains_its_terms_where_first_shown(serving, word, key):
    assert_explained_at_first_use(serving, word, key)


def test_mitigations_explains_the_envelope_and_the_unit_roundoff_where_first_shown():
    at = reader("mitigations").run()
    assert not at.exception
    assert_explained_at_first_use(at, "envelope", "envelope")
    assert_explained_at_first_use(at, "unit roundoff", "unit_roundoff")
