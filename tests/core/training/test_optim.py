"""core.training.optim: torch's optimizers, stepped without loading the compiler, with torch's bits."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

from core.training import optim

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_every_opt_out_wrapper_is_resolved():
    assert sorted(optim.RESOLVED) == ["add_param_group", "load_state_dict", "state_dict", "zero_grad"]


@pytest.mark.parametrize("make", [lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9, foreach=False),
                                  lambda ps: torch.optim.Adam(ps, lr=0.1, foreach=False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_step_has_the_bits_of_torchs_own_step(make, dtype):
    g = torch.Generator().manual_seed(0)
    start = torch.randn(64, 64, generator=g, dtype=dtype)
    grads = [torch.randn(64, 64, generator=g, dtype=dtype) for _ in range(5)]
    ours, theirs = start.clone().requires_grad_(True), start.clone().requires_grad_(True)
    opt_ours, opt_theirs = make([ours]), make([theirs])
    for grad in grads:
        ours.grad, theirs.grad = grad.clone(), grad.clone()
        optim.step(opt_ours)
        opt_theirs.step()
        assert torch.equal(ours.detach().view(torch.int8), theirs.detach().view(torch.int8))
        assert ours.requires_grad and torch.is_grad_enabled()  # the step ran under no_grad, and restored it


def test_training_emulation_and_the_fingerprint_leave_the_compiler_unloaded():
    code = ("import core.machines.native, sys; from core.recordings.fingerprint import op_fingerprint; "
            "from core.training.pair import PairedRun; from core.training.mlp import TrainSettings; "
            "from core.training.emulate import emulate_run; "
            "op_fingerprint(); PairedRun(TrainSettings(steps=3, optimizer='adam')).advance(3); "
            "emulate_run(8, 'ring_gloo', 2); "
            "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
