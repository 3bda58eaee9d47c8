"""Time the vectorized counterexample search against a per-triple loop, same triples.

The peer is the obvious implementation: for each triple, add numpy scalars both ways and
compare. Both count the same triples (checked), so the ratio is a like-for-like speed-up.
Usage: python -m benchmarks.bench_assoc [n]   (run from the repository root)
"""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.timing import median_time
from core.studies.assoc import SearchSettings, random_triples, search_counterexamples


def peer_count(triples: np.ndarray) -> int:
    n = 0
    for a, b, c in triples:
        if (a + b) + c != a + (b + c):
            n += 1
    return n




def main(n: int = 100_000) -> None:
    settings = SearchSettings(fmt_name="float32", n_triples=n, seed=0, distribution="normal")
    triples = random_triples(settings).numpy()  # float32 numpy scalars for the peer
    t_ours, ours = median_time(lambda: search_counterexamples(settings), 5)
    t_peer, peer = median_time(lambda: peer_count(triples), 3)
    assert ours.n_differ == peer, (ours.n_differ, peer)
    print(f"search_counterexamples: {t_ours * 1e3:.1f} ms (median of 5), {ours.n_differ:,} differ")
    print(f"per-triple numpy loop:  {t_peer * 1e3:.1f} ms (median of 3), {peer:,} differ")
    print(f"counterexample search: {t_peer / t_ours:.1f}x faster than a per-triple numpy-scalar loop (n={n} float32)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
