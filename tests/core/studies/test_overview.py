"""core.studies.overview: the Overview's live hook is the two pages' own computations."""

from __future__ import annotations

from fractions import Fraction

from core.arith.formats import FORMATS, value_of_bits
from core.machines.devices import cpu_device
from core.studies.cpu_vs_gpu import thread_sums
from core.studies.overview import HOOK_SUM, overview_hook


def test_the_hook_adds_the_classic_triple_both_ways_and_sums_on_one_and_all_threads():
    hook = overview_hook(2)
    t = hook.triple
    f64 = FORMATS["float64"]
    assert value_of_bits(t.left.bits, f64) == Fraction((0.1 + 0.2) + 0.3)  # Python's floats are IEEE float64
    assert value_of_bits(t.right.bits, f64) == Fraction(0.1 + (0.2 + 0.3))
    assert t.differ and t.ulps_apart == 1
    sums = thread_sums(HOOK_SUM, cpu_device(), 2)
    assert hook.sums.rows == sums.rows and hook.sums.threads == 2
    assert overview_hook(1).sums.apart is None  # one thread: nothing to compare
