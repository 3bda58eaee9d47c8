"""core.training.pair: the paired run isolates one source of difference and measures the drift honestly.

The default-settings divergence tests share one 300-step run per source (module fixture);
everything else uses short runs, so the whole file takes a few seconds on two CPU cores.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core.machines.devices import available_devices
from core.machines.globalstate import PROCESS_THREADS, GlobalState, torch_threads
from core.recordings.fingerprint import _compute as fingerprint_ops
from core.training.differences import SOURCES, STAND_IN
from core.training.mlp import (
    MAX_HIDDEN,
    MAX_STEPS,
    PARAM_NAMES,
    TrainSettings,
    bare_training_loop,
    batch_schedule,
    forward,
    init_params,
    spirals,
)
from core.training.pair import PairedRun, StepRecord, _permute, _unpermute
from core.training.pair import validate as pair_validate
from core.training.seeds import seed_study, summarize

CPU_SOURCES = tuple(s for s in SOURCES if s != "device")
NO_DIFFERENCE = ("none", "threads")
DIVERGING = tuple(s for s in CPU_SOURCES if s not in NO_DIFFERENCE)

# Invariants of the dynamics, not of one machine's bits: with the default TrainSettings() every diverging
# source already differs at step 1, and a perturbation of rounding size (about 1e-7 relative) needs many
# doublings to reach a 1% loss gap, so the first step with |loss A - loss B| / |loss A| > 1% lies well
# inside these windows on any CPU (two x86-64 CPUs with the same wheel were seen at different steps
# inside them). A broken stand-in (no drift, or instant drift) falls outside.
REL_1PCT_WINDOW = {src: (50, 250) for src in ("permute_hidden", "permute_batch", "permute_features", "float64",
                                               "nudge")} | {"bfloat16": (1, 100)}
FIRST_DIFFERENCE = 1  # a reordering or a nudge changes some bit of the very first update
DIVERGENCE_STEPS = 300  # past every window's end

DEFAULT = TrainSettings()
N_PARAMS = sum(t.numel() for t in init_params(DEFAULT.hidden, DEFAULT.classes, DEFAULT.seed).values())


def _paired(steps: int, **kw) -> tuple[PairedRun, list[StepRecord]]:
    run = PairedRun(TrainSettings(steps=steps, **kw))
    return run, run.run(steps)


def _bit_view(t: torch.Tensor) -> np.ndarray:
    a = t.detach().cpu().contiguous().numpy()
    return a.view({4: np.uint32, 8: np.uint64}[a.itemsize])


def _decode(bits: int, width: int) -> float:
    kind = {32: (np.uint32, np.float32), 64: (np.uint64, np.float64)}[width]
    return float(np.array([bits], dtype=kind[0]).view(kind[1])[0])


def _b_width(source: str, dtype: str) -> int:
    return 64 if "float64" in (source, dtype) else 32


@pytest.fixture(scope="module")
def default_runs() -> dict[str, tuple[PairedRun, list[StepRecord]]]:
    """Every CPU source with the default settings, DIVERGENCE_STEPS steps each (about 0.3 s apiece)."""
    return {src: _paired(DIVERGENCE_STEPS, source=src) for src in CPU_SOURCES}


# ------------------------------------------------------------------------- the control


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_control_is_bit_identical_at_every_step(dtype, optimizer):
    run, recs = _paired(60, source="none", dtype=dtype, optimizer=optimizer)
    for r in recs:
        assert r.loss_a_bits == r.loss_b_bits and r.loss_a == r.loss_b
        assert r.abs_diff == 0 and r.rel_diff == 0
        assert r.differing_bits == 0 and r.param_distance == 0
        assert r.acc_a == r.acc_b
    assert recs[-1].loss_a != recs[0].loss_a  # it did train
    pb = run.b_params_in_a_layout()
    for k in PARAM_NAMES:
        assert np.array_equal(_bit_view(run.a.params[k]), _bit_view(pb[k]))
    assert summarize(recs) == summarize([])  # all None
    assert summarize(recs).first_difference is None


# ------------------------------------------------------- divergence with the default settings


@pytest.mark.parametrize("source", DIVERGING)
def test_every_other_source_differs_from_the_first_steps(default_runs, source):
    _, recs = default_runs[source]
    s = summarize(recs)
    assert s.first_difference is not None
    assert s.first_difference <= FIRST_DIFFERENCE + 2
    assert recs[-1].param_distance > 1e-3  # grown from rounding level to a macroscopic gap
    assert recs[-1].differing_bits > 0


@pytest.mark.parametrize("source", DIVERGING)
def test_one_percent_loss_gap_step_lies_in_its_window(default_runs, source):
    _, recs = default_runs[source]
    lo, hi = REL_1PCT_WINDOW[source]
    step = summarize(recs).first_rel_1pct
    assert step is not None, f"{source}: the loss gap never exceeded 1% in {DIVERGENCE_STEPS} steps"
    assert lo <= step <= hi, f"{source}: 1% at step {step}, outside the window {REL_1PCT_WINDOW[source]}"


@pytest.mark.parametrize("source", DIVERGING)
def test_growth_fit_is_exponential_and_starts_at_the_first_difference(default_runs, source):
    _, recs = default_runs[source]
    s = summarize(recs)
    assert s.growth_per_step is not None and s.growth_per_step > 0
    assert s.doubling_steps == pytest.approx(math.log(2) / s.growth_per_step)
    assert 1 < s.doubling_steps < 50  # measured 7 (bfloat16) to 10 (nudge)
    lo, hi = s.fit_range
    assert lo == s.first_difference and lo < hi <= DIVERGENCE_STEPS


@pytest.mark.parametrize("source", NO_DIFFERENCE)
def test_control_and_threads_never_differ(default_runs, source):
    # "threads": A runs with every intra-op thread, B with one.  The thread count could only change
    # a result if torch split a reduction across threads, and this model's matmuls (at most 128 x 64
    # by 64 x 64) and reductions are far below the sizes at which torch's CPU kernels parallelize, so
    # both runs execute the very same instruction sequence.  (On a big model the thread count does
    # change reduction orders; here it is an honest "no difference" result.)
    run, recs = default_runs[source]
    identical = summarize(recs).first_difference is None and all(
        r.loss_a_bits == r.loss_b_bits and r.differing_bits == 0 and r.param_distance == 0 for r in recs)
    if source == "none":
        assert identical
    else:
        assert run.b.threads == 1 and run.a.threads == PROCESS_THREADS
        # On a machine whose BLAS does split these small products across threads the pair may differ;
        # then one of the step's single operations must give other bits with one thread (checked live).
        if not identical:
            with torch_threads(1):
                one = fingerprint_ops()
            with torch_threads(PROCESS_THREADS):
                every = fingerprint_ops()
            assert PROCESS_THREADS > 1 and one != every


def test_run_a_is_the_same_in_every_pair(default_runs):
    """Only B is changed by the source: A's loss sequence is bit-identical across all CPU sources."""
    reference = [r.loss_a_bits for r in default_runs["none"][1]]
    for source, (_, recs) in default_runs.items():
        assert [r.loss_a_bits for r in recs] == reference, source


