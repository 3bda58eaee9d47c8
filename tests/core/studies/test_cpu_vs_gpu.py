"""core.studies.cpu_vs_gpu: one sum on every source, its notices, the reduction stages, the TF32 comparison."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest
import torch

from core.arith.exact import correctly_rounded_sum
from core.arith.formats import FORMATS, bits_of_value, round_to_format
from core.arith.ulps import ulp_distance
from core.arith.vectors import VectorSpec, generate
from core.kernels.cuda_model import cuda_config_for, cuda_launch
from core.kernels.orders import ORDERS, ORIGIN_RECORDED
from core.kernels.torch_cpu_model import GRAIN_SIZE
from core.machines.devices import Device, cpu_device
from core.recordings.capture import capture
from core.recordings.store import Recording
from core.studies.cpu_vs_gpu import (
    H100_SMS,
    CpuVsGpuSettings,
    reduction_stages,
    sums_everywhere,
    tf32_product_difference,
    thread_sums,
)


@pytest.fixture(scope="module")
def quick():
    return capture(quick=True, log=lambda *_: None, throughput=False)


def test_settings_accept_only_the_recorded_suite():
    assert CpuVsGpuSettings().spec == VectorSpec(kind="normal", n=1_000_000, seed=0, storage="float32")
    for bad in ({"n": 12}, {"dtype": "float8"}, {"generator": "ill_conditioned"}):
        with pytest.raises(ValueError, match="suite"):
            CpuVsGpuSettings(**bad)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_without_recordings_every_row_is_live_model_or_exact_and_measured_from_the_exact_sum(dtype):
    s = CpuVsGpuSettings("alternating", 1_000, dtype)
    out = sums_everywhere(s, [cpu_device()], [], threads=2)
    fmt = FORMATS[dtype]
    assert [r.origin for r in out.rows] == ["live", "live", "model", "exact"]
    assert [r.order for r in out.rows] == ["torch_1", "torch_all", "cuda_model", "correct"]
    assert [r.origin for r in out.rows] == [ORDERS[r.order].origin for r in out.rows]  # the registry's word for each
    assert [r.where for r in out.live_cpu] == ["CPU, 1 thread", "CPU, 2 threads"]
    values = generate(s.spec).values
    assert out.exact_bits == bits_of_value(correctly_rounded_sum(values, fmt), fmt) == out.rows[-1].bits
    for r in out.rows:
        assert r.ulps_from_exact == ulp_distance(r.bits, out.exact_bits, fmt)
    assert out.rows[-1].ulps_from_exact == 0
    # equal bits print equally, different bits differently
    assert len({r.value for r in out.rows}) == len({r.bits for r in out.rows})
    names, matrix = out.ulp_matrix()
    assert names == tuple(r.where for r in out.rows)
    assert all(matrix[i][i] == 0 and matrix[i][j] == matrix[j][i] for i in range(len(names)) for j in range(len(names)))
    assert out.cpu_threads_apart == matrix[0][1]
    assert [n.kind for n in out.notices] == ["info"] and out.notices[0].text.startswith("No recording for")
    assert "its match rate on a real GPU is unmeasured" in out.rows[2].note
    assert f"SM count {H100_SMS}" in out.rows[2].where


def test_one_thread_leaves_one_cpu_row_and_nothing_to_compare():
    out = sums_everywhere(CpuVsGpuSettings("normal", 1_000, "float32"), [cpu_device()], [], threads=1)
    assert len(out.live_cpu) == 1 and out.cpu_threads_apart is None


def test_a_device_without_the_format_is_named_not_skipped_silently():
    no_f64 = Device("mps", None, "A GPU without float64")
    out = sums_everywhere(CpuVsGpuSettings("normal", 1_000, "float64"), [cpu_device(), no_f64], [], threads=1)
    assert out.notices[0].kind == "warning" and out.notices[0].text.startswith("A GPU without float64 has no float64")
    assert all(r.where != no_f64.name for r in out.rows)


def test_a_recording_is_replayed_and_a_tampered_one_refused(quick):
    s = CpuVsGpuSettings("normal", 1_000, "float32")
    rec = Recording.from_dict("here.json", quick)
    out = sums_everywhere(s, [cpu_device()], [rec], threads=1)
    recorded = [r for r in out.rows if r.origin == ORIGIN_RECORDED]
    entry = rec.find_sum("normal", 0, 1_000, "float32")
    assert len(recorded) == 1 and recorded[0].bits == int(entry.sum_hex, 16) and recorded[0].note == rec.label
    assert not out.notices
    tampered = json.loads(json.dumps(quick))
    for e in tampered["sums"]:
        e["vector_sha256"] = "f" * 64
    bad = Recording.from_dict("tampered.json", tampered)
    out = sums_everywhere(s, [cpu_device()], [bad], threads=1)
    assert ORIGIN_RECORDED not in {r.origin for r in out.rows}
    assert [(n.kind, n.subject) for n in out.notices] == [("error", bad.label)]
    assert "SHA-256 differs" in out.notices[0].text


@pytest.mark.parametrize("n", [1_000, 100_000, 10_000_000])
def test_reduction_stages_start_with_every_value_and_end_with_one(n):
    st = reduction_stages(n, np.dtype("float32"), threads=4)
    assert st.launch == cuda_launch(n, cuda_config_for(n, np.float32, sm_count=H100_SMS))
    for stages in (st.cpu, st.gpu):
        left = [s.values_left for s in stages]
        assert left[0] == n and left[-1] == 1 and left == sorted(left, reverse=True)
    assert st.below_grain == (n < GRAIN_SIZE)
    assert st.threads == (1 if n <= GRAIN_SIZE else min(4, -(-n // GRAIN_SIZE)))
    assert st.cpu[3].values_left == st.threads and st.gpu[4].values_left == st.launch.blocks


def test_tf32_comparison_restores_the_switch_and_changes_nothing_on_the_cpu():
    before = torch.backends.cuda.matmul.allow_tf32
    out = tf32_product_difference("cpu", n=64)
    assert (out.differing, out.total) == (0, 64 * 64)  # TF32 is a CUDA switch: CPU products ignore it
    assert torch.backends.cuda.matmul.allow_tf32 == before


@pytest.mark.skipif(not torch.cuda.is_available(), reason="TF32 needs a CUDA GPU")
def test_tf32_comparison_on_a_gpu():
    before = torch.backends.cuda.matmul.allow_tf32
    out = tf32_product_difference("cuda")
    assert 0 <= out.differing <= out.total == 256 * 256
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_thread_sums_are_the_live_cpu_rows_of_the_full_comparison():
    """The punchline's two sums are exactly the full comparison's live CPU rows (same bits, same ULP gap)."""
    s = CpuVsGpuSettings("normal", 100_000, "float32")
    cpu = cpu_device()
    full = sums_everywhere(s, [cpu], [], 2)
    sums = thread_sums(s, cpu, 2)
    assert [(c.where, c.bits, c.value) for c in sums.rows] == [(r.where, r.bits, r.value) for r in full.live_cpu]
    assert sums.apart == full.cpu_threads_apart
    assert thread_sums(s, cpu, 1).apart is None
    # the digits shown identify each sum in its format, so "N ULP apart" is true of what is shown
    fmt = s.fmt
    shown_bits = [bits_of_value(round_to_format(Fraction(c.value), fmt), fmt) for c in sums.rows]
    assert shown_bits == [c.bits for c in sums.rows]
    assert ulp_distance(*shown_bits, fmt) == sums.apart


def test_identical_bits_across_threads_come_with_the_reason():
    """The one-thread comparison showed no difference without saying why."""
    cpu = cpu_device()
    small = thread_sums(CpuVsGpuSettings("normal", 1_000, "float32"), cpu, 2)  # below the grain size: serial
    assert small.chunks == 1 and small.apart == 0 and "grain size" in small.why_same()
    big = thread_sums(CpuVsGpuSettings("normal", 100_000, "float32"), cpu, 2)
    assert big.chunks == 2
    assert (big.why_same() is None) == (big.apart != 0)
    if big.apart == 0:
        assert "happened to round to the same bits" in big.why_same()
    assert thread_sums(CpuVsGpuSettings("normal", 1_000, "float32"), cpu, 1).why_same() is None


@pytest.mark.parametrize(("generator", "n"), [("normal", 1_000_000), ("alternating", 1_000)])
def test_the_headline_sets_this_cpu_against_a_gpus_order_labelled_as_what_it_is(generator, n):
    """Without a GPU or a GPU recording, the first screen's GPU is the model of a 132-SM launch, named a model;
    every figure of its sentence is the rows' own, and the one-line insight says "different bits" only when the
    two results differ."""
    out = sums_everywhere(CpuVsGpuSettings(generator, n, "float32"), [cpu_device()], [], threads=2)
    head = out.headline()
    assert head.cpu == out.live_cpu[-1] and head.exact.origin == "exact" and head.gpu.origin == "model"
    assert head.gpu.gpu and not head.cpu.gpu and f"SM count {H100_SMS}" in head.gpu.where
    assert head.labels == ("CPU, live (2 threads)", f"GPU order, modelled ({H100_SMS} SMs)", "Exact sum, rounded once")
    assert head.apart == ulp_distance(head.cpu.bits, head.gpu.bits, FORMATS["float32"])
    figures = f"{head.cpu.ulps_from_exact:,} ULP from the exact sum, the GPU's {head.gpu.ulps_from_exact:,}"
    assert figures in head.sentence
    assert ("give different bits" in head.insight) == (head.apart != 0)
    assert "a model of a GPU's order" in head.sentence and "Neither device is the reference" in head.sentence


def test_the_headline_prefers_a_recorded_gpu_to_the_model(quick):
    """A GPU recording of the same vector is evidence from real hardware: it leads, labelled as recorded."""
    as_gpu = json.loads(json.dumps(quick))
    as_gpu["provenance"].update(device_kind="cuda", sm_count=H100_SMS)
    gpu_rec = Recording.from_dict("gpu.json", as_gpu)
    assert gpu_rec.is_gpu
    out = sums_everywhere(CpuVsGpuSettings("normal", 1_000, "float32"), [cpu_device()], [gpu_rec], threads=2)
    head = out.headline()
    assert head.gpu.origin == ORIGIN_RECORDED and head.labels[1] == "GPU, recorded"


def test_a_gpu_that_fails_leaves_no_row_and_marks_no_other_row_a_gpus(monkeypatch, quick):
    """A GPU's failure is a notice; the CPU recording after it stays a CPU's result, so the first screen
    still sets this CPU against the model of a GPU's order."""
    import core.studies.cpu_vs_gpu as cpu_vs_gpu

    real = cpu_vs_gpu.live_sum_bits

    def gone(values, device, threads=None):
        if device.kind != "cpu":
            raise RuntimeError("device lost")
        return real(values, device, threads)

    monkeypatch.setattr(cpu_vs_gpu, "live_sum_bits", gone)
    rec = Recording.from_dict("here.json", quick)
    assert not rec.is_gpu
    lost = Device("cuda", 0, "A GPU that went away")
    out = sums_everywhere(CpuVsGpuSettings("normal", 1_000, "float32"), [cpu_device(), lost], [rec], threads=1)
    assert [(n.kind, n.text.split(" (")[0]) for n in out.notices] == [("error", "A GPU that went away failed")]
    assert all(r.where != lost.name for r in out.rows)
    assert [(r.origin, r.gpu) for r in out.rows] == [("live", False), (ORIGIN_RECORDED, False), ("model", True),
                                                     ("exact", False)]
    assert out.headline().gpu.origin == "model"
