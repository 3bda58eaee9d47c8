"""What the Training divergence page claims beyond the pair's own records: the network's name, each
difference in plain words, what float64 buys (postponement), an input whose class flips at once
(boundary_flip), what a seed fixes (seed_streams) and what a seed verdict supports (outcome_words)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from core.arith.formats import format_of
from core.arith.ulps import in_ulps
from core.training.differences import DIFFERENCES, PLAIN
from core.training.divergence import (
    HEAD_START_BITS,
    PRECISION_BITS,
    SeedVerdict,
    boundary_flip,
    postponement,
    seed_streams,
)
from core.training.mlp import FEATURES, PRESETS, TrainSettings, init_params, network_name
from core.training.pair import PairedRun
from core.training.seeds import summarize


def test_the_network_is_named_from_the_sizes_it_is_built_with():
    s = TrainSettings()
    p = init_params(s.hidden, s.classes, s.seed)
    assert network_name(s) == f"{p['w1'].shape[1]}-{p['w2'].shape[1]}-{p['w2'].shape[0]}-{p['w3'].shape[0]} tanh MLP"
    assert network_name(s) == "2-64-64-3 tanh MLP" and PairedRun(replace(s, steps=1)).x64.shape[1] == FEATURES
    assert network_name(replace(s, hidden=32, classes=4)) == "2-32-32-4 tanh MLP"


def test_every_difference_has_a_plain_sentence_and_the_threads_one_reads_as_english():
    assert set(PLAIN) == set(DIFFERENCES) and all(PLAIN.values())
    assert PLAIN["threads"] == "Run B uses 1 CPU thread, run A all of them"
    assert all(not s.endswith(".") and s[0].isupper() for s in PLAIN.values())


# --------------------------------------------------------------------------- float64 postpones

def doubling(steps: int, d: float, start: float, cap: float) -> list[float]:
    """A gap that doubles every ``d`` steps from ``start`` at step 1 until it reaches ``cap``."""
    return [min(cap, start * 2 ** ((t - 1) / d)) for t in range(1, steps + 1)]


def test_head_start_is_the_difference_of_significant_bits():
    assert HEAD_START_BITS == PRECISION_BITS["float64"] - PRECISION_BITS["float32"] == 29
    assert (format_of(torch.float64).precision - format_of(torch.float32).precision) == HEAD_START_BITS


def test_postponement_of_an_exact_doubling_predicts_29_doublings_later():
    """A gap doubling exactly every 8 steps, float64 starting 2^29 lower: the fit finds 8 and the start 2^29."""
    d32 = doubling(600, 8.0, 2.0**-20, 1.0)
    d64 = doubling(600, 8.0, 2.0**-49, 1.0)
    plan = postponement(600, d32, 150, d64, 382)
    assert plan.doubling == pytest.approx(8.0, rel=1e-9)
    assert plan.start_step == 1 and plan.start_log2 == pytest.approx(29.0, abs=1e-12)
    assert plan.bought == pytest.approx(232.0, rel=1e-9) and plan.predicted == 150 + 232
    words = " ".join(plan.words("X"))
    assert "29 × 8.0 ≈ 232 steps" in words and "near step 382" in words
    assert "232 steps later than the float32 pair (predicted: about 232)" in words and "rough guide" not in words
    assert "did not prevent it" in words


def test_postponement_says_when_float64_outlasts_the_growth_and_when_the_run_is_too_short():
    d32 = doubling(500, 10.0, 2.0**-20, 1.0)
    stalled = doubling(500, 10.0, 2.0**-49, 2.0**-33)  # stops growing at 2^-33, far below 1%
    plan = postponement(500, d32, 135, stalled, None)
    assert plan.predicted == 135 + 290 and plan.growth64_end is not None and plan.growth64_end < plan.predicted
    assert "then stopped growing" in plan.words("X")[-1] and "though the prediction was step 425" in plan.words("X")[-1]
    short = postponement(300, d32[:300], 135, stalled[:300], None)
    assert "as predicted: the parting lies beyond the end of this run" in short.words("X")[-1]
    assert "no parting for float64 to postpone" in postponement(300, d32[:300], None, stalled[:300], None).words("X")[0]


def test_postponement_gives_no_head_start_where_the_difference_is_not_a_float32_rounding():
    d = doubling(200, 6.0, 1e-3, 5.0)
    plan = postponement(200, d, 21, d, 21)
    assert plan.start_log2 == 0.0
    (only,) = plan.words("Run B computes its forward pass in bfloat16 (autocast)")
    assert "gives it no head start" in only and "first 1% apart at step 21" in only and "prediction" not in only


def test_postponement_on_the_default_pair_measures_a_head_start_of_about_29_doublings():
    s = TrainSettings(steps=200)
    r32, r64 = PairedRun(s).run(200), PairedRun(replace(s, dtype="float64")).run(200)
    plan = postponement(200, [r.param_distance for r in r32], summarize(r32).first_rel_1pct,
                        [r.param_distance for r in r64], summarize(r64).first_rel_1pct)
    assert plan.start_step == 1 and abs(plan.start_log2 - HEAD_START_BITS) < 2  # 2^28.9 on the CPUs measured
    assert plan.doubling == pytest.approx(summarize(r32).doubling_steps)


# ------------------------------------------------------------------------------- a jump at once

@pytest.mark.parametrize("name", ["Hidden units reordered (SGD, lr 0.5)", "Butterfly: one weight moved by one ULP"])
def test_an_argmax_flips_a_whole_class_right_after_the_weights_first_differ(name):
    """The claim the page shows: at the first step whose weights differ (no growth yet) an input on the decision
    boundary gets two classes, from logits a few ULPs apart. Checked again here from the pair itself."""
    s = PRESETS[name].settings
    flip = boundary_flip(s)
    assert flip.differs, flip
    if flip.point is None:  # whether a searched boundary point flips rests on this CPU's bits; the page says so
        pytest.skip("no searched input on the boundary flips with this CPU's bits")
    assert flip.class_a != flip.class_b
    assert flip.relative_distance < 1e-6 and flip.rel_loss_gap < 1e-6  # nothing has grown yet
    assert 0 < flip.logit_ulps <= 64
    run = PairedRun(s)
    run.advance(flip.step)
    la, lb = run.logits(np.array([flip.point]))
    assert (int(la[0].argmax()), int(lb[0].argmax())) == (flip.class_a, flip.class_b)
    a, b = la[0].double().numpy(), lb[0].double().numpy()
    assert float(np.max(in_ulps(np.abs(a - b), a, format_of(la.dtype)))) == flip.logit_ulps
    assert boundary_flip(s) == flip  # deterministic


def test_no_input_flips_where_a_and_b_are_the_same_computation():
    flip = boundary_flip(PRESETS["Control: nothing differs"].settings, max_steps=5)
    assert not flip.differs and flip.point is None and flip.step == 5


# --------------------------------------------------------------------------------- random streams

def test_a_seed_fixes_the_cpu_stream_and_a_copy_keeps_every_bit():
    streams = seed_streams(TrainSettings(seed=7))
    assert streams.parameters == sum(p.numel() for p in init_params(64, 3, 7).values())
    assert streams.redrawn_identical and streams.other_seed_differs and streams.widened_identical
    assert streams.moved and all(same for _, same in streams.moved)
    assert len(streams.device_stream_differs) == sum(1 for _ in range(torch.cuda.device_count()))
    assert all(other for _, other in streams.device_stream_differs)  # Philox on CUDA, Mersenne Twister on the CPU


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_cuda_generator_draws_other_numbers_than_the_cpu_one_with_the_same_seed():
    cpu = torch.rand(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    gpu = torch.rand(1000, generator=torch.Generator(device="cuda").manual_seed(0), dtype=torch.float64, device="cuda")
    assert not torch.equal(cpu, gpu.cpu())
    assert torch.equal(cpu.to("cuda").cpu(), cpu)  # moving keeps the bits


# --------------------------------------------------------------------------------- seed verdict

def test_the_outcome_sentence_follows_the_verdict():
    inside = SeedVerdict(gap=0.01, spread=0.02, acc_gap=0.001, acc_spread=0.01, seeds=6)
    assert "does not measurably depend on the side for the final loss, nor for the accuracy" in inside.outcome_words(6)
    loss_only = replace(inside, acc_gap=0.05)
    assert "for the accuracy it does (gap 0.05 above the spread 0.01)" in loss_only.outcome_words(6)
    systematic = replace(inside, gap=0.5)
    words = systematic.outcome_words(6)
    assert "the side matters" in words and "does not" not in words and not math.isnan(systematic.gap)


def test_the_small_steps_preset_stays_together_where_the_default_parts():
    """The page points to this preset as a reordered pair that a smaller learning rate keeps together. Whether a
    rounding-sized start reaches 1% is set by the training's growth rate (the learning rate here), not by which
    bits one CPU rounds to: every CPU starts the pair rounding-apart, so the outcome does not rest on this
    machine's bits (the page still says "press Play to see whether it does here")."""
    small, default = PRESETS["Small steps: hidden units reordered (SGD, lr 0.1)"].settings, TrainSettings()
    assert replace(small, lr=default.lr) == default
    assert summarize(PairedRun(small).run(small.steps)).first_rel_1pct is None
    assert summarize(PairedRun(default).run(default.steps)).first_rel_1pct is not None
