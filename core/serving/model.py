"""A tiny character-level causal language model with a KV cache.

Token and position embeddings, ``layers`` blocks of (RMSNorm, multi-head causal
self-attention, RMSNorm, ReLU MLP) with residual connections, a final RMSNorm and an LM head.
The MLP uses ReLU, which is exact (no transcendental function whose vectorised and scalar
code paths could round differently). Every reduction goes through a ``Kernels`` object, so the
same weights run with torch's ordinary kernels or with batch-invariant ones.

The forward pass is written once, as ``TinyLMModule``: the server runs it over its requests' KV
caches (``TinyLM``), training differentiates it, and a trace records it op by op.

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

from core.serving.kernels import DEFAULT, Kernels

VOCAB = "\n ,.abcdefghijklmnopqrstuvwxyz"
DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "serving"
WEIGHTS = DATA_DIR / "tiny_lm.pt"
RECORD = DATA_DIR / "tiny_lm.json"
EPS = 1e-5


@dataclass(frozen=True, kw_only=True)
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

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype, device: str | torch.device = "cpu") -> None:
        shape = (cfg.layers, cfg.context, cfg.heads, cfg.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.length = 0


@dataclass(frozen=True, kw_only=True)
class Rows:
    """Where one forward pass's rows go. The batch is padded to its longest new-token list; padding
    rows take their request's first new position (valid, masked like it, thrown away).

    ``tokens``, ``pos``: [B, T], the new tokens and their positions; ``rows_b``, ``rows_t``, ``rows_p``:
    the real rows, by request, place among the new tokens and position (where their keys go);
    ``last``: each request's last real row in the flattened [B*T] rows; ``length``: the keys each
    request's attention spans after this pass (the longest request's)."""

    tokens: torch.Tensor
    pos: torch.Tensor
    rows_b: torch.Tensor
    rows_t: torch.Tensor
    rows_p: torch.Tensor
    last: torch.Tensor
    length: int

    @staticmethod
    def of(new_tokens: list[list[int]], starts: list[int], device: str | torch.device = "cpu") -> Rows:
        lens = [len(x) for x in new_tokens]
        t = max(lens)
        pairs = list(zip(starts, lens, strict=True))

        def tensor(values) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.long, device=device)

        return Rows(tokens=tensor([x + [0] * (t - len(x)) for x in new_tokens]),
                    pos=tensor([[s + j if j < n else s for j in range(t)] for s, n in pairs]),
                    rows_b=tensor([i for i, n in enumerate(lens) for _ in range(n)]),
                    rows_t=tensor([j for n in lens for j in range(n)]),
                    rows_p=tensor([s + j for s, n in pairs for j in range(n)]),
                    last=tensor([i * t + n - 1 for i, n in enumerate(lens)]),
                    length=max(s + n for s, n in pairs))

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.tokens, self.pos, self.rows_b, self.rows_t, self.rows_p, self.last


@dataclass(frozen=True, kw_only=True)
class Step:
    """One forward pass's inputs as the module takes them: the rows, and each layer's keys and values
    for the batch, [B, length, heads, head_dim], the requests' cached ones with room for the new."""

    rows: Rows
    keys: list[torch.Tensor]
    values: list[torch.Tensor]

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return *self.rows.tensors(), *self.keys, *self.values


