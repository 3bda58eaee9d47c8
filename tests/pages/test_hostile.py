"""Extreme but allowed settings and hostile link values: clear messages, never an exception."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from tests.pages.conftest import ROOT, TIMEOUT


def run(page: str, params: dict, click: str | None = None) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=TIMEOUT)
    at.query_params.update(params)
    at.run()
    if click:
        at.button(key=click).click().run()
    return at


@pytest.mark.parametrize(
    ("page", "params", "click"),
    [
        ("training_divergence", {"lr": "10", "steps": "40"}, "td_play"),
        ("training_divergence", {"lr": "10", "steps": "40", "optimizer": "adam", "format": "float64"}, "td_play"),
        ("training_divergence", {"lr": "0", "steps": "5"}, "td_play"),
        ("summation_lab", {"vector": "tiny_huge", "storage": "float16", "n": "100000"}, None),
        ("summation_lab", {"vector": "ill_conditioned", "storage": "bfloat16", "n": "2", "condition": "1e+16"}, None),
        ("summation_lab", {"vector": "one_then_tiny", "storage": "bfloat16", "n": "1"}, None),
        ("summation_lab", {"vector": "paste", "numbers": "\x00\x01 ½ 1e999999 0x"}, None),
        ("non_associativity", {"a": "1e-5000", "b": "0x1p-20000", "c": "1/3", "format": "float16"}, None),
        ("non_associativity", {"a": "9" * 199, "b": "-0", "c": "nan"}, None),
        ("cpu_vs_gpu", {"n": "10000000000", "format": "float128", "vector": "../../etc/passwd"}, None),
        ("mitigations", {"storage": "float8", "seeds": "-1"}, None),
    ],
)
def test_no_exception(page, params, click):
    at = run(page, params, click)
    assert not at.exception, at.exception
