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


@pytest.mark.browser
def test_bench_audience_prints_the_room_last(capsys):
    """A few protocol-level viewers at one talk link and at the bare page (a real server each; no browser, but
    it runs with the tests that start servers)."""
    from benchmarks import bench_audience

    results = run_in_own_thread(lambda: bench_audience.main(4, ["0.1 + 0.2 + 0.3"]), timeout=600)
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"audience: 4 viewers, p95 \d+\.\d\d s \(\d+\.\d x a bare page\), speaker's click "
                        r"\d+\.\d\d s, peak private \d+ MB", out[-1]), out[-1]
    assert any(line.startswith("bare page: p50 ") for line in out)
    assert [r.title for r in results] == ["0.1 + 0.2 + 0.3"] and not results[0].errors
    assert len(results[0].times) == 4  # every viewer got its page


@pytest.mark.browser
def test_bench_your_gpu_prints_its_ratios_last(capsys):
    """A real server and a Chromium with WebGPU (SwiftShader): the browser path against the CPU path."""
    from benchmarks import bench_your_gpu

    out = run_in_own_thread(lambda: bench_your_gpu.main(10_000), timeout=600)
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.fullmatch(r"your GPU: first result \d+(\.\d+)?x the server CPU path's time, page data "
                        r"\d+\.\d\dx the vector's bytes \(n=10000 float32\)", last), last
    assert out["first_ms"] <= out["total_ms"] and out["ws"] > 0


@pytest.mark.browser
def test_bench_room_play_prints_the_speakers_play_alone_and_with_players_last(capsys):
    """The speaker's Play on the training link alone and with two players (a fresh real server each; protocol-level
    sessions, no browser)."""
    from benchmarks import bench_room_play

    results = run_in_own_thread(lambda: bench_room_play.main([2]), timeout=600)
    out = capsys.readouterr().out.strip().splitlines()
    assert re.fullmatch(r"room play: speaker alone \d+\.\d\d s, with 2 players \d+\.\d\d s \(\d+\.\d\dx\), peak "
                        r"private \d+ MB", out[-1]), out[-1]
    alone, room = results
    assert not alone.errors and not room.errors and len(room.others) == 2
    assert alone.speaker.to_step and room.speaker.to_step and all(p.to_step for p in room.others)
    assert max(alone.speaker.steps_seen) == bench_room_play.STEPS  # the speaker's progress reached the end