# ------------------------------------------------------------------ the float64 mitigation


def test_float64_delays_divergence_by_many_orders_of_magnitude(default_runs):
    _, f32 = default_runs["permute_hidden"]
    _, f64 = _paired(DIVERGENCE_STEPS, source="permute_hidden", dtype="float64")
    s32, s64 = summarize(f32), summarize(f64)
    assert s64.first_difference is not None  # float64 rounds too; the gap is only far smaller
    assert s32.first_rel_1pct is not None
    assert s64.first_rel_1pct is None or s64.first_rel_1pct > s32.first_rel_1pct
    # measured after 300 steps: ~8e-10 (float64) vs ~0.54 (float32)
    assert f64[-1].param_distance < 1e-6 * f32[-1].param_distance
    assert f64[-1].total_bits == 64 * N_PARAMS


# ------------------------------------------------------------ the stand-ins are faithful


@pytest.mark.parametrize("source", sorted(STAND_IN))
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_permutations_map_back_exactly_when_nothing_is_learned(source, optimizer):
    """With lr = 0 the parameters never move, so B mapped back must equal A bit for bit at every step."""
    run = PairedRun(TrainSettings(source=source, optimizer=optimizer, lr=0.0, steps=25))
    initial = {k: _bit_view(v).copy() for k, v in run.a.params.items()}
    for rec in run:
        pb = run.b_params_in_a_layout()
        for k in PARAM_NAMES:
            assert np.array_equal(_bit_view(pb[k]), _bit_view(run.a.params[k])), (rec.step, k)
            assert np.array_equal(_bit_view(run.a.params[k]), initial[k])
        assert rec.differing_bits == 0 and rec.param_distance == 0
        # the losses may differ, but only by rounding in the permuted reductions
        assert rec.rel_diff < 1e-5
    # the stand-in really is reordered (the test is not vacuous)
    if source == "permute_batch":
        assert sorted(run.b.batch_perm) == list(range(run.settings.batch))
        assert not np.array_equal(run.b.batch_perm, np.arange(run.settings.batch))
    else:
        assert any(not torch.equal(run.a.params[k], run.b.params[k]) for k in PARAM_NAMES)


