"""Dot products the way CPUs and GPUs compute them, bit-faithfully on a CPU.

Most CPU-vs-GPU mismatches come from matrix products, and every entry of a matrix product
is a dot product sum(x_i * y_i) of K terms. What differs between devices is not the format
but the arithmetic around it: whether a*b + c is rounded once (FMA) or twice, whether float32
inputs are first cut to TF32 or float16/bfloat16, and in which structure the K terms are
accumulated (one chain, tiles of the inner dimension, split-K slices added at the end).
Each of those is a *model* here: the named arithmetic, computed exactly as written, on this
CPU. None of it needs a GPU to be shown exactly.

**The exact engine.** Every value is an integer times 2^-scale (a Python int), with the
scale chosen so that every product of two inputs is an integer (then so is every sum, and
every rounded value, which lies on a coarser grid). Products of two inputs are then exact,
sums are exact, and each rounding is done on the integer (nearest, ties to even, gradual
underflow, overflow to ±inf), so no floating-point operation of this machine decides a
rounding. Non-finite values follow IEEE (inf * 0 = nan, +inf + -inf = nan); zero signs
follow IEEE round-to-nearest (an exact zero sum is -0 only when every addend is -0; a
nonzero result that underflows keeps its sign). Every accumulator starts at +0, as ``acc = 0`` does in a kernel.

The tests check every model bit for bit against a separate pure-Fraction implementation and,
where torch exposes the same arithmetic (float32/float64 multiply then add; the float16 and
bfloat16 conversions), against torch.

What the GPU arithmetic page does with these models (its vectors, torch's live results, the lab's
rows, error against K, atomics) is core.studies.gpu_arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import (
    FORMATS,
    TF32,
    Exact,
    FloatFormat,
    bit_view,
    bits_of_value,
    format_of,
    from_bit_view,
    round_to_format,
)
from core.arith.metrics import gamma, input_rounding_error
from core.arith.vectors import round_array

MAX_K = 65_536  # every model is a Python loop over the K terms (about a microsecond each)
MAX_TRACE_K = 32  # the operation picture


# --------------------------------------------------------------------------- TF32

# TF32 (core.arith.formats.TF32) is float32's range with 10 explicit mantissa bits; its values here are
# float32 values with the low 13 bits 0, cut from float32 as one of these conversions does.
TF32_ROUNDINGS: dict[str, str] = {
    "rna": "nearest, ties away from zero: CUTLASS's default for float32 operands of TF32 tensor-core GEMMs "
           "(PreferredRoundingMode<tfloat32_t, float> is round_half_ulp_truncate: add 0x1000 to the bits, "
           "and the tensor core ignores the low 13), the same as PTX cvt.rna.tf32.f32",
    "rne": "nearest, ties to even: CUTLASS's NumericConverter<tfloat32_t, float, round_to_nearest> "
           "(PTX cvt.rn.tf32.f32 on sm_90 and later)",
    "rz": "truncation: what a tensor core reads from an unconverted float32 register, the top 10 mantissa bits "
          "(PyTorch's numerical-accuracy note: only the first 10 bits of the input mantissa are read)",
}
TF32_SOURCES = (
    "NVIDIA CUTLASS include/cutlass/tfloat32.h (tfloat32_t::round_half_ulp_truncate), "
    "include/cutlass/numeric_conversion.h (PreferredRoundingMode, NumericConverter<tfloat32_t, float, ...>), "
    "include/cutlass/gemm/warp/mma_tensor_op.h (MmaTensorOp::transform converts operands with the preferred "
    "mode); NVIDIA PTX ISA, cvt.rna.tf32.f32; PyTorch docs, notes/numerical_accuracy (TF32 on Ampere). "
    "cuBLAS's own kernels are closed: which conversion a given cuBLAS kernel uses is not documented, so this "
    "is a model."
)


def to_tf32(values: np.ndarray, mode: str = "rna") -> np.ndarray:
    """float32 values cut to TF32 (returned as float32 with the low 13 bits cleared).

    rna: add half a TF32 ulp (0x1000) to the bit pattern, then clear the low 13 bits: round to
    nearest on the magnitude, ties away from zero; a carry moves into the exponent, and past
    the largest TF32 value it reaches the infinity pattern (overflow). rne: add 0xFFF plus the
    lowest kept bit (ties to even). rz: clear the bits. inf and nan pass unchanged.
    """
    if mode not in TF32_ROUNDINGS:
        raise ValueError(f"unknown TF32 rounding {mode!r}; choose one of {', '.join(TF32_ROUNDINGS)}")
    a = np.asarray(values)
    if a.dtype != np.float32:
        raise TypeError(f"TF32 conversion takes float32 values, not {a.dtype}")
    u = bit_view(a).astype(np.uint64)  # room for the carry
    finite = (u & 0x7F800000) != 0x7F800000
    if mode == "rna":
        u = np.where(finite, u + 0x1000, u)
    elif mode == "rne":
        u = np.where(finite, u + 0xFFF + ((u >> 13) & 1), u)
    return from_bit_view(np.where(finite, u & 0xFFFFE000, u).astype(np.uint32), TF32)


# --------------------------------------------------------------------------- models


@dataclass(frozen=True, kw_only=True)
class DotModel:
    key: str
    name: str
    inputs: str  # "stored", or the format the inputs are converted to first: "tf32", "float16", "bfloat16"
    fused: bool  # one rounding per multiply-add (FMA) or a rounded product, then a rounded sum
    structure: str  # "sequential", "tiles" or "split_k"
    accumulate: str | None  # a fixed accumulation format (tensor cores: float32), or None: the chosen one
    description: str


MODELS: dict[str, DotModel] = {
    m.key: m
    for m in (
        DotModel(
            key="separate",
            name="Sequential, multiply then add",
            inputs="stored",
            fused=False,
            structure="sequential",
            accumulate=None,
            description="s ← round(s + round(x_i·y_i)), i = 1…K: two roundings per term, as a CPU loop compiled "
            "without FMA contraction",
        ),
        DotModel(
            key="fma",
            name="Sequential FMA",
            inputs="stored",
            fused=True,
            structure="sequential",
            accumulate=None,
            description="s ← round(x_i·y_i + s): one rounding per term, as one GPU thread's loop (nvcc contracts "
            "a*b + c to an FMA by default) or a CPU with FMA",
        ),
        DotModel(
            key="tf32",
            name="TF32 inputs, float32 accumulation",
            inputs="tf32",
            fused=True,
            structure="sequential",
            accumulate="float32",
            description="float32 inputs cut to TF32 (10 mantissa bits), exact products, one float32 rounding per term: "
            "a float32 matrix product on Ampere or later with TF32 allowed",
        ),
        DotModel(
            key="fp16",
            name="float16 inputs, float32 accumulation",
            inputs="float16",
            fused=True,
            structure="sequential",
            accumulate="float32",
            description="inputs rounded to float16, exact products, one float32 rounding per term (tensor-core style)",
        ),
        DotModel(
            key="bf16",
            name="bfloat16 inputs, float32 accumulation",
            inputs="bfloat16",
            fused=True,
            structure="sequential",
            accumulate="float32",
            description="inputs rounded to bfloat16, exact products, one float32 rounding per term (tensor-core style)",
        ),
        DotModel(
            key="tiles",
            name="Tiles of width T in a chain",
            inputs="stored",
            fused=True,
            structure="tiles",
            accumulate=None,
            description="s ← round(s + x_j·y_j + … + x_{j+T-1}·y_{j+T-1}) per tile of T terms: an idealised matrix "
            "instruction (D = A·B + C over a k-slice of width T, products and their sum exact, one rounding), "
            "the tiles of the inner dimension accumulated in a chain",
        ),
        DotModel(
            key="split_k",
            name="Split-K: s slices added at the end",
            inputs="stored",
            fused=True,
            structure="split_k",
            accumulate=None,
            description="K cut into s contiguous slices; each slice is a chain of tiles (its own thread block), and "
            "the s partial results are added in slice order at the end (a split-K reduction)",
        ),
    )
}
TENSOR_CORE_INPUTS = {"tf32": TF32, "float16": FORMATS["float16"], "bfloat16": FORMATS["bfloat16"]}
TENSOR_CORE_NOTE = (
    "Tensor cores add the products of one instruction in a multi-operand adder whose alignment, truncation "
    "and normalisation differ from IEEE rounding and between GPU generations (Fasi, Higham, Mikaitis and "
    "Pranesh, \"Numerical behavior of NVIDIA tensor cores\", PeerJ Comput. Sci. 7:e330, 2021; Khattak and "
    "Mikaitis, \"Accurate models of NVIDIA tensor cores\", arXiv:2512.07004, 2025). These models use IEEE "
    "round-to-nearest for each accumulation step: they show what the input formats and the structure do, "
    "not the last bit of a particular tensor core."
)


class ModelNotApplicable(ValueError):
    """A model that does not apply to these inputs; ``str(err)`` says why."""


def check_formats(storage: str, accumulate: str) -> str | None:
    """Why this pair of input and accumulation formats is refused, or None."""
    if storage not in FORMATS or accumulate not in FORMATS:
        return f"Choose formats among {', '.join(FORMATS)}."
    s, a = FORMATS[storage], FORMATS[accumulate]
    if a.precision < s.precision or a.emax < s.emax:
        return (f"Accumulating {storage} inputs in {accumulate} would round the inputs themselves: choose an "
                f"accumulation format at least as wide as {storage} (a kernel accumulates in the input format "
                "or a wider one).")
    return None


def model_inputs(model: DotModel, x: np.ndarray, y: np.ndarray, tf32_mode: str = "rna"
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The inputs the model multiplies: the stored values, or their conversion for a tensor core."""
    if model.inputs == "stored":
        return x, y
    if model.inputs == "tf32":
        if np.float64 in (x.dtype, y.dtype):
            raise ModelNotApplicable("TF32 applies to float32 inputs: torch uses it for float32 matrix products "
                                     "only, never for float64.")
        return to_tf32(x.astype(np.float32), tf32_mode), to_tf32(y.astype(np.float32), tf32_mode)
    return (round_array(x.astype(np.float64), model.inputs), round_array(y.astype(np.float64), model.inputs))


