"""The operands behind two compared results: a matrix product ``a @ b`` or a sum over the last axis,
checked against the results' shape and bounded in size, with the exact terms of any output element."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.arith.formats import FORMATS
from core.diagnose.rounding import as_float_array, round_to

MAX_INPUT_ELEMENTS = 4_000_000  # all inputs together
MAX_INPUT_WORK = 1_000_000_000  # M * K * N for the float64 products of sum|t| and sum t^2


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """The operands behind the compared results: a matrix product or a sum over the last axis."""

    kind: str  # "matmul" or "sum"
    a: np.ndarray  # float64; (M, K) for matmul, (M, K) rows to sum
    b: np.ndarray | None  # float64 (K, N) for matmul
    fmt: str  # the operands' own format (the wider of the two)

    @property
    def k(self) -> int:
        return int(self.a.shape[1])

    def terms(self, flat: np.ndarray, n_cols: int) -> np.ndarray:
        """(E, K) exact terms (float64) behind the outputs with these flat indices."""
        if self.kind == "sum":
            return self.a[flat]
        rows, cols = flat // n_cols, flat % n_cols
        return self.a[rows] * self.b[:, cols].T

    def rounded_terms(self, flat: np.ndarray, n_cols: int, key: str) -> np.ndarray:
        """Like ``terms``, with every factor first rounded to the format ``key`` (only the rows and
        columns these outputs need are rounded)."""
        if self.kind == "sum":
            return round_to(self.a[flat], key)
        rows, cols = flat // n_cols, flat % n_cols
        ur, ri = np.unique(rows, return_inverse=True)
        uc, ci = np.unique(cols, return_inverse=True)
        ar, bc = round_to(self.a[ur], key), round_to(self.b[:, uc], key)
        return ar[ri] * bc[:, ci].T


def prepare_inputs(inputs, shape: tuple[int, ...]) -> Inputs:
    """Check operands against the result shape: ``(a, b)`` for ``a @ b``, or one array ``x``
    whose last axis was summed. ValueError with the reason when they do not fit."""
    if isinstance(inputs, tuple | list) and len(inputs) == 2:
        (a, fa), (b, fb) = as_float_array(inputs[0], "the first factor"), as_float_array(inputs[1], "the second factor")
        if a.ndim not in (1, 2) or b.ndim not in (1, 2):
            raise ValueError(f"the factors must be vectors or matrices (got shapes {a.shape} and {b.shape})")
        if a.shape[-1] != b.shape[0]:
            raise ValueError(f"the factors do not multiply: {a.shape} @ {b.shape} (inner sizes "
                             f"{a.shape[-1]} and {b.shape[0]})")
        out_shape = np.empty(a.shape[:-1] + b.shape[1:], dtype=np.int8).shape
        if out_shape != tuple(shape):
            raise ValueError(f"a @ b has shape {out_shape}, but the compared results have shape {tuple(shape)}")
        if a.size + b.size > MAX_INPUT_ELEMENTS:
            raise ValueError(f"the factors hold {a.size + b.size:,} values; at most {MAX_INPUT_ELEMENTS:,} are "
                             "accepted")
        a2, b2 = a.reshape(-1, a.shape[-1]), b.reshape(b.shape[0], -1)
        if a2.shape[0] * a2.shape[1] * b2.shape[1] > MAX_INPUT_WORK:
            raise ValueError(f"the product is too large to re-derive here (M·K·N = "
                             f"{a2.shape[0] * a2.shape[1] * b2.shape[1]:,}; at most {MAX_INPUT_WORK:,})")
        if a2.shape[1] == 0:
            raise ValueError("the factors have an empty inner dimension")
        return Inputs(kind="matmul", a=a2, b=b2, fmt=fa if FORMATS[fa].precision >= FORMATS[fb].precision else fb)
    x, fx = as_float_array(inputs, "the summed array")
    if x.ndim == 0 or x.shape[-1] == 0:
        raise ValueError("the summed array needs at least one value along its last axis")
    if x.size > MAX_INPUT_ELEMENTS:
        raise ValueError(f"the summed array holds {x.size:,} values; at most {MAX_INPUT_ELEMENTS:,} are accepted")
    want = x.shape[:-1]
    if tuple(shape) != want and not (x.ndim == 1 and int(np.prod(shape)) == 1):
        raise ValueError(f"summing the last axis of shape {x.shape} gives shape {want}, but the compared results "
                         f"have shape {tuple(shape)}")
    return Inputs(kind="sum", a=x.reshape(-1, x.shape[-1]), b=None, fmt=fx)
