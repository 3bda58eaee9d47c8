"""The reduction length K of an op, and the terms behind its sampled output elements (core.traces.sums computes
the terms of products, convolutions and sums; this module says which op sums what).

For a rounding envelope (core.traces.judge) an op's output element is a sum of K terms t_k;
what the envelope needs per sampled element is sum|t_k| and sqrt(sum t_k^2), and for the check
over all elements the total of sum|t_k| over the whole output. They are computed here, at record
time, from the op's real inputs, in float64:

- ``mm``, ``addmm``, ``bmm``, ``baddbmm``, ``mv``, ``dot``: t_k = a_ik b_kj (K = inner dimension;
  addmm/baddbmm add the bias as one more term, K + 1; complex operands by their moduli, K doubled);
- a dynamically quantized linear layer (``quantized.linear_dynamic``): the terms of the float product of its
  input with its packed weights' values, and the bias (its float result rounds at their size);
- the FFTs (``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r``): t_k = x_k times a unit twiddle, so sum|t| is the
  transformed row's sum of moduli (times the normalization);
- ``sum``, ``mean`` (whole tensor or over dims), ``nansum``: t_k = the summed values (divided by K for
  a mean);
- ``nll_loss_forward`` (no class weights): t_n = the picked log-probabilities (K = the batch);
- ``_softmax``, ``_safe_softmax``, ``_log_softmax``, ``native_layer_norm``, ``_fused_rms_norm``,
  ``native_group_norm`` (K = the group's channels times its pixels): K = the row length;
  each output is the result of one row reduction, so its size is relative ("relative": sum|t| is
  taken as |y| for softmax and the norms, as 1 for log-softmax, where the error of log(sum) is
  absolute);
- other ops with a known K but no cheap terms (convolutions, fused attention, the backward of
  softmax and of the norms; recurrent layers in one kernel, oneDNN's LSTM or a quantized LSTM or GRU,
  K = the gates' terms times the steps; pooling and interpolation; norms, variances, log-sum-exp and
  running sums along dims): K only; the envelope then estimates sum|t| as sqrt(K) times the element's
  size, as core.diagnose does without inputs, and says so.

- ops that add up duplicates (``index_put`` with ``accumulate=True``, the backward of indexing;
  ``embedding_dense_backward``; ``scatter_add``, ``index_add``): K = the number of values added
  (an upper bound on the duplicates of one element), "estimated".

Every other op has K = None: it is elementwise (or moves data) and is judged per element. For the
formula ops in ``FORMULA_OPS`` (backward formulas such as tanh's g (1 - y^2), erf-based functions),
whose result can cancel, ``input_scales`` keeps the largest input magnitude at each sampled
position ("inputs"): the envelope then allows an absolute error at that scale (core.traces.judge).
"""

from __future__ import annotations

import math

import torch

from core.traces.sums import (
    ConvGeometry,
    Terms,
    TermsKind,
    channel_dims,
    conv_terms,
    f64,
    matmul_terms,
    norm_rows,
    row_length,
    sum_terms,
)

__all__ = ["Terms", "TermsKind", "input_scales", "may_have_terms", "terms"]  # Terms and TermsKind: sums's own

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
    "_fused_rms_norm_backward", "var_mean", "std_mean", "native_group_norm", "mkldnn_rnn_layer", "quantized_lstm",
    "quantized_gru",
})


