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
    """The trace runs the server's own forward pass: the traced batch of last characters after prefilled
    prompts gives, bit for bit, the logits the served model gives those requests in one decode step,
    and so does the pass recorded under the tracer (its last op's digest)."""
    from core.traces.record import digest
    from core.traces.run import make_trace

    prompts = [encode(p) for p in lm_prompts(3)]
    served = TinyLM(load_params(), ModelConfig())
    caches = [served.new_cache() for _ in prompts]
    for p, c in zip(prompts, caches, strict=True):
        served.forward(KERNELS["default"], [p[:-1]], [c])
    nxt = served.forward(KERNELS["default"], [[p[-1]] for p in prompts], caches)
    root, _, step = build(RunSettings(model="tiny-lm", batch=3))
    assert torch.equal(step(), nxt) and root.__class__.__name__ == "TinyLMModule"
    whole = sequence_logits(load_params(), torch.tensor(prompts))[:, -1]
    assert torch.allclose(nxt, whole, rtol=1e-5, atol=1e-5)  # the same function, in other shapes

    alone = served.new_cache()
    served.forward(KERNELS["default"], [prompts[0][:-1]], [alone])
    one = served.forward(KERNELS["default"], [[prompts[0][-1]]], [alone])
    trace = make_trace(RunSettings(model="tiny-lm"))
    assert trace["ops"][-1]["out_digest"] == digest(one)
    assert trace["ops"][-1]["module"] == "model.head"


def test_a_bundled_model_is_one_registry_entry(monkeypatch, capsys):
    """Adding a model is adding one ``TRACE_MODELS`` entry: validation, the build, the trace's batch and followed
    row, and the command's help all read it."""
    import torch.nn as nn

    from core.traces import models
    from core.traces.run import make_trace
    from scripts import trace as trace_cli

    def pair_of_rows(s: RunSettings):
        layer = nn.Linear(3, 2).to(torch.float64 if s.dtype == "float64" else torch.float32)
        x = torch.ones(s.batch, 3, dtype=layer.weight.dtype)
        return layer, (x,), lambda: layer(x)

    entry = models.Bundled(key="toy", name="the toy layer", description="one linear layer on a batch of ones",
                           build=pair_of_rows, dtypes=("float32", "float64"), follows_row=True)
    monkeypatch.setitem(models.TRACE_MODELS, entry.key, entry)  # the one entry
    with pytest.raises(ValueError, match="the toy layer runs in float32 or float64"):
        RunSettings(model="toy", dtype="bfloat16").validate()
    with pytest.raises(ValueError, match=r"the toy layer already follows request 0"):
        RunSettings(model="toy", follow_row=0).validate()
    with pytest.raises(ValueError, match="--batch is for tiny-lm or toy"):
        RunSettings(model="mlp-step", batch=2).validate()
    trace = make_trace(RunSettings(model="toy", batch=3, dtype="float64"))
    assert trace["settings"]["batch"] == 3 and trace["ops"][-1]["out_shape"] == [1, 2]  # request 0's row
    with pytest.raises(SystemExit):
        trace_cli.main(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "toy, one linear layer on a batch of ones" in shown and "tiny-lm, toy: requests in the batch" in shown
