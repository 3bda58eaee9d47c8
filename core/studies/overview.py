"""The Overview's live hook: two tiny computations made on this server when the page opens, so the
first screen shows the app's point with numbers rather than prose.

* ``(0.1 + 0.2) + 0.3`` against ``0.1 + (0.2 + 0.3)`` in float64, added by torch on this CPU
  (core.studies.assoc.evaluate_triple), with how many representable values apart they are;
* ``torch.sum`` of the CPU vs GPU page's default vector (10^6 standard normal float32 values,
  seed 0) with one thread and with all of this server's threads (core.studies.cpu_vs_gpu.thread_sums).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.arith.formats import FORMATS
from core.arith.parse import parse_number
from core.machines.devices import cpu_device
from core.studies.assoc import TripleResult, evaluate_triple
from core.studies.cpu_vs_gpu import CpuVsGpuSettings, ThreadSums, thread_sums

HOOK_NUMBERS = ("0.1", "0.2", "0.3")
HOOK_FORMAT = "float64"
HOOK_SUM = CpuVsGpuSettings("normal", 1_000_000, "float32")


@dataclass(frozen=True)
class OverviewHook:
    triple: TripleResult  # the two groupings, live on this CPU
    sums: ThreadSums  # torch.sum on 1 and on all threads, live on this CPU


def overview_hook(threads: int) -> OverviewHook:
    """Both live computations (milliseconds once the shared 10^6-value vector exists)."""
    fmt = FORMATS[HOOK_FORMAT]
    triple = evaluate_triple(tuple(parse_number(t, fmt) for t in HOOK_NUMBERS), [cpu_device()])
    return OverviewHook(triple, thread_sums(HOOK_SUM, cpu_device(), threads))
