"""FP8 matrix products as the DeepSeek-V3 technical report describes Hopper's: a limited accumulator, promoted.

FP8 inputs are multiplied exactly (a product of two eight-bit values has at most 8 significant bits). What the
report describes is the accumulation: "the accumulation precision of FP8 GEMM on NVIDIA H800 GPUs is limited
to retaining around 14 bits", and their fix copies the tensor cores' partial result into a float32 register
on the CUDA cores every N_C = 128 elements of the inner dimension (four WGMMA instructions), where it is added
in full float32 (DeepSeek-AI, DeepSeek-V3 Technical Report, section 3.3.2, https://arxiv.org/abs/2412.19437).

The model here has those two parameters: the accumulator's significant bits (``LIMITED_BITS``, with float32's
exponent range) and the promotion interval (``PROMOTE_EVERY``; 0 keeps the whole sum in the limited
accumulator). It rounds the limited accumulator to nearest, ties to even: the report does not say how the
tensor cores drop bits (Fasi et al. found truncation in earlier tensor cores: core.kernels.dot.TENSOR_CORE_NOTE),
so this is a model of the precision, not of a particular chip's last bit.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import torch

from core.arith.formats import FLOAT32, FloatFormat
from core.arith.metrics import gamma
from core.kernels.dot_engine import ZERO, _add, make_rounder

LIMITED_BITS = 14  # "retaining around 14 bits" (DeepSeek-V3 report, section 3.3.2)
PROMOTE_EVERY = 128  # N_C: the report's promotion interval, four WGMMA instructions
SOURCE = ("DeepSeek-AI, DeepSeek-V3 Technical Report (2024), section 3.3.2, Increasing Accumulation Precision: "
          "https://arxiv.org/abs/2412.19437")


@functools.lru_cache(maxsize=8)  # one per accumulator width a page asks for (LIMITED_BITS, and a test's)
def limited_format(bits: int = LIMITED_BITS) -> FloatFormat:
    """The tensor cores' accumulator as a format: ``bits`` significant bits, float32's exponent range (its
    values are float32 values; like TF32, no dtype stores it)."""
    if not 2 <= bits <= 24:
        raise ValueError(f"an accumulator narrower than float32 has 2 to 24 bits, not {bits}")
    return FloatFormat(name=f"{bits}-bit accumulator", precision=bits, exponent_bits=8, bias=127,
                       torch_dtype=torch.float32, int_dtype=torch.int32, numpy_dtype=FLOAT32.numpy_dtype)


def promotion_span(k: int, every: int) -> int:
    """Products added in the limited accumulator between two promotions, for K = ``k`` (``every`` 0: all of
    them); at least 1."""
    return max(1, min(k, every) if every else k)


def promoted_chain(products: list, negatives: list[bool], scale: int, bits: int = LIMITED_BITS,
                   every: int = PROMOTE_EVERY) -> tuple:
    """The sum of exact products: a chain in the limited accumulator (one rounding to ``bits`` bits per
    product), added into a float32 chain and restarted from +0 every ``every`` products (0: never), the
    float32 chain's state returned (the engine's (value, negative) pair, in units of 2^-scale)."""
    limited, wide = make_rounder(limited_format(bits), scale), make_rounder(FLOAT32, scale)
    span = promotion_span(len(products), every)
    total = ZERO
    for start in range(0, len(products), span):
        part = ZERO
        for i in range(start, min(start + span, len(products))):
            part = _add(part, products[i], negatives[i], limited)
        total = _add(total, part[0], part[1], wide)
    return total


def promoted_bound(k: int, sum_abs: Fraction, bits: int = LIMITED_BITS, every: int = PROMOTE_EVERY
                   ) -> Fraction | None:
    """|computed - exact| <= ((1 + g_l)(1 + g_32) - 1) S + (k eta_l + b eta_32)(1 + g_l)(1 + g_32): each product
    passes through at most min(k, every) roundings of the limited accumulator (g_l = gamma of those, its unit
    roundoff) and b = ceil(k / every) float32 additions (g_32); each rounding adds at most eta, half its smallest
    subnormal, where it underflows (core.kernels.dot.dot_bound's argument, with two formats). None: no finite
    bound (d u >= 1)."""
    span = promotion_span(k, every)
    blocks = -(-k // span)
    lim = limited_format(bits)
    g_l, g_32 = gamma(span, lim.unit_roundoff), gamma(blocks, FLOAT32.unit_roundoff)
    if g_l is None or g_32 is None:
        return None
    grow = (1 + g_l) * (1 + g_32)
    return (grow - 1) * sum_abs + (k * lim.min_subnormal / 2 + blocks * FLOAT32.min_subnormal / 2) * grow
