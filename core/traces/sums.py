"""The terms behind a sampled output element of a sum, computed from the op's live inputs in float64
(core.traces.reductions says which ops sum what; core.traces.judge sets a difference against them).

A sum of K terms t_k, at one sampled output element, is known to the envelope by sum|t_k| and
sqrt(sum t_k^2), and over the whole output by the total of sum|t_k|. Here: a matrix product's t_k = a_ik b_kj
(``matmul_terms``; complex operands by their moduli), a convolution's input patch times its filter
(``conv_terms``), a reduction's summed values (``sum_terms``), and the upper bound on an exact sum of
non-negative values that the totals rest on (``upper_sum``). What a trace knows of an op's terms is a
``Terms``, of a ``TermsKind``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import torch
import torch.nn.functional as F

from core.arith.formats import FLOAT32, FLOAT64, to_numpy
from core.arith.metrics import gamma


class TermsKind(StrEnum):
    """What a trace knows of an op's terms (a trace file holds the values)."""

    EXACT = "exact"  # the terms, from the inputs: sum|t| and sqrt(sum t^2) per sampled element
    RELATIVE = "relative"  # one row reduction (softmax, a norm's statistics): the output's own size
    RELATIVE_FLOOR = "relative-floor"  # a layer norm: relative, and absolute at the other elements' scale
    ESTIMATED = "estimated"  # K only
    INPUTS = "inputs"  # a formula op: ``scale`` holds the inputs' largest magnitude at each sample, k is 0


@dataclass(frozen=True, kw_only=True)
class Terms:
    """K, and for the sampled elements sum|t| and sqrt(sum t^2) (None where not computed)."""

    k: int
    kind: TermsKind
    sum_abs: list[float] | None = None
    scale: list[float] | None = None
    total_abs: float | None = None  # sum over all output elements of sum|t|


def f64(t: torch.Tensor) -> torch.Tensor:
    """The values in float64 on the CPU; a complex tensor's moduli (what bounds each part of its terms)."""
    t = t.detach()
    return (t.abs() if t.is_complex() else t).to("cpu", torch.float64)


