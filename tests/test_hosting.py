"""Hosting limits, measured on the real server (benchmarks/bench_hosting.py) and held to the targets."""

from __future__ import annotations

import pytest

from benchmarks import bench_hosting
from benchmarks.harness import run_in_own_thread


@pytest.mark.browser
def test_memory_and_cold_start_within_targets(capsys):
    r = run_in_own_thread(lambda: bench_hosting.main(largest=True), timeout=900)
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("hosting: ")
    # private memory (anonymous and shared pages, sampled every 50 ms): harness.Server.private_mb
    assert r["defaults_peak_mb"] <= bench_hosting.DEFAULTS_TARGET_MB, r  # with room below the smallest tier
    assert r["largest_peak_mb"] <= bench_hosting.LARGEST_TARGET_MB, r
    assert r["cold_start_s"] < 60, r
