"""core.studies.peak_rates: the cited float64 peak rates and the costs they imply."""

from __future__ import annotations

import pytest

from core.studies import peak_rates
from core.studies.peak_rates import cited_ratio


def test_cited_ratios_come_from_the_vendor_table():
    assert cited_ratio("x86 CPU (SIMD)") == next(r for h, r, _ in peak_rates.VENDOR_RATIOS if h.startswith("x86"))
    with pytest.raises(KeyError):
        cited_ratio("a machine nobody cited")


def test_the_float64_table_states_the_vendors_rates_and_what_they_cost_with_and_without_tensor_cores():
    """The cited peak rates (dense TFLOPS) and the costs they imply, × the float32 default's time: 1 : 2 on the
    A100 and H100 only without tensor cores; against float32 training on TF32 or bfloat16 tensor cores, 7-16×."""
    a100, h100 = peak_rates.float64_peak("NVIDIA A100"), peak_rates.float64_peak("NVIDIA H100 (SXM)")
    assert (a100.fp64, a100.fp64_tensor, a100.fp32, a100.tf32_tensor, a100.bf16_tensor) == (9.7, 19.5, 19.5, 156, 312)
    assert (h100.fp64, h100.fp64_tensor, h100.fp32, h100.tf32_tensor, h100.bf16_tensor) == (34, 67, 67, 494.7, 989)
    assert a100.ratio == h100.ratio == "1 : 2" and round(a100.plain_cost) == round(h100.plain_cost) == 2
    assert a100.tensor_cost == (8.0, 16.0)
    assert [round(c, 1) for c in h100.tensor_cost] == [7.4, 14.8]
    assert peak_rates.float64_peak("NVIDIA RTX 4090").plain_cost == pytest.approx(64)
    assert peak_rates.float64_peak("NVIDIA T4").plain_cost == pytest.approx(32)
    for p in peak_rates.float64_peaks():  # every GPU row names its source by address
        assert p.url is None or p.url.startswith("https://"), p
        if p.fp64 is not None:
            assert p.url and "nvidia.com" in p.url
    assert tuple((p.hardware, p.ratio, p.source) for p in peak_rates.float64_peaks()) == peak_rates.VENDOR_RATIOS
    assert peak_rates.float64_peaks() is peak_rates.FLOAT64_PEAKS  # one table
