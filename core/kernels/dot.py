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
rows, error against K, atomics) is core.studies.gpu_arithmetic; the picture of every rounding of a
model on a short vector is core.kernels.dot_trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import (
    FORMATS,
    TF32,
    FloatFormat,
    bit_view,
    format_of,
    from_bit_view,
)
from core.arith.metrics import gamma, input_rounding_error
from core.arith.vectors import round_array
from core.kernels import dot_fp8
from core.kernels.dot_engine import (  # noqa: F401  (exact_products, make_rounder, DotValue: the tests' and pages' names)
    ZERO,
    DotValue,
    _finish,
    _sequential,
    _split_k,
    _tiles,
    exact_products,
    make_rounder,
    slice_bounds,
)

MAX_K = 65_536  # every model is a Python loop over the K terms (about a microsecond each)


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
    inputs: str  # "stored", "fp8" (stored FP8, as given), or what they are converted to: "tf32", "float16", "bfloat16"
    fused: bool  # one rounding per multiply-add (FMA) or a rounded product, then a rounded sum
    structure: str  # "sequential", "tiles", "split_k", or "promoted" (core.kernels.dot_fp8)
    accumulate: str | None  # a fixed accumulation format (tensor cores: float32), or None: the chosen one
    description: str
    limited_bits: int = dot_fp8.LIMITED_BITS  # "promoted": the tensor cores' accumulator's significant bits
    promote_every: int = 0  # "promoted": products between copies into float32 (0: never)


DOT_MODELS: dict[str, DotModel] = {
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
        DotModel(
            key="fp8_limited",
            name=f"FP8 tensor cores, {dot_fp8.LIMITED_BITS}-bit accumulation",
            inputs="fp8",
            fused=True,
            structure="promoted",
            accumulate="float32",
            description=f"FP8 inputs, exact products, each added in an accumulator of {dot_fp8.LIMITED_BITS} "
            "significant bits for the whole of K: the accumulation the DeepSeek-V3 report measured in H800 "
            "FP8 matrix products (a model: rounding to nearest assumed)",
        ),
        DotModel(
            key="fp8_promoted",
            name=f"FP8 tensor cores, promoted to float32 every {dot_fp8.PROMOTE_EVERY}",
            inputs="fp8",
            fused=True,
            structure="promoted",
            accumulate="float32",
            promote_every=dot_fp8.PROMOTE_EVERY,
            description=f"as the previous model, but every {dot_fp8.PROMOTE_EVERY} products the partial sum is "
            "added into a float32 register and the accumulator restarts: DeepSeek-V3's fix",
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
    if not a.arithmetic:
        return f"{accumulate} is stored, never added in: accumulate in a format with an addition, such as float32."
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
    if model.inputs == "fp8":
        if format_of(x.dtype).arithmetic or format_of(y.dtype).arithmetic:
            raise ModelNotApplicable("This model takes FP8 inputs: choose float8_e4m3fn or float8_e5m2 as the "
                                     "input format.")
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
    elif model.structure == "promoted":
        state = dot_fp8.promoted_chain(products, negatives, scale, model.limited_bits, model.promote_every)
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
    if model.structure == "promoted":  # two formats: core.kernels.dot_fp8.promoted_bound bounds these
        span = dot_fp8.promotion_span(k, model.promote_every)
        blocks = -(-k // span)
        return span + blocks, k + blocks
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
