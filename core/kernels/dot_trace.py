"""The operation picture of a dot-product model: every rounding it does on a short vector.

Written independently of core.kernels.dot's integer engine, in exact rational arithmetic (Fractions and
core.arith.formats.round_to_format), so the tests can check that its last value is the engine's result.
Zero signs are not tracked here.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import Exact, FloatFormat, round_to_format
from core.kernels import dot_fp8
from core.kernels.dot import DotModel, accumulation_of, model_inputs, slice_bounds

MAX_TRACE_K = 32  # the picture draws every rounding, one row each


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


class _Picture:
    """The operations recorded so far, each rounded to ``fmt`` as it is added."""

    def __init__(self, products: list[Fraction], fmt: FloatFormat) -> None:
        self.p = products
        self.fmt = fmt
        self.ops: list[TraceOp] = []

    def op(self, label: str, products, inputs, exact: Fraction, fmt: FloatFormat | None = None) -> int:
        fmt = fmt or self.fmt
        self.ops.append(TraceOp(label=label, products=tuple(products), inputs=tuple(inputs), exact=exact,
                                rounded=round_to_format(exact, fmt), fmt=fmt.name))
        return len(self.ops) - 1

    def value(self, i: int | None) -> Exact:
        """The rounded value of operation i (+0 for None: an accumulator that nothing was added to)."""
        return self.ops[i].rounded if i is not None else Fraction(0)

    def separate(self) -> None:
        """s <- round(s + round(x_i·y_i)): each product rounded on its own, then added."""
        last = None
        for i in range(len(self.p)):
            q = self.op(f"round(x{i}·y{i})", [i], [], self.p[i])
            last = q if last is None else self.op(f"s + round(x{i}·y{i})", [], [last, q],
                                                  self.value(last) + self.value(q))

    def chain_of_tiles(self, lo: int, hi: int, width: int, tag: str = "") -> int | None:
        """s <- round(s + the exact sum of a tile's products), tile after tile of ``width`` over [lo, hi)."""
        last = None
        for j in range(lo, hi, width):
            idx = list(range(j, min(j + width, hi)))
            label = (f"fma(x{idx[0]}, y{idx[0]}, s)" if len(idx) == 1 else f"tile {tag}{j // width}: s + x·y over "
                     f"{idx[0]}…{idx[-1]}")
            last = self.op(label, idx, [] if last is None else [last], self.value(last) + sum(self.p[i] for i in idx))
        return last

    def split_k(self, tile: int, slices: int) -> None:
        """A chain of tiles per slice, then the partials added in slice order."""
        parts = [self.chain_of_tiles(lo, hi, tile, f"{j}.") if hi > lo else None
                 for j, (lo, hi) in enumerate(slice_bounds(len(self.p), slices))]
        total_op = parts[0]
        for j, part in enumerate(parts[1:], start=1):
            total_op = self.op(f"partials 0…{j}", [], [i for i in (total_op, part) if i is not None],
                               self.value(total_op) + self.value(part))


    def promoted(self, bits: int, every: int) -> None:
        """Each product added in the limited accumulator; every ``every`` products (0: at the end) its value is
        added into the float32 total and it restarts from +0 (core.kernels.dot_fp8)."""
        limited, span, total = dot_fp8.limited_format(bits), dot_fp8.promotion_span(len(self.p), every), None
        for lo in range(0, len(self.p), span):
            acc = None
            for i in range(lo, min(lo + span, len(self.p))):
                acc = self.op(f"acc + x{i}·y{i}", [i], [] if acc is None else [acc], self.value(acc) + self.p[i],
                              limited)
            total = self.op(f"float32 + acc over {lo}…{min(lo + span, len(self.p)) - 1}", [],
                            [j for j in (total, acc) if j is not None], self.value(total) + self.value(acc))


def trace(model: DotModel, x: np.ndarray, y: np.ndarray, accumulate: str, tile: int = 8, slices: int = 4,
          tf32_mode: str = "rna") -> list[TraceOp]:
    """Every rounding of a model on a short vector (K <= MAX_TRACE_K), in exact rational arithmetic."""
    if x.size > MAX_TRACE_K:
        raise ValueError(f"the picture is drawn for K <= {MAX_TRACE_K}")
    a, b = model_inputs(model, x, y, tf32_mode)
    products = [Fraction(float(u)) * Fraction(float(v)) for u, v in zip(a.astype(np.float64), b.astype(np.float64),
                                                                        strict=True)]
    picture = _Picture(products, accumulation_of(model, accumulate))
    if model.structure == "sequential" and not model.fused:
        picture.separate()
    elif model.structure == "sequential":
        picture.chain_of_tiles(0, len(products), 1)
    elif model.structure == "tiles":
        picture.chain_of_tiles(0, len(products), tile)
    elif model.structure == "promoted":
        picture.promoted(model.limited_bits, model.promote_every)
    else:
        picture.split_k(tile, slices)
    return picture.ops
