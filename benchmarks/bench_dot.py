"""exact_dot against math.fsum of the products and np.dot on the same two 10^7-element float32 vectors.

A product of two float32 values is exact in float64, so math.fsum over the float64 products is the
correctly rounded float64 of the exact dot product: the fair exact-ish competitor. It is given the
numpy array of products, as a user would write it (it iterates numpy scalars); the products are
formed inside the timed call. All results are checked: exact_dot must equal the exact value, and
fsum's result must be the float64 rounding of it.
Usage: python -m benchmarks.bench_dot [n]
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np

from benchmarks.timing import median_time
from core.arith.exact import exact_dot, exact_dot_fraction, mpf_to_fraction
from core.arith.formats import FLOAT64, round_to_format


def main(n: int = 10_000_000) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    t_exact, ex = median_time(lambda: exact_dot(x, y), 5, warmup=1)
    t_fsum, fs = median_time(lambda: math.fsum(x.astype(np.float64) * y.astype(np.float64)), 3)
    t_np, _ = median_time(lambda: np.dot(x, y), 15, warmup=1)
    exact = mpf_to_fraction(ex)
    assert exact == exact_dot_fraction(x, y)
    assert Fraction(fs) == round_to_format(exact, FLOAT64), "fsum must be the float64 rounding of the exact dot product"
    print(f"exact_dot:                  {t_exact * 1e3:8.1f} ms (median of 5), exact value {float(exact)!r}")
    print(f"math.fsum(float64 products): {t_fsum * 1e3:8.1f} ms (median of 3)")
    print(f"np.dot (float32):            {t_np * 1e3:8.1f} ms (median of 15)")
    print(f"exact_dot: {t_fsum / t_exact:.1f}x faster than math.fsum of the products, {t_exact / t_np:.1f}x the time "
          f"of np.dot (n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
