"""The batch-invariant RMSNorm, softmax and attention, each one compiled loop (numba) over float32 values.

Why compiled: on a model this small, a reduction written with torch's elementwise ops (a fixed pairwise
tree: a dozen ops per reduction) spent its time dispatching ops, not adding: batch-invariant serving took
1.64-1.8x the CPU time of torch's own kernels, measured on the 2-core development VM. One loop per
kernel does the same work in one call.

Why invariant: every output row is computed from that row's own values (and, for attention, the
request's own visible keys, never the padding a longer request in the batch adds) by a loop whose order
is fixed by the row's length alone. numba compiles without fast-math flags, so LLVM keeps each float32
addition where it is written (no reassociation: a sum stays a left-to-right sum) and fuses no multiply
into an add (that needs the contract flag); loops it vectorises are elementwise, where a vector lane
rounds exactly as the scalar code does. The exponential is the C library's ``expf`` for every element: the loops
that take it also carry a running sum, which keeps them scalar, and core.machines.native turns Intel's
SVML (numba's vector maths) off. So a row's bits cannot depend on the batch around it; the
tests check it bit for bit all the same.

Sums run left to right in float32: the error of a sum of n terms is at most gamma_(n-1) times the sum
of their magnitudes (gamma_k = k u / (1 - k u), u = 2^-24), for the largest n here (256) under 2e-5 of
it. A zero result is +0 (each sum starts from +0). numba compiles each kernel on its first call (about
a second for the three), and this module is imported only when a batch-invariant kernel first runs.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import torch

_F0 = np.float32(0.0)
_ONE = np.float32(1.0)
_NEG_INF = np.float32(-np.inf)


@numba.njit(nogil=True, boundscheck=False)
def _rmsnorm(x, w, eps, out):  # pragma: no cover - compiled; tested through rmsnorm
    rows, n = x.shape
    for r in range(rows):
        s = _F0
        for j in range(n):
            s += x[r, j] * x[r, j]
        scale = _ONE / np.sqrt(s / np.float32(n) + eps)
        for j in range(n):
            out[r, j] = x[r, j] * scale * w[j]


@numba.njit(nogil=True, boundscheck=False)
def _softmax(x, out):  # pragma: no cover - compiled; tested through softmax
    rows, n = x.shape
    for r in range(rows):
        top = _NEG_INF
        for j in range(n):
            if x[r, j] > top:  # exact in any order; a NaN is skipped here and makes the row NaN below
                top = x[r, j]
        total = _F0
        for j in range(n):
            e = np.exp(x[r, j] - top)
            out[r, j] = e
            total += e
        for j in range(n):
            out[r, j] = out[r, j] / total


@numba.njit(nogil=True, boundscheck=False)
def _attention(q, k, v, q_pos, scale, weights, out):  # pragma: no cover - compiled; tested through attention
    batch, steps, heads, dim = q.shape
    length = k.shape[1]
    for b in range(batch):
        for t in range(steps):
            visible = min(q_pos[b, t], length - 1) + 1  # keys 0 .. q_pos: the request's own
            for h in range(heads):
                for j in range(visible):
                    weights[j] = _F0
                for d in range(dim):  # key by key, each dot product in the order d = 0, 1, ...
                    qd = q[b, t, h, d]
                    for j in range(visible):
                        weights[j] += qd * k[b, j, h, d]
                top = _NEG_INF
                for j in range(visible):
                    weights[j] = weights[j] * scale
                    if weights[j] > top:
                        top = weights[j]
                total = _F0
                for j in range(visible):
                    e = np.exp(weights[j] - top)
                    weights[j] = e
                    total += e
                for d in range(dim):
                    out[b, t, h, d] = _F0
                for j in range(visible):  # the weighted values, key by key in order
                    e = weights[j]
                    for d in range(dim):
                        out[b, t, h, d] += e * v[b, j, h, d]
                for d in range(dim):
                    out[b, t, h, d] = out[b, t, h, d] / total + _F0


def _float32(x: torch.Tensor) -> np.ndarray:
    """x's values as a float32 NumPy array: a view where x is float32 already (any strides), else a
    widened copy (bfloat16 and float16 widen exactly, and are reduced in float32 as their kernels do)."""
    return x.detach().to(torch.float32).numpy()


def rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension, row by row (see the module docstring); x's dtype."""
    flat = _float32(x.reshape(-1, x.shape[-1]))
    out = torch.empty(flat.shape, dtype=torch.float32)
    _rmsnorm(flat, _float32(w), np.float32(eps), out.numpy())
    return out.reshape(x.shape).to(x.dtype)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, row by row; x's dtype."""
    flat = _float32(x.reshape(-1, x.shape[-1]))
    out = torch.empty(flat.shape, dtype=torch.float32)
    _softmax(flat, out.numpy())
    return out.reshape(x.shape).to(x.dtype)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor) -> torch.Tensor:
    """Attention of q [B, T, H, D] over keys and values [B, L, H, D]: query (b, t) sees keys 0..q_pos[b, t]
    of its own request, whatever L the batch's longest request sets; q's dtype."""
    out = torch.empty(q.shape, dtype=torch.float32)
    weights = np.empty(max(1, k.shape[1]), dtype=np.float32)
    positions = q_pos.detach().to(torch.int64).numpy()
    _attention(_float32(q), _float32(k), _float32(v), positions, np.float32(1.0 / math.sqrt(q.shape[-1])),
               weights, out.numpy())
    return out.to(q.dtype)
