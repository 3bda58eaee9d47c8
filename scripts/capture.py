"""Capture a recording of the fixed suite on this machine's GPU (or its CPU, when it has none).

    python -m scripts.capture                 # full suite, writes data/recordings/v2-<device>-<time>.json
    python -m scripts.capture --quick --out /tmp/rec   # small sizes (what CI exercises)

The file (format version 2, core.recordings.schema) holds a provenance object (CPU model,
SIMD capability, BLAS/oneDNN builds, threads, NumPy, OS; for a GPU also its compute
capability, SM count, driver, CUDA and cuBLAS versions; numeric environment variables),
every result as the hex of its bits, and the per-operation fingerprint of core.recordings.fingerprint,
so a capture from another machine tells by itself in which operation it parts from this
one. Commit recordings under data/recordings/; the app replays them with their provenance.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

from core.recordings.capture import capture
from core.recordings.fidelity import model_fidelity
from core.recordings.fingerprint import fingerprint, group_fingerprints
from core.recordings.store import DEFAULT_DIR, Recording, write_recording


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=pathlib.Path, default=DEFAULT_DIR, help="folder for the JSON file")
    p.add_argument("--quick", action="store_true", help="sizes 10^3 and 10^5 only, 100 training steps")
    p.add_argument("--no-throughput", action="store_true",
                   help="skip the float32/float64 timings (for a capture of the same hardware in another numeric "
                        "configuration, e.g. MKL_CBWR=COMPATIBLE, where only the bits matter)")
    args = p.parse_args(argv)
    rec = capture(quick=args.quick, throughput=not args.no_throughput)
    path = write_recording(rec, args.out)
    fid = model_fidelity(Recording.from_dict(str(path), rec))
    print(f"wrote {path} ({path.stat().st_size:,} bytes): {len(rec['sums'])} sums, {len(rec['matmuls'])} matmuls, "
          f"{len(rec['training'])} training pairs")
    groups = ", ".join(f"{g} {h}" for g, h in group_fingerprints(rec["op_fingerprint"]).items())
    print(f"machine fingerprint {fingerprint(rec['op_fingerprint'])} ({groups})")
    print(f"model fidelity: {fid.matched}/{fid.compared} bit-identical ({fid.conditions})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