_NUMPY_FLOATS = frozenset({torch.float16, torch.float32, torch.float64})


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array with its strides (shared on the CPU; to_numpy's, with its checks only
    where needed: a trace asks for two or three per op)."""
    if t.dtype in _NUMPY_FLOATS and t.is_cpu and t.layout == torch.strided and not t.is_neg():
        return (t.detach() if t.requires_grad else t).numpy()
    if t.is_complex():  # its moduli: each part of a complex product's term is at most the product of the moduli
        return t.detach().abs().cpu().numpy()
    return to_numpy(t)


@functools.lru_cache(maxsize=1024)  # a run samples the same positions of the same shapes again and again
def _product_index(idx: tuple[int, ...], m: int, n: int) -> tuple[np.ndarray, ...]:
    """Flat positions in a [B, m, n] product as (positions, batch, row, column) arrays (never written)."""
    flat = np.asarray(idx, dtype=np.int64)
    bi, rem = np.divmod(flat, m * n)
    i, j = np.divmod(rem, n)
    return flat, bi, i, j


def matmul_terms(a: torch.Tensor, b: torch.Tensor, idx: list[int], alpha: float = 1.0,
                  bias: torch.Tensor | None = None, beta: float = 1.0, total: bool = True) -> Terms:
    """a [..., M, K] @ b [..., K, N] (batched or not), sampled at flat output indices (``total``: also the
    total of sum|t| over every output element). Complex operands count by their moduli: each part of a complex
    product a_ik b_kj is two real products, together at most |a_ik| |b_kj|, so K doubles and sum|t| holds."""
    na, nb = as_numpy(a), as_numpy(b)
    if na.ndim == 1:
        na = na[None]
    if nb.ndim == 1:
        nb = nb[:, None]
    # [S, K] each: the sampled rows of a and columns of b; their float64 products are exact. NumPy, because these
    # gathers and sums are small: a few microseconds each against tens in torch, and a trace makes them per op
    if na.ndim == 2 and nb.ndim == 2:  # mm, addmm: no batch
        (m, k), n = na.shape, nb.shape[1]
        flat, _, i, j = _product_index(tuple(idx), m, n)
        na3_batch = 1
        rows, cols = na[i], nb.T[j]
    else:
        na3 = na.reshape(-1, *na.shape[-2:])
        nb3 = nb.reshape(-1, *nb.shape[-2:])
        m, k = na3.shape[-2:]
        n = nb3.shape[-1]
        flat, bi, i, j = _product_index(tuple(idx), m, n)
        na3_batch = na3.shape[0]
        rows = na3[bi, i] if na3.shape[0] > 1 else na3[0][i]
        cols = nb3[bi, :, j] if nb3.shape[0] > 1 else nb3[0].T[j]
    t = rows.astype(np.float64)
    if alpha != 1.0:  # (times 1 changes no bits)
        t = abs(alpha) * t
    np.multiply(t, cols.astype(np.float64), out=t)
    sq = np.einsum("sk,sk->s", t, t)
    sum_abs = np.add.reduce(np.abs(t, out=t), axis=1)  # (t.sum(1)'s sums, t no longer needed)
    kk = 2 * k if a.is_complex() or b.is_complex() else k
    # sum over i, j of sum_k |a_ik||b_kj| = sum_k (sum_i |a_ik|)(sum_j |b_kj|); the column and row sums
    # of |a| and |b| in their own format (fast), each raised by its own worst rounding
    whole = None
    if total:
        a, b = a.detach().to("cpu"), b.detach().to("cpu")
        a = a[None] if a.dim() == 1 else a
        b = b[:, None] if b.dim() == 1 else b
        a3, b3 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
        cols_a = upper_sum(a3.abs(), -2, m)  # [Ba, K]
        rows_b = upper_sum(b3.abs(), -1, n)  # [Bb, K]
        # broadcasting covers a shared b; the float64 products and their sum round at most numel + 1 times
        whole = abs(alpha) * float((cols_a * rows_b).sum()) * (1 + 2.0 ** -52 * (cols_a.numel() + 2))
    if bias is not None:
        bias_full = torch.broadcast_to(f64(bias), (na3_batch, m, n)).reshape(-1) * abs(beta)
        bsel = bias_full[torch.from_numpy(flat)].numpy()
        sum_abs = sum_abs + np.abs(bsel)
        sq = sq + bsel * bsel
        if whole is not None:
            whole += float(bias_full.abs().sum())
        kk += 1
    return Terms(k=kk, kind=TermsKind.EXACT, sum_abs=sum_abs.tolist(), scale=np.sqrt(sq).tolist(), total_abs=whole)


@dataclass(frozen=True, kw_only=True)
class ConvGeometry:
    """How a convolution slides its filter: aten's stride, padding and dilation (one number per spatial
    dimension) and the number of channel groups."""

    stride: Sequence[int]
    padding: Sequence[int] | str
    dilation: Sequence[int]
    groups: int


def conv_terms(x: torch.Tensor, w: torch.Tensor, bias, geometry: ConvGeometry, idx: list[int], out_shape,
                total: bool = True) -> Terms:
    """A 1-D or 2-D convolution's terms: each sampled output element sums the products of its input
    patch (over its group's channels) and its filter, K = C_in/groups x the kernel (+ 1 with a bias).
    The total over all elements is the convolution of |x| with |w|, in float64."""
    stride, padding, dilation, groups = geometry.stride, geometry.padding, geometry.dilation, geometry.groups
    w = f64(w)
    x = x.detach().to("cpu")
    if w.dim() == 3:  # a 1-D convolution as a 2-D one of height 1
        x, w = x.unsqueeze(2), w.unsqueeze(2)
        stride, padding, dilation = (1, stride[0]), (0, padding[0]), (1, dilation[0])
    if isinstance(padding, str):
        raise ValueError("string padding")  # padding="same" reaches aten as numbers; anything else: estimated
    cout, cin_g, kh, kw = w.shape
    n_, oh, ow = int(out_shape[0]), (int(out_shape[2]) if len(out_shape) == 4 else 1), int(out_shape[-1])
    flat = torch.tensor(idx, dtype=torch.long)
    bn, rem = flat // (cout * oh * ow), flat % (cout * oh * ow)
    co, pix = rem // (oh * ow), rem % (oh * ow)
    # only the sampled images, each once (a batch of one samples every element from it), in float64 (exact products)
    images, which = torch.unique(bn, return_inverse=True)
    cols = F.unfold(x[images].double(), (kh, kw), dilation=dilation, padding=padding, stride=stride)
    cols = cols.reshape(len(images), groups, cin_g * kh * kw, -1)
    g = co // (cout // groups)
    patch = cols[which, g, :, pix]  # [S, cin_g kh kw]
    t = patch * w.reshape(cout, -1)[co]
    sum_abs, sq = t.abs().sum(1), (t * t).sum(1)
    # the total: the convolution of |x| with |w| gives sum|t| of every output element
    whole = float(F.conv2d(f64(x).abs(), w.abs(), None, stride, padding, dilation, groups).sum()) if total else None
    k = cin_g * kh * kw
    if bias is not None:
        b = f64(bias)[co]
        sum_abs, sq = sum_abs + b.abs(), sq + b * b
        if whole is not None:
            whole += float(f64(bias).abs().sum()) * n_ * oh * ow
        k += 1
    return Terms(k=k, kind=TermsKind.EXACT, sum_abs=sum_abs.tolist(), scale=sq.sqrt().tolist(), total_abs=whole)


def upper_sum(x: torch.Tensor, dim: int, n: int) -> torch.Tensor:
    """An upper bound, in float64, on the exact sums of the non-negative ``x`` along ``dim`` (n terms):
    the sums computed in float32 (exact inputs for float16 and bfloat16), divided by 1 - gamma_n: any
    order's computed sum of n non-negative terms is at least (1 - gamma_n) times the exact one (Higham
    3.4). Float64 inputs are summed in float64 the same way."""
    u = float((FLOAT64 if x.dtype == torch.float64 else FLOAT32).unit_roundoff)
    g = gamma(n, u, math.inf)
    if g >= 1:
        return torch.full(x.sum(dim).shape, math.inf, dtype=torch.float64)
    s = x.sum(dim, dtype=torch.float64 if x.dtype == torch.float64 else torch.float32).double()
    return s / (1 - g)


def _rows_layout(ndim: int, dims) -> tuple[list[int], list[int]] | None:
    """The kept dims and the reduced ones of a reduction over ``dims``; None where every value is one row."""
    if ndim == 0 or dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return None
    reduced = [d % ndim for d in (dims if isinstance(dims, (list, tuple)) else [dims])]
    return [d for d in range(ndim) if d not in reduced], reduced


def _reduced_rows(x: torch.Tensor, dims) -> torch.Tensor:
    """x with its reduced dims moved last and flattened: [out elements, K], in x's own dtype."""
    x = x.detach().to("cpu")
    layout = _rows_layout(x.dim(), dims)
    if layout is None:
        return x.reshape(1, -1)
    keep, reduced = layout
    return x.permute(*keep, *reduced).reshape(math.prod(x.shape[d] for d in keep), -1)


