"""What recording every op costs: the tiny language model's forward pass traced and untraced.

Two runs of the model: its forward pass over 8 passages of 160 characters (its whole context; a
prefill, core.traces.models.tiny_lm_prefill; the last line), and the decode step below (the line
before it). Recording costs a roughly fixed time per op (about 0.15 ms on the 2-core development VM
under load, December 2026; 0.25 ms before the recorder's per-op work was cut) plus what grows with the
data (hashing, the float64 L1 norm), so the ratio is large where the ops are tiny (the decode step's ops
take about 15-25 microseconds each) and smaller where they compute more.

The run is the one ``python -m scripts.trace run --model tiny-lm --batch 8`` traces (core.traces.models:
eight requests' last characters through the model as one batch, after their prompts were prefilled),
called bare and under core.traces.record.run_traced (following request 0, as the command does), with
one torch thread (``--threads 1``): on a busy machine OpenMP's threads waiting for each other made the
bare 2 ms step take 100-200 ms and the ratio meaningless. Interleaved repeats, alternating which goes
first, as many for the forward pass as for the decode step (30 by default: with a third as many, the
ratio moved by 0.4 between runs on the development VM); the ratio is of the two median wall times. What the
trace pays for per op: an XXH3 (64-bit) digest of every input and of the output (copied to the CPU, cut to
request 0's rows), the output's L1 norm in float64, 32 sampled values, and for the matrix products and
sums the float64 terms of the sampled elements and the total over all elements; plus the module tracker's
hooks. It also prints the size of the trace files (the JSON that core.traces.files writes) of this run
and of the MLP training step.
Usage: python -m benchmarks.bench_trace [repeats]
"""

from __future__ import annotations

import os
import statistics
import sys
import time

from core.traces.files import dumps
from core.traces.models import RunSettings, build, threads_context, tiny_lm_prefill
from core.traces.record import run_traced
from core.traces.run import make_trace

LM = RunSettings(model="tiny-lm", batch=8, threads=1)


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


PREFILL = (8, 160)


def _ratio(root, inputs, forward, follow: int, repeats: int) -> tuple[float, float, int]:
    """(median untraced s, median traced s, ops), interleaved repeats alternating which goes first."""
    n_ops = len(run_traced(forward, root, inputs, follow))  # warm-up (and the op count)
    forward()
    bare, traced = [], []
    for i in range(repeats):
        pair = ["bare", "traced"] if i % 2 == 0 else ["traced", "bare"]
        for which in pair:
            if which == "bare":
                bare.append(_seconds(forward))
            else:
                traced.append(_seconds(lambda: run_traced(forward, root, inputs, follow)))
    return statistics.median(bare), statistics.median(traced), n_ops


def main(repeats: int = 30) -> None:
    root, inputs, forward = build(LM)
    with threads_context(LM):
        pb, pt, p_ops = _ratio(*tiny_lm_prefill(*PREFILL), PREFILL[0], repeats)
        n_ops = len(run_traced(forward, root, inputs, LM.batch))  # warm-up (and the op count)
        forward()
        print(f"load average before: {os.getloadavg()[0]:.1f}")
        bare, traced = [], []
        for i in range(repeats):
            pair = ["bare", "traced"] if i % 2 == 0 else ["traced", "bare"]  # interleaved, alternating order
            for which in pair:
                if which == "bare":
                    bare.append(_seconds(forward))
                else:
                    traced.append(_seconds(lambda: run_traced(forward, root, inputs, LM.batch)))
    b, t = statistics.median(bare), statistics.median(traced)
    print(f"untraced decode step: median {b * 1e3:.2f} ms; traced: median {t * 1e3:.2f} ms ({repeats} repeats each, "
          f"1 thread)")
    for label, s in (("tiny-lm decode step, batch 8", RunSettings(model="tiny-lm", batch=8)),
                     ("MLP training step", RunSettings())):
        trace = make_trace(s)
        size = len(dumps(trace).encode())
        print(f"trace file of the {label}: {size:,} bytes, {len(trace['ops'])} ops "
              f"({size / len(trace['ops']):,.0f} bytes per op)")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(f"decode step (8 requests, one new character each): {t / b:.2f}x the time of the untraced run "
          f"({n_ops} ops)")
    print(f"forward pass {PREFILL[0]} x {PREFILL[1]} characters: untraced median {pb * 1e3:.2f} ms, traced "
          f"{pt * 1e3:.2f} ms")
    print(f"trace overhead: {pt / pb:.2f}x the time of the untraced run (tiny-lm forward pass, "
          f"{PREFILL[0]} x {PREFILL[1]} characters, {p_ops} ops)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
