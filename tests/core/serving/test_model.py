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
