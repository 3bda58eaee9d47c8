"""scripts.serve_fork ends with one summary line (K distinct completions of N identical requests with the
default kernels, K2 with batch-invariant ones, and the cost), whatever K this machine gives (never asserted)."""

from __future__ import annotations

import re

from scripts import serve_fork


def test_serve_fork_ends_with_its_summary_line(capsys):
    serve_fork.main(["--requests", "6", "--max-batch", "4", "--new-tokens", "8"])
    lines = capsys.readouterr().out.strip().splitlines()
    m = re.fullmatch(
        r"serving fork: (\d+) distinct completions of (\d+) identical requests \(default kernels\), (\d+) with "
        r"batch-invariant kernels; batch-invariant cost \d+(\.\d+)?x", lines[-1])
    assert m, lines[-1]
    k, n, k2 = int(m.group(1)), int(m.group(2)), int(m.group(3))
    assert n == 6 and 1 <= k <= n
    assert k2 == 1  # batch-invariant kernels: one completion for every schedule (an invariant, on every machine)
