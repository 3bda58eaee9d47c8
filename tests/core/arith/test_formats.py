"""core.arith.formats: decoding, correct rounding and ULPs, against independent references."""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.arith.formats import (
    ARITHMETIC,
    BFLOAT16,
    FLOAT16,
    FLOAT32,
    FLOAT64,
    FORMATS,
    TF32,
    bit_view,
    bits_differ,
    bits_of,
    bits_of_value,
    byte_view,
    floor_log2,
    format_of,
    from_bit_view,
    get_format,
    last_bit_even,
    round_to_format,
    same_bits,
    tensor_from_bits,
    value_of_bits,
)
from core.arith.hexbits import bits_of_hex, decode_hex, hex_bits, hex_digits, split_bits
from core.arith.ulps import error_in_ulps, ulp, ulp_array, ulp_distance, ulp_distance_array
from tests.strategies import any_values, bit_patterns, finite_values, is_nan

NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


def test_format_constants_match_torch_finfo():
    for fmt in FORMATS.values():
        info = torch.finfo(fmt.torch_dtype)
        assert float(fmt.max_finite) == info.max
        assert float(fmt.min_normal) == info.tiny
        assert float(fmt.unit_roundoff) * 2 == info.eps
        assert fmt.width == info.bits
        assert float(fmt.min_subnormal) == info.smallest_normal * info.eps  # 2^(emin-p+1)


def test_float16_every_bit_pattern_decodes_like_torch():
    bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16)
    vals = bits.view(torch.float16).to(torch.float64).tolist()
    for raw, v in zip(bits.tolist(), vals, strict=True):
        mine = value_of_bits(raw & 0xFFFF, FLOAT16)
        if math.isnan(v):
            assert is_nan(mine)
        else:
            assert mine == (Fraction(v) if math.isfinite(v) else v)


@pytest.mark.parametrize("name", list(FORMATS))
@given(data=st.data())
def test_decode_matches_torch_and_encode_round_trips(name, data):
    fmt = FORMATS[name]
    b = data.draw(bit_patterns(fmt))
    t = tensor_from_bits(b, fmt)
    assert bits_of(t) == b
    v = value_of_bits(b, fmt)
    ref = t.to(torch.float64).item()
    if math.isnan(ref):
        assert is_nan(v)
        return
    assert v == (Fraction(ref) if math.isfinite(ref) else ref)
    negative_zero = b == 1 << (fmt.width - 1)
    assert bits_of_value(v, fmt, negative_zero=negative_zero) == b


@given(st.floats(allow_nan=False))
def test_round_to_float64_is_identity_on_float64(x):
    r = round_to_format(Fraction(x) if math.isfinite(x) else x, FLOAT64)
    assert float(r) == x


@given(st.fractions(max_denominator=10**30).filter(lambda q: abs(q) < 10**300))
def test_round_to_float64_matches_python_float(q):
    # float(Fraction) is correctly rounded (round half to even) in CPython
    assert round_to_format(q, FLOAT64) == Fraction(float(q))


@pytest.mark.parametrize("name", ["float16", "float32"])
@given(x=st.floats(allow_nan=False, allow_infinity=False))
def test_round_float64_to_smaller_matches_numpy(name, x):
    fmt = FORMATS[name]
    with np.errstate(over="ignore"):
        ref = float(np.float64(x).astype(NUMPY[name]))
    mine = round_to_format(Fraction(x), fmt)
    if isinstance(mine, float):
        assert mine == ref and math.isinf(ref)
    else:
        assert mine == Fraction(ref)


def _bfloat16_rne_from_float32_bits(u: int) -> int:
    """Independent reference: the classic integer trick for float32 -> bfloat16 (RNE)."""
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


@given(st.floats(width=32, allow_nan=False, allow_infinity=False))
def test_round_float32_to_bfloat16_matches_bit_trick(x):
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    ref = value_of_bits(_bfloat16_rne_from_float32_bits(u), BFLOAT16)
    assert round_to_format(Fraction(x), BFLOAT16) == ref


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
def test_overflow_threshold_is_halfway_past_max(fmt):
    half_ulp = ulp(fmt.max_finite, fmt) / 2
    assert round_to_format(fmt.max_finite + half_ulp - fmt.min_subnormal, fmt) == fmt.max_finite
    # the tie goes to the even neighbour past the largest value, which overflows by the format's rule
    last_even = (bits_of_value(fmt.max_finite, fmt) & 1) == 0
    for policy, up in (("inf", math.inf), ("saturate", fmt.max_finite), ("nan", math.nan)):
        if policy == "inf" and not fmt.infinities:
            continue
        got = round_to_format(fmt.max_finite + half_ulp, fmt, policy)
        want = fmt.max_finite if last_even else up
        assert got == want or (math.isnan(want) and math.isnan(got))
        got = round_to_format(-(fmt.max_finite + 2 * half_ulp), fmt, policy)
        assert got == -up or (math.isnan(up) and math.isnan(got))


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
def test_subnormal_rounding_ties_to_even(fmt):
    s = fmt.min_subnormal
    assert round_to_format(s / 2, fmt) == 0  # tie between 0 (even) and s
    assert round_to_format(s * 3 / 2, fmt) == 2 * s  # tie between s and 2s (even)
    assert round_to_format(s / 2 + s / 1024, fmt) == s


