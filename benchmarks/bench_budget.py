"""Check core.crowd.budget's cost model against this machine: work and peak memory, model vs measured.

Work is measured as CPU time of the computing thread (time.thread_time, so other load on
the machine cancels out, and torch runs with one thread) divided by the time of the unit,
one float32 value through np.add.accumulate; memory as tracemalloc's peak above what was
held before (NumPy reports its arrays to tracemalloc), the vector included. A ratio of 1 is
a perfect model; above 1 the model overestimates (safe), below 1 it underestimates.

Usage: python -m benchmarks.bench_budget [n]   (default 1,000,000; the weights were set from
runs at 10^6 and 10^7)
"""

from __future__ import annotations

import statistics
import sys
import time
import tracemalloc

import numpy as np

from core.arith.vectors import GENERATORS, VectorSpec, generate
from core.crowd import budget
from core.kernels.orders import DEFAULT_ORDERS, ORDERS, permutation_sums, run_order
from core.machines.globalstate import torch_threads
from core.studies.sumlab import run_lab, running_error


def cpu(fn, repeats: int = 1) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def peak(fn) -> float:
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main(n: int = 1_000_000) -> dict:
    x32 = generate(VectorSpec(kind="normal", n=n, seed=0, storage="float32")).values
    unit = cpu(lambda: np.add.accumulate(x32), 5) / n
    print(f"unit: {unit * 1e9:.2f} ns of CPU per value operation (n = {n:,})")
    work_ratios, byte_ratios = [], []

    def report(what: str, model_work: float, seconds: float, model_bytes: float | None = None,
               bytes_: float | None = None) -> None:
        measured = seconds / unit
        r = model_work / measured if measured > 0 else float("inf")
        work_ratios.append(r)
        line = f"{what:52s} model {budget.amount(model_work):>13s}  measured {budget.amount(measured):>13s}  {r:5.2f}x"
        if model_bytes is not None and bytes_:
            br = model_bytes / bytes_
            byte_ratios.append(br)
            line += f"   memory {model_bytes / 2**20:7.1f} MB vs {bytes_ / 2**20:7.1f} MB  {br:5.2f}x"
        print(line)

    with torch_threads(1):
        for dtype in ("float64", "float32", "float16", "bfloat16"):
            x = generate(VectorSpec(kind="normal", n=n, seed=0, storage=dtype)).values
            for key in ORDERS:
                report(f"{key} ({dtype})", budget.ORDER_WORK[key][dtype] * n,
                       cpu(lambda k=key, x=x, d=dtype: run_order(k, x, d)))
            k = budget.permutations_done(20, n)
            w = budget.PERMUTATION_WORK_SMALL if n <= budget.PERMUTATION_SMALL_N else budget.PERMUTATION_WORK_LARGE
            report(f"{k} permutations ({dtype})", w * k * n, cpu(lambda x=x, k=k: permutation_sums(x, k, 0)))
            report(f"running error ({dtype})", budget.RUNNING_FIXED[dtype] + budget.RUNNING_WORK[dtype] * n,
                   cpu(lambda x=x, d=dtype: running_error(x, d)))
            for gen in GENERATORS:
                spec = VectorSpec(kind=gen, n=n, seed=0, storage=dtype)
                work, bytes_ = budget.vector_cost(gen, n, dtype)
                if gen != "large_one_minus_large":
                    report(f"generate {gen} ({dtype})", work, cpu(lambda s=spec: generate(s)), bytes_,
                           peak(lambda s=spec: generate(s)))
        cases = [("normal", "float32", "same", DEFAULT_ORDERS, 20), ("ill_conditioned", "float64", "same",
                                                                   tuple(ORDERS), 1000),
                 ("alternating", "float16", "float64", DEFAULT_ORDERS, 5), ("normal", "float64", "float32",
                                                                          tuple(ORDERS), 0)]
        for gen, storage, working, orders, k in cases:
            spec = VectorSpec(kind=gen, n=n, seed=0, storage=storage)
            cost = budget.sumlab_cost(n, storage, working, orders, k, gen)

            def request(spec=spec, storage=storage, working=working, orders=orders, k=k):
                v = generate(spec)
                run_lab(v.values, storage, working, orders, k, 0)
                running_error(v.values, storage if working == "same" else working)

            report(f"lab request {gen} {storage}->{working}, {len(orders)} orders, k={k}", cost.work, cpu(request),
                   cost.peak_bytes, peak(request))
        from core.training.mlp import TrainSettings
        from core.training.seeds import train_seed

        steps = max(20, min(200, n // 5000))
        train_seed(TrainSettings(steps=2))  # warm-up: the data set, first-call costs
        for dtype, opt in (("float32", "sgd_momentum"), ("float64", "sgd_momentum"), ("float32", "adam")):
            s = TrainSettings(steps=steps, dtype=dtype, optimizer=opt)
            cost = budget.training_cost(steps, 1, dtype, opt)
            report(f"one seed of the pair, {steps} steps ({dtype}, {opt})", cost.work, cpu(lambda s=s: train_seed(s)))
    lo, hi = min(work_ratios), max(work_ratios)
    out = {"work_min": lo, "work_median": statistics.median(work_ratios), "work_max": hi,
           "bytes_min": min(byte_ratios), "bytes_max": max(byte_ratios)}
    print(f"budget model: model/measured work {lo:.2f}x to {hi:.2f}x (median {out['work_median']:.2f}x), "
          f"memory {out['bytes_min']:.2f}x to {out['bytes_max']:.2f}x over {len(work_ratios)} cases (n={n})")
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
