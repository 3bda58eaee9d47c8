"""Serving the same workload with this CPU's default kernels and with batch-invariant ones.

Both serve one seeded schedule (identical requests among others, dynamic batching, bfloat16
and then float32, one torch thread) through core.serving.engine; the cost is the serving thread's CPU time
(wall time on a shared machine counts other processes' turns), the median of per-repeat
ratios over interleaved repeats. What sets the cost: the batch-invariant linear pads rows to
fixed 32-row tiles (small batches pay for 32 rows) and calls the library once per tile;
RMSNorm and attention are one compiled loop each (core.serving.fused), which visits only a
request's own keys, where torch's batched attention works over the padding too. On a model this
small, Python and dispatch overhead per operation is a large part of both.
Usage: python -m benchmarks.bench_serving [identical requests] [repeats]
"""

from __future__ import annotations

import os
import statistics
import sys

from benchmarks.timing import median_time
from core.serving.engine import ServeSettings, serve


def linear_ratios(m: int = 64, k: int = 4096, n: int = 4096, repeats: int = 15) -> dict[str, float]:
    """The batch-invariant linear's time over torch's F.linear, x [m, k] @ w[n, k].T, per dtype: the
    median of per-repeat ratios over interleaved calls (the weight converted once, as a server would
    keep it)."""
    import torch
    import torch.nn.functional as F

    from core.serving.kernels import linear_invariant

    out = {}
    g = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        x = torch.randn(m, k, generator=g).to(dtype)
        w = (torch.randn(n, k, generator=g) / k**0.5).to(dtype)
        linear_invariant(x, w), F.linear(x, w)  # warm-up: the kept float32 weight, the library's kernels
        ratios = []
        for _ in range(repeats):
            t_inv, _ = median_time(lambda x=x, w=w: linear_invariant(x, w), 1)
            t_ref, _ = median_time(lambda x=x, w=w: F.linear(x, w), 1)
            ratios.append(t_inv / t_ref)
        out[str(dtype).removeprefix("torch.")] = statistics.median(ratios)
    return out


def serving_ratio(dtype: str, requests: int, repeats: int, new_tokens: int):
    """Median over interleaved repeats of batch-invariant serving's CPU time over default serving's, in
    ``dtype``; with the last repeat's two runs."""
    base = ServeSettings(requests=requests, dtype=dtype, kernels="default", new_tokens=new_tokens)
    inv = ServeSettings(requests=requests, dtype=dtype, kernels="batch_invariant", new_tokens=new_tokens)
    for kernels in ("default", "batch_invariant"):  # warm-up: weights, library kernels, compiled loops
        serve(ServeSettings(requests=2, dtype=dtype, kernels=kernels, new_tokens=8))
    ratios, runs = [], []
    for i in range(repeats):
        pair = [base, inv] if i % 2 == 0 else [inv, base]  # interleaved, alternating order
        done = {s.kernels: serve(s) for s in pair}
        d, b = done["default"], done["batch_invariant"]
        ratios.append(b.cpu_seconds / d.cpu_seconds)
        runs.append((d, b))
        print(f"{dtype} repeat {i + 1}: default {d.cpu_tokens_per_second:,.0f} tokens/s, batch-invariant "
              f"{b.cpu_tokens_per_second:,.0f} tokens/s (CPU time); {d.distinct} and {b.distinct} distinct "
              f"completions")
    return statistics.median(ratios), runs[-1]


def main(requests: int = 100, repeats: int = 3, new_tokens: int = 48, linear_shape=(64, 4096, 4096)) -> None:
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    bf16, (_, bf16_run) = serving_ratio("bfloat16", requests, repeats, new_tokens)
    ratio, (d, _) = serving_ratio("float32", requests, repeats, new_tokens)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"batch-invariant serving, bfloat16: {bf16:.2f}x the time of default serving ({requests} requests, "
          f"{bf16_run.tokens} tokens)")
    m, k, n = linear_shape
    lin = linear_ratios(m, k, n)
    print(f"batch-invariant linear {m}x{k}x{n}: {lin['float32']:.2f}x (float32), {lin['bfloat16']:.2f}x (bfloat16) "
          "the time of torch's linear")
    print(f"batch-invariant serving: {ratio:.2f}x the time of default serving "
          f"({requests} requests, {d.tokens} tokens)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
