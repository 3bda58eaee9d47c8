"""Trace a model op by op, and find where two traces part.

    python -m scripts.trace run --model mlp-step --threads 1 --out a.json
    python -m scripts.trace run --model tiny-lm --batch 8 --out b.json
    python -m scripts.trace run --module path/to/file.py:make --arg width=64 --backward --out c.json
    python -m scripts.trace run --module gpt.py:make --arg batch=4 --follow-row 0 --dtype bfloat16 --out d.json
    python -m scripts.trace run --module gnn.py:make --arg graphs=4 --batch-arg graphs --follow-row 0 --out g.json
    python -m scripts.trace run --module gpt.py:make --list-ops --out e.json
    python -m scripts.trace run --module gpt.py:make --perturb-op 12 --perturb-size 6e-8 --out f.json
    python -m scripts.trace compare a.json b.json --limit 40

``run`` records every op of one run (core.traces.record: aten's and every other namespace's, such as
``quantized::linear_dynamic``; the profiler's range markers are named in a note) with the machine's facts and writes a
JSON trace file (core.traces.files: declared schema, 8 MB cap). Bundled models: ``mlp-step`` (one
training step of the Training divergence MLP) and ``tiny-lm`` (a decode step of the serving
page's language model; ``--batch B`` puts the request in a batch of B). ``--module`` imports the
file and calls ``make(**args)`` (string values), which returns ``(model, inputs)``, the inputs a
tensor, a tuple or a dict of keyword arguments; the trace covers the model's call, and with
``--backward`` the backward pass of the sum of its first floating output. ``--dtype`` casts the
model's floating parameters, buffers and inputs (bfloat16, float16, float64) or runs it under
autocast (autocast-bfloat16); a model that does not run in that format (quantized layers, the CPU's FFT in
bfloat16) is refused in one line naming where it failed. ``--follow-row R`` traces row R of the batch (the
first input's leading dimension, or the value of make()'s argument that ``--batch-arg NAME`` names: a batch of
graphs), so batch 4 compares op for op with that row alone; a tensor whose batch is not its
first dimension (an RNN's [layers, batch, hidden] state) cannot be cut, and ``run`` says so in a note.
``--list-ops`` prints every op with its number, module and output, to choose from. ``--perturb-op I``
multiplies op I's first floating output by (1 + ``--perturb-size``, 2^-10 by default; 2^-22 is a
rounding-sized plant): a planted difference, to see the judgement work (refused when op I does not
exist or has no floating output). ``run`` needs torch, NumPy and
jsonschema (and this repository), like ``scripts.capture``, so it runs in a bare GPU image: copy
the trace file back and compare it with one from your laptop, or upload both on the app's "Where
two runs part" page.

``compare`` prints the answer first (after one line on each run): the one-line answer, why (the first
difference's reason and size), the sentence on a choice that flips (when one does) and a note; then the
per-op table (``--limit N`` matched ops, 40 by default; only the ops that differ, unless ``--all``); and
ends with the one-line answer again, exactly one line of one of the forms

    first difference: op <i> of <N>, <op> in <module path>: <born here|inherited>, <within|beyond> rounding
    first difference: op <i> of <N>, <op> in <module path>: inherited, passed on
    first difference: op <i> of <N>, <op> in <module path>: not comparable, <shapes differ|reads the whole batch>
    first difference: op <i> of <N>, <op> in <module path>: format change, <format A> to <format B>
    first difference: op <j> of <M> (only in B), <op> in <module path>: format change, <from> to <to>
    first difference: none in <N> ops

where a born-within-rounding difference flips a discrete choice later (topk's experts, an argmax, a
comparison's mask, a quantizer's level), the line goes on with "; a choice flips at op <k>, <op> in <module path>".
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys


def _threads(n) -> str:
    return f"{n} thread" + ("" if n == 1 else "s")


def _device(name: str) -> str:
    """The device's name without the machine's thread count ("CPU (x86_64, 2 threads)" -> "CPU (x86_64)"):
    the run's own count is named beside it, and it may differ."""
    return re.sub(r" \((.*?), \d+ threads?\)$", r" (\1)", re.sub(r" \(\d+ threads?\)$", "", name))


