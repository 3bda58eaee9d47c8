"""Serving the same workload with this CPU's default kernels and with batch-invariant ones.

Both serve one seeded schedule (identical requests among others, dynamic batching, float32,
one torch thread) through core.serving.engine; the cost is the serving thread's CPU time
(wall time on a shared machine counts other processes' turns), the median of per-repeat
ratios over interleaved repeats. What sets the cost: the batch-invariant linear pads rows to
fixed 32-row tiles (small batches pay for 32 rows) and calls the library once per tile;
RMSNorm, softmax and attention are written as fixed pairwise trees of elementwise adds
instead of one fused library reduction, so they make several passes over small tensors, and
attention over padded fixed-size splits does work for the padding. On a model this small,
Python and dispatch overhead per operation is a large part of both.
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


def main(requests: int = 100, repeats: int = 3, new_tokens: int = 48, linear_shape=(64, 4096, 4096)) -> None:
    base = ServeSettings(requests=requests, dtype="float32", kernels="default", new_tokens=new_tokens)
    inv = ServeSettings(requests=requests, dtype="float32", kernels="batch_invariant", new_tokens=new_tokens)
    serve(ServeSettings(requests=2, dtype="float32", new_tokens=8))  # warm-up (weights, kernels)
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    ratios, runs = [], []
    for i in range(repeats):
        pair = [base, inv] if i % 2 == 0 else [inv, base]  # interleaved, alternating order
        done = {s.kernels: serve(s) for s in pair}
        d, b = done["default"], done["batch_invariant"]
        ratios.append(b.cpu_seconds / d.cpu_seconds)
        runs.append((d, b))
        print(f"repeat {i + 1}: default {d.cpu_tokens_per_second:,.0f} tokens/s, batch-invariant "
              f"{b.cpu_tokens_per_second:,.0f} tokens/s (CPU time); {d.distinct} and {b.distinct} distinct "
              f"completions")
    d, b = runs[-1]
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    m, k, n = linear_shape
    lin = linear_ratios(m, k, n)
    print(f"batch-invariant linear {m}x{k}x{n}: {lin['float32']:.2f}x (float32), {lin['bfloat16']:.2f}x (bfloat16) "
          "the time of torch's linear")
    print(f"batch-invariant serving: {statistics.median(ratios):.2f}x the time of default serving "
          f"({requests} requests, {d.tokens} tokens)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
