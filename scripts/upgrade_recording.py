"""Upgrade a version-1 recording to version 2, results unchanged bit for bit.

    python -m scripts.upgrade_recording OLD.json --out data/recordings \
        [--facts facts.json --ops op_hashes.txt --note "where the attached facts come from"]

Version 1 did not record the CPU model, SIMD capability, BLAS build or per-operation
hashes. Facts known about the capturing machine from elsewhere (its owner's notes) can be
attached with ``--facts`` (a JSON object of provenance fields) and ``--ops`` (lines
``<16 hex digits>  <operation name>`` as printed by shared/recordings/op_fingerprint.py);
``--note`` then says where they came from, and the page shows that note with them.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

from core.recordings.fingerprint import OPS
from core.recordings.store import Recording, upgrade_v1, write_recording


def read_ops(text: str) -> dict[str, str]:
    """``<hash>  <name>`` lines (other lines ignored); names must be operations of core.recordings.fingerprint."""
    known = {op.name for op in OPS}
    out = {}
    for line in text.splitlines():
        digest, _, name = line.strip().partition("  ")
        if len(digest) == 16 and all(c in "0123456789abcdef" for c in digest):
            if name.strip() not in known:
                raise ValueError(f"unknown operation {name.strip()!r}")
            out[name.strip()] = digest
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("recording", type=pathlib.Path)
    p.add_argument("--out", type=pathlib.Path, required=True)
    p.add_argument("--facts", type=pathlib.Path)
    p.add_argument("--ops", type=pathlib.Path)
    p.add_argument("--note")
    args = p.parse_args(argv)
    data = json.loads(args.recording.read_text())
    if data.get("format_version") != 1:
        print(f"{args.recording}: not a version-1 recording", file=sys.stderr)
        return 2
    facts = json.loads(args.facts.read_text()) if args.facts else None
    ops = read_ops(args.ops.read_text()) if args.ops else None
    new = upgrade_v1(data, facts, ops, args.note)
    path = write_recording(new, args.out)
    Recording.from_dict(str(path), new)
    print(f"wrote {path}: {len(new['sums'])} sums, {len(new['matmuls'])} matmuls, {len(new['training'])} training "
          f"pairs unchanged; {len(new['op_fingerprint'])} operation hashes attached")
    return 0


if __name__ == "__main__":
    sys.exit(main())
