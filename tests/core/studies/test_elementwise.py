"""exp, log, tanh and sigmoid against correctly rounded results: the reference (core.arith.elementary)
checked against mpmath in a local context at 600 bits rounded with Fractions, and the study's reported
numbers against the same independent computation."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from core.arith.elementary import _round, reference
from core.arith.exact import mpf_to_fraction
from core.arith.formats import FORMATS, bits_of, round_to_format
from core.arith.ulps import ulp_distance
from core.recordings.store import cached_recordings
from core.studies import elementwise as ew

F32, F64 = FORMATS["float32"], FORMATS["float64"]
CTX = mpmath.MPContext()  # local: the process-wide mpmath.mp is never touched
CTX.prec = 600


def _independent(name: str, x: float, fmt) -> Fraction | float:
    """f(x) at 600 bits in a local mpmath context, rounded to ``fmt`` with Fractions."""
    v = CTX.mpf(x)
    value = {"exp": CTX.exp, "log": CTX.log, "tanh": CTX.tanh,
             "sigmoid": lambda t: 1 / (1 + CTX.exp(-t))}[name](v)
    return round_to_format(mpf_to_fraction(value), fmt)


@pytest.fixture(scope="module")
def result() -> ew.OtherCauses:
    return ew.other_causes()


@pytest.mark.parametrize("fmt", [F32, F64], ids=["float32", "float64"])
@pytest.mark.parametrize("name", ew.FUNCTIONS)
def test_reference_is_the_correctly_rounded_value(name, fmt):
    xs = ew.inputs(name, fmt)
    rng = np.random.default_rng(7)
    for x in rng.choice(xs, size=min(60, len(xs)), replace=False):
        assert reference(name, float(x), fmt) == _independent(name, float(x), fmt), (name, float(x))


@pytest.mark.parametrize(("name", "x", "fmt", "expected"), [
    ("exp", 0.0, F32, Fraction(1)),
    ("log", 1.0, F32, Fraction(0)),
    ("tanh", 0.0, F64, Fraction(0)),
    ("sigmoid", 0.0, F32, Fraction(1, 2)),
    ("exp", 89.0, F32, math.inf),  # e^89 > float32's largest value
    ("exp", -110.0, F32, Fraction(0)),  # below half the smallest subnormal
    ("tanh", 2.0**-100, F32, Fraction(2) ** -100),  # x - x^3/3: decided only with more than 200 bits
    ("tanh", 20.0, F64, Fraction(1)),  # saturated
    ("log", 0.0, F32, -math.inf),
])
def test_reference_at_known_values(name, x, fmt, expected):
    assert reference(name, x, fmt) == expected


def test_reference_of_log_of_a_negative_number_is_nan():
    assert math.isnan(reference("log", -1.0, F32))


def test_integer_rounding_matches_fraction_rounding():
    rng = np.random.default_rng(3)
    for fmt in (F32, F64):
        for _ in range(400):
            man = int(rng.integers(1, 2**62)) * int(rng.integers(1, 2**40))
            exp = int(rng.integers(fmt.emin - fmt.precision - 80, fmt.emax - 40))
            got = _round(0, man, exp, fmt)
            want = round_to_format(Fraction(man) * Fraction(2) ** exp, fmt)
            if got is None:
                assert want == math.inf
            else:
                assert Fraction(got[1]) * Fraction(2) ** got[2] == want


def test_reported_counts_and_distances_match_an_independent_computation(result):
    """torch's and NumPy's float32 exp: every miss and the largest distance, recomputed."""
    xs = ew.inputs("exp", F32)
    correct = [_independent("exp", float(x), F32) for x in xs]
    for impl in ew.IMPLEMENTATIONS:
        got = impl.run("exp", xs)
        dists = []
        for g, c, x in zip(got, correct, xs, strict=True):
            c32 = np.float32(float(c))
            d = ulp_distance(bits_of(np.float32(g)), bits_of(c32), F32)
            normal = c == 0 or isinstance(c, float) or abs(c) >= F32.min_normal
            dists.append((d, normal, float(x)))
        row = result.row("exp", "float32", impl.key)
        assert row.not_correctly_rounded == sum(d > 0 for d, _, _ in dists)
        assert row.max_ulps == max((d for d, normal, _ in dists if normal), default=0)


def test_a_known_miss_is_reported_as_its_exact_distance(result):
    """The worst argument each row names: its result really is that many ULPs from the correctly rounded one."""
    for row in result.rows:
        if row.worst_input is None:
            continue
        fmt = FORMATS[row.fmt]
        impl = next(i for i in ew.IMPLEMENTATIONS if i.key == row.implementation)
        # the whole grid, as the study ran it: a lone element may take a library's scalar path, not its SIMD one
        xs = ew.inputs(row.function, fmt)
        where = int(np.flatnonzero(xs == np.array(row.worst_input, dtype=fmt.numpy_dtype))[0])
        got = impl.run(row.function, xs)[where]
        want = np.array([float(_independent(row.function, row.worst_input, fmt))], dtype=fmt.numpy_dtype)[0]
        assert ulp_distance(bits_of(got), bits_of(want), fmt) == row.max_ulps > 0


def test_disagreements_count_differing_bits(result):
    for d in result.disagreements:
        fmt = FORMATS[d.fmt]
        xs = ew.inputs(d.function, fmt)
        a, b = (impl.run(d.function, xs) for impl in ew.IMPLEMENTATIONS)
        assert d.differing == int((a.view(fmt.uint_dtype) != b.view(fmt.uint_dtype)).sum())
        assert d.inputs == len(xs)


def test_sentences_are_computed_from_the_result(result):
    text = ew.headline(result)
    for impl in ew.IMPLEMENTATIONS:
        missed = sum(r.not_correctly_rounded for r in result.rows if r.implementation == impl.key)
        assert f"{impl.label.split()[0]} on {missed:,}" in text
    assert f"{result.total_differing:,} of them" in text
    assert f"{result.total_compared:,} arguments" in text
    worst = max(r.max_ulps for r in result.rows)
    assert f"at most {worst} ULP" in text
    sub = ew.subnormal_sentence(result)
    assert str(sum(r.subnormal_wrong for r in result.rows)) in sub


def test_the_grid_holds_the_hard_cases():
    xs = ew.inputs("exp", F32)
    overflow = np.float32(128 * math.log(2))
    assert overflow in xs and np.nextafter(overflow, np.float32(np.inf)) in xs
    assert np.float32(2.0**-149) in xs  # the smallest subnormal argument
    assert len(ew.inputs("log", F64)) > 100 and (ew.inputs("log", F64) > 0).all()


def test_recorded_groups_follow_the_hashes(result):
    recs = [r for r in cached_recordings()[0] if not r.is_gpu]
    for op in result.recorded:
        for group in op.groups:
            hashes = {r.op_fingerprint.get(op.op) for r in recs if r.device in group}
            assert len(hashes) == 1
    if result.recorded:
        sentence = ew.recorded_sentence(result)
        assert all(r.op in sentence for r in result.recorded if r.differs)


def test_cached_once_and_mpmath_precision_untouched():
    before = mpmath.mp.prec
    first = ew.cached_other_causes()
    assert ew.cached_other_causes() is first
    assert mpmath.mp.prec == before


def test_headline_of_a_server_where_every_result_is_correctly_rounded(result):
    from dataclasses import replace

    perfect = replace(result, rows=tuple(replace(r, not_correctly_rounded=0, max_ulps=0, worst_input=None,
                                                 subnormal_wrong=0) for r in result.rows))
    assert "returned the correctly rounded result on all" in ew.headline(perfect)
    subnormal_only = replace(result, rows=tuple(replace(r, max_ulps=0) for r in result.rows))
    assert "only where the result is subnormal" in ew.headline(subnormal_only)
