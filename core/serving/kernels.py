"""The model's reductions, two ways: torch's ordinary ops, and batch-invariant ones.

A server batches the requests that are waiting. With ordinary kernels a request's numbers
then depend on its company: on this CPU torch's float32 ``F.linear`` gives other bits for one
row, for 2-3 rows and for 4 or more (likely a matrix-vector path for one row and other blockings
of a matrix-matrix path for more, each adding the K products in another order: the BLAS does not
document its choice); attention over a batch padded to
its longest request reduces over a length set by the other requests. Thinking Machines
("Defeating Nondeterminism in LLM Inference", 2025) showed this is why identical requests to
an LLM server at temperature 0 come back different, and that kernels whose reduction order
for a row never depends on the batch ("batch-invariant") stop it.

``DEFAULT`` uses torch's ops as a server would. ``BATCH_INVARIANT`` achieves invariance so:

* **linear**: the rows are cut into tiles of ``TILE_ROWS`` (zero rows pad the last tile) and
  each tile is one matrix product of the same shape, so the library picks one kernel
  configuration for every batch size, as Thinking Machines' fix does (one matmul
  configuration, no split-K chosen by size). A row's products are then reduced in the order
  that configuration fixes, whatever its position in the tile and whatever the other rows
  hold. K is padded with zeros to a multiple of ``PAD_K``: on this CPU's MKL, with K=17 and 5
  outputs a row's bits depended on its position inside the tile (measured), and with K a
  multiple of 16 they did not for any shape tried. This rests on the library computing every
  row of one product shape alike, which is what the tests check bit for bit (hypothesis,
  batch sizes 1 to 64, every position, many shapes).
* **RMSNorm, softmax and attention over the KV cache** (core.serving.fused, compiled loops): each
  output row is computed from the row's own values alone, by a loop whose order the row's length
  fixes (sums left to right, in float32). Attention visits only the keys a query may see, those of
  its own request: keys beyond a request's own length (padding to the longest request of the
  batch) are never read, so a request's result depends on its own length only. Exponentials are
  taken against the row's exact maximum.

Signed zeros are normalised (``+ 0.0``) where an exact zero could come out with either sign.
bfloat16 inputs are reduced in float32 and rounded once, as bfloat16 kernels do (the linear through
torch's own bfloat16 product, which accumulates so).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.weak import WeakTensorKeyDictionary

# 32 rows: on the 2-core development machines a 64 x 4096 x 4096 product took 1.8-1.9x torch's
# one call in 16-row tiles (the weight is read once per tile) and 1.3x in 32-row tiles, in float32 and
# bfloat16; a batch of one pays for 32 rows instead of 16 (for that shape 14 ms against 10 ms here).
TILE_ROWS = 32
PAD_K = 16
SPLIT_SIZE = 16  # the modelled GPU's flash-decoding kernel: at least this many keys per split


# ---------------------------------------------------------------- the ordinary kernels (torch's)

def linear_default(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """torch's F.linear on the whole batch at once: the library picks a kernel by the row count."""
    return F.linear(x, w)


