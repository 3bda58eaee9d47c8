"""Time every summation order, and the lab's whole default panel, against one np.sum.

The default panel is what the Summation lab page computes at its defaults: the default
orders, 20 random permutations, exact sums and metrics, and the running error.
Usage: python -m benchmarks.bench_sumlab [n]
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import median_time
from core.arith.vectors import VectorSpec, generate
from core.kernels.orders import DEFAULT_ORDERS, ORDERS, run_order
from core.studies.sumlab import run_lab, running_error


def main(n: int = 1_000_000) -> None:
    v = generate(VectorSpec(kind="normal", n=n, seed=0, storage="float32"))
    x = v.values
    run_lab(x, "float32", "same", DEFAULT_ORDERS, 20, 0)  # warm-up: imports, first-call costs
    t_np, _ = median_time(lambda: np.sum(x), 21)
    for key in ORDERS:
        t, _ = median_time(lambda key=key: run_order(key, x, "float32"), 3)
        print(f"{ORDERS[key].name:40s} {t * 1e3:9.2f} ms  {t / t_np:8.1f}x np.sum")

    def panel():
        run_lab(x, "float32", "same", DEFAULT_ORDERS, 20, 0)
        running_error(x, "float32")

    t_panel, _ = median_time(panel, 5)
    print(f"{'default panel (orders, 20 permutations, running error)':40s} {t_panel * 1e3:9.2f} ms")
    print(f"sumlab panel: {t_panel / t_np:.1f}x the time of one np.sum (n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
