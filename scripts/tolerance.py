"""Two tolerances for two correct implementations, before you have a mismatch: typical, or guaranteed.

    python -m scripts.tolerance --dtype bfloat16 --length 4096 [--scale S] [--op sum|matmul] [--accumulate F]
                                [--guarantee]

--length is K, the number of terms each output adds up (the inner dimension of a matrix product), --scale the
root mean square of those terms (of the products, for a matrix product; default 1). --op sum (the default) is
a library's reduction (torch.sum, np.sum, a GPU's reduction: trees, whose paths are short); --op matmul is a
matrix product or any loop that adds one term at a time (K roundings on a path).

Without --guarantee it prints the *typical* tolerance: the rounding envelope the mismatch diagnosis uses, a
multiple of the typical rounding error, which assumes that the rounding errors behave independently. Sorted or
same-sign data, long left-to-right loops and NumPy's reductions along an outer axis break that assumption and
can exceed it. With --guarantee it prints a tolerance that holds for every order of summation, from the
worst-case bound gamma(K) sum|x| of each result (Higham), for terms whose RMS is at most --scale: far larger.
Both come from core.studies.reproducible.suggest_tolerance. The output is one line of words saying which kind
it is, then ``rtol=R atol=A``, for ``torch.testing.assert_close(actual, expected, rtol=R, atol=A)``.

By default float16 and bfloat16 sums are taken to accumulate in float32, as torch's CPU and CUDA kernels do.
An implementation that accumulates in the narrow format itself (NumPy's ``np.sum`` of an ml_dtypes bfloat16
array does) needs ``--accumulate bfloat16``: its own rounding errors are far larger. Where K·u >= 1 in the
accumulation format (bfloat16 from K = 256, float16 from 2,048, float32 from 2^24) no tolerance can mean
anything: the command says so in one line and exits with status 2.
"""

from __future__ import annotations

import argparse
import sys

from core.studies.reproducible import TOLERANCE_DTYPES, TOLERANCE_OPS, NoTolerance, suggest_tolerance


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
    parser.add_argument("--guarantee", action="store_true",
                        help="the tolerance that holds for every order of summation (worst case), not the typical one")
    args = parser.parse_args(argv)
    try:
        tol = suggest_tolerance(args.dtype, args.length, args.scale, args.accumulate, args.op)
    except NoTolerance as err:
        print(err, file=sys.stderr)
        return 2
    except ValueError as err:
        parser.error(str(err))
    print(tol.guarantee_words() if args.guarantee else tol.typical_words())
    print(tol.guarantee_line if args.guarantee else tol.line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
