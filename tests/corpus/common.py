"""What the corpus files share: seeded weights, seeded inputs whose row 0 does not depend on the batch."""

from __future__ import annotations

import torch

VOCAB = 128


def seeded(build, seed: int = 0):
    """``build()`` under a fixed torch seed (the weights' random initialisation), in eval mode: no dropout.
    The global generator is restored afterwards, so a test that builds a model changes nothing else."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        return build().eval()
    finally:
        torch.random.set_rng_state(state)


def token_rows(batch: int, tokens: int, vocab: int = VOCAB) -> torch.Tensor:
    """[batch, tokens] token ids; row r is drawn from its own seed, so row 0 is the same for every batch."""
    return torch.stack([torch.randint(0, vocab, (tokens,), generator=torch.Generator().manual_seed(100 + r))
                        for r in range(batch)])


def image_rows(batch: int, size: int, channels: int = 3) -> torch.Tensor:
    """[batch, channels, size, size] images, each from its own seed (row 0 is the same for every batch)."""
    return torch.stack([torch.randn(channels, size, size, generator=torch.Generator().manual_seed(200 + r))
                        for r in range(batch)])