@pytest.mark.parametrize("source", [s for s in CPU_SOURCES if s != "nudge"])
def test_both_runs_start_from_the_same_weights_and_data(source):
    run = PairedRun(TrainSettings(source=source, steps=1))
    pb = run.b_params_in_a_layout()
    for k in PARAM_NAMES:
        assert torch.equal(run.a.params[k].detach().double(), pb[k].double()), k
    xb = run.b.x.double()
    if source == "permute_features":
        xb = xb[:, [1, 0]]
    assert torch.equal(run.a.x.double(), xb)
    assert torch.equal(run.a.y, run.b.y)


def test_nudge_moves_exactly_one_weight_by_one_ulp():
    run = PairedRun(TrainSettings(source="nudge", steps=1))
    for k in PARAM_NAMES:
        a, b = _bit_view(run.a.params[k]).astype(np.int64), _bit_view(run.b.params[k]).astype(np.int64)
        if k == "w2":
            assert np.flatnonzero(a.ravel() != b.ravel()).tolist() == [0]
            assert abs(int(a.ravel()[0]) - int(b.ravel()[0])) == 1
        else:
            assert np.array_equal(a, b)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), hidden=st.integers(2, 16), classes=st.integers(2, 8),
       which=st.sampled_from(["h1", "h2", "f", "h1h2", "all"]))
def test_permute_and_unpermute_are_inverse(seed, hidden, classes, which):
    rng = np.random.default_rng(seed)
    p = init_params(hidden, classes, seed)
    h1 = rng.permutation(hidden) if which in ("h1", "h1h2", "all") else None
    h2 = rng.permutation(hidden) if which in ("h2", "h1h2", "all") else None
    f = np.array([1, 0]) if which in ("f", "all") else None
    q = _permute(p, h1, h2, f)
    back = _unpermute(q, h1, h2, f)
    assert set(back) == set(p)
    for k in PARAM_NAMES:
        assert q[k].shape == p[k].shape
        assert np.array_equal(_bit_view(back[k]), _bit_view(p[k])), k
    # and the permuted network is the same function (up to rounding in the reordered sums)
    x = torch.from_numpy(rng.normal(size=(32, 2)))
    xq = x[:, f] if f is not None else x
    torch.testing.assert_close(forward(q, xq), forward(p, x), rtol=1e-12, atol=1e-12)
    # and the inputs are untouched
    assert torch.equal(init_params(hidden, classes, seed)["w2"], p["w2"])


# ------------------------------------------------------------------------------ summarize


def _synthetic(distances, rel=None, first_bits=None) -> list[StepRecord]:
    out = []
    for i, d in enumerate(distances):
        step = i + 1
        r = 0.0 if rel is None else rel(step)
        bits = 0 if first_bits is None or step < first_bits else 7
        out.append(StepRecord(step=step, loss_a=1.0, loss_b=1.0 + r, loss_a_bits=0, loss_b_bits=0, abs_diff=r,
                              rel_diff=r, param_distance=float(d), differing_bits=bits, total_bits=320,
                              acc_a=0.5, acc_b=0.5))
    return out


def test_summarize_recovers_a_known_doubling_time():
    steps = np.arange(1, 401)
    dist = np.minimum(1e-8 * 2.0 ** (steps / 10), 1.0)  # saturates at 1.0 from step 266
    recs = _synthetic(dist, rel=lambda s: 1e-6 * 2.0 ** (s / 10), first_bits=1)
    s = summarize(recs)
    assert s.first_difference == 1
    assert s.first_rel_1pct == 133  # 1e-6 * 2**(s/10) > 0.01  <=>  s > 10 log2(1e4) = 132.9
    assert s.doubling_steps == pytest.approx(10, rel=1e-9)
    assert s.growth_per_step == pytest.approx(math.log(2) / 10, rel=1e-9)
    # growth phase: from the first nonzero distance to the first reaching 0.1 x the largest (1.0):
    # 1e-8 * 2**(s/10) >= 0.1  <=>  s >= 10 log2(1e7) = 232.5
    assert s.fit_range == (1, 233)
    assert summarize(recs, saturation=0.5).fit_range == (1, 256)  # s >= 10 log2(5e7) = 255.8


