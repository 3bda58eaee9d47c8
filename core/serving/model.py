"""A tiny character-level causal language model with a KV cache.

Token and position embeddings, ``layers`` blocks of (RMSNorm, multi-head causal
self-attention, RMSNorm, ReLU MLP) with residual connections, a final RMSNorm and an LM head.
The MLP uses ReLU, which is exact (no transcendental function whose vectorised and scalar
code paths could round differently). Every reduction goes through a ``Kernels`` object, so the
same weights run with torch's ordinary kernels or with batch-invariant ones.

The weights ship in ``data/serving/tiny_lm.pt`` (a plain state dict of tensors, read with
``torch.load(weights_only=True)``: no unpickling of code), trained by
``scripts/train_tiny_lm.py``; ``data/serving/tiny_lm.json`` records the command, the corpus
and the file's SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from core.serving.kernels import Kernels

VOCAB = "\n ,.abcdefghijklmnopqrstuvwxyz"
DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "serving"
WEIGHTS = DATA_DIR / "tiny_lm.pt"
RECORD = DATA_DIR / "tiny_lm.json"
EPS = 1e-5


@dataclass(frozen=True)
class ModelConfig:
    vocab: str = VOCAB
    d_model: int = 96
    heads: int = 3
    layers: int = 2
    d_mlp: int = 256
    context: int = 160

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


def encode(text: str, cfg: ModelConfig = ModelConfig()) -> list[int]:
    """Token ids of ``text``; a character outside the vocabulary raises ValueError naming it."""
    index = {c: i for i, c in enumerate(cfg.vocab)}
    bad = sorted({c for c in text if c not in index})
    if bad:
        raise ValueError("characters outside the model's alphabet (lower-case letters, space, comma, full stop): "
                         + " ".join(repr(c) for c in bad[:8]))
    return [index[c] for c in text]


def decode(ids: list[int], cfg: ModelConfig = ModelConfig()) -> str:
    return "".join(cfg.vocab[i] for i in ids)


def init_params(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Fresh float32 parameters (for training), from a private generator: no global RNG touched."""
    g = torch.Generator().manual_seed(seed)
    d, v = cfg.d_model, len(cfg.vocab)

    def normal(*shape: int, std: float) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * std

    p = {"tok_emb": normal(v, d, std=0.3), "pos_emb": normal(cfg.context, d, std=0.1),
         "ln_f": torch.ones(d), "head": normal(v, d, std=1 / math.sqrt(d))}
    for i in range(cfg.layers):
        p[f"l{i}.ln1"] = torch.ones(d)
        p[f"l{i}.wqkv"] = normal(3 * d, d, std=1 / math.sqrt(d))
        p[f"l{i}.wo"] = normal(d, d, std=1 / math.sqrt(d) / math.sqrt(2 * cfg.layers))
        p[f"l{i}.ln2"] = torch.ones(d)
        p[f"l{i}.w1"] = normal(cfg.d_mlp, d, std=1 / math.sqrt(d))
        p[f"l{i}.w2"] = normal(d, cfg.d_mlp, std=1 / math.sqrt(cfg.d_mlp) / math.sqrt(2 * cfg.layers))
    return p


def parameter_count(params: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() for t in params.values())


class KVCache:
    """One request's keys and values, [layers, context, heads, head_dim] each, and how many are filled."""

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype) -> None:
        shape = (cfg.layers, cfg.context, cfg.heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype)
        self.v = torch.zeros(shape, dtype=dtype)
        self.length = 0


