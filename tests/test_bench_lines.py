"""Every benchmark script runs (small sizes) and ends with its ratio line in the agreed format."""

from __future__ import annotations

import re

from benchmarks import bench_exact, bench_reprosum, bench_sumlab, bench_training


def last_line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def test_bench_exact(capsys):
    bench_exact.main(20_000)
    assert re.fullmatch(r"exact_sum: [\d.]+x faster than math\.fsum, [\d.]+x the time of np\.sum "
                        r"\(n=20000 float32\)", last_line(capsys))


def test_bench_sumlab(capsys):
    bench_sumlab.main(5_000)
    assert re.fullmatch(r"sumlab panel: [\d.]+x the time of one np\.sum \(n=5000 float32\)", last_line(capsys))


def test_bench_training(capsys):
    bench_training.main(30)
    assert re.fullmatch(r"paired run: [\d.]+x the time of two bare training loops \(30 steps, MLP 2-64-64-3, "
                        r"batch 128, sgd_momentum, float32\)", last_line(capsys))


def test_bench_reprosum(capsys):
    bench_reprosum.main(20_000, repeats=3)
    assert re.fullmatch(r"reproducible sum: [\d.]+x the time of torch\.sum, [\d.]+x the time of np\.sum "
                        r"\(n=20000 float32\)", last_line(capsys))


def test_bench_serving(capsys):
    from benchmarks import bench_serving

    bench_serving.main(4, repeats=1, new_tokens=10, linear_shape=(8, 64, 32))
    lines = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"batch-invariant serving, bfloat16: [\d.]+x the time of default serving \(4 requests, "
                        r"\d+ tokens\)", lines[-3])
    assert re.fullmatch(r"batch-invariant linear 8x64x32: [\d.]+x \(float32\), [\d.]+x \(bfloat16\) the time of "
                        r"torch's linear", lines[-2])
    assert re.fullmatch(r"batch-invariant serving: [\d.]+x the time of default serving \(4 requests, \d+ tokens\)",
                        lines[-1])


def test_bench_trace(capsys):
    from benchmarks import bench_trace

    bench_trace.main(repeats=3)
    assert re.fullmatch(r"trace overhead: \d+\.\d\dx the time of the untraced run "
                        r"\(tiny-lm forward pass, 8 x 160 characters, \d+ ops\)",
                        last_line(capsys))