@settings(max_examples=50, deadline=None)
@given(doubling=st.floats(2, 60), start=st.integers(1, 40), n=st.integers(60, 400))
def test_summarize_fits_any_exponential_after_a_silent_start(doubling, start, n):
    steps = np.arange(1, n + 1)
    dist = np.where(steps >= start, 1e-9 * 2.0 ** ((steps - start) / doubling), 0.0)
    recs = _synthetic(dist, first_bits=start)
    s = summarize(recs)
    assert s.first_difference == start
    assert s.first_rel_1pct is None
    if s.fit_range is not None and s.fit_range[1] - s.fit_range[0] >= 4:
        assert s.fit_range[0] == start
        assert s.doubling_steps == pytest.approx(doubling, rel=1e-6)


def test_summarize_returns_none_fields_without_enough_data():
    empty = summarize([])
    assert (empty.first_difference, empty.first_rel_1pct, empty.growth_per_step, empty.doubling_steps,
            empty.fit_range) == (None,) * 5
    zero = summarize(_synthetic([0.0] * 100))
    assert zero == empty
    few = summarize(_synthetic([0, 0, 1e-8, 1e-7, 1e-6, 1e-5], first_bits=3))  # 4 nonzero points: no fit
    assert few.first_difference == 3
    assert few.growth_per_step is None and few.doubling_steps is None and few.fit_range is None
    shrinking = summarize(_synthetic([2.0 ** -k for k in range(50)], first_bits=1))
    assert shrinking.growth_per_step is None and shrinking.doubling_steps is None  # no growth, no doubling


def test_summarize_first_difference_counts_loss_bits_alone():
    recs = _synthetic([0.0] * 10)
    recs[6] = replace(recs[6], loss_b_bits=1)
    assert summarize(recs).first_difference == 7


# ---------------------------------------------------------------------------- the records


@pytest.mark.parametrize("source", CPU_SOURCES)
def test_record_contents_are_consistent(default_runs, source):
    run, recs = default_runs[source]
    wb = _b_width(source, run.settings.dtype)
    assert [r.step for r in recs] == list(range(1, DIVERGENCE_STEPS + 1))
    for r in recs:
        assert _decode(r.loss_a_bits, 32) == r.loss_a
        assert _decode(r.loss_b_bits, wb) == r.loss_b
        assert r.abs_diff == abs(r.loss_a - r.loss_b)
        assert r.rel_diff == r.abs_diff / abs(r.loss_a)
        assert r.total_bits == 32 * N_PARAMS
        assert 0 <= r.differing_bits <= r.total_bits
        assert r.param_distance >= 0 and math.isfinite(r.param_distance)
        for acc in (r.acc_a, r.acc_b):
            assert 0 <= acc <= 1
            assert (acc * run.settings.batch) == pytest.approx(round(acc * run.settings.batch))
    # the last record's gap, recomputed independently from the final parameters
    pb = run.b_params_in_a_layout()
    dist2, bits = 0.0, 0
    for k in PARAM_NAMES:
        a = run.a.params[k].detach()
        dist2 += float(((a.double() - pb[k].double()) ** 2).sum())
        bits += int(np.bitwise_count(_bit_view(a) ^ _bit_view(pb[k].to(a.dtype))).sum())
    assert recs[-1].param_distance == pytest.approx(math.sqrt(dist2), rel=1e-12, abs=0)
    assert recs[-1].differing_bits == bits


def test_bfloat16_in_float64_keeps_the_loss_in_float64_and_really_uses_bfloat16():
    _, recs = _paired(5, source="bfloat16", dtype="float64")
    for r in recs:
        assert _decode(r.loss_a_bits, 64) == r.loss_a and _decode(r.loss_b_bits, 64) == r.loss_b
        assert r.total_bits == 64 * N_PARAMS
    # bfloat16 has 8 significand bits: a forward pass in it moves the loss by ~1e-4, not ~1e-8
    assert recs[0].rel_diff > 1e-6
    assert summarize(recs).first_difference == 1


def test_stepping_stops_at_the_configured_number_of_steps():
    run = PairedRun(TrainSettings(source="permute_batch", steps=10))
    assert run.done == 0 and not run.finished
    first = run.run(4)
    assert [r.step for r in first] == [1, 2, 3, 4] and run.done == 4
    assert run.step().step == 5
    rest = run.run(100)
    assert [r.step for r in rest] == [6, 7, 8, 9, 10]
    assert run.finished and run.done == 10 and len(run.records) == 10
    assert run.run(5) == []
    with pytest.raises(StopIteration):
        run.step()
    assert list(run) == []
    assert run.records == [*first, run.records[4], *rest]