class TinyLM:
    """The weights in one dtype and the forward pass over a batch of requests."""

    def __init__(self, params: dict[str, torch.Tensor], cfg: ModelConfig = ModelConfig(),
                 dtype: torch.dtype = torch.float32) -> None:
        self.cfg = cfg
        self.dtype = dtype
        self.p = {k: t.detach().to(dtype) for k, t in params.items()}

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg, self.dtype)

    def forward(self, kern: Kernels, new_tokens: list[list[int]], caches: list[KVCache]) -> torch.Tensor:
        """Run each request's new tokens (a prompt to prefill, or one token to decode) through the
        model as one batch, appending their keys and values to the requests' caches. Returns the
        logits after each request's last new token, [B, vocab], in float32.

        The batch is padded to its longest new-token list (prefill) and its keys to the longest
        request (the padding is masked); every row goes through the kernels together."""
        cfg, p = self.cfg, self.p
        b = len(new_tokens)
        lens = [len(x) for x in new_tokens]
        t = max(lens)
        starts = [c.length for c in caches]
        length = max(s + n for s, n in zip(starts, lens, strict=True))
        if length > cfg.context:
            raise ValueError(f"a request would pass the model's context of {cfg.context} tokens")
        tok = torch.tensor([x + [0] * (t - len(x)) for x in new_tokens])
        # padding rows take their request's first new position: valid, masked like it, thrown away
        pos = torch.tensor([[s + j if j < n else s for j in range(t)] for s, n in zip(starts, lens, strict=True)])
        rows_b = torch.tensor([i for i, n in enumerate(lens) for _ in range(n)])
        rows_t = torch.tensor([j for n in lens for j in range(n)])
        rows_p = torch.tensor([s + j for s, n in zip(starts, lens, strict=True) for j in range(n)])
        keys = torch.stack([c.k[:, :length] for c in caches])  # [B, layers, L, H, D]
        values = torch.stack([c.v[:, :length] for c in caches])
        x = (p["tok_emb"][tok] + p["pos_emb"][pos]).reshape(b * t, cfg.d_model)
        for layer in range(cfg.layers):
            h = kern.rmsnorm(x, p[f"l{layer}.ln1"], EPS)
            qkv = kern.linear(h, p[f"l{layer}.wqkv"]).reshape(b, t, 3, cfg.heads, cfg.head_dim)
            keys[rows_b, layer, rows_p] = qkv[rows_b, rows_t, 1]
            values[rows_b, layer, rows_p] = qkv[rows_b, rows_t, 2]
            att = kern.attention(qkv[:, :, 0], keys[:, layer], values[:, layer], pos)
            x = x + kern.linear(att.reshape(b * t, cfg.d_model), p[f"l{layer}.wo"])
            h = kern.rmsnorm(x, p[f"l{layer}.ln2"], EPS)
            x = x + kern.linear(torch.relu(kern.linear(h, p[f"l{layer}.w1"])), p[f"l{layer}.w2"])
        for i, (s, n, c) in enumerate(zip(starts, lens, caches, strict=True)):
            c.k[:, s:s + n] = keys[i, :, s:s + n]
            c.v[:, s:s + n] = values[i, :, s:s + n]
            c.length = s + n
        last = torch.tensor([i * t + n - 1 for i, n in enumerate(lens)])
        h = kern.rmsnorm(x[last], p["ln_f"], EPS)
        return kern.linear(h, p["head"]).float()

    def generate(self, kern: Kernels, prompt: list[int], new: int) -> tuple[list[int], torch.Tensor]:
        """A plain greedy loop for one request: prefill, then one token at a time. (tokens, logits [new, V])"""
        cache = self.new_cache()
        logits = self.forward(kern, [prompt], [cache])[0]
        out, rows = [], []
        for _ in range(new):
            rows.append(logits)
            nxt = int(torch.argmax(logits))
            out.append(nxt)
            if len(out) == new:
                break
            logits = self.forward(kern, [[nxt]], [cache])[0]
        return out, torch.stack(rows)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class WeightsRecord:
    command: str
    corpus: str
    sha256: str
    parameters: int
    train_seconds: float
    final_loss: float
    steps: int


_loaded: dict[str, dict[str, torch.Tensor]] = {}
_load_lock = threading.Lock()


def load_params() -> dict[str, torch.Tensor]:
    """The shipped weights (float32), read once per process without unpickling code; checked
    against the SHA-256 in the record."""
    with _load_lock:
        if "p" not in _loaded:
            record = load_record()
            if sha256_of(WEIGHTS) != record.sha256:
                raise ValueError(f"{WEIGHTS} does not match the SHA-256 in {RECORD}")
            _loaded["p"] = torch.load(WEIGHTS, weights_only=True)
        return _loaded["p"]


def load_record() -> WeightsRecord:
    raw = json.loads(RECORD.read_text())
    return WeightsRecord(**{k: raw[k] for k in WeightsRecord.__dataclass_fields__})


# ----------------------------------------------------------------- the module form


class RMSNorm(nn.Module):
    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(w, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, EPS)


class Attention(nn.Module):
    def __init__(self, wqkv: torch.Tensor, wo: torch.Tensor, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=False)
        self.out = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        with torch.no_grad():
            self.qkv.weight.copy_(wqkv)
            self.out.weight.copy_(wo)

    def forward(self, h: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None = None):
        """h [B, T, d]; ``past``: keys and values of earlier positions, [B, H, P, D] each. Returns the
        output and the keys and values of all positions."""
        b, t, d = h.shape
        q, k, v = (x.transpose(1, 2) for x in self.qkv(h).reshape(b, t, 3, self.cfg.heads, self.cfg.head_dim).unbind(2))
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        # with a past, the new positions are the last ones: they see every key (t == 1 when decoding)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=past is None)
        return self.out(att.transpose(1, 2).reshape(b, t, d)), (k, v)