def _run(args: argparse.Namespace) -> int:
    from core.traces.files import TraceFileError, write
    from core.traces.models import TRACE_MODELS, RunSettings
    from core.traces.record import TooManyOps
    from core.traces.run import make_trace

    if (args.model is None) == (args.module is None):
        print(f"give exactly one of --model ({', '.join(TRACE_MODELS)}) or --module path/to/file.py:make",
              file=sys.stderr)
        return 2
    pairs = []
    for a in args.arg or []:
        key, sep, value = a.partition("=")
        if not sep or not key.isidentifier():
            print(f"--arg takes key=value, not {a!r}", file=sys.stderr)
            return 2
        pairs.append((key, value))
    if args.module is not None and args.batch != 1:
        print("--batch is for the bundled models; pass your own batch size with --arg", file=sys.stderr)
        return 2
    s = RunSettings(model=args.model or args.module, threads=args.threads, batch=args.batch, dtype=args.dtype,
                    device=args.device, perturb_op=args.perturb_op, args=tuple(pairs), follow_row=args.follow_row,
                    perturb_size=args.perturb_size, batch_arg=args.batch_arg)
    try:
        trace = make_trace(s, backward=args.backward)
        path = write(trace, args.out)
    except (ValueError, TooManyOps, TraceFileError) as e:
        if args.debug:
            raise
        print(f"trace: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # the user's make() or model failed: say what, in one line (--debug: the traceback)
        if args.debug:
            raise
        first = (str(e).strip().splitlines() or [""])[0]
        print(f"trace: the run failed with {type(e).__name__}: {first} (--debug shows the traceback)",
              file=sys.stderr)
        return 2
    for note in trace["settings"].get("notes", []):
        print(f"note: {note}", file=sys.stderr)
    m = trace["machine"]
    if args.list_ops:
        print(f"{'op':>5}  {'op name':<44} {'module':<40} output")
        for o in trace["ops"]:
            where = o["module"] + (" (bw)" if o["backward"] else "")
            print(f"{o['index']:>5}  {o['op'][:44]:<44} {where[:40]:<40} {o['out_dtype']} {o['out_shape']}")
    print(f"wrote {path} ({path.stat().st_size:,} bytes): {len(trace['ops'])} ops of {s.model} on "
          f"{_device(m['device_name'])} ({_threads(trace['settings']['threads_used'])}, torch {m['torch_version']})"
          + ("" if args.list_ops else "; --list-ops lists them"))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from core.traces.compare import compare, table_lines
    from core.traces.files import TraceFileError, read

    try:
        a, b = read(args.a), read(args.b)
    except (OSError, TraceFileError) as e:
        print(f"trace: {e}", file=sys.stderr)
        return 2
    try:
        c = compare(a, b)
    except TraceFileError as e:
        print(f"trace: {e}", file=sys.stderr)
        return 2
    for label, t in (("A", a), ("B", b)):
        st, m = t["settings"], t["machine"]
        row = f" (row {st['follow_row']} followed)" if st.get("follow_row") is not None else ""
        print(f"{label}: {st['model']} on {_device(m['device_name'])}, {_threads(st.get('threads_used'))}, batch "
              f"{st.get('batch')}{row}, {st.get('dtype')}, torch {m['torch_version']}, {t['created']}")
    print(c.line)  # the answer first; the table after it, and the line again at its end
    if c.first is not None and c.cast is None:
        j = c.first.judgement
        size = f" {j.size.text()}." if j.size is not None else ""
        print(f"Why: {j.reason}.{size}")
    if c.flip_sentence:
        print("A choice flips: " + c.flip_sentence + ".")
    if c.note:
        print(c.note)
    print()
    print("\n".join(table_lines(c, limit=args.limit, only_differences=not args.all, note=False)))
    print(c.line)
    return 0


def main(argv: list[str] | None = None) -> int:
    from core.traces.models import DTYPES, TRACE_MODELS, batched_models, or_list

    p = argparse.ArgumentParser(prog="python -m scripts.trace", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="trace one run and write its trace file")
    r.add_argument("--model", help="a bundled model: " + "; ".join(f"{k}, {m.description}"
                                                                    for k, m in TRACE_MODELS.items()))
    r.add_argument("--module", help="path/to/file.py:make, a function returning (model, inputs)")
    r.add_argument("--arg", action="append", metavar="KEY=VALUE", help="passed to make() as a string; repeatable")
    r.add_argument("--backward", action="store_true", help="also trace the backward pass of the output's sum")
    r.add_argument("--threads", type=int, help="torch threads for this run (default: the process's)")
    r.add_argument("--batch", type=int, default=1,
                   help=f"{', '.join(batched_models())}: requests in the batch (default 1)")
    r.add_argument("--dtype", default="float32", help=or_list(DTYPES))
    r.add_argument("--device", default="cpu", help="cpu or cuda")
    r.add_argument("--follow-row", type=int, metavar="R",
                   help="--module: trace row R of the batch (the first input's leading dimension, or --batch-arg's)")
    r.add_argument("--batch-arg", metavar="NAME",
                   help="--module: the batch size is make()'s argument NAME (a batch of graphs: its graphs, not "
                   "their nodes); --follow-row cuts each tensor's first dimension into that many rows")
    r.add_argument("--perturb-op", type=int, metavar="I",
                   help="plant a difference: multiply op I's first floating output by 1 + the size (--list-ops)")
    r.add_argument("--perturb-size", type=float, default=2.0 ** -10, metavar="S",
                   help="the plant's relative size, between 0 and 1 (default 2^-10; 2^-22 is rounding-sized)")
    r.add_argument("--list-ops", action="store_true", help="print every op: its number, module and output")
    r.add_argument("--out", type=pathlib.Path, required=True, help="the trace file to write")
    r.add_argument("--debug", action="store_true", help="show the full traceback when the run fails")
    c = sub.add_parser("compare", help="compare two trace files")
    c.add_argument("a", type=pathlib.Path)
    c.add_argument("b", type=pathlib.Path)
    c.add_argument("--limit", type=int, default=40, help="rows of the per-op table (default 40)")
    c.add_argument("--all", action="store_true", help="the table lists every matched op, not only those that differ")
    args = p.parse_args(argv)
    return _run(args) if args.command == "run" else _compare(args)


if __name__ == "__main__":
    sys.exit(main())
