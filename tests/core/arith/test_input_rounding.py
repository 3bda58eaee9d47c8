"""The input-rounding bound that the dot-product models and the reduced-precision envelopes share holds
for real conversions, subnormals and signed zeros included (exact, in Fractions)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import FLOAT16
from core.arith.metrics import input_rounding_error

# float16's range, its subnormals (below 6.1e-5) and zeros of both signs
VALUES = st.one_of(st.floats(-60000, 60000), st.floats(-1e-4, 1e-4), st.sampled_from([0.0, -0.0, 5.96e-8, 65504.0]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES), min_size=1, max_size=12))
def test_rounding_inputs_to_float16_moves_a_dot_product_and_a_sum_within_the_bound(pairs):
    x = np.array([p[0] for p in pairs])
    y = np.array([p[1] for p in pairs])
    xr, yr = x.astype(np.float16).astype(np.float64), y.astype(np.float16).astype(np.float64)  # nearest, ties even
    u, eta = FLOAT16.unit_roundoff, FLOAT16.min_subnormal / 2
    exact = sum(Fraction(a) * Fraction(b) for a, b in zip(x, y, strict=True))
    rounded = sum(Fraction(a) * Fraction(b) for a, b in zip(xr, yr, strict=True))
    s_xy = sum(abs(Fraction(a) * Fraction(b)) for a, b in zip(x, y, strict=True))
    rows = sum(abs(Fraction(a)) for a in x) + sum(abs(Fraction(b)) for b in y)
    assert abs(rounded - exact) <= input_rounding_error(s_xy, len(x), u, eta, rows_abs=rows)
    s_x = sum(abs(Fraction(a)) for a in x)
    moved = abs(sum(Fraction(a) for a in xr) - sum(Fraction(a) for a in x))
    assert moved <= input_rounding_error(s_x, len(x), u, eta)


def test_truncation_doubles_both_parts_and_arrays_work_per_element():
    u, eta = Fraction(1, 2**11), Fraction(1, 2**25)
    assert input_rounding_error(Fraction(1), 3, u, eta, truncating=True) == 2 * u + 3 * 2 * eta
    got = input_rounding_error(np.array([1.0, 2.0]), 4, 2.0**-8, 0.0, rows_abs=0.0)
    assert np.array_equal(got, (2 * 2.0**-8 + 2.0**-16) * np.array([1.0, 2.0]))