class TinyLM:
    """The served model: the weights in one dtype (as a ``TinyLMModule``), the requests' KV caches, and
    the forward pass over a batch of requests, which is the module's."""

    def __init__(self, params: dict[str, torch.Tensor], cfg: ModelConfig = ModelConfig(),
                 dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> None:
        self.cfg = cfg
        self.dtype = dtype
        self.device = device
        self.module = TinyLMModule({k: t.detach().to(dtype) for k, t in params.items()}, cfg).to(device)

    def new_cache(self) -> KVCache:
        return KVCache(self.cfg, self.dtype, self.device)

    def step(self, new_tokens: list[list[int]], caches: list[KVCache]) -> Step:
        """The module's inputs for these requests: their rows, and their cached keys and values stacked."""
        starts = [c.length for c in caches]
        rows = Rows.of(new_tokens, starts, self.device)
        if rows.length > self.cfg.context:
            raise ValueError(f"a request would pass the model's context of {self.cfg.context} tokens")
        layers = range(self.cfg.layers)
        return Step(rows=rows, keys=[torch.stack([c.k[i, :rows.length] for c in caches]) for i in layers],
                    values=[torch.stack([c.v[i, :rows.length] for c in caches]) for i in layers])

    def forward(self, kern: Kernels, new_tokens: list[list[int]], caches: list[KVCache]) -> torch.Tensor:
        """Run each request's new tokens (a prompt to prefill, or one token to decode) through the
        model as one batch, appending their keys and values to the requests' caches. Returns the
        logits after each request's last new token, [B, vocab], in float32.

        Every row goes through the kernels together; the keys are padded to the longest request
        (the padding is masked)."""
        step = self.step(new_tokens, caches)
        logits = self.module(kern, step)
        for i, (c, x) in enumerate(zip(caches, new_tokens, strict=True)):
            s, n = c.length, len(x)
            for layer in range(self.cfg.layers):
                c.k[layer, s:s + n] = step.keys[layer][i, s:s + n]
                c.v[layer, s:s + n] = step.values[layer][i, s:s + n]
            c.length = s + n
        return logits

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


@dataclass(frozen=True, kw_only=True)
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


class Linear(nn.Module):
    """A weight, applied as ``x @ w.T`` by the kernels of the pass."""

    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(w.clone(), requires_grad=False)

    def forward(self, x: torch.Tensor, kern: Kernels) -> torch.Tensor:
        return kern.linear(x, self.weight)


class RMSNorm(nn.Module):
    def __init__(self, w: torch.Tensor) -> None:
        super().__init__()
        self.weight = nn.Parameter(w.clone(), requires_grad=False)

    def forward(self, x: torch.Tensor, kern: Kernels) -> torch.Tensor:
        return kern.rmsnorm(x, self.weight, EPS)


class Attention(nn.Module):
    def __init__(self, wqkv: torch.Tensor, wo: torch.Tensor, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.qkv = Linear(wqkv)
        self.out = Linear(wo)

    def forward(self, h: torch.Tensor, kern: Kernels, rows: Rows, keys: torch.Tensor, values: torch.Tensor
                ) -> torch.Tensor:
        """h [B*T, d]: writes the new rows' keys and values into ``keys`` and ``values`` [B, L, H, D] at
        their positions, and attends over them."""
        b, t = rows.tokens.shape
        qkv = self.qkv(h, kern).reshape(b, t, 3, self.cfg.heads, self.cfg.head_dim)
        # index_put_ rather than ``keys[...] = ``, which drops a leading 1 of the values' shape at batch 1
        # and so would give batch 1 and batch 8 differently shaped ops; the cast acts only under
        # autocast, where the products come out narrower than the cache
        where = (rows.rows_b, rows.rows_p)
        keys.index_put_(where, qkv[rows.rows_b, rows.rows_t, 1].to(keys.dtype))
        values.index_put_(where, qkv[rows.rows_b, rows.rows_t, 2].to(values.dtype))
        att = kern.attention(qkv[:, :, 0], keys, values, rows.pos)
        return self.out(att.reshape(b * t, self.cfg.d_model), kern)


class Block(nn.Module):
    def __init__(self, p: dict[str, torch.Tensor], i: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(p[f"l{i}.ln1"])
        self.attn = Attention(p[f"l{i}.wqkv"], p[f"l{i}.wo"], cfg)
        self.norm2 = RMSNorm(p[f"l{i}.ln2"])
        self.up = Linear(p[f"l{i}.w1"])
        self.down = Linear(p[f"l{i}.w2"])

    def forward(self, x: torch.Tensor, kern: Kernels, rows: Rows, keys: torch.Tensor, values: torch.Tensor
                ) -> torch.Tensor:
        x = x + self.attn(self.norm1(x, kern), kern, rows, keys, values)
        return x + self.down(torch.relu(self.up(self.norm2(x, kern), kern)), kern)


class TinyLMModule(nn.Module):
    """The model as an ``nn.Module`` tree (``layers.<i>.attn.qkv`` ...) with its one forward pass: the
    served model runs it (``TinyLM.forward``), training differentiates it (``sequence_logits``) and a
    trace follows it op by op (core.traces.models). Every reduction goes through the pass's kernels."""

    def __init__(self, p: dict[str, torch.Tensor], cfg: ModelConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or ModelConfig()
        self.tok_emb = nn.Parameter(p["tok_emb"].clone(), requires_grad=False)
        self.pos_emb = nn.Parameter(p["pos_emb"].clone(), requires_grad=False)
        self.layers = nn.ModuleList(Block(p, i, cfg) for i in range(cfg.layers))
        self.norm_f = RMSNorm(p["ln_f"])
        self.head = Linear(p["head"])

    @staticmethod
    def parameter_names(cfg: ModelConfig) -> dict[str, str]:
        """The module's name of each weight in a parameter dict (``init_params``, the shipped file)."""
        names = {"tok_emb": "tok_emb", "pos_emb": "pos_emb", "ln_f": "norm_f.weight", "head": "head.weight"}
        for i in range(cfg.layers):
            names |= {f"l{i}.ln1": f"layers.{i}.norm1.weight", f"l{i}.wqkv": f"layers.{i}.attn.qkv.weight",
                      f"l{i}.wo": f"layers.{i}.attn.out.weight", f"l{i}.ln2": f"layers.{i}.norm2.weight",
                      f"l{i}.w1": f"layers.{i}.up.weight", f"l{i}.w2": f"layers.{i}.down.weight"}
        return names

    def forward(self, kern: Kernels, step: Step, every_position: bool = False) -> torch.Tensor:
        """The logits, in float32, after each request's last new token [B, V] (``every_position``:
        after each new token, [B, T, V]). Writes the new keys and values into ``step``'s."""
        rows = step.rows
        b, t = rows.tokens.shape
        x = (self.tok_emb[rows.tokens] + self.pos_emb[rows.pos]).reshape(b * t, self.cfg.d_model)
        for block, keys, values in zip(self.layers, step.keys, step.values, strict=True):
            x = block(x, kern, rows, keys, values)
        h = self.norm_f(x if every_position else x[rows.last], kern)
        logits = self.head(h, kern).float()
        return logits.reshape(b, t, -1) if every_position else logits


def sequence_logits(params: dict[str, torch.Tensor], tokens: torch.Tensor, cfg: ModelConfig = ModelConfig()
                    ) -> torch.Tensor:
    """The logits after every position of whole sequences [B, T] from position 0, [B, T, V]: the
    module's forward with torch's ordinary kernels, computed with ``params`` themselves
    (``torch.func.functional_call``), so they are differentiable in them: for training."""
    # a module of its own per call: functional_call swaps a module's tensors while it runs, so a shared
    # one would not be safe across threads (building it copies about a megabyte, small beside a step)
    shape = TinyLMModule({k: v.detach() for k, v in params.items()}, cfg)
    names = TinyLMModule.parameter_names(cfg)
    b, t = tokens.shape
    dtype, device = params["head"].dtype, tokens.device
    rows = Rows.of(tokens.tolist(), [0] * b, device)
    kv = (b, t, cfg.heads, cfg.head_dim)
    step = Step(rows=rows, keys=[torch.zeros(kv, dtype=dtype, device=device) for _ in range(cfg.layers)],
                values=[torch.zeros(kv, dtype=dtype, device=device) for _ in range(cfg.layers)])
    return torch.func.functional_call(shape, {names[k]: v for k, v in params.items()}, (DEFAULT, step),
                                      {"every_position": True})