class Block(nn.Module):
    def __init__(self, p: dict[str, torch.Tensor], i: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(p[f"l{i}.ln1"])
        self.attn = Attention(p[f"l{i}.wqkv"], p[f"l{i}.wo"], cfg)
        self.norm2 = RMSNorm(p[f"l{i}.ln2"])
        self.up = nn.Linear(cfg.d_model, cfg.d_mlp, bias=False)
        self.down = nn.Linear(cfg.d_mlp, cfg.d_model, bias=False)
        with torch.no_grad():
            self.up.weight.copy_(p[f"l{i}.w1"])
            self.down.weight.copy_(p[f"l{i}.w2"])

    def forward(self, x: torch.Tensor, past=None):
        a, kv = self.attn(self.norm1(x), past)
        x = x + a
        return x + self.down(torch.relu(self.up(self.norm2(x)))), kv


class TinyLMModule(nn.Module):
    """The model over whole sequences as an ``nn.Module`` tree (``layers.<i>.attn.qkv`` ...): what
    training differentiates (``sequence_logits``) and what a trace follows op by op
    (core.traces.models), one definition for both. The served model (``TinyLM``) computes the same
    function over its KV cache through its kernels (tests/core/serving/test_model.py)."""

    def __init__(self, p: dict[str, torch.Tensor], cfg: ModelConfig | None = None) -> None:
        super().__init__()
        cfg = cfg or ModelConfig()
        self.tok_emb = nn.Parameter(p["tok_emb"].clone(), requires_grad=False)
        self.pos_emb = nn.Parameter(p["pos_emb"].clone(), requires_grad=False)
        self.layers = nn.ModuleList(Block(p, i, cfg) for i in range(cfg.layers))
        self.norm_f = RMSNorm(p["ln_f"].clone())
        self.head = nn.Linear(cfg.d_model, len(cfg.vocab), bias=False)
        with torch.no_grad():
            self.head.weight.copy_(p["head"])

    @staticmethod
    def parameter_names(cfg: ModelConfig) -> dict[str, str]:
        """The module's name of each weight in a parameter dict (``init_params``, the shipped file)."""
        names = {"tok_emb": "tok_emb", "pos_emb": "pos_emb", "ln_f": "norm_f.weight", "head": "head.weight"}
        for i in range(cfg.layers):
            names |= {f"l{i}.ln1": f"layers.{i}.norm1.weight", f"l{i}.wqkv": f"layers.{i}.attn.qkv.weight",
                      f"l{i}.wo": f"layers.{i}.attn.out.weight", f"l{i}.ln2": f"layers.{i}.norm2.weight",
                      f"l{i}.w1": f"layers.{i}.up.weight", f"l{i}.w2": f"layers.{i}.down.weight"}
        return names

    def forward(self, tokens: torch.Tensor, past: list | None = None):
        """Logits [B, T, V] of ``tokens`` [B, T] following ``past`` (one (keys, values) per layer, or
        None for a prompt from position 0), and the keys and values of every position."""
        start = 0 if past is None else past[0][0].shape[2]
        x = self.tok_emb[tokens] + self.pos_emb[start: start + tokens.shape[1]][None]
        cache = []
        for i, block in enumerate(self.layers):
            x, kv = block(x, None if past is None else past[i])
            cache.append(kv)
        return self.head(self.norm_f(x)), cache


def sequence_logits(params: dict[str, torch.Tensor], tokens: torch.Tensor, cfg: ModelConfig = ModelConfig()
                    ) -> torch.Tensor:
    """TinyLMModule's logits over whole sequences [B, T] at once, computed with ``params`` themselves
    (``torch.func.functional_call``), so they are differentiable in them: for training."""
    # a module of its own per call: functional_call swaps a module's tensors while it runs, so a shared
    # one would not be safe across threads (building it copies about a megabyte, small beside a step)
    shape = TinyLMModule({k: v.detach() for k, v in params.items()}, cfg)
    names = TinyLMModule.parameter_names(cfg)
    return torch.func.functional_call(shape, {names[k]: v for k, v in params.items()}, (tokens,))[0]