def test_floor_log2_exact():
    for k in range(-1100, 1100, 7):
        p = Fraction(2) ** k
        assert floor_log2(p) == k
        assert floor_log2(p * 3 / 2) == k
        assert floor_log2(p - p / 2**60) == k - 1


@pytest.mark.parametrize("name", ["float16", "float32", "float64"])
@given(data=st.data())
def test_ulp_distance_matches_nextafter(name, data):
    fmt = FORMATS[name]
    v = abs(data.draw(finite_values(fmt)))
    x = NUMPY[name](float(v))
    with np.errstate(over="ignore"):
        up = np.nextafter(x, NUMPY[name](np.inf))
    if not np.isfinite(up):
        assert v == fmt.max_finite
        return
    b1, b2 = bits_of_value(Fraction(float(x)), fmt), bits_of_value(Fraction(float(up)), fmt)
    assert ulp_distance(b1, b2, fmt) == 1
    assert ulp_distance(b1 | 1 << (fmt.width - 1), b2, fmt) == 2 * ulp_distance(0, b1, fmt) + 1
    # for x >= 0 the next value up is exactly one ulp(x) away
    assert Fraction(float(up)) - Fraction(float(x)) == ulp(Fraction(float(x)), fmt)


def test_ulp_distance_across_zero():
    pos = bits_of_value(FLOAT32.min_subnormal, FLOAT32)
    neg = bits_of_value(-FLOAT32.min_subnormal, FLOAT32)
    assert ulp_distance(pos, neg, FLOAT32) == 2
    assert ulp_distance(0, 1 << 31, FLOAT32) == 0  # +0 and -0


def test_error_in_ulps():
    one = Fraction(1)
    assert error_in_ulps(one + 2 * FLOAT32.unit_roundoff, one, FLOAT32) == 1.0
    assert error_in_ulps(math.inf, one, FLOAT32) == math.inf
    assert math.isnan(error_in_ulps(one, math.inf, FLOAT32))
    assert error_in_ulps(FLOAT16.min_subnormal, Fraction(0), FLOAT16) == 1.0


def test_split_bits_and_unknown_format():
    assert split_bits(bits_of_value(Fraction(-2), FLOAT16), FLOAT16) == ("1", "10000", "0000000000")
    with pytest.raises(ValueError, match="unknown format"):
        get_format("float8")
    with pytest.raises(ValueError):
        bits_of_value(Fraction(1, 3), FLOAT32)
    with pytest.raises(ValueError):
        tensor_from_bits(1 << 16, FLOAT16)


@settings(max_examples=300)
@given(data=st.data(), name=st.sampled_from(list(ARITHMETIC)))
def test_torch_single_addition_is_correctly_rounded(data, name):
    """The premise of the playground: one addition = exact sum, rounded once (IEEE)."""
    fmt = FORMATS[name]
    x, y = data.draw(any_values(fmt)), data.draw(any_values(fmt))
    tx, ty = (tensor_from_bits(bits_of_value(v, fmt), fmt) for v in (x, y))
    got = value_of_bits(bits_of(tx + ty), fmt)
    if isinstance(x, float) or isinstance(y, float):
        expected = float(x) + float(y)
    else:
        expected = round_to_format(x + y, fmt)
    if is_nan(expected):
        assert is_nan(got)
    else:
        assert got == expected


@given(st.sampled_from(["float64", "float32", "float16", "bfloat16"]), st.data())
def test_decode_hex_reads_every_bit_pattern(name, data):
    """Big-endian hex bits back to the value, for every pattern: subnormals, ±0, ±inf, NaN, the largest finite."""
    fmt = FORMATS[name]
    bits = data.draw(st.one_of(st.integers(0, 2**fmt.width - 1),
                               st.sampled_from([0, 1 << (fmt.width - 1), 1, (1 << (fmt.width - 1)) - 1])))
    h = f"{bits:0{fmt.width // 4}x}"
    got = decode_hex(h, name)
    want = value_of_bits(bits, fmt)
    if isinstance(want, float) and math.isnan(want):
        assert math.isnan(got)
    else:
        assert got == want and math.copysign(1.0, got) == (-1.0 if bits >> (fmt.width - 1) else 1.0)
    if name in ("float64", "float32"):  # the width tells these two apart without a format
        assert decode_hex(h) == got or math.isnan(got)


