"""exact_sum against math.fsum and np.sum on the same 10^7-element float32 vector.

math.fsum is given the numpy array itself, as a user would call it (it iterates numpy
scalars); its time on a pre-built Python list is printed too, for comparison. All three
results are checked: exact_sum must equal the exact value, and fsum's correctly rounded
float64 must be the float64 rounding of it.
Usage: python -m benchmarks.bench_exact [n]
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np

from benchmarks.timing import median_time
from core.arith.exact import exact_sum, exact_sum_fraction, mpf_to_fraction
from core.arith.formats import FLOAT64, round_to_format


def main(n: int = 10_000_000) -> None:
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    t_exact, ex = median_time(lambda: exact_sum(x), 7)
    t_fsum, fs = median_time(lambda: math.fsum(x), 3)
    as_list = x.tolist()
    t_fsum_list, _ = median_time(lambda: math.fsum(as_list), 3)
    t_np, _ = median_time(lambda: np.sum(x), 15)
    exact = mpf_to_fraction(ex)
    assert exact == exact_sum_fraction(x)
    assert Fraction(fs) == round_to_format(exact, FLOAT64), "fsum must be the float64 rounding of the exact sum"
    print(f"exact_sum:            {t_exact * 1e3:8.1f} ms (median of 7), exact value {float(exact)!r}")
    print(f"math.fsum(array):     {t_fsum * 1e3:8.1f} ms (median of 3)")
    print(f"math.fsum(list):      {t_fsum_list * 1e3:8.1f} ms (median of 3; the list built beforehand)")
    print(f"np.sum:               {t_np * 1e3:8.1f} ms (median of 15)")
    print(f"exact_sum: {t_fsum / t_exact:.1f}x faster than math.fsum, {t_exact / t_np:.1f}x the time of np.sum "
          f"(n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000)