def test_iterating_yields_exactly_steps_records_and_matches_step_by_step():
    by_iter = list(PairedRun(TrainSettings(source="permute_batch", steps=12)))
    assert [r.step for r in by_iter] == list(range(1, 13))
    other = PairedRun(TrainSettings(source="permute_batch", steps=12))
    by_step = [other.step() for _ in range(12)]
    assert by_iter == by_step == other.records


# ------------------------------------------------------------------------------- validate


@pytest.mark.parametrize("bad", [
    {"source": "cosmic_rays"}, {"source": ""}, {"dtype": "float16"}, {"dtype": "bfloat16"},
    {"optimizer": "rmsprop"}, {"optimizer": "sgd"},
    {"lr": -0.1}, {"lr": math.nan}, {"lr": math.inf}, {"lr": 10.5},
    {"steps": 0}, {"steps": -5}, {"steps": MAX_STEPS + 1},
    {"hidden": 1}, {"hidden": MAX_HIDDEN + 1},
    {"batch": 0}, {"batch": 601}, {"n_points": 100, "batch": 101}, {"n_points": 20_001, "batch": 128},
    {"classes": 1}, {"classes": 9},
    {"seed": -1}, {"seed": 2**63},
])
def test_validate_rejects_bad_settings(bad):
    s = TrainSettings(**bad)
    with pytest.raises(ValueError):
        pair_validate(s)  # the source against its registry, then every other field
    if "source" not in bad:
        with pytest.raises(ValueError):
            s.validate()
    with pytest.raises(ValueError):
        PairedRun(s)


@pytest.mark.parametrize("edge", [
    {"lr": 0.0}, {"lr": 10.0}, {"steps": 1}, {"steps": MAX_STEPS}, {"hidden": 2}, {"hidden": MAX_HIDDEN},
    {"batch": 1}, {"batch": 600}, {"classes": 2}, {"classes": 8}, {"seed": 2**63 - 1},
    {"dtype": "float64"}, {"optimizer": "adam"}, *({"source": s} for s in SOURCES),
])
def test_validate_accepts_the_edges(edge):
    TrainSettings(**edge).validate()