@settings(max_examples=300)
@given(st.data())
def test_ulp_array_is_the_exact_ulp_of_every_bit_pattern(data):
    fmt = data.draw(st.sampled_from(list(FORMATS.values())))
    bits = data.draw(bit_patterns(fmt))
    x = value_of_bits(bits, fmt)
    got = ulp_array(np.array([float(x)]), fmt)[0]
    if isinstance(x, float) and not math.isfinite(x):
        assert math.isnan(got)
    else:
        assert got == float(ulp(x, fmt))  # exact: a power of two
        if fmt.name in ("float32", "float64") and x != 0 and abs(x) < fmt.max_finite:
            # np.spacing agrees, but at the largest finite value, where it gives inf (the next value)
            assert got == np.spacing(np.abs(np.array(float(x), dtype=fmt.numpy_dtype)))  # np.spacing's convention


@settings(max_examples=300)
@given(st.data())
def test_ulp_distance_array_counts_what_ulp_distance_counts(data):
    fmt = data.draw(st.sampled_from(list(FORMATS.values())))
    a_bits = data.draw(st.lists(bit_patterns(fmt), min_size=1, max_size=8))
    b_bits = data.draw(st.lists(bit_patterns(fmt), min_size=len(a_bits), max_size=len(a_bits)))
    finite = [(p, q) for p, q in zip(a_bits, b_bits, strict=True)
              if not (is_nan(value_of_bits(p, fmt)) or is_nan(value_of_bits(q, fmt)))]
    if not finite:
        return
    a = np.array([p for p, _ in finite], dtype=fmt.uint_dtype).view(fmt.numpy_dtype)
    b = np.array([q for _, q in finite], dtype=fmt.uint_dtype).view(fmt.numpy_dtype)
    got = ulp_distance_array(a, b)
    assert list(got) == [ulp_distance(p, q, fmt) for p, q in finite]


def test_ulp_distance_array_refuses_two_formats():
    with pytest.raises(ValueError, match="one format"):
        ulp_distance_array(np.zeros(2, np.float32), np.zeros(2, np.float64))


