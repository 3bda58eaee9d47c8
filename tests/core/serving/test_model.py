"""The shipped weights: recorded, checked and small; the KV-cache forward equals the whole-sequence one."""

from __future__ import annotations

import torch

from core.serving.kernels import KERNELS
from core.serving.model import (
    RECORD,
    WEIGHTS,
    ModelConfig,
    TinyLM,
    load_params,
    load_record,
    parameter_count,
    sequence_logits,
    sha256_of,
)


def test_the_weights_match_their_record():
    record = load_record()
    assert sha256_of(WEIGHTS) == record.sha256
    assert record.command.startswith("python -m scripts.train_tiny_lm")
    assert "grammar" in record.corpus
    params = load_params()
    assert parameter_count(params) == record.parameters and 100_000 <= record.parameters <= 400_000
    assert WEIGHTS.stat().st_size < 4 * 2**20 and RECORD.exists()
    assert all(t.dtype == torch.float32 for t in params.values())


def test_cached_decoding_computes_the_training_function():
    """Prefill plus token-by-token decoding over the KV cache gives the whole-sequence logits (to rounding)."""
    params = load_params()
    cfg = ModelConfig()
    tokens = torch.randint(0, len(cfg.vocab), (1, 40), generator=torch.Generator().manual_seed(0))
    whole = sequence_logits(params, tokens, cfg)[0]
    model = TinyLM(params, cfg)
    for kern in KERNELS.values():
        cache = model.new_cache()
        rows = [model.forward(kern, [tokens[0, :10].tolist()], [cache])[0]]
        rows += [model.forward(kern, [[int(t)]], [cache])[0] for t in tokens[0, 10:]]
        assert torch.allclose(torch.stack(rows), whole[9:], atol=1e-3, rtol=1e-4), kern.key


def test_training_differentiates_the_served_forward():
    """One forward pass: sequence_logits is TinyLMModule's forward with the dict's own tensors (so
    training reaches them), the same bits as the module built from those weights run directly."""
    from core.serving.kernels import DEFAULT
    from core.serving.model import Rows, Step, TinyLMModule, init_params

    cfg = ModelConfig()
    params = {k: v.clone().requires_grad_() for k, v in init_params(cfg, 5).items()}
    tokens = torch.randint(0, len(cfg.vocab), (3, 50), generator=torch.Generator().manual_seed(2))
    logits = sequence_logits(params, tokens, cfg)
    assert logits.shape == (3, 50, len(cfg.vocab))
    kv = (3, 50, cfg.heads, cfg.head_dim)
    step = Step(rows=Rows.of(tokens.tolist(), [0, 0, 0]), keys=[torch.zeros(kv) for _ in range(cfg.layers)],
                values=[torch.zeros(kv) for _ in range(cfg.layers)])
    with torch.no_grad():
        module_logits = TinyLMModule({k: v.detach() for k, v in params.items()}, cfg)(DEFAULT, step, True)
    assert torch.equal(logits.detach(), module_logits)
    assert all(k.abs().sum(dim=(1, 2)).gt(0).all() for k in step.keys)  # every position's keys written
    logits.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in params.values())
    assert set(TinyLMModule.parameter_names(cfg)) == set(params)
    module_names = {n for n, _ in TinyLMModule(params, cfg).named_parameters()}
    assert set(TinyLMModule.parameter_names(cfg).values()) == module_names


def test_a_batch_fills_each_requests_cache_as_it_would_alone():
    """Requests of unequal lengths in one prefill: each cache holds its own positions' keys (to the
    rounding of the batch's other kernels), padding rows write nothing, and the lengths advance."""
    model = TinyLM(load_params(), ModelConfig())
    prompts = [[5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
    caches = [model.new_cache() for _ in prompts]
    together = model.forward(KERNELS["batch_invariant"], prompts, caches)
    for p, c, row in zip(prompts, caches, together, strict=True):
        alone = model.new_cache()
        logits = model.forward(KERNELS["batch_invariant"], [p], [alone])[0]
        assert c.length == alone.length == len(p)
        assert torch.equal(c.k, alone.k) and torch.equal(c.v, alone.v) and torch.equal(row, logits)
