"""Time the instrumented paired run against two bare training loops of the same model.

The paired run trains A and B in lockstep and, after every update, records both losses
with their bits, the exact parameter distance (permutations undone), the count of
differing parameter bits and batch accuracies. The peer is what it replaces: two plain
PyTorch loops with the same model, batches and optimizer, recording nothing.
Usage: python -m benchmarks.bench_training [steps]
"""

from __future__ import annotations

import sys

from benchmarks.timing import median_time
from core.training.mlp import TrainSettings, bare_training_loop
from core.training.pair import PairedRun


def main(steps: int = 500) -> None:
    s = TrainSettings(steps=steps)
    bare_training_loop(s)  # warm-up
    t_pair, _ = median_time(lambda: PairedRun(s).run(steps), 5)
    t_bare, _ = median_time(lambda: (bare_training_loop(s), bare_training_loop(s)), 5)
    model = f"MLP 2-{s.hidden}-{s.hidden}-{s.classes}, batch {s.batch}, {s.optimizer}, {s.dtype}"
    print(f"paired run (instrumented): {t_pair * 1e3:8.1f} ms   ({t_pair / steps * 1e3:.2f} ms per step)")
    print(f"two bare training loops:   {t_bare * 1e3:8.1f} ms")
    print(f"paired run: {t_pair / t_bare:.2f}x the time of two bare training loops ({steps} steps, {model})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
