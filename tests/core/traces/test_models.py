"""The bundled models a trace follows compute what the app's own models compute."""

from __future__ import annotations

import pytest
import torch

from core.serving.kernels import KERNELS
from core.serving.model import ModelConfig, TinyLM, encode, load_params, sequence_logits
from core.traces.models import RunSettings, build, lm_prompts
from core.training.mlp import MLPModule, TrainSettings, forward, init_params, spirals


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_traced_mlp_gives_the_training_mlps_bits(dtype):
    cfg = TrainSettings()
    p = {k: v.to(dtype) for k, v in init_params(cfg.hidden, cfg.classes, cfg.seed).items()}
    x = torch.from_numpy(spirals(cfg.n_points, cfg.classes, cfg.seed)[0][:128]).to(dtype)
    with torch.no_grad():
        assert torch.equal(MLPModule(p).to(dtype)(x), forward(p, x))


def test_the_traced_decode_step_is_the_served_models_next_token():
    """The trace's batch of last characters after prefilled prompts: the module form's logits are the
    whole-sequence function's at the last position and the served model's next-token logits, to rounding
    (a decode step reads cached keys; the served model has kernels of its own)."""
    _, _, step = build(RunSettings(model="tiny-lm", batch=3))
    logits = step()[:, -1]
    prompts = [encode(p) for p in lm_prompts(3)]
    whole = sequence_logits(load_params(), torch.tensor(prompts))[:, -1]
    assert torch.allclose(logits, whole, rtol=1e-5, atol=1e-5)
    one = build(RunSettings(model="tiny-lm", batch=1))[2]()[:, -1]
    served = TinyLM(load_params(), ModelConfig())
    cache = served.new_cache()
    served.forward(KERNELS["default"], [prompts[0][:-1]], [cache])
    nxt = served.forward(KERNELS["default"], [[prompts[0][-1]]], [cache])[0]
    assert torch.allclose(one[0], nxt, rtol=1e-4, atol=1e-4)
    assert int(torch.argmax(one[0])) == int(torch.argmax(nxt))
