"""The eight-bit formats, against torch's and ml_dtypes' casts on every bit pattern.

Each format has 256 patterns, so every claim is checked on all of them: decoding, encoding, the ULP,
the moves between NumPy and torch, and rounding at every value, every midpoint between neighbours
and just beside each midpoint, from float32 and from float64, past the largest value and at the
infinities and NaN, by each library's own overflow rule.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from core.arith.exact import correctly_rounded_sum, exact_sum_fraction
from core.arith.formats import (
    FLOAT8_E4M3FN,
    FLOAT8_E5M2,
    FORMATS,
    bit_view,
    bits_of_value,
    format_of,
    from_bit_view,
    round_to_format,
    round_values,
    to_numpy,
    to_torch,
    value_of_bits,
)
from core.arith.hexbits import decode_hex, hex_bits
from core.arith.ulps import error_in_ulps, ulp

FP8 = [FLOAT8_E4M3FN, FLOAT8_E5M2]
ids = [f.name for f in FP8]


def _all(fmt) -> np.ndarray:
    return from_bit_view(np.arange(256, dtype=np.uint8), fmt)


def _same(a, b) -> bool:
    """Equal values, NaN matching NaN (its payload may differ between libraries)."""
    a, b = float(a), float(b)
    return a == b or (math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_every_pattern_decodes_as_torch_and_ml_dtypes_read_it(fmt):
    values = _all(fmt)
    from_torch = torch.arange(256, dtype=torch.uint8).view(fmt.torch_dtype).float().tolist()
    for b in range(256):
        exact = value_of_bits(b, fmt)
        assert _same(exact, values[b]) and _same(exact, from_torch[b]), hex(b)
        if not (isinstance(exact, float) and math.isnan(exact)):
            negative_zero = b == 0x80
            assert bits_of_value(exact, fmt, negative_zero=negative_zero) == b
    nans = [b for b in range(256) if math.isnan(float(values[b]))]
    infs = [b for b in range(256) if math.isinf(float(values[b]))]
    if fmt.infinities:  # IEEE-like: the all-ones exponent, nonzero fraction
        assert len(nans) == 2 * ((1 << fmt.mantissa_bits) - 1) and len(infs) == 2
    else:  # one NaN pattern a sign, no infinity
        assert nans == [0x7F, 0xFF] and infs == []
    finite = [float(v) for v in values.tolist() if math.isfinite(float(v))]
    assert max(finite) == float(fmt.max_finite) == float(torch.finfo(fmt.torch_dtype).max)
    assert float(fmt.min_normal) == float(torch.finfo(fmt.torch_dtype).smallest_normal)
    assert min(v for v in finite if v > 0) == float(fmt.min_subnormal)


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_the_ulp_of_every_value_is_the_step_to_its_neighbour(fmt):
    for b in range(0x7F):
        here, up = value_of_bits(b, fmt), value_of_bits(b + 1, fmt)
        if isinstance(up, float):  # the step into the NaN or infinity patterns
            continue
        assert up - here == ulp(here, fmt), hex(b)


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_values_move_between_numpy_torch_and_hex_with_their_bits(fmt):
    a = _all(fmt)
    t = to_torch(a)
    assert t.dtype == fmt.torch_dtype and format_of(t.dtype) is fmt and format_of(a.dtype) is fmt
    assert bit_view(t).tolist() == list(range(256)) and bit_view(to_numpy(t)).tolist() == list(range(256))
    for b in range(256):
        assert _same(decode_hex(hex_bits(b, fmt, prefix=""), fmt.name), value_of_bits(b, fmt))


def _probes(fmt) -> list[float]:
    """Every finite value, every midpoint between neighbours and the float32 values just beside it, the
    midpoints past the largest value, huge values, the infinities and NaN: both signs."""
    finite = sorted({value_of_bits(b, fmt) for b in range(256)} - {math.nan}, key=float)
    finite = [v for v in finite if not isinstance(v, float)]
    top = fmt.max_finite + ulp(fmt.max_finite, fmt)  # the first value past the largest, with more exponent
    points = [*finite, top, top + ulp(fmt.max_finite, fmt)]
    out: list[float] = []
    for lo, hi in itertools.pairwise(points):
        mid = float((lo + hi) / 2)
        out += [float(lo), mid, float(np.nextafter(np.float32(mid), np.float32(np.inf))),
                float(np.nextafter(np.float32(mid), np.float32(-np.inf)))]
    out += [float(points[-1]), 1e4 * float(fmt.max_finite), 3e38, math.inf, math.nan, float(fmt.min_subnormal) / 4]
    return out + [-v for v in out]


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_rounding_matches_torchs_cast_from_float32_and_float64(fmt):
    probes = _probes(fmt)
    for wide in (torch.float32, torch.float64):
        cast = torch.tensor(probes, dtype=wide).to(fmt.torch_dtype).float().tolist()
        for x, got in zip(probes, cast, strict=True):
            assert _same(round_to_format(x, fmt), got), (x, wide)
    ours = round_values(np.array(probes), fmt)
    assert bit_view(ours).tolist() == bit_view(torch.tensor(probes).to(fmt.torch_dtype)).tolist() or all(
        _same(a, b) for a, b in zip(ours.astype(np.float64).tolist(),
                                     torch.tensor(probes).to(fmt.torch_dtype).double().tolist(), strict=True))


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_rounding_by_numpys_rule_matches_ml_dtypes_cast(fmt):
    probes = _probes(fmt)
    for wide in (np.float32, np.float64):
        with np.errstate(over="ignore", invalid="ignore"):
            cast = np.array(probes, dtype=wide).astype(fmt.numpy_dtype).astype(np.float64).tolist()
        for x, got in zip(probes, cast, strict=True):
            assert _same(round_to_format(x, fmt, fmt.numpy_overflow), got), (x, wide)
    mine = round_values(np.array(probes), fmt, fmt.numpy_overflow).astype(np.float64).tolist()
    assert all(_same(a, b) for a, b in zip(mine, cast, strict=True))


def test_the_two_libraries_part_only_past_e4m3fns_largest_value():
    """torch saturates float8_e4m3fn, ml_dtypes gives NaN: the two agree everywhere else."""
    fmt = FLOAT8_E4M3FN
    probes = _probes(fmt)
    torch_cast = torch.tensor(probes).to(fmt.torch_dtype).double().tolist()
    with np.errstate(over="ignore", invalid="ignore"):
        numpy_cast = np.array(probes).astype(fmt.numpy_dtype).astype(np.float64).tolist()
    parted = [x for x, a, b in zip(probes, torch_cast, numpy_cast, strict=True) if not _same(a, b)]
    assert parted and all(abs(x) > 464 for x in parted)  # 464 is the tie that still rounds to 448
    assert torch_cast[probes.index(math.inf)] == 448.0 and math.isnan(numpy_cast[probes.index(math.inf)])


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_exact_sums_and_their_errors_in_ulps_against_fractions(fmt):
    """Sums of FP8 values, exact and correctly rounded, and the error of a float32 accumulation rounded
    to FP8, in ULPs of the exact sum: all against Fraction arithmetic."""
    rng = np.random.default_rng(7)
    finite = [b for b in range(256) if isinstance(value_of_bits(b, fmt), Fraction)]
    bits = rng.choice(finite, size=500).astype(np.uint8)
    x = from_bit_view(bits, fmt)
    exact = sum((value_of_bits(int(b), fmt) for b in bits), Fraction(0))
    assert exact_sum_fraction(x) == exact
    assert _same(correctly_rounded_sum(x, fmt), round_to_format(exact, fmt))
    acc = np.float32(0)
    for v in x.astype(np.float32):  # a GPU's accumulation: float32, left to right
        acc = np.float32(acc + v)
    stored = round_to_format(Fraction(float(acc)), fmt)
    if isinstance(stored, Fraction) and exact != 0:
        want = (stored - exact) / ulp(exact, fmt)
        assert error_in_ulps(stored, exact, fmt) == float(want)


def test_the_registry_holds_the_eight_bit_formats_by_torchs_names():
    assert FORMATS["float8_e4m3fn"] is FLOAT8_E4M3FN and FORMATS["float8_e5m2"] is FLOAT8_E5M2
    assert (FLOAT8_E4M3FN.emax, FLOAT8_E4M3FN.emin, float(FLOAT8_E4M3FN.max_finite)) == (8, -6, 448.0)
    assert (FLOAT8_E5M2.emax, FLOAT8_E5M2.emin, float(FLOAT8_E5M2.max_finite)) == (15, -14, 57344.0)
    with pytest.raises(ValueError):
        bits_of_value(math.inf, FLOAT8_E4M3FN)


@pytest.mark.parametrize("fmt", FP8, ids=ids)
def test_float32_holds_every_fp8_partial_sum_below_its_limit_exactly(fmt):
    from core.arith.formats import FLOAT32, exact_sums_below

    q, e = exact_sums_below(fmt, FLOAT32)
    assert 2.0**q == float(fmt.min_subnormal) and e == q + 24
    top = Fraction(2) ** e - Fraction(2) ** q  # the largest multiple of 2^q below 2^e: a float32 value
    assert round_to_format(top, FLOAT32) == top
    assert round_to_format(Fraction(2) ** e + Fraction(2) ** q, FLOAT32) != Fraction(2) ** e + Fraction(2) ** q
