"""Binary floating-point formats: exact decoding, correct rounding, and the moves of values and bit patterns
between NumPy and torch (errors and distances in ULPs: core.arith.ulps; bit patterns as text: core.arith.hexbits).

Everything here is integer and rational arithmetic (``fractions.Fraction``); no
floating-point operation is used to decide a rounding. torch is used only to move bit
patterns in and out of tensors of the matching dtype.

``FloatFormat`` (core.arith.floatformat, re-exported here) is the one type of a number format, for every
format the project knows: those a dtype stores (``FORMATS``: the four torch computes in, ``ARITHMETIC``,
and the eight-bit storage formats) and TF32, which tensor cores read from float32 registers. It owns its
name, its NumPy and torch dtypes, its bit layout and its rules (infinities, NaN patterns, overflow), and
every function here reads those fields, never a format's name. Values move between NumPy and torch only
through ``to_torch`` and ``to_numpy`` (bfloat16, which NumPy knows through ml_dtypes, included),
and bit patterns are read and written only here: ``bit_view`` and ``from_bit_view`` (many values),
``bits_of`` and ``tensor_from_bits`` (one value), and the comparisons and tests built on them
(``same_bits``, ``bits_differ``, ``last_bit_even``). No other module reinterprets memory with
``.view(dtype)`` (tests/test_bit_views.py holds every module outside this one to that).

Conventions
-----------
* ``p`` is the precision in bits, counting the implicit leading bit (24 for float32).
* ``emax`` is the largest unbiased exponent of a finite value; ``emin = 1 - bias``.
* Rounding is IEEE round-to-nearest, ties-to-even. When the value rounded with an unbounded
  exponent exceeds the largest finite number it overflows by the format's rule (``overflow``:
  to infinity, or saturated to the largest finite value, or to NaN); an infinity is cast the
  same way (float8_e4m3fn has none).
* Values that are not finite are plain Python floats (``inf``, ``-inf``, ``nan``);
  finite values are ``Fraction``.  Zero has no sign as a Fraction; the sign of a
  computed zero is visible in its bit pattern.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import torch

from core.arith.floatformat import BFLOAT16 as BFLOAT16
from core.arith.floatformat import FLOAT8_E4M3FN as FLOAT8_E4M3FN
from core.arith.floatformat import FLOAT8_E5M2 as FLOAT8_E5M2
from core.arith.floatformat import FLOAT16 as FLOAT16
from core.arith.floatformat import FLOAT32 as FLOAT32
from core.arith.floatformat import FLOAT64 as FLOAT64
from core.arith.floatformat import REGISTRY, FloatFormat, Overflow
from core.arith.floatformat import TF32 as TF32

Exact = Fraction | float  # a Fraction when finite, else float inf/-inf/nan


FORMATS: dict[str, FloatFormat] = {f.name: f for f in REGISTRY}
# The formats torch adds and multiplies in on a CPU: where a page computes in a format, it offers these.
ARITHMETIC: dict[str, FloatFormat] = {name: f for name, f in FORMATS.items() if f.arithmetic}
NUMPY_DTYPES: dict[str, np.dtype] = {name: f.numpy_dtype for name, f in FORMATS.items()}  # a view of FORMATS
_FORMAT_OF_TORCH = {f.torch_dtype: f for f in FORMATS.values()}
_NATIVE = frozenset(f.torch_dtype for f in FORMATS.values() if f.native_numpy)  # dtypes NumPy stores itself


def get_format(name: str) -> FloatFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; choose one of {', '.join(FORMATS)}") from None


def working_format(storage: str, working: str) -> str:
    """The format a sum of ``storage`` values accumulates in when asked for ``working`` ("same": the storage
    format itself where torch adds in it, else the format its values accumulate in, float32 for FP8)."""
    if working != "same":
        return working
    fmt = get_format(storage)
    return storage if fmt.arithmetic else fmt.accumulates_in


def exact_sums_below(storage: FloatFormat, acc: FloatFormat) -> tuple[int, int]:
    """(q, e): every value of ``storage`` is a whole multiple of 2^q (its smallest subnormal), so ``acc`` holds
    every sum of them below 2^e in magnitude exactly (e = q + acc's precision, within acc's range): a sum whose
    partial sums all stay below 2^e is exact, in every order."""
    q = storage.emin - storage.precision + 1
    return q, min(q + acc.precision, acc.emax + 1)


# --------------------------------------------------------------------------- exponents


def floor_log2(x: Fraction) -> int:
    """floor(log2(x)) for a positive Fraction, exactly."""
    if x <= 0:
        raise ValueError("floor_log2 needs a positive number")
    n, d = x.numerator, x.denominator
    e = n.bit_length() - d.bit_length()
    # 2^e <= x < 2^(e+1) after at most one correction step
    if e >= 0:
        if n < d << e:
            e -= 1
    elif n << -e < d:
        e -= 1
    return e


def quantum_exponent(x, precision: int, emin: int) -> np.ndarray:
    """q with 2^q the ULP of each float64 |x| in a format of ``precision`` bits and smallest normal
    exponent ``emin`` (the convention above), as int64; x = 0 gives the subnormal spacing's."""
    _, e = np.frexp(np.abs(np.asarray(x, dtype=np.float64)))  # |x| = m 2^e, 0.5 <= m < 1
    return np.maximum(e.astype(np.int64) - 1, emin) - precision + 1


