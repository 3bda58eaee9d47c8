"""Train the Training divergence model data-parallel on W gloo processes and compare with one process.

    python -m scripts.data_parallel --world-size 2 --steps 50

W worker processes on this machine (torch.distributed, gloo backend, 127.0.0.1 only) each
train on their shard of every global batch of 1,024 examples; the gradients are all-reduced
by gloo; rank 0 also trains the same model alone on the whole batch and compares the two
step by step. Progress and memory go to stderr; the last line on stdout is one of

    data-parallel (gloo, world size W): first differs from one process at step S, first more than 1% apart at step T
    data-parallel (gloo, world size W): bit-identical to one process for N steps

(T reads "never within N steps" when the losses never part by more than 1%). A run that
cannot start or does not finish prints its reason on stderr and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from dataclasses import asdict

from core.training.data_parallel import DP_SETTINGS, MAX_LIVE_STEPS, MAX_WORLD_SIZE
from core.training.gloo import GLOO_ALGORITHM, DataParallelError, run_data_parallel
from core.training.gloo_supervisor import WorkerProgress


def _bounded(low: int, high: int, what: str):
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, not {text[:20]!r}") from None
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{what} must be between {low} and {high:,}")
        return v

    return parse


def _progress(p: WorkerProgress) -> None:
    if p.what == "starting":
        print(f"  starting: {p.done} of {p.total} workers joined the group", file=sys.stderr)
    elif p.what == "training" and (p.done % 50 == 0 or p.done == p.total):
        print(f"  step {p.done} of {p.total} (workers now {p.rss_bytes / 2**20:,.0f} MB resident)", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--world-size", type=_bounded(1, MAX_WORLD_SIZE, "--world-size"), default=2,
                   help=f"worker processes, 1 to {MAX_WORLD_SIZE} (the global batch of {DP_SETTINGS.batch:,} "
                        "examples must split evenly)")
    p.add_argument("--steps", type=_bounded(1, MAX_LIVE_STEPS, "--steps"), default=50, help="training steps")
    p.add_argument("--seed", type=_bounded(0, 2**31 - 1, "--seed"), default=DP_SETTINGS.seed,
                   help="seed of the data, the batches and the initial weights")
    p.add_argument("--json", type=pathlib.Path, default=None, help="also write the records and measurements here")
    args = p.parse_args(argv)
    if DP_SETTINGS.batch % args.world_size:
        p.error(f"--world-size must divide the global batch of {DP_SETTINGS.batch:,} examples")
    settings = DP_SETTINGS.__class__(**{**asdict(DP_SETTINGS), "seed": args.seed})
    print(f"data-parallel: {args.world_size} gloo worker(s), {args.steps} steps, global batch {settings.batch:,}",
          file=sys.stderr)
    try:
        r = run_data_parallel(args.world_size, args.steps, settings, on_progress=_progress)
    except DataParallelError as err:
        print(f"data-parallel (gloo, world size {args.world_size}): could not run: {err}", file=sys.stderr)
        return 1
    pss = f", {r.peak_pss_bytes / 2**20:,.0f} MB proportional (PSS)" if r.peak_pss_bytes else ""
    print(f"  memory of the process group: peak {r.peak_rss_bytes / 2**20:,.0f} MB resident (RSS, sampled){pss}; "
          f"each worker's own peak: {', '.join(f'{m / 2**20:,.0f}' for m in r.worker_max_rss)} MB", file=sys.stderr)
    print(f"  torch {r.torch_version}, {r.threads_per_worker[0]} thread per worker; all-reduce: {GLOO_ALGORITHM}",
          file=sys.stderr)
    print(f"  replicas identical at the end: {'yes' if r.replicas_identical else 'NO'}; started in "
          f"{r.startup_s:.1f} s, finished in {r.wall_s:.1f} s", file=sys.stderr)
    if args.json is not None:
        payload = {"world_size": r.world_size, "steps": r.steps, "settings": asdict(r.settings),
                   "summary": asdict(r.summary), "replicas_identical": r.replicas_identical,
                   "peak_rss_bytes": r.peak_rss_bytes, "peak_pss_bytes": r.peak_pss_bytes,
                   "worker_max_rss": list(r.worker_max_rss), "torch": r.torch_version,
                   "records": [asdict(x) for x in r.records]}
        try:
            args.json.write_text(json.dumps(payload, indent=1))
        except OSError as err:
            print(f"could not write {args.json}: {err.strerror or err}", file=sys.stderr)
    print(r.line())
    return 0


if __name__ == "__main__":
    sys.exit(main())
