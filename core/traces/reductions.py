"""The reduction length K of an aten op, and the terms behind its sampled output elements.

For a rounding envelope (core.traces.judge) an op's output element is a sum of K terms t_k;
what the envelope needs per sampled element is sum|t_k| and sqrt(sum t_k^2), and for the check
over all elements the total of sum|t_k| over the whole output. They are computed here, at record
time, from the op's real inputs, in float64:

- ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``: t_k = a_ik b_kj (K = inner dimension;
  addmm/baddbmm add the bias as one more term, K + 1);
- ``sum``, ``mean`` (whole tensor or over dims), ``nansum``: t_k = the summed values (divided by K for
  a mean);
- ``nll_loss_forward`` (no class weights): t_n = the picked log-probabilities (K = the batch);
- ``_softmax``, ``_log_softmax``, ``native_layer_norm``, ``_fused_rms_norm``: K = the row length;
  each output is the result of one row reduction, so its size is relative ("relative": sum|t| is
  taken as |y| for softmax and the norms, as 1 for log-softmax, where the error of log(sum) is
  absolute);
- other ops with a known K but no cheap terms (convolutions, fused attention, the backward of
  softmax): K only; the envelope then estimates sum|t| as sqrt(K) times the element's size, as
  core.diagnose does without inputs, and says so.

- ops that add up duplicates (``index_put`` with ``accumulate=True``, the backward of indexing;
  ``embedding_dense_backward``; ``scatter_add``, ``index_add``): K = the number of values added
  (an upper bound on the duplicates of one element), "estimated".

Every other op has K = None: it is elementwise (or moves data) and is judged per element. For the
formula ops in ``FORMULA_OPS`` (backward formulas such as tanh's g (1 - y^2), erf-based functions),
whose result can cancel, ``input_scales`` keeps the largest input magnitude at each sampled
position ("inputs"): the envelope then allows an absolute error at that scale (core.traces.judge).
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

aten = torch.ops.aten


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


FORMULA_OPS = frozenset({
    "tanh_backward", "sigmoid_backward", "gelu", "gelu_backward", "silu", "silu_backward", "erf", "erfc",
    "erfinv", "softplus", "softplus_backward", "mish", "mish_backward", "elu", "elu_backward", "lerp", "lerp_",
    "addcmul", "addcmul_", "addcdiv", "addcdiv_", "log1p", "expm1", "hardswish_backward", "rsub", "logit",
    "_log_softmax_backward_data", "_softmax_backward_data", "xlogy", "polar",
})
ACCUMULATING = frozenset({"index_put", "index_put_", "_index_put_impl_", "embedding_dense_backward", "scatter_add",
                          "scatter_add_", "index_add", "index_add_", "scatter_reduce", "scatter_reduce_"})


def _name(func) -> str:
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu", torch.float64)


_NUMPY_FLOATS = frozenset({torch.float16, torch.float32, torch.float64})


def _numpy(t: torch.Tensor) -> np.ndarray:
    """A tensor's values as a NumPy array with its strides (shared on the CPU; to_numpy's, with its checks only
    where needed: a trace asks for two or three per op)."""
    if t.dtype in _NUMPY_FLOATS and t.is_cpu and t.layout == torch.strided and not t.is_neg():
        return (t.detach() if t.requires_grad else t).numpy()
    return to_numpy(t)


@functools.lru_cache(maxsize=1024)  # a run samples the same positions of the same shapes again and again
def _product_index(idx: tuple[int, ...], m: int, n: int) -> tuple[np.ndarray, ...]:
    """Flat positions in a [B, m, n] product as (positions, batch, row, column) arrays (never written)."""
    flat = np.asarray(idx, dtype=np.int64)
    bi, rem = np.divmod(flat, m * n)
    i, j = np.divmod(rem, n)
    return flat, bi, i, j


def _matmul_terms(a: torch.Tensor, b: torch.Tensor, idx: list[int], alpha: float = 1.0,
                  bias: torch.Tensor | None = None, beta: float = 1.0, total: bool = True) -> Terms:
    """a [..., M, K] @ b [..., K, N] (batched or not), sampled at flat output indices (``total``: also the
    total of sum|t| over every output element)."""
    na, nb = _numpy(a), _numpy(b)
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
    kk = k
    # sum over i, j of sum_k |a_ik||b_kj| = sum_k (sum_i |a_ik|)(sum_j |b_kj|); the column and row sums
    # of |a| and |b| in their own format (fast), each raised by its own worst rounding
    whole = None
    if total:
        a, b = a.detach().to("cpu"), b.detach().to("cpu")
        a = a[None] if a.dim() == 1 else a
        b = b[:, None] if b.dim() == 1 else b
        a3, b3 = a.reshape(-1, *a.shape[-2:]), b.reshape(-1, *b.shape[-2:])
        cols_a = _upper_sum(a3.abs(), -2, m)  # [Ba, K]
        rows_b = _upper_sum(b3.abs(), -1, n)  # [Bb, K]
        # broadcasting covers a shared b; the float64 products and their sum round at most numel + 1 times
        whole = abs(alpha) * float((cols_a * rows_b).sum()) * (1 + 2.0 ** -52 * (cols_a.numel() + 2))
    if bias is not None:
        bias_full = torch.broadcast_to(_f64(bias), (na3_batch, m, n)).reshape(-1) * abs(beta)
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


def _conv_terms(x: torch.Tensor, w: torch.Tensor, bias, geometry: ConvGeometry, idx: list[int], out_shape,
                total: bool = True) -> Terms:
    """A 1-D or 2-D convolution's terms: each sampled output element sums the products of its input
    patch (over its group's channels) and its filter, K = C_in/groups x the kernel (+ 1 with a bias).
    The total over all elements is the convolution of |x| with |w|, in float64."""
    stride, padding, dilation, groups = geometry.stride, geometry.padding, geometry.dilation, geometry.groups
    w = _f64(w)
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
    # only the sampled images, in float64 (exact products)
    cols = F.unfold(x[bn].double(), (kh, kw), dilation=dilation, padding=padding, stride=stride)
    cols = cols.reshape(len(idx), groups, cin_g * kh * kw, -1)
    g = co // (cout // groups)
    patch = cols[torch.arange(len(idx)), g, :, pix]  # [S, cin_g kh kw]
    t = patch * w.reshape(cout, -1)[co]
    sum_abs, sq = t.abs().sum(1), (t * t).sum(1)
    # the total: the convolution of |x| with |w| gives sum|t| of every output element
    whole = float(F.conv2d(_f64(x).abs(), w.abs(), None, stride, padding, dilation, groups).sum()) if total else None
    k = cin_g * kh * kw
    if bias is not None:
        b = _f64(bias)[co]
        sum_abs, sq = sum_abs + b.abs(), sq + b * b
        if whole is not None:
            whole += float(_f64(bias).abs().sum()) * n_ * oh * ow
        k += 1
    return Terms(k=k, kind=TermsKind.EXACT, sum_abs=sum_abs.tolist(), scale=sq.sqrt().tolist(), total_abs=whole)


def _upper_sum(x: torch.Tensor, dim: int, n: int) -> torch.Tensor:
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
    a = _numpy(x)
    layout = _rows_layout(a.ndim, dims)
    if layout is None:
        return a.reshape(1, -1)
    keep, reduced = layout
    return a.transpose(*keep, *reduced).reshape(math.prod(a.shape[d] for d in keep), -1)


def _sum_terms(x: torch.Tensor, dims, idx: list[int], mean: bool, total: bool = True) -> Terms:
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


def _row_length(x: torch.Tensor, dim: int) -> int:
    return int(x.shape[dim % max(x.dim(), 1)]) if x.dim() else 1


def _norm_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    """x as [rows, n]: a norm's normalized trailing elements last."""
    return x.detach().to("cpu").reshape(-1, n)


def _channel_dims(x: torch.Tensor) -> list[int]:
    """A batch norm's reduced dimensions: every one but the channels (dimension 1)."""
    return [d for d in range(x.dim()) if d != 1]


def _batch_norm_training(name: str, args: tuple) -> bool:
    if name == "_native_batch_norm_legit_no_training":
        return False
    if name == "_native_batch_norm_legit" and len(args) == 6:  # the no_stats overload: (x, w, b, training, ...)
        return bool(args[3])
    return bool(args[5]) if len(args) > 5 else True


# the ops whose later outputs (which > 0) ``_more_terms`` knows (and fused attention, by a part of its name)
_MORE_TERMS = frozenset({
    "native_layer_norm", "native_layer_norm_backward", "native_batch_norm", "_native_batch_norm_legit",
    "_native_batch_norm_legit_no_training", "native_batch_norm_backward", "convolution_backward", "_fused_rms_norm",
    "_fused_rms_norm_backward", "var_mean", "std_mean",
})


def _more_terms(
    name: str, args: tuple, out: torch.Tensor, idx: list[int], which: int, total: bool = True
) -> Terms | None:
    """K and terms of output ``which`` (> 0) of an op with several outputs (None: not a reduction, or
    unknown)."""
    if name not in _MORE_TERMS and "scaled_dot_product" not in name:
        return None
    if name == "native_layer_norm":  # (y, mean, rstd): the mean has its K terms x/K; rstd is one row reduction
        n = math.prod(args[1]) if args[1] else 1
        if which == 1:
            return _sum_terms(_norm_rows(args[0], n), [1], idx, mean=True, total=total)
        return Terms(k=n, kind=TermsKind.RELATIVE)
    if name == "native_layer_norm_backward":  # (grad x, grad weight, grad bias): sums over the M rows
        g, x, shape, mean, rstd = args[:5]
        n = math.prod(shape) if shape else 1
        g2 = _norm_rows(g, n)
        if which == 2:
            return _sum_terms(g2, [0], idx, mean=False, total=total)
        xhat = (_norm_rows(x, n).double() - _f64(mean).reshape(-1, 1)) * _f64(rstd).reshape(-1, 1)
        return _sum_terms(g2.double() * xhat, [0], idx, mean=False, total=total)
    if name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"):
        x = args[0]
        if not _batch_norm_training(name, args) or x.numel() == 0:
            return None  # the running statistics: nothing is reduced
        if which == 1:
            return _sum_terms(x, _channel_dims(x), idx, mean=True, total=total)
        return Terms(k=x.numel() // max(1, int(x.shape[1])), kind=TermsKind.RELATIVE)
    if name == "native_batch_norm_backward":  # (grad x, grad weight, grad bias): sums over all but the channels
        g = args[0]
        if which == 2:
            return _sum_terms(g, _channel_dims(g), idx, mean=False, total=total)
        return Terms(k=g.numel() // max(1, int(g.shape[1])), kind=TermsKind.ESTIMATED)
    if name == "convolution_backward":  # (grad x, grad weight, grad bias)
        g = args[0]
        if which == 2:
            return _sum_terms(g, _channel_dims(g), idx, mean=False, total=total)
        return Terms(k=int(g.shape[0] * math.prod(g.shape[2:])), kind=TermsKind.ESTIMATED)
    if name in ("_fused_rms_norm", "_fused_rms_norm_backward"):
        if name == "_fused_rms_norm":
            return Terms(k=math.prod(args[1]) if args[1] else 1, kind=TermsKind.RELATIVE)  # rstd: one row reduction
        n = math.prod(args[2]) if len(args) > 2 and args[2] else int(args[0].shape[-1])
        # grad weight: a sum over the rows
        return Terms(k=max(1, args[0].numel() // max(1, n)), kind=TermsKind.ESTIMATED)
    if "scaled_dot_product" in name:  # the log-sum-exp, the key and value gradients: rows of the same lengths
        return Terms(
            k=max(int(args[1].shape[-2]), int(args[2].shape[-2]), int(args[1].shape[-1])), kind=TermsKind.ESTIMATED
        )
    if name in ("var_mean", "std_mean") and which == 1:
        dims = args[1] if len(args) > 1 else None
        return _sum_terms(args[0], dims, idx, mean=True, total=total)
    return None


# The first output's terms, one helper per class of op. Each takes (name, args, kwargs, out, idx, total) as
# ``terms`` does and may raise on arguments it cannot read (``terms`` then answers None).


def _product_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Matrix products: t_k = a_ik b_kj; addmv, addmm and baddbmm add their bias as one more term."""
    if name in ("mm", "bmm", "mv", "dot", "matmul"):
        return _matmul_terms(args[0], args[1], idx, total=total)
    beta = float(kwargs.get("beta", args[3] if len(args) > 3 else 1.0))
    alpha = float(kwargs.get("alpha", args[4] if len(args) > 4 else 1.0))
    if name == "addmv":
        bias = torch.broadcast_to(args[0], out.shape)[:, None] if beta != 0 else None
        return _matmul_terms(args[1], args[2], idx, alpha, bias, beta, total)
    return _matmul_terms(args[1], args[2], idx, alpha, args[0] if beta != 0 else None, beta, total)


def _summed_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms | None:
    """sum, mean, nansum, of the whole tensor or over dims: t_k = the summed values (over K for a mean)."""
    x = args[0]
    if not x.is_floating_point():
        return None
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    return _sum_terms(x, dims, idx, name == "mean", total)


def _nll_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms | None:
    """nll_loss_forward without class weights: t_n = the picked log-probabilities (K = the batch)."""
    x, target, weight, reduction = args[0], args[1], args[2], int(args[3])
    ignore = int(args[4]) if len(args) > 4 else -100
    if weight is not None or reduction == 0 or x.dim() != 2:
        return None
    tgt = target.to("cpu").long()
    keep = tgt != ignore  # ignored targets add nothing and do not count in the mean
    picked = _f64(x)[torch.arange(x.shape[0])[keep], tgt[keep].clamp(0, x.shape[1] - 1)]
    if reduction == 1:
        picked = picked / max(1, int(keep.sum()))
    s = float(picked.abs().sum())
    root_sq = float(picked.square().sum().sqrt())
    return Terms(
        k=int(x.shape[0]), kind=TermsKind.EXACT, sum_abs=[s] * len(idx), scale=[root_sq] * len(idx), total_abs=s
    )


def _softmax_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Softmax and log-softmax (one row reduction each) and their backward: K = the row length."""
    forward = name in ("_softmax", "_log_softmax")
    x, dim = args[0], int(args[1] if forward else args[2])
    return Terms(k=_row_length(x, dim), kind=TermsKind.RELATIVE if forward else TermsKind.ESTIMATED)


def _norm_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms | None:
    """Layer, RMS and batch norms and their backward: K = the normalized length, no terms."""
    if name in ("native_layer_norm", "_fused_rms_norm", "rms_norm", "layer_norm"):
        shape = args[1]
        # a layer norm subtracts the mean: its error is absolute at the scale of the normalized values,
        # so an output near zero is judged at the scale of the others ("relative" with a floor)
        kind = TermsKind.RELATIVE if "rms" in name else TermsKind.RELATIVE_FLOOR
        return Terms(k=math.prod(shape) if shape else 1, kind=kind)
    if name == "native_layer_norm_backward":  # grad x: the row's own sums of K terms
        return Terms(k=math.prod(args[2]) if args[2] else 1, kind=TermsKind.ESTIMATED)
    if name == "native_batch_norm_backward":
        g = args[0]
        return Terms(k=g.numel() // max(1, int(g.shape[1])), kind=TermsKind.ESTIMATED) if bool(args[7]) else None
    if name == "_fused_rms_norm_backward":
        n = math.prod(args[2]) if len(args) > 2 and args[2] else int(args[0].shape[-1])
        return Terms(k=n, kind=TermsKind.ESTIMATED)
    x = args[0]  # native_batch_norm, _native_batch_norm_legit(_no_training)
    if not _batch_norm_training(name, args):
        return None  # (x - running mean) / sqrt(running var + eps) * w + b: elementwise
    # normalized by its channel's statistics: absolute error at their scale, as a layer norm
    return Terms(k=x.numel() // max(1, int(x.shape[1])), kind=TermsKind.RELATIVE_FLOOR)


def _convolution_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A convolution (exact terms for a 1-D or 2-D one that is not transposed, else K only) and the input
    gradient of its backward (K only)."""
    if name == "convolution_backward":  # grad x: a sum over a group's output channels and the kernel
        w, groups = args[2], int(args[9]) if len(args) > 9 else 1
        return Terms(k=int(w.shape[0] // max(1, groups) * math.prod(w.shape[2:])), kind=TermsKind.ESTIMATED)
    x, w, bias, stride, padding, dilation, transposed = args[:7]
    groups = int(args[8]) if len(args) > 8 else 1
    if not bool(transposed) and w.dim() in (3, 4):
        geometry = ConvGeometry(stride=stride, padding=padding, dilation=dilation, groups=groups)
        return _conv_terms(x, w, bias, geometry, idx, out.shape, total)
    return Terms(
        k=int(math.prod(w.shape[1:])) * (1 if not bool(transposed) else int(w.shape[0])), kind=TermsKind.ESTIMATED
    )


def _attention_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Fused attention (a scaled_dot_product op): K = the longer of the key length and the head size."""
    return Terms(k=max(int(args[1].shape[-2]), int(args[0].shape[-1])), kind=TermsKind.ESTIMATED)


def _grouped_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A grouped matrix product (a mixture of experts' tokens, each group by its expert's matrix): K = the first
    operand's last dimension (the inner dimension; for a weight gradient grouped over tokens, the most any
    group can sum)."""
    return Terms(k=max(1, int(args[0].shape[-1])), kind=TermsKind.ESTIMATED)


def _accumulated_terms(
    name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool
) -> Terms | None:
    """Ops that add up duplicates (``ACCUMULATING``): K = the number of values added, an upper bound."""
    if name.startswith(("index_put", "_index_put")):
        acc = kwargs.get("accumulate", args[3] if len(args) > 3 else False)
        return Terms(k=max(1, int(args[2].numel())), kind=TermsKind.ESTIMATED) if acc else None
    if name == "embedding_dense_backward":
        return Terms(k=max(1, int(args[1].numel())), kind=TermsKind.ESTIMATED)
    src = args[3] if len(args) > 3 and isinstance(args[3], torch.Tensor) else args[-1]
    return Terms(k=max(1, int(src.numel())), kind=TermsKind.ESTIMATED) if isinstance(src, torch.Tensor) else None


_FIRST_OUTPUT = {
    **dict.fromkeys(("mm", "bmm", "mv", "dot", "matmul", "addmv", "addmm", "baddbmm"), _product_terms),
    **dict.fromkeys(("sum", "mean", "nansum"), _summed_terms),
    "nll_loss_forward": _nll_terms,
    **dict.fromkeys(
        ("_softmax", "_log_softmax", "_softmax_backward_data", "_log_softmax_backward_data"), _softmax_terms
    ),
    **dict.fromkeys(
        (
            "native_layer_norm",
            "_fused_rms_norm",
            "rms_norm",
            "layer_norm",
            "native_layer_norm_backward",
            "native_batch_norm",
            "_native_batch_norm_legit",
            "_native_batch_norm_legit_no_training",
            "native_batch_norm_backward",
            "_fused_rms_norm_backward",
        ),
        _norm_terms,
    ),
    **dict.fromkeys(("convolution", "_convolution", "convolution_backward"), _convolution_terms),
    **dict.fromkeys(("_grouped_mm", "grouped_mm"), _grouped_terms),
    **dict.fromkeys(ACCUMULATING, _accumulated_terms),
}


def may_have_terms(name: str) -> bool:
    """Whether ``terms`` can answer anything but None for some output of an op of this name (a recorder asks once
    per op and skips the call for the elementwise ops)."""
    return name in _FIRST_OUTPUT or name in _MORE_TERMS or "scaled_dot_product" in name


def terms(
    func, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], which: int = 0, total: bool = True,
    name: str | None = None,
) -> Terms | None:
    """K and the terms of the sampled elements ``idx`` (flat indices into ``out``, output ``which`` of
    the op), or None. ``total``: also the total of sum|t| over all of ``out`` (a trace that follows one
    row of a batch has no use for it: its L1 norm is the row's). ``name``: the op's name, where the caller
    has it (``func``'s packet's)."""
    name = _name(func) if name is None else name
    kwargs = kwargs or {}
    if not idx or not (out.is_floating_point() and out.numel()):
        return None
    try:
        if which > 0:
            return _more_terms(name, args, out, idx, which, total)
        rule = _FIRST_OUTPUT.get(name)
        if rule is None:
            if "scaled_dot_product" not in name:
                return None  # elementwise, or it moves data
            rule = _attention_terms
        return rule(name, args, kwargs, out, idx, total)
    except (IndexError, RuntimeError, TypeError, ValueError, ArithmeticError):
        return None


def input_scales(tensors_in: list[torch.Tensor], out: torch.Tensor, idx: list[int], cut) -> Terms | None:
    """For a formula op: the largest |input| at each sampled position, over the floating inputs shaped like
    the output (``cut``: the recorder's cut to the followed request)."""
    if not idx or not out.is_floating_point():
        return None
    flat = torch.tensor(idx, dtype=torch.long)
    best = torch.zeros(len(idx), dtype=torch.float64)
    for t in tensors_in:
        t = cut(t)
        if t.is_floating_point() and t.shape == out.shape:
            v = t.detach().to("cpu").reshape(-1)[flat].double().abs()
            best = torch.maximum(best, torch.nan_to_num(v, nan=0.0, posinf=0.0))
    return Terms(k=0, kind=TermsKind.INPUTS, sum_abs=None, scale=best.tolist(), total_abs=None)