# ---------------------------------------------------------------------------- rounding


def round_precision(x, precision: int, emin: int, max_finite: float) -> np.ndarray:
    """Round float64 values to ``precision`` significant bits (exponents >= ``emin``, with
    subnormals below), to nearest with ties to even, overflowing to +-inf: exactly one
    IEEE rounding, for any precision up to 53 (``round_to_format`` is the same in Fractions).

    With the quantum 2^q at x (``quantum_exponent``), x / 2^q is exact (a power of two scaling)
    and below 2^p, so ``np.rint`` (ties to even) rounds it exactly.
    """
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        qexp = quantum_exponent(x, precision, emin)
        r = np.ldexp(np.rint(np.ldexp(x, -qexp)), qexp)
        r = np.where(np.isfinite(x) & (np.abs(r) > max_finite), np.copysign(np.inf, x), r)
    return np.where(np.isfinite(x), r, x)


def round_to_format(x: Exact, fmt: FloatFormat, overflow: Overflow | None = None) -> Exact:
    """Round an exact real to ``fmt``: nearest, ties to even, overflow by ``overflow`` (default: the
    format's own rule, torch's cast).

    NaN passes through; an infinity is cast by the overflow rule. The result is exactly a value of
    ``fmt`` (as a Fraction), an infinity or NaN.
    """
    if isinstance(x, float):
        if math.isnan(x):
            return x
        if math.isinf(x):
            return fmt.overflowed(x < 0, overflow)
        x = Fraction(x)
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    mag = abs(x)
    quantum_exp = max(floor_log2(mag), fmt.emin) - fmt.precision + 1
    quantum = Fraction(2) ** quantum_exp
    m = round(mag / quantum)  # Fraction.__round__ rounds half to even
    rounded = m * quantum
    if rounded > fmt.max_finite:
        return fmt.overflowed(sign < 0, overflow)
    return sign * rounded


_ROUND_PIECE = 1 << 16  # values rounded at a time by round_values


