"""Timing on the machine that runs this code: interleaved repeats after a warm-up, and float32 against
float64 throughput (matrix product and a large sum).

On a GPU every timing synchronizes. Only core.machines.globalstate changes a global setting.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.machines.devices import Device
from core.machines.progress import OnProgress, report


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass(frozen=True, kw_only=True)
class Throughput:
    device: str
    op: str  # "matmul" or "sum"
    size: int  # matrix side, or number of elements
    seconds32: float  # median over the repeats
    seconds64: float
    rate32: float  # GFLOP/s for matmul, GB/s for sum (bytes read: 4 resp. 8 per value)
    rate64: float
    unit: str
    repeats: int = 1
    # Quartiles of the per-repeat ratio t32 / t64 (each repeat times both formats back to back).
    ratio_quartiles: tuple[float, float] = (float("nan"), float("nan"))
    # The median of the same per-repeat ratios (NaN: not given, then the ratio of the median times).
    ratio_median: float = float("nan")

    @property
    def ratio(self) -> float:
        """float64 speed as a fraction of float32's, per value (0.5 means half speed): the same work in both.

        The median of the per-repeat ratios, the sample its quartiles come from (the ratio of the median
        times can lie outside the quartiles of the per-repeat ratios, as in "0.50 (0.51–0.75)")."""
        return self.ratio_median if math.isfinite(self.ratio_median) else self.seconds32 / self.seconds64

    def verdict(self) -> str:
        """What the ratio says, in words: a ratio above 1 is never shown bare."""
        lo, hi = self.ratio_quartiles
        if self.ratio > 1 or (math.isfinite(hi) and lo <= 1 <= hi):
            return ("no measurable float64 penalty: the spread of the repeats includes 1 or the median is above "
                    "it, which is noise (such as another visitor or process taking the CPU during some repeats)"
                    + ("; a sum is limited by memory bandwidth, so a penalty shows only once the data outgrow "
                       "the caches" if self.op == "sum" else ""))
        if self.op == "sum":
            return "memory-bound: float64 moves twice the bytes per value, so about half the values per second"
        return "arithmetic-bound: a SIMD register holds half as many float64 values, so about half the speed"


def measure_throughput(
    device: Device, matmul_n: int = 1024, sum_n: int = 1 << 24, repeats: int = 7,
    on_progress: OnProgress | None = None,
) -> list[Throughput]:
    """float32 and float64 matrix product and sum on one device, per element, interleaved.

    Each repeat times float32 and float64 back to back (alternating which goes first), so a
    disturbance from other work on the machine hits both formats alike; the ratio is taken
    per repeat and reported as its median and quartiles. The sum is large enough
    (default 2^24 values, 64 MB in float32) to leave the caches, as a model's tensors do.
    ``on_progress`` gets the repeats done, out of ``repeats``, as they proceed.
    """
    out = []
    g = torch.Generator().manual_seed(0)
    dev = device.torch_device
    if not device.supports(torch.float64):
        return out
    a64 = torch.randn(matmul_n, matmul_n, generator=g, dtype=torch.float64)
    b64 = torch.randn(matmul_n, matmul_n, generator=g, dtype=torch.float64)
    x64 = torch.randn(sum_n, generator=g, dtype=torch.float64)
    data = {dt: (a64.to(dt).to(dev), b64.to(dt).to(dev), x64.to(dt).to(dev)) for dt in (torch.float32, torch.float64)}
    del a64, b64, x64
    ops = {"matmul": lambda a, b, x: a @ b, "sum": lambda a, b, x: x.sum()}
    times: dict[tuple[str, torch.dtype], list[float]] = {(op, dt): [] for op in ops for dt in data}
    for fn in ops.values():  # warm-up
        for args in data.values():
            fn(*args)
    _sync(dev)
    for i in range(repeats):
        for op, fn in ops.items():
            for dt in (torch.float32, torch.float64) if i % 2 == 0 else (torch.float64, torch.float32):
                t0 = time.perf_counter()
                fn(*data[dt])
                _sync(dev)
                times[(op, dt)].append(time.perf_counter() - t0)
        report(on_progress, done=i + 1, total=repeats, what=f"{device.name}: repeat {i + 1} of {repeats}")
    work = {"matmul": ((2 * matmul_n**3,) * 2, matmul_n, "GFLOP/s"), "sum": ((4 * sum_n, 8 * sum_n), sum_n, "GB/s")}
    for op in ops:
        t32, t64 = times[(op, torch.float32)], times[(op, torch.float64)]
        med, iqr = median_and_quartiles([a / b for a, b in zip(t32, t64, strict=True)])
        s32, s64 = statistics.median(t32), statistics.median(t64)
        (amount32, amount64), size, unit = work[op]
        out.append(
            Throughput(
                device=device.name,
                op=op,
                size=size,
                seconds32=s32,
                seconds64=s64,
                rate32=amount32 / s32 / 1e9,
                rate64=amount64 / s64 / 1e9,
                unit=unit,
                repeats=repeats,
                ratio_quartiles=iqr,
                ratio_median=med,
            )
        )
    return out


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int, inner: int = 3,
                      budget_s: float | None = None, warmup: int = 2) -> dict[str, list[float]]:
    """Per repeat, the fastest of ``inner`` consecutive calls of each function, the functions
    in an order that rotates from repeat to repeat (after ``warmup`` calls of each), so that a
    slow phase of a busy machine slows every side of a per-repeat ratio alike. With
    ``budget_s``, repeats stop once that many seconds have passed (after at least 5)."""
    keys = list(fns)
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times: dict[str, list[float]] = {k: [] for k in keys}
    start = time.perf_counter()
    for i in range(repeats):
        if budget_s is not None and i >= 5 and time.perf_counter() - start > budget_s:
            break
        r = i % len(keys)
        for k in keys[r:] + keys[:r]:
            best = math.inf
            for _ in range(inner):
                t0 = time.perf_counter()
                fns[k]()
                best = min(best, time.perf_counter() - t0)
            times[k].append(best)
    return times


def median_and_quartiles(xs: list[float]) -> tuple[float, tuple[float, float]]:
    """The median and the quartiles of one sample (inclusive method: the median always lies between them)."""
    if len(xs) == 1:
        return xs[0], (xs[0], xs[0])
    q1, med, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return med, (q1, q3)


def cpu_load() -> tuple[int, float | None]:
    """(CPU cores this process may use, the 1-minute load average or None where the OS has none)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        return cores, os.getloadavg()[0]
    except (AttributeError, OSError):
        return cores, None
