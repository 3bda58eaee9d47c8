"""The tolerance two correct implementations pass, before you have a mismatch.

    python -m scripts.tolerance --dtype bfloat16 --length 4096 [--scale S] [--op sum|matmul] [--accumulate F]

--length is K, the number of terms each output adds up (the inner dimension of a matrix product), --scale the
root mean square of those terms (of the products, for a matrix product; default 1). --op sum (the default) is
a library's reduction (torch.sum, np.sum, a GPU's reduction: trees, whose paths are short); --op matmul is a
matrix product or any loop that adds one term at a time (K roundings on a path). The tolerance comes from the
rounding envelope the mismatch diagnosis uses (core.studies.reproducible.suggest_tolerance). The last line
printed is ``rtol=R atol=A``, for ``torch.testing.assert_close(actual, expected, rtol=R, atol=A)``.

By default float16 and bfloat16 sums are taken to accumulate in float32, as torch's CPU and CUDA kernels do.
An implementation that accumulates in the narrow format itself (NumPy's ``np.sum`` of an ml_dtypes bfloat16
array does) needs ``--accumulate bfloat16``: its own rounding errors are far larger.
"""

from __future__ import annotations

import argparse
import sys

from core.studies.reproducible import TOLERANCE_DTYPES, TOLERANCE_OPS, suggest_tolerance


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.tolerance", description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", required=True, choices=TOLERANCE_DTYPES,
                        help="the format of the results (tf32: a float32 product on TF32 tensor cores)")
    parser.add_argument("--length", required=True, type=int, help="K: the terms each output adds up")
    parser.add_argument("--scale", type=float, default=1.0, help="root mean square of the terms (default 1)")
    parser.add_argument("--op", choices=TOLERANCE_OPS, default="sum",
                        help="sum: a library's reduction (default); matmul: a matrix product or a loop over K")
    parser.add_argument("--accumulate", default=None,
                        help="the format the sums run in (default: float32, or float64 for float64 results)")
    args = parser.parse_args(argv)
    try:
        tol = suggest_tolerance(args.dtype, args.length, args.scale, args.accumulate, args.op)
    except ValueError as err:
        parser.error(str(err))
    what = "sums (a library's reduction, " if tol.op == "sum" else "matrix products or loops ("
    print(f"{tol.dtype} results of {tol.length:,}-term {what}{tol.depth:,} roundings on a path) accumulated in "
          f"{tol.accumulate}, terms of RMS {tol.scale:g}: from the reordering envelope, rtol {tol.rtol0:.3g} and atol "
          f"{tol.atol0:.3g}, rounded up")
    print(tol.line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