def _reduced_rows_numpy(x: torch.Tensor, dims) -> np.ndarray:
    """``_reduced_rows`` in NumPy (its values, read in place where the layout allows): where only sampled rows
    are read, NumPy's views and gathers cost a fraction of torch's."""
    a = as_numpy(x)
    layout = _rows_layout(a.ndim, dims)
    if layout is None:
        return a.reshape(1, -1)
    keep, reduced = layout
    return a.transpose(*keep, *reduced).reshape(math.prod(a.shape[d] for d in keep), -1)


def sum_terms(x: torch.Tensor, dims, idx: list[int], mean: bool, total: bool = True) -> Terms:
    # the total sums every row in torch (its order); the samples alone read the rows NumPy gives
    rows = _reduced_rows(x, dims) if total else _reduced_rows_numpy(x, dims)
    k = rows.shape[1]
    sel = (to_numpy(rows) if total else rows)[np.asarray(idx, dtype=np.int64)].astype(np.float64)
    if not np.isfinite(sel).all():  # NaN as 0 and an infinity as the largest float64 (rare: checked first)
        sel = np.nan_to_num(sel, nan=0.0)
    whole = float(torch.nansum(rows.abs(), dtype=torch.float64)) if total else None
    if mean and k:
        sel, whole = sel / k, (whole / k if whole is not None else None)
    return Terms(
        k=k,
        kind=TermsKind.EXACT,
        sum_abs=np.abs(sel).sum(1).tolist(),
        scale=np.sqrt((sel * sel).sum(1)).tolist(),
        total_abs=whole,
    )


def row_length(x: torch.Tensor, dim: int) -> int:
    return int(x.shape[dim % max(x.dim(), 1)]) if x.dim() else 1


def norm_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """x as [rows, n]: a norm's normalized trailing elements last."""
    return x.detach().to("cpu").reshape(-1, n)


def channel_dims(x: torch.Tensor) -> list[int]:
    """A batch norm's reduced dimensions: every one but the channels (dimension 1)."""
    return [d for d in range(x.dim()) if d != 1]