def _round_bits(x: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Float64 values rounded to ``fmt.precision`` bits (to nearest, ties to even; no overflow check), as
    float64. Where the result is a normal number of ``fmt`` the rounding is an integer addition on the
    float64 bit pattern (half the dropped part, less one, plus the kept part's last bit; a carry moves
    into the exponent, as it should); ``round_precision`` rounds the values below ``fmt``'s smallest
    normal, whose quantum is fixed, and the infinities and NaN pass through."""
    drop = np.uint64(53 - fmt.precision)
    bits = bit_view(x)
    up = np.right_shift(bits, drop)
    np.bitwise_and(up, np.uint64(1), out=up)
    np.add(up, np.uint64((1 << (53 - fmt.precision - 1)) - 1), out=up)
    np.add(up, bits, out=up)
    np.right_shift(up, drop, out=up)
    np.left_shift(up, drop, out=up)
    r = from_bit_view(up, FLOAT64)
    small = np.abs(x) < float(fmt.min_normal)
    if small.any():
        r[small] = round_precision(x[small], fmt.precision, fmt.emin, math.inf)
    special = ~np.isfinite(x)
    if special.any():
        r[special] = x[special]
    return r


def round_values(x, fmt: FloatFormat, overflow: Overflow | None = None) -> np.ndarray:
    """``round_to_format`` element by element over float64 values, as an array of ``fmt.numpy_dtype``:
    one correct rounding, overflow by ``overflow`` (default: the format's rule). NumPy's own casts
    round correctly for the formats it stores itself; the others are rounded by ``round_precision``
    first, so that the cast that stores them is exact."""
    x = np.asarray(x, dtype=np.float64)
    policy = overflow or fmt.overflow
    if fmt.native_numpy and policy == "inf":
        with np.errstate(over="ignore"):
            return x.astype(fmt.numpy_dtype)
    flat = x.reshape(-1)
    out = np.empty(flat.shape, dtype=fmt.numpy_dtype)
    big, over = float(fmt.max_finite), float(fmt.overflowed(False, policy))
    table = _byte_table(fmt) if fmt.numpy_dtype.itemsize == 1 else None
    for s in range(0, flat.size, _ROUND_PIECE):  # pieces: the temporaries stay small and in cache
        r = _round_bits(flat[s : s + _ROUND_PIECE], fmt)
        past = np.abs(r) > big  # infinities included; NaN compares False
        if past.any():
            r[past] = np.copysign(over, r[past])
        if table is None:
            out[s : s + _ROUND_PIECE] = r  # exact: r holds values of fmt (or its overflow result)
        else:  # the same bits as the cast, several times faster: the float32 pattern's top bits pick the byte
            out[s : s + _ROUND_PIECE] = from_bit_view(table[bit_view(r.astype(np.float32)) >> (23 - fmt.mantissa_bits)],
                                                      fmt)
    return out.reshape(x.shape)


@functools.lru_cache(maxsize=16)  # one table per one-byte format: the registry's, and a test's toy format or two
def _byte_table(fmt: FloatFormat) -> np.ndarray:
    """For a one-byte format, the bit pattern of each of its values (and NaN, and its infinities) indexed by
    the top 9 + mantissa_bits bits of the value's float32 pattern, which tell its values apart: every value
    of such a format is a float32 value."""
    shift = 23 - fmt.mantissa_bits
    table = np.zeros(1 << (32 - shift), dtype=np.uint8)
    nan = bits_of_value(math.nan, fmt)
    for b in range(256):
        v = value_of_bits(b, fmt)
        if isinstance(v, float) and math.isnan(v):
            continue
        wide = np.array([float(v)], dtype=np.float32)
        if b == 1 << 7:
            wide = -wide  # -0
        table[int(bit_view(wide)[0]) >> shift] = b
    for sign in (0, 1 << 31):  # float32's quiet NaN, either sign
        table[(sign | 0x7FC00000) >> shift] = nan | (sign >> 24)
    return table




# ------------------------------------------------------------------------ bit patterns


def format_of(dtype) -> FloatFormat:
    """The format of a torch dtype or a NumPy dtype (anything ``np.dtype`` accepts)."""
    if isinstance(dtype, torch.dtype):
        if (f := _FORMAT_OF_TORCH.get(dtype)) is not None:
            return f
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        for f in FORMATS.values():
            if f.numpy_dtype == dt:
                return f
    raise ValueError(f"unsupported dtype {dtype}; expected one of {', '.join(FORMATS)}")


def to_torch(a, copy: bool = False) -> torch.Tensor:
    """A CPU tensor holding exactly ``a``'s values (a NumPy array or scalar of a format in FORMATS).

    The tensor shares ``a``'s memory unless ``copy`` is set or ``a`` is read-only or not
    C-contiguous (then it holds a copy). Every format goes through its bit pattern, so
    bfloat16 (ml_dtypes in NumPy) needs no special case.
    """
    a = np.asarray(a)
    fmt = format_of(a.dtype)
    if copy or not a.flags.writeable or not a.flags.c_contiguous:
        a = np.array(a, order="C", copy=True)
    return torch.from_numpy(a.view(_SIGNED[fmt.width])).view(fmt.torch_dtype)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x + y rounded once to their format, on their device. torch adds the formats in ARITHMETIC itself. A
    storage-only format (the eight-bit ones) has no adder of its own: the sum is taken in float64, where
    it is exact (FloatFormat requires such a format's values to span at most 53 bits), and cast once,
    by the format's overflow rule, as a kernel that writes its float32 or wider result to FP8 does."""
    if format_of(x.dtype).arithmetic:
        return x + y
    return (x.double() + y.double()).to(x.dtype)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy array holding exactly a tensor's values (moved to the CPU; bfloat16 via ml_dtypes).

    A CPU tensor's memory is shared, as with ``Tensor.numpy``.
    """
    fmt = format_of(t.dtype)
    if t.dtype in _NATIVE:  # the same bits, without the two dtype views (a trace converts several tensors per op)
        return t.detach().cpu().numpy()
    return t.detach().cpu().view(fmt.int_dtype).numpy().view(fmt.numpy_dtype)


def to_scalar(t: torch.Tensor) -> np.generic:
    """The NumPy scalar of a one-element tensor, exactly."""
    a = to_numpy(t)
    if a.size != 1:
        raise ValueError(f"a scalar needs one element, not {a.size}")
    return a.reshape(())[()]


def bit_view(x) -> np.ndarray:
    """The unsigned bit patterns of an array or tensor of a format in FORMATS (a view where possible)."""
    a = to_numpy(x) if isinstance(x, torch.Tensor) else np.asarray(x)
    return a.view(format_of(a.dtype).uint_dtype)


def from_bit_view(bits, fmt: FloatFormat) -> np.ndarray:
    """The ``fmt`` values that unsigned bit patterns stand for (cast to ``fmt.uint_dtype`` first), as an array
    of ``fmt.numpy_dtype`` (a view where possible): the inverse of ``bit_view``. TF32's values are float32's."""
    return np.asarray(bits, dtype=fmt.uint_dtype).view(fmt.numpy_dtype)


def byte_view(a) -> np.ndarray:
    """An array's memory as its bytes, in order (uint8, a view; any dtype): what a digest hashes."""
    return np.asarray(a).view(np.uint8)


def _int_view(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bit patterns as its same-width signed integers: a view, on the tensor's own device."""
    return t.view(format_of(t.dtype).int_dtype)


def same_bits(a, b) -> bool:
    """Whether two arrays, or two tensors (compared on their device), of one format have the same shape and
    the same bit patterns: -0 is not +0, and a NaN matches only the same NaN."""
    if isinstance(a, torch.Tensor):
        return torch.equal(_int_view(a), _int_view(b))
    return bool(np.array_equal(bit_view(a), bit_view(b)))


def bits_differ(a, b):
    """Element by element, whether two arrays or two tensors of one format hold different bit patterns: a
    bool tensor on the tensors' device for tensors, else a NumPy array."""
    if isinstance(a, torch.Tensor):
        return _int_view(a) != _int_view(b)
    return bit_view(a) != bit_view(b)


def last_bit_even(x) -> np.ndarray:
    """Whether each value's last stored significand bit is 0: the neighbour a tie goes to under ties-to-even."""
    return (bit_view(x) & 1) == 0


def differing_bits(a, b, axis=None):
    """How many bits differ between the bit patterns of two arrays or tensors of one format (in all,
    or summed along ``axis``)."""
    return np.bitwise_count(bit_view(a) ^ bit_view(b)).sum(axis=axis)


def bits_of(x) -> int:
    """Unsigned bit pattern of one value: a 0-d (or 1-element) tensor, NumPy scalar or array."""
    b = bit_view(x)
    if b.size != 1:
        raise ValueError(f"bits_of reads one value, not {b.size}")
    return int(b.reshape(-1)[0])


_SIGNED = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}


def tensor_from_bits(bits: int, fmt: FloatFormat, device: str | torch.device = "cpu") -> torch.Tensor:
    """A 0-d tensor of ``fmt`` with exactly the given bit pattern."""
    if not 0 <= bits < 1 << fmt.width:
        raise ValueError(f"{bits:#x} is not a {fmt.width}-bit pattern")
    signed = bits - (1 << fmt.width) if bits >> (fmt.width - 1) else bits
    return torch.tensor(signed, dtype=fmt.int_dtype).view(fmt.torch_dtype).to(device)


def value_of_bits(bits: int, fmt: FloatFormat) -> Exact:
    """Decode a bit pattern to its exact value, independently of torch."""
    sign = -1 if bits >> (fmt.width - 1) & 1 else 1
    if fmt.nan_encoding == "negative_zero" and bits == 1 << (fmt.width - 1):
        return math.nan
    exp_field = bits >> fmt.mantissa_bits & ((1 << fmt.exponent_bits) - 1)
    frac = bits & ((1 << fmt.mantissa_bits) - 1)
    if exp_field == (1 << fmt.exponent_bits) - 1:  # without infinities, a binade of finite values
        if fmt.infinities:
            return math.nan if frac else sign * math.inf
        if fmt.nan_encoding == "all_ones" and frac == (1 << fmt.mantissa_bits) - 1:
            return math.nan
    if exp_field == 0:  # zero or subnormal
        return sign * Fraction(frac) * Fraction(2) ** (fmt.emin - fmt.mantissa_bits)
    significand = (1 << fmt.mantissa_bits) | frac
    return sign * Fraction(significand) * Fraction(2) ** (exp_field - fmt.bias - fmt.mantissa_bits)


def bits_of_value(x: Exact, fmt: FloatFormat, negative_zero: bool = False) -> int:
    """Encode a value of ``fmt`` (exactly representable, +-inf where the format has infinities, or NaN: its
    quiet NaN, the top fraction bit set, or the all-ones pattern) as its bit pattern."""
    sign_bit = 1 << (fmt.width - 1)
    exp_all_ones = ((1 << fmt.exponent_bits) - 1) << fmt.mantissa_bits
    if isinstance(x, float):
        if math.isnan(x):
            if fmt.nan_encoding == "negative_zero":
                return sign_bit
            quiet = (1 << fmt.mantissa_bits) - 1 if fmt.nan_encoding == "all_ones" else 1 << (fmt.mantissa_bits - 1)
            return exp_all_ones | quiet
        if math.isinf(x):
            if not fmt.infinities:
                raise ValueError(f"{fmt.name} has no infinity")
            return exp_all_ones | (sign_bit if x < 0 else 0)
        x = Fraction(x)
    if x == 0:
        return sign_bit if negative_zero and fmt.nan_encoding != "negative_zero" else 0
    if abs(x) > fmt.max_finite or round_to_format(x, fmt) != x:
        raise ValueError(f"{x} is not a {fmt.name} value")
    s = sign_bit if x < 0 else 0
    mag = abs(x)
    e = floor_log2(mag)
    if e < fmt.emin:  # subnormal
        frac = mag / fmt.min_subnormal
        return s | int(frac)
    frac = mag / Fraction(2) ** (e - fmt.mantissa_bits) - (1 << fmt.mantissa_bits)
    return s | (e + fmt.bias) << fmt.mantissa_bits | int(frac)


def tensor_of(x: Exact, fmt: FloatFormat, device: str | torch.device = "cpu") -> torch.Tensor:
    """A 0-d tensor holding exactly the ``fmt`` value x (no rounding happens)."""
    return tensor_from_bits(bits_of_value(x, fmt), fmt, device)
