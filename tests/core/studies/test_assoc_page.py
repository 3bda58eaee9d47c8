"""core.studies.assoc's answers for the Non-associativity page: which grouping is correctly rounded, where
torch departs from the IEEE model, and each rounding's size in ULPs."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

from core.arith.formats import FLOAT16, FLOAT32, FLOAT64
from core.arith.parse import parse_number
from core.machines.devices import cpu_device
from core.studies.assoc import evaluate_triple


def _triple(fmt, *texts):
    return evaluate_triple(tuple(parse_number(t, fmt) for t in texts), devices=[cpu_device()])


def test_correct_groupings():
    r = _triple(FLOAT64, "0.1", "0.2", "0.3")  # 0.6000000000000001 versus 0.6; 0.6 is correctly rounded
    assert r.correct_groupings == ["a + (b + c)"]
    r = _triple(FLOAT64, "1e16", "-1e16", "1")  # cancel first: exact; swamp first: the 1 is lost
    assert r.correct_groupings == ["(a + b) + c"]
    r = _triple(FLOAT32, "1e8", "1", "-1e8")  # both lose the 1
    assert r.correct_groupings == []
    r = _triple(FLOAT64, "1", "2", "3")
    assert r.correct_groupings == ["(a + b) + c", "a + (b + c)"]


def test_model_mismatches_name_the_additions_torch_rounded_otherwise():
    r = _triple(FLOAT64, "0.1", "0.2", "0.3")
    assert r.model_mismatches == []  # this CPU rounds to nearest even
    step = r.left.inner
    wrong = dataclasses.replace(step, rounded=step.model_rounded + Fraction(1, 2**60))
    bad = dataclasses.replace(r, left=dataclasses.replace(r.left, inner=wrong))
    assert bad.model_mismatches == [step.expression]


def test_step_and_stored_ulps():
    r = _triple(FLOAT16, "2048", "1", "1")
    inner = r.left.inner  # 2048 + 1 = 2049 is a tie between 2048 and 2050: to even, 2048
    assert inner.exact == 2049 and inner.rounded == 2048 and r.step_ulps(inner) == -0.5
    assert r.step_ulps(r.right.inner) == 0  # 1 + 1 is exact
    assert [r.stored_ulps(n) for n in r.numbers] == [0, 0, 0]
    r = _triple(FLOAT16, "0.1", "1", "1")  # 0.1 is not a float16
    off = r.stored_ulps(r.numbers[0])
    assert 0 < abs(off) <= 0.5
