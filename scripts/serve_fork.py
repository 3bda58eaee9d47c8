"""Serve N identical requests among others with dynamic batching; count their distinct completions.

    python -m scripts.serve_fork --requests 200 --max-batch 16

Serves the same seeded workload twice, with the ordinary kernels and with batch-invariant
ones (core.serving), and ends with one line:
serving fork: <K> distinct completions of <N> identical requests (default kernels), <K2> with
batch-invariant kernels; batch-invariant cost <R>x
"Default kernels" are the server's ordinary kernels, by default the labelled MODEL of a GPU's
batch-dependent kernel choices in bfloat16 (``--kernels default --dtype float32`` serves with this
CPU's own torch kernels instead). The cost is the serving thread's CPU time, batch-invariant over
ordinary.
"""

from __future__ import annotations

import argparse

from core.serving.engine import DEFAULT_DTYPE, DEFAULT_KERNELS, DEFAULT_PROMPT, DTYPES, ServeSettings, fork_study
from core.serving.kernels import KERNELS


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200, help="identical requests")
    ap.add_argument("--max-batch", type=int, default=16)
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--new-tokens", type=int, default=ServeSettings().new_tokens)
    ap.add_argument("--dtype", choices=list(DTYPES), default=DEFAULT_DTYPE)
    ap.add_argument("--kernels", choices=[k for k in KERNELS if k != "batch_invariant"], default=DEFAULT_KERNELS)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    s = ServeSettings(requests=a.requests, max_batch=a.max_batch, prompt=a.prompt, new_tokens=a.new_tokens,
                      dtype=a.dtype, kernels=a.kernels, seed=a.seed)
    if bad := s.problems():
        ap.error("; ".join(f"{k}: {v}" for k, v in bad.items()))
    study = fork_study(s)
    o, i = study.ordinary, study.invariant
    print(f"prompt {s.prompt!r}, {s.new_tokens} new tokens, {s.dtype}, {s.requests} identical requests among "
          f"{s.other_requests} others, max batch {s.max_batch}, seed {s.seed}, {o.torch_threads} torch thread")
    print(f"default kernels: {o.kernels_label}")
    print(f"served alone: {s.prompt}{o.alone}")
    for c in o.completions[:5]:
        where = (f"departs at token {c.fork.position}: {c.fork.token!r} instead of {c.fork.alone_token!r}, top-2 gap "
                 f"{c.fork.gap_ulps:g} ULPs ({c.fork.gap_ratio:.2e} of the logit)" if c.fork else "same as alone")
        print(f"  {c.count:5d} x  {where}")
    for label, r in (("default", o), ("batch-invariant", i)):
        print(f"{label}: {r.rows_bits_differ:,} of {r.rows_compared:,} logit rows differ in bits from the lone run, "
              f"{r.rows_argmax_flip:,} flip the best token; smallest top-2 gap {r.min_gap_ulps:g} ULPs; "
              f"{r.tokens_per_second:,.0f} tokens/s wall, {r.cpu_tokens_per_second:,.0f} tokens/s CPU "
              f"({r.tokens:,} tokens, {r.steps:,} steps)")
    print(f"serving fork: {o.distinct} distinct completions of {o.identical_requests} identical requests "
          f"(default kernels), {i.distinct} with batch-invariant kernels; batch-invariant cost {study.cost:.2f}x")


if __name__ == "__main__":
    main()