def _more_terms(
    name: str, args: tuple, out: torch.Tensor, idx: list[int], which: int, total: bool = True
) -> Terms | None:
    """K and terms of output ``which`` (> 0) of an op with several outputs (None: not a reduction, or
    unknown)."""
    if name not in _MORE_TERMS and "scaled_dot_product" not in name:
        return None
    if name == "native_group_norm":
        return _group_statistics(args, idx, which, total)
    if name in ("mkldnn_rnn_layer", "quantized_lstm", "quantized_gru"):  # the last step's states
        return _recurrent_terms(name, args, {}, out, idx, total)
    if name == "native_layer_norm":  # (y, mean, rstd): the mean has its K terms x/K; rstd is one row reduction
        n = math.prod(args[1]) if args[1] else 1
        if which == 1:
            return sum_terms(norm_rows(args[0], n), [1], idx, mean=True, total=total)
        return Terms(k=n, kind=TermsKind.RELATIVE)
    if name == "native_layer_norm_backward":  # (grad x, grad weight, grad bias): sums over the M rows
        g, x, shape, mean, rstd = args[:5]
        n = math.prod(shape) if shape else 1
        g2 = norm_rows(g, n)
        if which == 2:
            return sum_terms(g2, [0], idx, mean=False, total=total)
        xhat = (norm_rows(x, n).double() - f64(mean).reshape(-1, 1)) * f64(rstd).reshape(-1, 1)
        return sum_terms(g2.double() * xhat, [0], idx, mean=False, total=total)
    if name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"):
        x = args[0]
        if not _batch_norm_training(name, args) or x.numel() == 0:
            return None  # the running statistics: nothing is reduced
        if which == 1:
            return sum_terms(x, channel_dims(x), idx, mean=True, total=total)
        return Terms(k=x.numel() // max(1, int(x.shape[1])), kind=TermsKind.RELATIVE)
    if name == "native_batch_norm_backward":  # (grad x, grad weight, grad bias): sums over all but the channels
        g = args[0]
        if which == 2:
            return sum_terms(g, channel_dims(g), idx, mean=False, total=total)
        return Terms(k=g.numel() // max(1, int(g.shape[1])), kind=TermsKind.ESTIMATED)
    if name == "convolution_backward":  # (grad x, grad weight, grad bias)
        g = args[0]
        if which == 2:
            return sum_terms(g, channel_dims(g), idx, mean=False, total=total)
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
        return sum_terms(args[0], dims, idx, mean=True, total=total)
    return None


# The first output's terms, one helper per class of op. Each takes (name, args, kwargs, out, idx, total) as
# ``terms`` does and may raise on arguments it cannot read (``terms`` then answers None).


def _product_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Matrix products: t_k = a_ik b_kj; addmv, addmm and baddbmm add their bias as one more term."""
    if name in ("mm", "bmm", "mv", "dot", "matmul"):
        return matmul_terms(args[0], args[1], idx, total=total)
    beta = float(kwargs.get("beta", args[3] if len(args) > 3 else 1.0))
    alpha = float(kwargs.get("alpha", args[4] if len(args) > 4 else 1.0))
    if name == "addmv":
        bias = torch.broadcast_to(args[0], out.shape)[:, None] if beta != 0 else None
        return matmul_terms(args[1], args[2], idx, alpha, bias, beta, total)
    return matmul_terms(args[1], args[2], idx, alpha, args[0] if beta != 0 else None, beta, total)


def _summed_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms | None:
    """sum, mean, nansum, of the whole tensor or over dims: t_k = the summed values (over K for a mean)."""
    x = args[0]
    if not x.is_floating_point():
        return None
    dims = args[1] if len(args) > 1 else kwargs.get("dim")
    return sum_terms(x, dims, idx, name == "mean", total)


def _nll_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms | None:
    """nll_loss_forward without class weights: t_n = the picked log-probabilities (K = the batch)."""
    x, target, weight, reduction = args[0], args[1], args[2], int(args[3])
    ignore = int(args[4]) if len(args) > 4 else -100
    if weight is not None or reduction == 0 or x.dim() != 2:
        return None
    tgt = target.to("cpu").long()
    keep = tgt != ignore  # ignored targets add nothing and do not count in the mean
    picked = f64(x)[torch.arange(x.shape[0])[keep], tgt[keep].clamp(0, x.shape[1] - 1)]
    if reduction == 1:
        picked = picked / max(1, int(keep.sum()))
    s = float(picked.abs().sum())
    root_sq = float(picked.square().sum().sqrt())
    return Terms(
        k=int(x.shape[0]), kind=TermsKind.EXACT, sum_abs=[s] * len(idx), scale=[root_sq] * len(idx), total_abs=s
    )


def _softmax_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Softmax and log-softmax (one row reduction each) and their backward: K = the row length."""
    forward = name in ("_softmax", "_log_softmax", "_safe_softmax")
    x, dim = args[0], int(args[1] if forward else args[2])
    return Terms(k=row_length(x, dim), kind=TermsKind.RELATIVE if forward else TermsKind.ESTIMATED)


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
        return conv_terms(x, w, bias, geometry, idx, out.shape, total)
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


def _group_norm_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A group norm (native_group_norm(x, w, b, N, C, HxW, group, eps)), normalized by its group's statistics as a
    layer norm by its row's: K = C/group x HxW; its backward: K only."""
    if name == "native_group_norm_backward":
        n, c, hw, group = (int(v) for v in args[5:9])
        return Terms(k=max(1, n * hw * c // max(1, group)), kind=TermsKind.ESTIMATED)
    c, hw, group = int(args[4]), int(args[5]), int(args[6])
    return Terms(k=max(1, c // max(1, group) * hw), kind=TermsKind.RELATIVE_FLOOR)


def _group_statistics(args: tuple, idx: list[int], which: int, total: bool) -> Terms:
    """A group norm's mean (``which`` 1: its terms, x/K over the group) and rstd (2: one reduction of the group)."""
    x, n, c, hw, group = args[0], int(args[3]), int(args[4]), int(args[5]), int(args[6])
    k = max(1, c // max(1, group) * hw)
    if which == 1:
        return sum_terms(x.detach().to("cpu").reshape(n * group, k), [1], idx, mean=True, total=total)
    return Terms(k=k, kind=TermsKind.RELATIVE)


def _fft_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A discrete Fourier transform (_fft_r2c, _fft_c2c, _fft_c2r: x, the transformed dims, the normalization, ...):
    each output sums the transformed row's values times unit twiddles, so |t_k| = |x_k|: sum|t| is the row's sum
    of moduli and sqrt(sum t^2) its 2-norm, times the normalization (1, 1/sqrt(n) or 1/n). c2r reads half of a
    Hermitian spectrum, which stands for the whole: twice its sums (an upper bound). Each part of a complex term
    is two real products: K = 2n for a complex input."""
    x = args[0]
    dims = [int(d) % x.dim() for d in args[1]]
    n = math.prod(int(out.shape[d]) if name == "_fft_c2r" else int(x.shape[d]) for d in dims)
    factor = {0: 1.0, 1: 1 / math.sqrt(n), 2: 1 / n}[int(args[2])] * (2.0 if name == "_fft_c2r" else 1.0)
    a = f64(x).abs()  # moduli
    s1 = a.sum(dims, keepdim=True) * factor
    s2 = (a * a).sum(dims, keepdim=True).sqrt() * factor * (math.sqrt(2.0) if name == "_fft_c2r" else 1.0)
    pick = torch.tensor(idx, dtype=torch.long)
    every = s1.expand(out.shape)
    return Terms(k=2 * n if x.is_complex() else n, kind=TermsKind.EXACT,
                 sum_abs=every.reshape(-1)[pick].tolist(), scale=s2.expand(out.shape).reshape(-1)[pick].tolist(),
                 total_abs=float(every.sum()) if total else None)


def _recurrent_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A recurrent layer in one kernel (oneDNN's mkldnn_rnn_layer; a quantized LSTM or GRU): each step's gates sum
    their input's and hidden state's terms with two biases, and each step's rounding reaches the later steps:
    K = (input + hidden + 2) x steps, terms estimated."""
    x = args[0]
    if name == "mkldnn_rnn_layer":  # (x [T, B, F] or batch first, weights, hx, cx, ..., hidden_size, ...)
        hidden, steps = int(args[10]), int(x.shape[1] if bool(args[14]) else x.shape[0])
    else:  # quantized_lstm / quantized_gru (x, hx, params, has_biases, layers, dropout, train, bidirectional,
        hx = args[1][0] if isinstance(args[1], (list, tuple)) else args[1]  # batch_first)
        hidden, steps = int(hx.shape[-1]), int(x.shape[1] if bool(args[8]) else x.shape[0])
    return Terms(k=max(1, (int(x.shape[-1]) + hidden + 2) * steps), kind=TermsKind.ESTIMATED)


def _quantized_linear_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int],
                            total: bool) -> Terms:
    """A dynamically quantized linear layer (x, packed weights, ...): its float result scales an exact integer sum of
    the quantized input and weights and adds the bias, rounding a few times at the size of x w terms and the
    bias. The terms of the float product with the packed weights' own values (dequantized) and the bias bound
    those roundings: K = in_features + 1 (the quantization itself is a choice, core.traces.judge)."""
    weight, bias = torch.ops.quantized.linear_unpack(args[1])
    x = args[0]
    return matmul_terms(x.reshape(-1, x.shape[-1]), weight.dequantize().T, idx, bias=bias, total=total)


def _pool_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """Averages over windows and interpolations (avg_pool, adaptive averages, bilinear and linear upsampling):
    sums of K values, terms estimated. K: the window (each input dimension over the output's, at least the
    kernel), or the 2^d neighbours an interpolation weighs."""
    x = args[0]
    spatial = out.dim() - 2
    if name.startswith("upsample"):
        return Terms(k=2 ** max(1, spatial), kind=TermsKind.ESTIMATED)
    ratio = math.prod(max(1, -(-int(x.shape[-d]) // max(1, int(out.shape[-d])))) for d in range(1, spatial + 1))
    kernel = math.prod(int(v) for v in args[1]) if name.startswith("avg_pool") and len(args) > 1 else 1
    return Terms(k=max(ratio, kernel, 1), kind=TermsKind.ESTIMATED)


def _vector_norm_terms(name: str, args: tuple, kwargs: dict, out: torch.Tensor, idx: list[int], total: bool) -> Terms:
    """A norm, variance, log-sum-exp or running sum along dims: K = the reduced length, terms estimated."""
    x = args[0]
    dims = args[2] if name in ("linalg_vector_norm", "norm") and len(args) > 2 else args[1] if len(args) > 1 else None
    dims = kwargs.get("dim", dims)
    if dims is None or (isinstance(dims, (list, tuple)) and not dims):
        k = x.numel()
    else:
        k = math.prod(int(x.shape[int(d) % max(1, x.dim())]) for d in (dims if isinstance(dims, (list, tuple))
                                                                          else [dims]))
    return Terms(k=max(1, k), kind=TermsKind.ESTIMATED)


_FIRST_OUTPUT = {
    **dict.fromkeys(("mm", "bmm", "mv", "dot", "matmul", "addmv", "addmm", "baddbmm"), _product_terms),
    **dict.fromkeys(("sum", "mean", "nansum"), _summed_terms),
    "nll_loss_forward": _nll_terms,
    **dict.fromkeys(
        ("_softmax", "_log_softmax", "_safe_softmax", "_softmax_backward_data", "_log_softmax_backward_data"),
        _softmax_terms,
    ),
    **dict.fromkeys(("native_group_norm", "native_group_norm_backward"), _group_norm_terms),
    **dict.fromkeys(("_fft_r2c", "_fft_c2c", "_fft_c2r"), _fft_terms),
    **dict.fromkeys(("mkldnn_rnn_layer", "quantized_lstm", "quantized_gru"), _recurrent_terms),
    **dict.fromkeys(("quantized.linear_dynamic", "quantized.linear_relu_dynamic"), _quantized_linear_terms),
    **dict.fromkeys(("avg_pool1d", "avg_pool2d", "avg_pool3d", "_adaptive_avg_pool2d", "_adaptive_avg_pool3d",
                     "adaptive_avg_pool1d", "upsample_bilinear2d", "upsample_linear1d", "upsample_bicubic2d",
                     "upsample_trilinear3d", "_upsample_bilinear2d_aa"), _pool_terms),
    **dict.fromkeys(("linalg_vector_norm", "norm", "var", "std", "var_mean", "std_mean", "logsumexp", "cumsum",
                     "cumsum_"), _vector_norm_terms),
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
    if not idx or not ((out.is_floating_point() or out.is_complex()) and out.numel()):
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
