"""benchmarks/bench_budget.py runs (small n) and ends with its model-vs-measured line."""

from __future__ import annotations

import re

from benchmarks import bench_budget


def test_bench_budget_prints_model_against_measurement(capsys):
    r = bench_budget.main(20_000)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"budget model: model/measured work [\d.]+x to [\d.]+x \(median [\d.]+x\), "
                        r"memory [\d.]+x to [\d.]+x over \d+ cases \(n=20000\)", last), last
    assert r["bytes_min"] > 0.5  # memory is modelled closely even at this small size
