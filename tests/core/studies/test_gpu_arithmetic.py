"""core.studies.gpu_arithmetic's page-facing helpers: DotLabSettings runs the lab and the curves as run_lab and
error_curves do, and the small questions the GPU arithmetic page asks of a lab (bound violations,
which models applied, batch dependence, the correctly rounded result) are answered from its rows."""

from __future__ import annotations

import dataclasses
import math

from core.kernels.dot import DOT_MODELS, model_name
from core.studies.gpu_arithmetic import (
    BatchDependence,
    DotLabSettings,
    DotSpec,
    applicable_models,
    batch_dependence,
    bound_violations,
    correctly_rounded,
    error_curves,
    make_pair,
    run_lab,
)


def _small() -> tuple[DotLabSettings, object]:
    settings = DotLabSettings(
        spec=DotSpec(kind="normal", k=64, seed=3, storage="float32"),
        accumulate="float32",
        models=("fma", "tiles", "split_k", "tf32"),
        tile=4,
        slices=3,
        tf32_mode="rz",
    )
    return settings, make_pair(settings.spec)


def test_settings_run_the_lab_and_the_curves_with_their_parameters():
    settings, pair = _small()
    lab = settings.run(pair)
    ref = run_lab(pair, "float32", ("fma", "tiles", "split_k", "tf32"), 4, 3, "rz")
    assert [(r.key, r.name, r.metrics and r.metrics.bits) for r in lab.rows] == \
        [(r.key, r.name, r.metrics and r.metrics.bits) for r in ref.rows]
    assert (lab.tile, lab.slices, lab.tf32_mode) == (4, 3, "rz")
    assert settings.curves(pair, live=False) == error_curves(pair, "float32", settings.models, 4, 3, "rz", False)
    assert settings.model_name("split_k") == model_name(DOT_MODELS["split_k"], 4, 3, "rz")
    assert hash(settings) == hash(dataclasses.replace(settings))  # a cache key


def test_default_settings_are_the_pages_defaults():
    d = DotLabSettings()
    assert d.spec == DotSpec() and d.accumulate == "float32" and (d.tile, d.slices, d.tf32_mode) == (8, 4, "rna")
    assert set(d.models) <= set(DOT_MODELS)


def test_correctly_rounded_is_the_exact_row():
    settings, pair = _small()
    lab = settings.run(pair, live=False)
    exact_row = next(r for r in lab.rows if r.key == "correct")
    assert correctly_rounded(lab) == exact_row.metrics.value
    assert exact_row.metrics.ulps == 0 or abs(exact_row.metrics.ulps) <= 0.5


def test_violations_name_only_rows_outside_their_bound():
    settings, pair = _small()
    lab = settings.run(pair, live=False)
    assert bound_violations(lab) == []
    broken = dataclasses.replace(lab.rows[1], metrics=dataclasses.replace(lab.rows[1].metrics, within_bound=False))
    lab2 = dataclasses.replace(lab, rows=(lab.rows[0], broken, *lab.rows[2:]))
    assert bound_violations(lab2) == [broken.name]


def test_applicable_models_keep_the_order_and_skip_refusals():
    # float64 inputs: the tensor-core models (TF32, float16, bfloat16 inputs) do not apply
    settings = DotLabSettings(
        spec=DotSpec(kind="normal", k=16, seed=0, storage="float64"),
        accumulate="float64",
        models=("tf32", "fma", "bf16", "tiles"),
    )
    lab = settings.run(make_pair(settings.spec), live=False)
    refused = {r.key for r in lab.rows if r.metrics is None}
    assert applicable_models(lab) == [m for m in settings.models if m not in refused]
    assert "fma" in applicable_models(lab) and "correct" not in applicable_models(lab)


def test_batch_dependence_compares_the_two_mm_rows():
    settings, pair = _small()
    assert batch_dependence(settings.run(pair, live=False)) is None  # no live rows
    lab = settings.run(pair)
    rows = {r.key: r for r in lab.rows}
    got = batch_dependence(lab)
    one, many = rows["torch_mm1"].metrics, rows["torch_mm64"].metrics
    assert got.same_bits == (one.bits == many.bits)
    # a lab where M = 64 gave other bits, 3 ULPs further from the exact result
    other = dataclasses.replace(rows["torch_mm64"], metrics=dataclasses.replace(many, ulps=one.ulps + 3,
                                                                                bits=one.bits ^ 1))
    lab2 = dataclasses.replace(lab, rows=tuple(other if r.key == "torch_mm64" else r for r in lab.rows))
    got2 = batch_dependence(lab2)
    assert got2 == BatchDependence(False, 3.0) and not math.isnan(got2.ulps_apart)
