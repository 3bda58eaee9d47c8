"""core.training.divergence: the pair's snapshot and labels, settings changed from a preset, the seed verdict."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pandas as pd
import pytest

from core.training.differences import STAND_IN
from core.training.divergence import (
    DEFAULT_SEEDS,
    DEFAULT_SPEED,
    SEED_RULE,
    SPEEDS,
    FirstDifferences,
    PairSnapshot,
    changed_settings,
    check_speed,
    first_differences,
    frames_for,
    seed_verdict,
    snapshot,
)
from core.training.mlp import TrainSettings
from core.training.pair import PairedRun, StepRecord
from core.training.seeds import APART, SeedStudy, first_apart, summarize


def test_changed_settings_names_what_differs_in_field_order():
    base = TrainSettings()
    assert changed_settings(base, base) == ()
    assert changed_settings(replace(base, seed=3, dtype="float64"), base) == ("dtype", "seed")


def test_snapshot_of_a_fresh_and_a_stepped_pair():
    s = TrainSettings(steps=20)
    run = PairedRun(s)
    empty = snapshot(run, s, None)
    assert empty.records == () and empty.last is None and empty.summary is None and empty.finite
    run.request(5)
    run.advance_requested(5)
    snap = snapshot(run, s, 8)
    assert len(snap.records) == 5 and snap.last.step == 5
    assert snap.summary == summarize(list(snap.records))
    gx, gy, pa, pb = snap.grid
    assert len(gx) == len(gy) == len(pa) == len(pb) == 64
    assert snap.b_device_name == run.b_device_name


def test_loss_formats_and_where_b_ran():
    def snap(**kw) -> PairSnapshot:
        return PairSnapshot(settings=replace(TrainSettings(), **kw), records=(), grid=None, b_device_name="CPU")

    assert (snap().loss_a_dtype, snap().loss_b_dtype) == ("float32", "float32")
    assert (snap(dtype="float64").loss_a_dtype, snap(dtype="float64").loss_b_dtype) == ("float64", "float64")
    assert snap(source="float64").loss_b_dtype == "float64" and snap(source="float64").loss_a_dtype == "float32"
    assert snap(source="device").b_kind == "device"
    assert snap(source=next(iter(STAND_IN))).b_kind == "stand-in"
    assert snap(source="none").b_kind == "cpu"


def test_an_overflowing_pair_is_not_finite():
    s = TrainSettings(lr=10.0, steps=60)
    run = PairedRun(s)
    run.request(60)
    run.advance_requested(60)
    snap = snapshot(run, s, None)
    last = snap.last
    assert snap.finite == (math.isfinite(last.loss_a) and math.isfinite(last.loss_b))


def _record(step: int, loss_bits: tuple[int, int], differing_bits: int) -> StepRecord:
    return StepRecord(
        step=step,
        loss_a=1.0,
        loss_b=1.0,
        loss_a_bits=loss_bits[0],
        loss_b_bits=loss_bits[1],
        abs_diff=0.0,
        rel_diff=0.0,
        param_distance=0.0,
        differing_bits=differing_bits,
        total_bits=100,
        acc_a=0.5,
        acc_b=0.5,
    )


def test_first_differences_names_loss_and_weights_apart():
    """The label "first step that differs" said 1 while both losses were bit-identical (it meant the weights)."""
    recs = [_record(1, (7, 7), 3), _record(2, (7, 7), 5), _record(3, (7, 8), 9)]
    assert first_differences(recs[:1]) == FirstDifferences(loss=None, weights=1)
    assert first_differences(recs) == FirstDifferences(loss=3, weights=1)
    assert first_differences([]) == FirstDifferences(None, None)
    assert first_differences([_record(1, (1, 2), 0)]) == FirstDifferences(loss=1, weights=None)
    # the summary's single first difference is the earlier of the two
    assert summarize(recs).first_difference == 1


def test_first_differences_notes_say_what_the_metrics_say():
    assert FirstDifferences(None, None).note == "So far A and B are bit-identical: losses and weights."
    assert FirstDifferences(None, 1).note == "Losses bit-identical so far; the weights differ since step 1."
    assert FirstDifferences(4, None).note == "The losses differ since step 4; the weights are bit-identical so far."
    assert FirstDifferences(6, 1).note == "The weights differ since step 1, the losses since step 6."


def test_one_step_of_the_default_pair_changes_weight_bits_and_the_snapshot_says_which():
    s = TrainSettings(steps=3)
    run = PairedRun(s)
    run.request(1)
    run.advance_requested(1)
    snap = snapshot(run, s, None)
    last = snap.last
    firsts = snap.firsts
    # whatever this CPU gives, the labels follow the bits of the record
    assert firsts.weights == (1 if last.differing_bits else None)
    assert firsts.loss == (1 if last.loss_a_bits != last.loss_b_bits else None)
    assert snap.summary.first_difference == min([x for x in (firsts.loss, firsts.weights) if x is not None],
                                                default=None)


@pytest.mark.parametrize("speed", SPEEDS)
def test_frames_for_each_speed_covers_the_run(speed):
    for steps in (1, 5, 499, 500, 501, 5000):
        frames = frames_for(steps, speed)
        assert (frames - 1) * speed < steps <= frames * speed
    assert frames_for(0, speed) == 0


def test_only_offered_speeds_are_accepted():
    assert DEFAULT_SPEED in SPEEDS and tuple(sorted(SPEEDS)) == SPEEDS and SPEEDS[0] == 1
    assert check_speed(DEFAULT_SPEED) == DEFAULT_SPEED
    for bad in (0, -1, 3, 10**9):
        with pytest.raises(ValueError, match="steps per frame"):
            check_speed(bad)
        with pytest.raises(ValueError):
            frames_for(500, bad)


def test_seed_verdict_matches_the_table_the_page_shows():
    study = SeedStudy(
        seeds=(0, 1, 2),
        final_loss_a=(0.5, 0.7, 0.6),
        final_loss_b=(0.52, 0.69, 0.9),
        final_acc_a=(0.9,) * 3,
        final_acc_b=(0.8,) * 3,
    )
    v = seed_verdict(study)
    table = pd.DataFrame({"side": ["A"] * 3 + ["B"] * 3, "final loss": study.final_loss_a + study.final_loss_b})
    agg = table.groupby("side")["final loss"].agg(["mean", "std"])
    assert v.gap == pytest.approx(abs(agg.loc["A", "mean"] - agg.loc["B", "mean"]))
    assert v.spread == pytest.approx(max(agg["std"]))
    assert v.spread == max(statistics.stdev(study.final_loss_a), statistics.stdev(study.final_loss_b))
    assert v.inside == (v.gap <= v.spread)
    far = seed_verdict(
        SeedStudy(
            seeds=(0, 1),
            final_loss_a=(0.5, 0.51),
            final_loss_b=(0.9, 0.91),
            final_acc_a=(1.0,) * 2,
            final_acc_b=(1.0,) * 2,
        )
    )
    assert not far.inside


def test_seed_verdict_applies_one_rule_to_loss_and_accuracy():
    # a case a review found: a gap of means larger than one side's spread but not the other's
    study = SeedStudy(
        seeds=(0, 1, 2, 3),
        final_loss_a=(1.0, 1.2, 1.1, 1.3),
        final_loss_b=(1.05, 1.0, 1.4, 1.2),
        final_acc_a=(0.9, 0.8, 0.85, 0.95),
        final_acc_b=(0.9, 0.9, 0.9, 0.9),
    )
    v = seed_verdict(study)
    assert v.seeds == 4
    assert v.gap == pytest.approx(abs(statistics.mean(study.final_loss_a) - statistics.mean(study.final_loss_b)))
    assert v.spread == max(statistics.stdev(study.final_loss_a), statistics.stdev(study.final_loss_b))
    assert v.acc_gap == pytest.approx(abs(statistics.mean(study.final_acc_a) - statistics.mean(study.final_acc_b)))
    assert v.acc_spread == max(statistics.stdev(study.final_acc_a), statistics.stdev(study.final_acc_b))
    assert v.inside == (v.gap <= v.spread) and v.acc_inside == (v.acc_gap <= v.acc_spread)
    assert ("inside" in v.words()) == v.inside
    assert "sample standard deviation" in SEED_RULE and DEFAULT_SEEDS >= 2


def test_seed_verdict_needs_two_seeds():
    with pytest.raises(ValueError, match="at least 2"):
        seed_verdict(
            SeedStudy(seeds=(0,), final_loss_a=(1.0,), final_loss_b=(1.0,), final_acc_a=(1.0,), final_acc_b=(1.0,))
        )


def test_threads_note_says_why_one_thread_and_all_can_agree():
    """The one-thread preset showed no difference without saying why."""
    from core.kernels.torch_cpu_model import GRAIN_SIZE
    from core.training.divergence import threads_note

    s = TrainSettings(source="threads")
    note = threads_note(s, 2)
    assert note.threads == 2 and note.largest == s.batch * s.hidden < GRAIN_SIZE
    assert ("gave the same bits" in note.text()) == note.products_agree
    assert "by construction" in threads_note(s, 1).text()
    big = threads_note(replace(s, batch=600, hidden=128), 2)  # 76,800 elements: above the grain size
    assert big.largest >= GRAIN_SIZE and "at or above torch's grain size" in big.text()
    assert "may part" in big.text()


def test_first_apart_is_the_first_step_above_one_percent():
    assert APART == 0.01
    assert first_apart([0.0, 0.01, 0.0100001, 0.5]) == 3  # strictly above 1%, steps counted from 1
    assert first_apart([0.0, 0.02], [10, 20]) == 20
    assert first_apart([0.0, math.nan, 0.001]) is None
    assert first_apart([math.inf]) == 1  # one run overflowed: as far apart as runs can be
    with pytest.raises(ValueError):
        first_apart([0.0, 0.0], [1])  # steps and gaps must pair up
