"""Heavy visitors at once on a real server (benchmarks/bench_crowd.py), held to the hosting targets.

A shared link that asks too much is refused (nothing computed, memory flat); the heaviest settings the
budget allows run one slot at a time, the others shown how many they wait for; memory stays
within the largest tier and a normal visitor alongside still gets the page, with no exception
anywhere. Page times are reported, not asserted (they depend on the machine's load).
"""

from __future__ import annotations

from benchmarks import bench_crowd
from benchmarks.harness import run_in_own_thread
from core.crowd.budget import HOSTING_LARGE, MB
from core.crowd.gate import HEAVY_SLOTS


def test_heavy_visitors_queue_and_a_normal_one_gets_the_page(capsys):
    # three heavy visitors outnumber the gate's slots (at most two) as five do, for half the time
    crowd = bench_crowd.Crowd(heavy=3, normal_visits=1)
    shared, largest = run_in_own_thread(lambda: bench_crowd.main(["shared", "largest"], crowd), timeout=1500)
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("crowd (largest): peak ")
    assert all(h["refused"] and not h["exceptions"] for h in shared["heavy"]), shared["heavy"]
    assert shared["peak_mb"] < shared["peak_before_mb"] + 150, shared  # nothing heavy was allocated
    assert not any(h["refused"] or h["exceptions"] for h in largest["heavy"]), largest["heavy"]
    assert crowd.heavy > HEAVY_SLOTS and len(largest["heavy"]) == crowd.heavy
    assert any(h["waited"] for h in largest["heavy"]), largest["heavy"]  # the gate queued them
    assert largest["peak_mb"] * MB <= HOSTING_LARGE, largest
