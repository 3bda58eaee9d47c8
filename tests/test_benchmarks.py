"""The benchmark scripts run and end with their ratio line (timings themselves are not asserted)."""

from __future__ import annotations

import re

import pytest

from benchmarks import bench_assoc, bench_dot, bench_models
from benchmarks.harness import run_in_own_thread


def test_bench_assoc_prints_its_ratio_last(capsys):
    bench_assoc.main(3000)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"counterexample search: \d+(\.\d+)?x faster than a per-triple numpy-scalar loop \(n=3000 float32\)", last
    ), last


def test_bench_dot_prints_its_ratio_last(capsys):
    bench_dot.main(20_000)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"exact_dot: \d+(\.\d+)?x faster than math\.fsum of the products, \d+(\.\d+)?x the time of np\.dot "
        r"\(n=20000 float32\)", last
    ), last


def test_bench_models_prints_its_ratios_last(capsys):
    bench_models.main(100_000)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"sum models: NumPy \d+(\.\d+)?x, torch CPU \d+(\.\d+)?x, CUDA \d+(\.\d+)?x the time of np\.sum "
        r"\(n=100000 float32\)", last
    ), last


@pytest.mark.browser
def test_bench_pages_prints_the_slowest_first_render_last(capsys):
    from benchmarks import bench_pages

    # a real server and browser; the home page and one page (in its own thread: the browser tests' fixtures
    # own this thread's event loop, and Playwright's sync API refuses to run inside it)
    run_in_own_thread(lambda: bench_pages.main(["non_associativity"]), timeout=600)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(
        r"slowest first render: (Overview|Non-associativity) \d+\.\d\d s warm, (Overview|Non-associativity) "
        r"\d+\.\d\d s fresh \(budget 2\.0 s warm, 4\.0 s fresh\)", last
    ), last