def accumulation_of(model: DotModel, accumulate: str) -> FloatFormat:
    return FORMATS[model.accumulate or accumulate]


def model_name(model: DotModel, tile: int, slices: int, tf32_mode: str) -> str:
    """The model's name with its parameters filled in (tile width, slices, TF32 conversion)."""
    if model.key == "tiles":
        return f"Tiles of width {tile} in a chain"
    if model.key == "split_k":
        return f"Split-K: {slices} slices (tiles of {tile}) added at the end"
    if model.key == "tf32":
        return f"TF32 inputs ({tf32_mode}), float32 accumulation"
    return model.name


# --------------------------------------------------------------------------- the exact engine


def _lowest_exponent(fmt: FloatFormat) -> int:
    """log2 of the smallest subnormal: every value of fmt is an integer times 2^this."""
    return fmt.emin - fmt.precision + 1


def _lowest_bits(mantissas: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """For m * 2^e (m an integer < 2^53 in int64, 0 allowed): the exponent of m's lowest set bit,
    plus e (a large number for m = 0)."""
    low = mantissas & -mantissas  # the lowest set bit, a power of two
    tz = np.frexp(low.astype(np.float64))[1].astype(np.int64) - 1
    return np.where(mantissas != 0, tz + exponents, 1 << 20)


def exact_products(a: np.ndarray, b: np.ndarray) -> tuple[list, list[bool], int]:
    """Each product a_i * b_i exactly, as an int in units of 2^-scale, and the scale: the smallest
    that makes every product an integer (nan or ±inf, as a float, where an input is not finite:
    inf * 0 = nan), with the sign bit of each product (which a zero product keeps).

    Sums of these integers are exact, and every rounded value is a coarser multiple of the same
    unit, so the whole computation stays in integers.
    """
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    negative = (np.signbit(a64) ^ np.signbit(b64)).tolist()
    finite = np.isfinite(a64) & np.isfinite(b64)
    fa, fb = np.where(finite, a64, 0.0), np.where(finite, b64, 0.0)
    if a.dtype != np.float64 and b.dtype != np.float64:
        # a product of two narrow values is exact in float64 (at most 48 bits, within [2^-298, 2^256]);
        # times 2^scale (scale <= 298) it is an integer below 2^554, still exact: int() loses nothing
        p = fa * fb
        m, e = np.frexp(p)
        low = _lowest_bits(np.ldexp(m, 53).astype(np.int64), e.astype(np.int64) - 53)
        scale = max(0, -int(low.min())) if p.size else 0
        out = [int(v) for v in np.ldexp(p, scale).tolist()]
    else:
        ma, ea = np.frexp(fa)
        mb, eb = np.frexp(fb)
        ia, ib = np.ldexp(ma, 53).astype(np.int64), np.ldexp(mb, 53).astype(np.int64)
        ea, eb = ea.astype(np.int64) - 53, eb.astype(np.int64) - 53
        low = _lowest_bits(ia, ea) + _lowest_bits(ib, eb)  # the product of the lowest bits is the lowest bit
        scale = max(0, -int(low.min())) if low.size else 0
        shifts = (ea + eb + scale).tolist()
        # a negative shift only drops zero bits: the product is a multiple of 2^-scale
        out = [(i * j << s) if s >= 0 else (i * j >> -s) for i, j, s in zip(ia.tolist(), ib.tolist(), shifts,
                                                                             strict=True)]
    if not finite.all():
        with np.errstate(invalid="ignore", over="ignore"):
            for i in np.flatnonzero(~finite).tolist():
                out[i] = float(a64[i] * b64[i])
    return out, negative, scale


def make_rounder(fmt: FloatFormat, scale: int):
    """round(n): the integer n (units of 2^-scale) rounded to fmt, nearest with ties to even, with
    gradual underflow, and ±inf (a float) past the overflow threshold. Non-finite floats pass.

    The spacing of fmt at |v| in [2^E, 2^(E+1)) is 2^(max(E, emin) - p + 1): in units, 2^sh with
    sh = max(bit_length(|n|) - p, emin - p + 1 + scale). sh <= 0 means n is a value of fmt."""
    p = fmt.precision
    qmin = _lowest_exponent(fmt) + scale
    max_units = math.floor(fmt.max_finite * Fraction(2) ** scale)
    inf = math.inf

    def rnd(n):
        if n.__class__ is float:
            return n
        a = n if n > 0 else -n
        sh = a.bit_length() - p
        if sh < qmin:
            sh = qmin
        if sh <= 0:
            return n
        q = a >> sh
        r = a - (q << sh)
        half = 1 << (sh - 1)
        if r > half or (r == half and q & 1):
            q += 1
        a = q << sh
        if a > max_units:
            return inf if n > 0 else -inf
        return a if n > 0 else -a

    return rnd


def _special_sum(*terms) -> float:
    """IEEE sum when a term is not finite (finite terms cannot change it)."""
    total = 0.0
    for t in terms:
        if t.__class__ is float:
            total += t
    return total


def _add(state: tuple, term, term_negative: bool, rnd) -> tuple:
    """round(s + term), with IEEE zero signs: an exact zero is -0 only if both addends are -0."""
    s, s_negative = state
    if s.__class__ is int and term.__class__ is int:
        t = s + term
        if t:
            return rnd(t), t < 0  # the sign matters only if t underflows to zero
        return 0, s == 0 and term == 0 and s_negative and term_negative
    return _special_sum(s, term), False


def _add_block(state: tuple, terms: list, negatives: list[bool], rnd) -> tuple:
    """round(s + t_1 + ... + t_T): the terms and s added exactly, rounded once."""
    s, s_negative = state
    if s.__class__ is int and all(t.__class__ is int for t in terms):
        t = s + sum(terms)
        if t:
            return rnd(t), t < 0
        all_zero = s == 0 and not any(terms)
        return 0, all_zero and s_negative and all(negatives)
    return _special_sum(s, *terms), False


ZERO = (0, False)  # +0


def _sequential(products: list, negatives: list[bool], rnd, fused: bool, checkpoints=frozenset()):
    """The chain s <- round(s + p_i) (fused) or s <- round(s + round(p_i)), from s = +0.

    The same arithmetic as ``_add``, written out in the loop (it runs K times)."""
    s, s_negative, seen = 0, False, {}
    for i, p in enumerate(products):
        if fused:
            q, q_negative = p, negatives[i]
        elif p.__class__ is int:
            q = rnd(p)  # the product rounded on its own; a zero (or an underflow) keeps the product's sign
            q_negative = p < 0 if p else negatives[i]
        else:
            q, q_negative = p, False
        if s.__class__ is int and q.__class__ is int:
            t = s + q
            if t:
                s, s_negative = rnd(t), t < 0
            else:
                s, s_negative = 0, s == 0 and q == 0 and s_negative and q_negative
        else:
            s, s_negative = _special_sum(s, q), False
        if i + 1 in checkpoints:
            seen[i + 1] = (s, s_negative)
    return (s, s_negative), seen


def _tiles(products: list, negatives: list[bool], rnd, tile: int, start=ZERO):
    state = start
    for j in range(0, len(products), tile):
        state = _add_block(state, products[j : j + tile], negatives[j : j + tile], rnd)
    return state


def slice_bounds(k: int, slices: int) -> list[tuple[int, int]]:
    """Split-K: s contiguous slices of ceil(K/s) terms (the last ones shorter, possibly empty)."""
    length = -(-k // slices)
    return [(min(j * length, k), min((j + 1) * length, k)) for j in range(slices)]


def _split_k(products: list, negatives: list[bool], rnd, tile: int, slices: int):
    partials = [_tiles(products[lo:hi], negatives[lo:hi], rnd, tile) for lo, hi in slice_bounds(len(products), slices)]
    state = partials[0]
    for value, negative in partials[1:]:
        state = _add(state, value, negative, rnd)
    return state


@dataclass(frozen=True)
class DotValue:
    """A rounded result: exact value (Fraction, or nan/±inf), its format and bit pattern."""

    value: Exact
    fmt: FloatFormat
    bits: int

    @property
    def negative_zero(self) -> bool:
        return self.bits == 1 << (self.fmt.width - 1)

    def as_float(self) -> float:
        return -0.0 if self.negative_zero else float(self.value)


def _finish(state: tuple, fmt: FloatFormat, scale: int) -> DotValue:
    v, negative = state
    if v.__class__ is float:
        return DotValue(v, fmt, bits_of_value(v, fmt))
    value = Fraction(v, 1 << scale)
    return DotValue(value, fmt, bits_of_value(value, fmt, negative_zero=(v == 0 and negative)))


def run_model(model: DotModel, x: np.ndarray, y: np.ndarray, accumulate: str, tile: int = 8, slices: int = 4,
              tf32_mode: str = "rna", checkpoints: tuple[int, ...] = ()) -> tuple[DotValue, dict[int, DotValue]]:
    """The model's result for x·y, and (sequential models only) its results for the prefixes of the
    given lengths (a chain's state after k terms is the model's result for the first k terms)."""
    a, b = model_inputs(model, x, y, tf32_mode)
    fmt = accumulation_of(model, accumulate)
    if model.inputs == "stored" and (why := check_formats(format_of(a.dtype).name, fmt.name)):
        raise ModelNotApplicable(why)
    products, negatives, scale = exact_products(a, b)
    rnd = make_rounder(fmt, scale)
    seen = {}
    if model.structure == "sequential":
        state, seen = _sequential(products, negatives, rnd, model.fused, frozenset(checkpoints))
    elif model.structure == "tiles":
        state = _tiles(products, negatives, rnd, tile)
    else:
        state = _split_k(products, negatives, rnd, tile, slices)
    return _finish(state, fmt, scale), {k: _finish(s, fmt, scale) for k, s in seen.items()}


# --------------------------------------------------------------------------- bounds


def rounding_counts(model: DotModel, k: int, tile: int, slices: int) -> tuple[int, int]:
    """(depth, roundings): the most roundings any one product passes through, and how many
    roundings the model does in all."""
    if model.structure == "sequential":
        return k, (2 * k - 1 if not model.fused else k)
    if model.structure == "tiles":
        n = -(-k // tile)
        return n, n
    spans = slice_bounds(k, slices)
    per_slice = [-(-(hi - lo) // tile) for lo, hi in spans]
    return max(per_slice) + slices - 1, sum(per_slice) + slices - 1


def dot_bound(depth: int, roundings: int, sum_abs: Fraction, fmt: FloatFormat,
                   input_error: Fraction = Fraction(0)) -> Fraction | None:
    """|computed - exact| <= gamma_d * S + m * eta * (1 + gamma_d) + D.

    Each rounding to fmt gives v(1 + delta) + eps with |delta| <= u, |eps| <= eta (half the
    smallest subnormal: only underflow has eps != 0). A product that passes through at most d
    roundings picks up a relative error of at most gamma_d (Higham, Accuracy and Stability,
    Lemma 3.1), and each of the m absolute errors is multiplied by at most (1 + gamma_d) later.
    S = sum |x_i y_i| of the values the model multiplies; D bounds the error of converting the
    inputs (tensor-core models). None: no finite bound (d u >= 1).
    """
    g = gamma(depth, fmt.unit_roundoff)
    if g is None:
        return None
    return g * sum_abs + roundings * (fmt.min_subnormal / 2) * (1 + g) + input_error


def conversion_error(sum_abs_xy: Fraction, sum_abs_x: Fraction, sum_abs_y: Fraction, k: int,
                     fmt: FloatFormat, truncating: bool = False) -> Fraction:
    """A bound on |sum x^_i y^_i - sum x_i y_i| when every input is rounded to fmt (exact, in Fractions):
    ``core.arith.metrics.input_rounding_error``."""
    return input_rounding_error(sum_abs_xy, k, fmt.unit_roundoff, fmt.min_subnormal / 2, truncating=truncating,
                                rows_abs=sum_abs_x + sum_abs_y)


# --------------------------------------------------------------------------- the operation picture


@dataclass(frozen=True, kw_only=True)
class TraceOp:
    """One rounding of a model: what it adds (products by index, earlier operations), the exact
    value of that sum and what it rounds to."""

    label: str
    products: tuple[int, ...]  # indices of the exact products x_i·y_i it takes directly
    inputs: tuple[int, ...]  # indices of earlier operations it takes
    exact: Exact
    rounded: Exact
    fmt: str


def trace(model: DotModel, x: np.ndarray, y: np.ndarray, accumulate: str, tile: int = 8, slices: int = 4,
          tf32_mode: str = "rna") -> list[TraceOp]:
    """Every rounding of a model on a short vector (K <= MAX_TRACE_K), in exact rational arithmetic.

    Written independently of the integer engine (Fractions and core.arith.formats.round_to_format); the
    tests check that its last value is the engine's result. Zero signs are not tracked here.
    """
    if x.size > MAX_TRACE_K:
        raise ValueError(f"the picture is drawn for K <= {MAX_TRACE_K}")
    a, b = model_inputs(model, x, y, tf32_mode)
    fmt = accumulation_of(model, accumulate)
    p = [Fraction(float(u)) * Fraction(float(v)) for u, v in zip(a.astype(np.float64), b.astype(np.float64),
                                                                strict=True)]
    ops: list[TraceOp] = []

    def op(label, products, inputs, exact):
        ops.append(
            TraceOp(
                label=label,
                products=tuple(products),
                inputs=tuple(inputs),
                exact=exact,
                rounded=round_to_format(exact, fmt),
                fmt=fmt.name,
            )
        )
        return len(ops) - 1

    def value(i):
        return ops[i].rounded

    def chain_of_tiles(lo, hi, width, tag=""):
        last = None
        for j in range(lo, hi, width):
            idx = list(range(j, min(j + width, hi)))
            acc = value(last) if last is not None else Fraction(0)
            label = (f"fma(x{idx[0]}, y{idx[0]}, s)" if len(idx) == 1 else f"tile {tag}{j // width}: s + x·y over "
                     f"{idx[0]}…{idx[-1]}")
            last = op(label, idx, [] if last is None else [last], acc + sum(p[i] for i in idx))
        return last

    if model.structure == "sequential" and not model.fused:
        last = None
        for i in range(len(p)):
            q = op(f"round(x{i}·y{i})", [i], [], p[i])
            last = q if last is None else op(f"s + round(x{i}·y{i})", [], [last, q], value(last) + value(q))
    elif model.structure == "sequential":
        chain_of_tiles(0, len(p), 1)
    elif model.structure == "tiles":
        chain_of_tiles(0, len(p), tile)
    else:
        parts = []
        for j, (lo, hi) in enumerate(slice_bounds(len(p), slices)):
            last = chain_of_tiles(lo, hi, tile, f"{j}.") if hi > lo else None
            parts.append(last)
        total_op = parts[0]
        for j, part in enumerate(parts[1:], start=1):
            left = value(total_op) if total_op is not None else Fraction(0)
            right = value(part) if part is not None else Fraction(0)
            total_op = op(f"partials 0…{j}", [], [i for i in (total_op, part) if i is not None], left + right)
    return ops