def rmsnorm_default(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def softmax_default(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def attention_default(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
    """Attention of q [B, T, H, D] over keys/values [B, L, H, D] padded to the batch's longest
    request; query (b, t) sees keys 0..q_pos[b, t]. Batched matrix products over the padded
    length L, which the other requests set."""
    d = q.shape[-1]
    qh, kh, vh = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, T|L, D]
    scores = torch.matmul(qh, kh.transpose(-1, -2)) * (1.0 / math.sqrt(d))  # [B, H, T, L]
    keys = torch.arange(k.shape[1], device=k.device)
    mask = keys[None, None, None, :] > q_pos[:, None, :, None]
    scores = scores.masked_fill(mask, float("-inf"))
    p = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return torch.matmul(p, vh).transpose(1, 2)  # [B, T, H, D]


# ---------------------------------------------------------------- the batch-invariant kernels

_PREPARED = WeakTensorKeyDictionary()  # weight -> (its version, K padded, tile dtype, the padded copy)
_PREPARED_LOCK = threading.Lock()


def _tile_dtype(x: torch.Tensor, w: torch.Tensor) -> torch.dtype:
    """The dtype the tiles are multiplied in: bfloat16 when both operands are, else float32.

    torch's bfloat16 matrix product on a CPU (oneDNN's kernels) accumulates in float32 and rounds each
    output once, as the float32 route does, and runs at the bfloat16 speed of the hardware (AMX and
    AVX-512 BF16 units): widening a 4096 x 4096 weight and multiplying in float32 took 6-7 times torch's
    own bfloat16 linear. The accumulation is checked against the exact product by the tests."""
    return torch.bfloat16 if x.dtype == w.dtype == torch.bfloat16 else torch.float32


def _prepared(w: torch.Tensor, kp: int, dtype: torch.dtype) -> torch.Tensor:
    """w in the tiles' dtype and padded with zero columns to kp, made once per weight, and again only if
    it is changed in place (an inference tensor cannot be, outside inference mode): converting a
    4096 x 4096 weight on every call cost more than the product. The copy lives as long as the weight."""
    version = None if w.is_inference() else w._version  # an inference tensor keeps no version counter
    with _PREPARED_LOCK:
        kept = _PREPARED.get(w)
        if kept is not None and kept[:3] == (version, kp, dtype):
            return kept[3]
    wf = w.detach().to(dtype)  # w itself (no copy) when it is in that dtype already
    if kp != wf.shape[1]:
        wf = torch.cat([wf, wf.new_zeros(wf.shape[0], kp - wf.shape[1])], dim=1)
    with _PREPARED_LOCK:
        _PREPARED[w] = (version, kp, dtype, wf)
    return wf


def linear_invariant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x [M, K] @ w.T, in tiles of TILE_ROWS rows: one product shape for every batch size. K is
    padded with zeros to a multiple of PAD_K (adding zero products changes no sum). bfloat16
    operands go through the library's bfloat16 product (float32 accumulation, one rounding per output);
    float16 operands are multiplied in float32 (exact: their products fit) and the result rounded once."""
    m, k = x.shape
    kp = math.ceil(k / PAD_K) * PAD_K
    tiles = max(1, math.ceil(m / TILE_ROWS))
    dtype = _tile_dtype(x, w)
    padded = F.pad(x.to(dtype), (0, kp - k, 0, tiles * TILE_ROWS - m))  # zero rows and columns, one new tensor
    # a weight already in the tiles' dtype and width is used as it is (no lookup in the kept copies)
    wf = w.detach() if w.dtype == dtype and w.shape[1] == kp else _prepared(w, kp, dtype)
    out = [F.linear(padded[i * TILE_ROWS:(i + 1) * TILE_ROWS], wf) for i in range(tiles)]
    return (out[0] if tiles == 1 else torch.cat(out))[:m].to(x.dtype)


def _fused():
    """core.serving.fused, imported on first use: it loads numba and compiles its loops (about a second),
    which only batch-invariant serving needs."""
    import core.serving.fused as fused  # deferred on purpose, see above

    return fused


def rmsnorm_invariant(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return _fused().rmsnorm(x, w, eps)


def softmax_invariant(x: torch.Tensor) -> torch.Tensor:
    return _fused().softmax(x)


def attention_invariant(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
    """The same attention, each query over its own request's visible keys in a fixed order (module docstring)."""
    return _fused().attention(q, k, v, q_pos)


# ---------------------------------------------------------------- a MODEL of a GPU's kernel choice

def split_k_for(rows: int) -> int:
    """How many K splits the modelled GPU library picks for a product with ``rows`` rows: few rows
    cannot fill the GPU's multiprocessors, so the K loop is split (a heuristic of the kind cuBLAS
    and CUTLASS apply; the thresholds here are this model's, not any library's)."""
    return 4 if rows <= 4 else 2 if rows <= 8 else 1


def linear_gpu_model(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """A MODEL of a GPU matmul whose split-K depends on the batch: the K range is cut into
    ``split_k_for(rows)`` equal parts, each part's float32 product computed with the batch-invariant
    tile kernel, the float32 partials added in split order and the sum rounded once to the input
    format (as a split-K reduction writes its output). Exact float32 arithmetic on this CPU; only
    the choice of order is modelled."""
    splits = split_k_for(x.shape[0])
    k = x.shape[1]
    while k % splits:
        splits //= 2
    part = k // splits
    xf, wf = x.float(), w.float()
    acc = linear_invariant(xf[:, :part], wf[:, :part])
    for i in range(1, splits):
        acc = acc + linear_invariant(xf[:, i * part:(i + 1) * part], wf[:, i * part:(i + 1) * part])
    return acc.to(x.dtype)


MODEL_SMS = 64  # the modelled GPU's multiprocessors: work items (rows x heads x splits) it likes to fill


def kv_splits_for(batch: int, heads: int, length: int) -> int:
    """How many KV splits the modelled flash-decoding kernel picks: enough (batch x heads x splits)
    to fill ``MODEL_SMS`` multiprocessors, at least ``SPLIT_SIZE`` keys per split. A fixed split
    COUNT chosen by the batch, which is what makes a request's attention depend on its company."""
    return max(1, min(math.ceil(length / SPLIT_SIZE), MODEL_SMS // max(1, batch * heads)))


def attention_gpu_model(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
    """A MODEL of split-KV decoding attention (flash-decoding) with the split count chosen by the batch
    size (``kv_splits_for``). Per split: the split's own maximum, exponentials in float32 rounded to the
    input format before they weight the values (as FlashAttention does for bfloat16), float32 sums; the
    splits are then rescaled to the common maximum and added in order, and the result rounded once.
    In float32 the rounding of the weights is exact and only the order changes; in bfloat16 a split's
    maximum decides how each weight rounds."""
    b, t, h, d = q.shape
    length = k.shape[1]
    splits = kv_splits_for(b, h, length)
    size = math.ceil(length / splits)
    splits = math.ceil(length / size)
    padded = splits * size
    qf, kf, vf = q.float().transpose(1, 2), k.float().transpose(1, 2), v.float().transpose(1, 2)  # [B,H,T|L,D]
    if padded != length:
        pad = kf.new_zeros(b, h, padded - length, d)
        kf, vf = torch.cat([kf, pad], 2), torch.cat([vf, pad], 2)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * (1.0 / math.sqrt(d))  # [B, H, T, P]
    keys = torch.arange(padded)
    scores = scores.masked_fill(keys[None, None, None, :] > q_pos[:, None, :, None], float("-inf"))
    s = scores.reshape(b, h, t, splits, size)
    m_j = s.amax(-1, keepdim=True)  # each split's own maximum: -inf for a split with no visible key
    p_j = torch.exp(s - torch.where(torch.isfinite(m_j), m_j, torch.zeros_like(m_j)))
    l_j = p_j.sum(-1)  # [B, H, T, splits]
    p_round = p_j.to(q.dtype).float()  # the weights as the kernel stores them for the PV product
    o_j = torch.matmul(p_round.unsqueeze(-2), vf.reshape(b, h, 1, splits, size, d).expand(b, h, t, splits, size, d)
                       ).squeeze(-2)  # [B, H, T, splits, D]
    m = m_j.squeeze(-1).amax(-1, keepdim=True)  # [B, H, T, 1]
    scale = torch.exp(m_j.squeeze(-1) - m)  # 0 for empty splits
    total = l_j[..., 0] * scale[..., 0]
    out = o_j[..., 0, :] * scale[..., 0, None]
    for j in range(1, splits):  # combined in split order
        total = total + l_j[..., j] * scale[..., j]
        out = out + o_j[..., j, :] * scale[..., j, None]
    return (out / total[..., None]).transpose(1, 2).to(q.dtype)


@dataclass(frozen=True, kw_only=True)
class Kernels:
    """One set of the model's reductions."""

    key: str
    label: str
    linear: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    rmsnorm: Callable[[torch.Tensor, torch.Tensor, float], torch.Tensor]
    softmax: Callable[[torch.Tensor], torch.Tensor]
    attention: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


DEFAULT = Kernels(key="default", label="default kernels (torch's F.linear, rms_norm, softmax, batched attention)",
                  linear=linear_default, rmsnorm=rmsnorm_default, softmax=softmax_default, attention=attention_default)
BATCH_INVARIANT = Kernels(
    key="batch_invariant",
    label="batch-invariant kernels (fixed tiles, fixed-order loops over each request's own keys)",
    linear=linear_invariant,
    rmsnorm=rmsnorm_invariant,
    softmax=softmax_invariant,
    attention=attention_invariant,
)
GPU_MODEL = Kernels(key="gpu_model", label="MODEL of a GPU's batch-dependent kernel choices (split-K matmul, split-KV "
                    "attention), computed exactly on this CPU", linear=linear_gpu_model, rmsnorm=rmsnorm_default,
                    softmax=softmax_default, attention=attention_gpu_model)
KERNELS = {k.key: k for k in (DEFAULT, GPU_MODEL, BATCH_INVARIANT)}
