"""This machine's per-operation fingerprint against every bundled recording, in a few seconds.

    python -m scripts.fingerprint            # compares with data/recordings/ (or FP_RECORDINGS_DIR)

It hashes the result bits of the 27 fixed operations of core.recordings.fingerprint on this CPU with torch's
configured thread count and prints, for each recording, how many operations give the same bits
here and which give other bits. Nothing is written; ``python -m scripts.capture`` makes a full
recording (sums, matrix products, 500 training steps) to commit.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from core.machines.devices import machine_facts
from core.machines.globalstate import PROCESS_THREADS
from core.recordings.fingerprint import OTHER_BITS, compare_ops, fingerprint, group_fingerprints, op_fingerprint
from core.recordings.store import load_recordings, recordings_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recordings", type=pathlib.Path, default=None, help="folder of recordings to compare with")
    args = p.parse_args(argv)
    facts = machine_facts()
    ops = op_fingerprint()
    print(f"this machine: {facts['cpu_model']} ({facts['cpu_vendor']}, family/model/stepping "
          f"{facts['cpu_family_model_stepping']}), torch capability {facts['cpu_capability']}, {facts['blas']}, "
          f"{PROCESS_THREADS} threads")
    groups = ", ".join(f"{g} {h}" for g, h in group_fingerprints(ops).items())
    print(f"fingerprint {fingerprint(ops)} ({groups})")
    for name, digest in ops.items():
        print(f"  {digest}  {name}")
    recs, problems = load_recordings(args.recordings or recordings_dir())
    for rec in recs:
        both = [c for c in compare_ops(ops, rec.op_fingerprint) if c.verdict != "not recorded on both"]
        differ = [c.name for c in both if c.verdict == OTHER_BITS]
        print(f"{rec.name}: {len(both) - len(differ)} of {len(both)} operations with the same bits"
              + (f"; other bits in: {', '.join(differ)}" if differ else ""))
    for problem in problems:
        print(f"not read: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