def test_device_source_without_a_gpu_says_so():
    if any(d.kind != "cpu" for d in available_devices()):
        pytest.skip("a GPU is visible here; the no-GPU message cannot be checked")
    with pytest.raises(ValueError, match="No GPU"):
        PairedRun(TrainSettings(source="device", steps=1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_device_source_on_a_gpu_runs_and_maps_back():  # pragma: no cover - only where a GPU exists
    run, recs = _paired(20, source="device")
    assert run.b_device_name != "CPU" and run.b.params["w1"].is_cuda
    assert all(math.isfinite(r.loss_a) and math.isfinite(r.loss_b) for r in recs)
    assert recs[-1].total_bits == 32 * N_PARAMS
    _, _, pa, pb = run.decision_grid(10)
    assert pa.shape == pb.shape == (100,)
    assert all(0 <= a <= 1 for a in run.full_accuracy())


@pytest.mark.parametrize(("n", "classes"), [(600, 3), (600, 7), (10, 3), (2, 3), (601, 8)])
def test_spirals_have_exactly_n_balanced_points(n, classes):
    x, y = spirals(n, classes, seed=3)
    assert x.shape == (n, 2) and y.shape == (n,) and x.dtype == np.float64
    assert set(np.unique(y)) <= set(range(classes))
    counts = np.bincount(y, minlength=classes)
    assert counts.max() - counts.min() <= 1
    assert np.all(np.abs(x) <= 1.0 + 1e-12)


def test_batch_as_large_as_an_uneven_data_set_trains():
    """600 points in 7 classes used to give 595 points, and batch=600 then failed inside numpy."""
    run, recs = _paired(2, classes=7, batch=600)
    assert len(run.y) == 600 and len(recs) == 2


def test_batch_schedule_draws_distinct_indices_per_step():
    sched = batch_schedule(50, 20, 30, seed=4)
    assert sched.shape == (30, 20)
    assert all(len(set(row)) == 20 for row in sched) and sched.min() >= 0 and sched.max() < 50
    assert np.array_equal(sched, batch_schedule(50, 20, 30, seed=4))


# ----------------------------------------------------------------------- no global state


@pytest.mark.parametrize("source", CPU_SOURCES)
def test_a_paired_run_changes_no_process_global_state(source):
    before = GlobalState.capture()
    rng_before = torch.random.get_rng_state().clone()
    run, _ = _paired(5, source=source)
    run.decision_grid(8)
    run.full_accuracy()
    assert GlobalState.capture() == before
    assert torch.equal(torch.random.get_rng_state(), rng_before)


def test_threads_source_runs_b_with_one_thread_and_restores(monkeypatch):
    import core.training.mlp as mlp

    seen: list[tuple[int | None, int]] = []
    real = mlp._one_step

    def spy(run, idx):
        seen.append((run.threads, torch.get_num_threads()))
        return real(run, idx)

    monkeypatch.setattr(mlp, "_one_step", spy)  # train_step (core.training.mlp) looks it up there
    before = torch.get_num_threads()
    PairedRun(TrainSettings(source="threads", steps=3)).run(3)
    assert torch.get_num_threads() == before
    assert seen == [(max(1, before), max(1, before)), (1, 1)] * 3  # A with all threads, then B with one


def test_other_helpers_change_no_process_global_state():
    before = GlobalState.capture()
    bare_training_loop(TrainSettings(steps=5))
    seed_study(TrainSettings(source="threads", steps=3), 2)
    assert GlobalState.capture() == before


def test_same_seed_same_records_different_seed_different_records():
    one = _paired(30, source="permute_batch", seed=5)[1]
    two = _paired(30, source="permute_batch", seed=5)[1]
    other = _paired(30, source="permute_batch", seed=6)[1]
    assert one == two
    assert one[0].loss_a != other[0].loss_a
    assert [r.loss_a for r in one] != [r.loss_a for r in other]


def test_interleaved_pairs_do_not_interfere():
    alone = _paired(15, source="permute_hidden")[1]
    mixed = PairedRun(TrainSettings(source="permute_hidden", steps=15))
    control = PairedRun(TrainSettings(source="none", steps=15))
    for _ in range(15):
        mixed.step()
        control.step()
    assert mixed.records == alone


# ----------------------------------------------------------------------------- seed study


def test_seed_study_collects_k_seeds_per_side():
    s = TrainSettings(steps=60)
    study = seed_study(s, 3)
    assert study.seeds == (0, 1, 2)
    for side in (study.final_loss_a, study.final_loss_b, study.final_acc_a, study.final_acc_b):
        assert len(side) == 3
    assert all(math.isfinite(v) for v in study.final_loss_a + study.final_loss_b)
    assert all(0 <= v <= 1 for v in study.final_acc_a + study.final_acc_b)
    # the first entry is exactly the pair with the given seed
    run, recs = _paired(60)
    assert (study.final_loss_a[0], study.final_loss_b[0]) == (recs[-1].loss_a, recs[-1].loss_b)
    assert (study.final_acc_a[0], study.final_acc_b[0]) == run.full_accuracy()


def test_seed_study_of_the_control_has_identical_sides():
    study = seed_study(TrainSettings(source="none", steps=20, seed=7), 2)
    assert study.seeds == (7, 8)
    assert study.final_loss_a == study.final_loss_b and study.final_acc_a == study.final_acc_b


@pytest.mark.parametrize("source", ["float64", "bfloat16", "permute_features"])
def test_seed_study_works_for_sources_that_change_b(source):
    """B in float64 used to crash full_accuracy (float32 inputs into float64 weights)."""
    study = seed_study(TrainSettings(source=source, steps=10), 1)
    assert all(0 <= v <= 1 for v in study.final_acc_a + study.final_acc_b)


@pytest.mark.parametrize("k", [0, -1, 33])
def test_seed_study_rejects_k_out_of_range(k):
    with pytest.raises(ValueError):
        seed_study(TrainSettings(steps=5), k)


# ------------------------------------------------------------------------ bare training loop


@pytest.mark.parametrize(("dtype", "optimizer"), [("float32", "sgd_momentum"), ("float64", "sgd_momentum"),
                                                  ("float32", "adam")])
def test_bare_loop_matches_run_a_bit_for_bit(dtype, optimizer):
    s = TrainSettings(source="none", dtype=dtype, optimizer=optimizer, steps=80)
    _, recs = _paired(80, source="none", dtype=dtype, optimizer=optimizer)
    bare = bare_training_loop(s)
    assert bare == recs[-1].loss_a
    assert bare_training_loop(replace(s, source="permute_hidden")) == bare  # the source only changes B


# --------------------------------------------------------------------------- decision grid


def test_decision_grid_of_the_control():
    run, _ = _paired(30, source="none")
    gx, gy, pa, pb = run.decision_grid(20)
    assert gx.shape == gy.shape == pa.shape == pb.shape == (400,)
    assert gx.min() < run.x64[:, 0].min() and gx.max() > run.x64[:, 0].max()
    assert gy.min() < run.x64[:, 1].min() and gy.max() > run.x64[:, 1].max()
    assert pa.min() >= 0 and pa.max() < run.settings.classes
    assert np.array_equal(pa, pb)
    assert len(run.decision_grid()[2]) == 80 * 80
    acc_a, acc_b = run.full_accuracy()
    assert acc_a == acc_b and 0 <= acc_a <= 1


@pytest.mark.parametrize("source", DIVERGING)
def test_decision_grid_works_for_every_source(default_runs, source):
    """Float64 B used to raise 'mat1 and mat2 must have the same dtype' here."""
    run, _ = default_runs[source]
    _, _, pa, pb = run.decision_grid(16)
    for p in (pa, pb):
        assert p.shape == (256,) and p.min() >= 0 and p.max() < run.settings.classes
    assert all(0 <= v <= 1 for v in run.full_accuracy())
    # trained on the same data, A and B disagree in weights far more than in their predictions
    assert np.mean(pa == pb) > 0.5


@pytest.mark.parametrize("source", ["none", "permute_hidden", "permute_features"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_differing_bits_counts_a_flipped_sign_bit_exactly(source, dtype):
    """With lr = 0 nothing moves, so B with one weight negated differs from A in exactly one bit."""
    run = PairedRun(TrainSettings(source=source, dtype=dtype, lr=0.0, steps=2))
    with torch.no_grad():
        w = run.b.params["w2"]
        w[3, 5] = -w[3, 5]
        flipped = abs(float(w[3, 5]))
    for rec in run:
        assert rec.differing_bits == 1
        assert rec.param_distance == pytest.approx(2 * flipped, rel=1e-12)
    assert summarize(run.records).first_difference == 1


# -------------------------------------------- one pair, many threads (two script threads advanced one run)
# Streamlit may run a session's script in a new thread while the previous run still computes; both
# reach the same PairedRun. Before the pair had its own lock, this gave "modified by an inplace
# operation" errors, losses that differ from a clean run, and (in the server) heap corruption.

RACE_THREADS = 8


def _bits(records):
    return [(r.step, r.loss_a_bits, r.loss_b_bits, r.differing_bits, r.param_distance) for r in records]


def _race(work, threads: int = RACE_THREADS) -> list[BaseException]:
    import threading

    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def body(i):
        barrier.wait()
        try:
            work(i)
        except BaseException as err:  # collected and asserted on below
            errors.append(err)

    pool = [threading.Thread(target=body, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return errors


def test_many_threads_advancing_one_pair_give_a_clean_run_bit_for_bit():
    steps = RACE_THREADS * 4 * 5
    s = TrainSettings(steps=steps)
    shared = PairedRun(s)

    def work(i):
        for _ in range(4):
            shared.run(5)
            _ = shared.records  # reading (and measuring) while others step

    errors = _race(work)
    assert not errors, errors[:2]
    clean = PairedRun(s)
    clean_records = clean.run(steps)
    assert shared.done == steps and shared.finished
    assert _bits(shared.records) == _bits(clean_records)
    for k in PARAM_NAMES:
        assert torch.equal(shared.a.params[k], clean.a.params[k]) and torch.equal(shared.b.params[k], clean.b.params[k])


def test_requests_from_many_threads_are_each_applied_once_and_bit_for_bit():
    s = TrainSettings(steps=200)
    shared = PairedRun(s)

    def work(i):
        shared.request(3 if i % 2 else 2)
        while shared.advance_requested(4):
            pass

    errors = _race(work)
    assert not errors, errors[:2]
    while shared.advance_requested(50):  # whatever a thread left asked for
        pass
    n = (RACE_THREADS // 2) * 3 + (RACE_THREADS - RACE_THREADS // 2) * 2
    assert shared.done == n and shared.requested == 0
    assert _bits(shared.records) == _bits(PairedRun(s).run(n))


def test_requests_stop_at_the_end_and_cancel_forgets_what_was_not_applied():
    run = PairedRun(TrainSettings(steps=12))
    assert run.request(5) == 5 and run.request(5) == 10 and run.requested == 10
    assert len(run.advance_requested(3)) == 3 and run.requested == 7
    run.cancel_requests()
    assert run.requested == 0 and run.advance_requested(10) == [] and run.done == 3
    run.request_to_end()
    assert run.requested == 9
    while run.advance_requested(4):
        pass
    assert run.finished and run.requested == 0 and run.request(10) == 12


def test_advance_waits_at_most_its_timeout_for_another_thread():
    import threading

    run = PairedRun(TrainSettings(steps=5))
    held, release = threading.Event(), threading.Event()

    def holder():
        with run._lock:
            held.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    held.wait(10)
    try:
        assert run.advance(1, timeout=0.05) is None
    finally:
        release.set()
        t.join()
    assert run.done == 0  # nothing applied (read after the release: ``done`` waits for the lock too)
    assert len(run.advance(1, timeout=5)) == 1


def test_a_step_that_raises_leaves_the_pair_refusing_to_continue(monkeypatch):
    run = PairedRun(TrainSettings(steps=5))
    run.advance(1)
    from core.training import optim

    real = optim.step
    monkeypatch.setattr(optim, "step", lambda opt: (_ for _ in ()).throw(RuntimeError("boom")) if opt is run.b.opt
                        else real(opt))
    with pytest.raises(RuntimeError, match="boom"):
        run.advance(1)
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="cannot continue"):
        run.advance(1)


def test_one_pair_per_session_whatever_threads_ask_for_it():
    from core.crowd.runner import current_run

    state: dict = {}
    s = TrainSettings(steps=5)
    got = []
    errors = _race(lambda i: got.append(current_run(state, "run", s)))
    assert not errors and len({id(r) for r in got}) == 1 and state["run"] is got[0]
    assert current_run(state, "run", s) is got[0]
    other = current_run(state, "run", replace(s, seed=1))
    assert other is not got[0] and state["run"] is other
    fresh = current_run(state, "run", replace(s, seed=1), fresh=True)
    assert fresh is not other and fresh.done == 0


def test_memo_keeps_the_most_recent_entries_only():
    from core.crowd.bytecache import ByteLRU

    memo = ByteLRU(2**20, max_entries=2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # now the most recent
    memo.put("c", 3)
    assert memo.get("b") is None and memo.get("a") == 1 and memo.get("c") == 3 and len(memo) == 2


def test_seed_study_with_a_memo_trains_only_new_seeds_and_reports_progress():
    from core.crowd.bytecache import ByteLRU

    s = TrainSettings(steps=20)
    memo = ByteLRU(2**20, max_entries=8)
    seen = []
    first = seed_study(s, 2, lambda p: seen.append((p.done, p.total)), memo=memo)
    assert seen[-1] == (40, 40) and all(t == 40 for _, t in seen) and len(memo) == 2
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    trained = []
    again = seed_study(s, 3, lambda p: trained.append(p.done), memo=memo)
    assert again.final_loss_a[:2] == first.final_loss_a and len(memo) == 3
    assert seed_study(s, 3) == again  # the memo changes nothing but the work


def test_pair_outcome_matches_the_records_of_a_clean_run():
    from core.crowd.bytecache import ByteLRU
    from core.crowd.runner import pair_outcome

    s = TrainSettings(steps=60)
    recs = PairedRun(s).run(60)
    memo = ByteLRU(2**20, max_entries=2)
    out = pair_outcome(s, memo=memo)
    assert out.steps == tuple(r.step for r in recs if r.abs_diff > 0)
    assert out.abs_diff == tuple(r.abs_diff for r in recs if r.abs_diff > 0)
    assert out.first_rel_1pct == summarize(recs).first_rel_1pct and out.final_distance == recs[-1].param_distance
    assert pair_outcome(s, memo=memo) is out


@pytest.mark.parametrize("source", ["permute_hidden", "float64", "bfloat16", "permute_batch", "threads", "nudge"])
@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_a_pair_copied_from_a_template_trains_bit_for_bit_like_a_new_one(source, optimizer):
    """Each visitor's pair is copied from one never-stepped template of its settings (core.crowd.runner): the
    copies share the data, schedule and step 0's decision grid, never the weights or the optimizer's state."""
    from core.training.differences import DIFFERENCES

    if source not in DIFFERENCES:
        pytest.skip(f"no {source} source here")
    s = TrainSettings(steps=30, source=source, optimizer=optimizer)
    template = PairedRun(s)
    first, second = template.fresh(), template.fresh()
    grid = first.snapshot(40)[1]
    first.run(30)
    assert template.done == 0 and second.done == 0  # stepping a copy moves neither the template nor another copy
    clean = PairedRun(s)
    assert _bits(first.records) == _bits(clean.run(30))
    for k in PARAM_NAMES:
        assert torch.equal(first.a.params[k], clean.a.params[k]) and torch.equal(first.b.params[k], clean.b.params[k])
        assert torch.equal(second.a.params[k], template.a.params[k])
    assert all(np.array_equal(x, y) for x, y in zip(grid, PairedRun(s).decision_grid(40), strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(first.snapshot(40)[1], grid, strict=True))
    second.run(30)
    assert _bits(second.records) == _bits(first.records)
    with pytest.raises(ValueError):
        first.fresh()  # only a pair at step 0 is a template
