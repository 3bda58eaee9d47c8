"""The reordering envelope's two sizes, which diagnose's verdict and the traces' judge share."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import FORMATS
from core.diagnose.envelopes import ENVELOPE_FACTOR, reordering_sizes

F32 = FORMATS["float32"]
finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=True,
                     min_value=-(2.0**100), max_value=2.0**100)  # no overflow in 64 terms


def _sum32(xs) -> np.float32:
    acc = np.float32(0)
    for x in xs:
        acc = np.float32(acc + np.float32(x))
    return acc


@settings(max_examples=300)
@given(st.lists(finite32, min_size=1, max_size=64), st.randoms(use_true_random=False))
def test_two_orders_never_differ_by_more_than_the_rigorous_bound(xs, rnd):
    shuffled = xs[:]
    rnd.shuffle(shuffled)
    a, b = _sum32(xs), _sum32(shuffled)
    diff = abs(Fraction(float(a)) - Fraction(float(b)))  # exact: both are float32 values
    sum_abs = sum(abs(Fraction(x)) for x in xs)
    s = math.sqrt(sum(x * x for x in xs))
    m = max(abs(float(a)), abs(float(b)))
    typical, bound = reordering_sizes(len(xs), s, m, float(sum_abs) * (1 + 2**-50), F32)
    assert diff <= Fraction(float(bound))
    assert typical >= 0 and bound >= 0


def test_terms_of_one_sign_are_sized_by_the_sum_not_the_two_norm():
    k = 10_000
    rng = np.random.default_rng(0)
    xs = rng.uniform(0.5, 1.0, k).astype(np.float32)
    y = float(np.sum(xs, dtype=np.float64))
    s = float(np.sqrt(np.sum(xs.astype(np.float64) ** 2)))
    typical, _ = reordering_sizes(k, s, y, y, F32)
    u = float(F32.unit_roundoff)
    assert y > 50 * s  # one sign: |y| grows like K, the two-norm like sqrt(K)
    assert typical >= u * math.sqrt(k) * y
    # the measured spread of reorderings of these terms sits inside the envelope
    orders = [xs, xs[::-1], np.sort(xs), rng.permutation(xs)]
    sums = [float(_sum32(o)) for o in orders]
    assert max(sums) - min(sums) <= ENVELOPE_FACTOR * typical


def test_no_terms_left_at_zero_size_have_only_the_subnormal_floor():
    typical, bound = reordering_sizes(4, 0.0, 0.0, 0.0, F32)
    assert typical == math.sqrt(4) * float(F32.min_subnormal)
    assert bound == 4 * float(F32.min_subnormal)