@pytest.mark.parametrize("name", list(FORMATS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_hex_digits_are_hex_bits_of_each_pattern_and_decode_back(name, data):
    fmt = FORMATS[name]
    # any patterns: subnormals, both zeros, infinities, NaNs of every payload, the largest finite values
    bits = data.draw(st.lists(bit_patterns(fmt), min_size=0, max_size=40))
    got = hex_digits(np.array(bits, dtype=fmt.uint_dtype), fmt)
    assert got == [hex_bits(b, fmt)[2:] for b in bits] == [hex_bits(b, fmt, prefix="") for b in bits]
    for b, h in zip(bits, got, strict=True):
        assert len(h) == fmt.width // 4 and int(h, 16) == b == bits_of_hex(h) == bits_of_hex(hex_bits(b, fmt))


def test_differing_bits_counts_the_bits_of_the_patterns_not_the_values():
    import numpy as np
    import torch

    from core.arith.formats import differing_bits

    a = np.array([[0.0, 1.0], [np.inf, np.finfo(np.float32).max]], dtype=np.float32)
    b = np.array([[-0.0, np.nextafter(np.float32(1.0), np.float32(2.0))], [np.inf, np.inf]], dtype=np.float32)
    # -0 against +0: the sign bit; 1 against its neighbour: one bit; max against inf: 0x7f7fffff ^ 0x7f800000
    assert differing_bits(a, b, axis=1).tolist() == [2, bin(0x7F7FFFFF ^ 0x7F800000).count("1")]
    assert differing_bits(torch.tensor([1.0], dtype=torch.bfloat16), torch.tensor([-1.0], dtype=torch.bfloat16)) == 1


def test_in_ulps_measures_at_the_references_magnitude():
    import numpy as np

    from core.arith.formats import FLOAT32
    from core.arith.ulps import in_ulps

    tiny = float(FLOAT32.min_subnormal)
    got = in_ulps([2.0**-23, 2.0**-22, 3 * tiny, 0.0, 1.0], [1.0, 1.5, 0.0, np.nan, np.inf], FLOAT32)
    assert got[:4].tolist() == [1.0, 2.0, 3.0, 0.0]  # ulp(0) is the smallest subnormal; d = 0 is 0 ULPs
    assert np.isnan(got[4])  # no ULP at infinity


# ------------------------------------------------------------------ bits through formats alone


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_from_bit_view_inverts_bit_view(fmt, data):
    """Bit patterns to values and back, every pattern (NaNs included) kept; each value decodes like value_of_bits."""
    bits = np.array(data.draw(st.lists(bit_patterns(fmt), min_size=1, max_size=8)), dtype=fmt.uint_dtype)
    values = from_bit_view(bits, fmt)
    assert values.dtype == fmt.numpy_dtype and bit_view(values).tolist() == bits.tolist()
    for b, v in zip(bits.tolist(), values.tolist(), strict=True):
        exact = value_of_bits(b, fmt)
        if is_nan(exact):
            assert math.isnan(float(v))
        elif isinstance(exact, float):  # an infinity: value_of_bits gives the float, which no Fraction holds
            assert float(v) == exact
        else:
            assert Fraction(float(v)) == exact


def test_same_bits_and_bits_differ_compare_patterns_not_values():
    """-0 and +0 are equal values with other bits; a NaN has the bits of itself; tensors stay tensors."""
    for fmt in FORMATS.values():
        a = np.array([0.0, 1.0, np.nan], dtype=fmt.numpy_dtype)
        b = np.array([-0.0, 1.0, np.nan], dtype=fmt.numpy_dtype)
        assert not same_bits(a, b) and same_bits(a, a.copy()) and not same_bits(a, a[:2])
        assert bits_differ(a, b).tolist() == [True, False, False]
        ta, tb = torch.tensor([0.0, 1.0, math.nan], dtype=fmt.torch_dtype), torch.tensor([-0.0, 1.0, math.nan],
                                                                                          dtype=fmt.torch_dtype)
        assert not same_bits(ta, tb) and same_bits(ta, ta.clone()) and not same_bits(ta, ta[:2])
        differ = bits_differ(ta, tb)
        assert isinstance(differ, torch.Tensor) and differ.tolist() == [True, False, False]


@pytest.mark.parametrize("fmt", list(FORMATS.values()), ids=list(FORMATS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_last_bit_even_reads_the_last_stored_bit(fmt, data):
    bits = data.draw(st.lists(bit_patterns(fmt), min_size=1, max_size=8))
    values = from_bit_view(np.array(bits, dtype=fmt.uint_dtype), fmt)
    assert last_bit_even(values).tolist() == [b & 1 == 0 for b in bits]


def test_byte_view_is_the_memory_in_order():
    for a in (np.arange(5, dtype=np.float32), np.array([True, False]), np.arange(3, dtype=np.int64),
              np.array([1.5, -2.0], dtype=BFLOAT16.numpy_dtype)):
        assert byte_view(a).dtype == np.uint8 and byte_view(a).tobytes() == a.tobytes()


def test_tf32_is_a_float_format_stored_in_float32():
    """TF32 is one more FloatFormat: its own precision and range, float32's storage, never a dtype's format."""
    assert (TF32.precision, TF32.exponent_bits, TF32.emax, TF32.width) == (11, 8, 127, 19)
    assert TF32.numpy_dtype == np.float32 and TF32.uint_dtype == np.uint32 and TF32.torch_dtype == torch.float32
    assert TF32 not in FORMATS.values() and format_of(torch.float32) is FLOAT32 and format_of(np.float32) is FLOAT32
    assert float(TF32.max_finite) == (2 - 2.0**-10) * 2.0**127 and TF32.emin == FLOAT32.emin
    x = np.array([1.0, 3.0, 2.0**-130, 0.0, 1e38])
    assert ulp_array(x, TF32).tolist() == [float(ulp(Fraction(v), TF32)) for v in x.tolist()]
    assert from_bit_view(np.array([0x3F800000], dtype=np.uint32), TF32).tolist() == [1.0]



@pytest.mark.parametrize("fmt", [f for f in FORMATS.values() if f.infinities], ids=lambda f: f.name)
def test_from_bit_view_keeps_the_infinities(fmt):
    """The example a random draw once found: +inf and -inf, pattern to value and back."""
    pos = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits  # exponent all ones, mantissa zero
    bits = np.array([pos, pos | (1 << (fmt.width - 1))], dtype=fmt.uint_dtype)
    values = from_bit_view(bits, fmt)
    assert bit_view(values).tolist() == bits.tolist()
    assert [float(v) for v in values.tolist()] == [math.inf, -math.inf]
