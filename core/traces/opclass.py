"""How an op may round, read from its record: its class (``op_class``) and what a discrete output of it is
(``discrete_kind``), both by the op's packet name (``packet``); core.traces.judge sets each class against its
envelope.

Classes. *reduction*: the op has a reduction length K (core.traces.reductions): it sums K terms, in an order
that is free. *exact*: a correctly rounded op (``EXACT_OPS``: + - * / sqrt, comparisons, copies, casts,
indexing) gives the same bits from the same inputs on every IEEE machine; so does an op whose output is not
floating, and a fake quantizer, whose floating outputs are levels only (``LEVEL_OPS``). *elementwise*: any
other function (exp, tanh, rsqrt, pow, ...), which is not correctly rounded, so two implementations may round
it apart; so are a + alpha b (one rounding or two) and a complex product of two complex operands (two products
in each part). An op of another namespace that nothing here knows is taken for an elementwise function.

Discrete outputs, which a rounding-sized change of an input can flip: a choice among the input's elements
(``CHOICE_OPS``: indices), a mask, signs (``SIGN_OPS``), a quantizer's levels (``quantizes``: a fake
quantization, ``quantize_per_tensor``, a dynamically quantized layer, each rounding values to its grid's
levels), or integers.
"""

from __future__ import annotations

from enum import StrEnum

from core.arith.formats import FORMATS
from core.traces.bits import COMPONENTS
from core.traces.oprecord import OpRecord
from core.traces.oprules import DYNAMIC_QUANTIZERS

EXACT_OPS = frozenset({
    "add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "neg", "abs", "sqrt", "relu", "relu_",
    "threshold_backward", "where", "maximum", "minimum", "clamp", "clamp_min", "clamp_max", "copy_", "_to_copy",
    "clone", "index", "index_select", "embedding", "cat", "stack", "gather",
    "scatter", "masked_fill", "masked_fill_", "fill_", "zero_", "zeros", "zeros_like", "ones",
    "ones_like", "full", "full_like", "new_zeros", "new_ones", "_unsafe_view", "le", "lt", "ge", "gt", "eq", "ne",
    "nll_loss_backward", "index_put_", "index_put", "slice_scatter", "select_backward", "slice_backward", "sign",
    "constant_pad_nd", "expand", "argmax", "argmin", "max", "min", "amax", "amin", "logical_not", "bitwise_and",
    "dequantize", "index_fill", "index_fill_", "index_copy", "index_copy_", "masked_scatter", "repeat",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact2d", "scatter_reduce",
})
# ops whose integer output is a choice among their input's elements (positions), and ops whose floating
# output is a sign: a discrete output, which a rounding-sized change of the input can flip
CHOICE_OPS = frozenset({"topk", "sort", "argsort", "argmax", "argmin", "max", "min", "kthvalue", "median", "nanmedian",
                        "mode", "cummax", "cummin", "max_pool1d_with_indices", "max_pool2d_with_indices",
                        "max_pool3d_with_indices", "adaptive_max_pool2d", "multinomial", "searchsorted", "bucketize"})
SIGN_OPS = frozenset({"sign", "sgn", "heaviside", "signbit"})
# quantizers: each value is rounded to a level of a grid, a discrete choice that a rounding-sized change of the
# input can flip (by a whole level); the dynamic ones (oprules.DYNAMIC_QUANTIZERS, the quantized namespaces'
# layers) also choose the grid, and their float results are made from the levels chosen
QUANTIZER_OPS = frozenset({
    "fake_quantize_per_tensor_affine", "fake_quantize_per_tensor_affine_cachemask",
    "_fake_quantize_per_tensor_affine_cachemask_tensor_qparams", "fake_quantize_per_channel_affine",
    "fake_quantize_per_channel_affine_cachemask", "_fake_quantize_learnable_per_tensor_affine",
    "_fake_quantize_learnable_per_channel_affine", "quantize_per_tensor", "quantize_per_channel",
})
LEVEL_OPS = QUANTIZER_OPS - {"quantize_per_tensor", "quantize_per_channel"}  # float outputs that are levels only
_QUANTIZED_NAMESPACES = ("quantized.", "_quantized.", "sparse.", "onednn.")


def packet(op: str) -> str:
    """aten.mm.default -> mm; quantized.linear_dynamic.default -> quantized.linear_dynamic (another namespace's
    op keeps it: core.traces.oprules.op_name)"""
    parts = op.split(".")
    if len(parts) < 2:
        return op
    return parts[1] if parts[0] == "aten" else f"{parts[0]}.{parts[1]}"


def quantizes(name: str) -> bool:
    """Whether the op (by ``packet``'s name) rounds values to a quantizer's levels."""
    return name in QUANTIZER_OPS or name in DYNAMIC_QUANTIZERS or name.startswith(_QUANTIZED_NAMESPACES)


def discrete_kind(op: str, dtype: str) -> str | None:
    """What a discrete output is: "indices" (a choice among the input's elements), "a mask" (booleans, a
    comparison's), "signs", "quantization levels" (a quantizer's, or what a quantized layer makes of them), or
    "integers"; None for a floating output that is none of these."""
    name = packet(op)
    if dtype in FORMATS or dtype in COMPONENTS:
        return "signs" if name in SIGN_OPS else "quantization levels" if quantizes(name) else None
    if dtype == "bool":
        return "a mask"
    if dtype.startswith(("qint", "quint")):
        return "quantization levels"
    return "indices" if name in CHOICE_OPS else "integers"


class OpClass(StrEnum):
    """How an op may round (see the module docstring)."""

    REDUCTION = "reduction"  # sums K terms: its order is free
    EXACT = "exact"  # correctly rounded: the same inputs give the same bits everywhere
    ELEMENTWISE = "elementwise"  # a function within a few ULPs, which two libraries may round apart


def op_class(rec: OpRecord) -> OpClass:
    """The op's class, from its recorded K, name, arguments and output format."""
    name = packet(rec.op)
    if rec.k is not None:
        return OpClass.REDUCTION
    if name in ("add", "add_", "sub", "sub_") and "alpha=" in rec.args and not any(
            f"alpha={one}," in rec.args + "," for one in ("1", "1.0", (1.0).hex())):
        return OpClass.ELEMENTWISE  # a + alpha b may be fused into one rounding or done in two
    complex_in = sum(d in COMPONENTS for d in rec.in_dtypes)
    if (name in ("mul", "mul_", "div", "div_") and complex_in >= 2) or (name in ("abs", "sqrt") and complex_in):
        return OpClass.ELEMENTWISE  # (a + bi)(c + di) has two products in each part: not correctly rounded
    if name in EXACT_OPS or name in LEVEL_OPS or (rec.out_dtype not in FORMATS and rec.out_dtype not in COMPONENTS):
        return OpClass.EXACT
    return OpClass.ELEMENTWISE
