"""The bundled pairs of traces that the "Where two runs part" page computes live, and what the page
shows of a comparison (the timeline, the rows, the provenance), as plain values.

Every bundled pair is traced on this server when asked (nothing recorded, nothing planted but the
one pair that says it is planted):

- ``lm-batch``: the tiny language model's decode step for one request alone and in a batch of 8;
- ``mlp-threads``: the Training divergence MLP's training step with all of this server's threads
  and with one;
- ``mlp-bf16``: the same step in float32 and under bfloat16 autocast;
- ``mlp-planted``: the same step, with op ``PLANTED_OP`` (the first layer's matrix product)
  multiplied by 1 + 2^-10 in B: a deliberately planted bug, to show what "beyond rounding" looks like.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.traces.compare import Comparison, cast_formats, compare
from core.traces.judge import (
    BEYOND_ROUNDING,
    BORN,
    FORMAT_CHANGE,
    IDENTICAL,
    INHERITED,
    NOT_COMPARABLE,
    WITHIN_ROUNDING,
)
from core.traces.models import RunSettings
from core.traces.opclass import packet
from core.traces.run import make_trace

PLANTED_OP = 1


@dataclass(frozen=True, kw_only=True)
class TracePair:
    """A bundled pair of runs to trace and compare: A's and B's settings, their names, and what B changes."""

    key: str
    label: str
    a: RunSettings
    b: RunSettings
    a_name: str
    b_name: str
    note: str


PAIRS: dict[str, TracePair] = {
    p.key: p
    for p in [
        TracePair(
            key="lm-batch",
            label="Language model: one request alone vs in a batch of 8",
            a=RunSettings(model="tiny-lm"),
            b=RunSettings(model="tiny-lm", batch=8),
            a_name="batch 1",
            b_name="batch 8",
            note="One decode step of the Serving page's model. B's request shares every matrix product with 7 others; "
            "the trace follows its own rows.",
        ),
        TracePair(
            key="mlp-threads",
            label="Training step: all threads vs one thread",
            a=RunSettings(model="mlp-step"),
            b=RunSettings(model="mlp-step", threads=1),
            a_name="all threads",
            b_name="1 thread",
            note="One training step (forward, loss, backward, SGD) of the Training divergence MLP, with this server's "
            "thread count and with one.",
        ),
        TracePair(
            key="mlp-bf16",
            label="Training step: float32 vs bfloat16 autocast",
            a=RunSettings(model="mlp-step"),
            b=RunSettings(model="mlp-step", dtype="autocast-bfloat16"),
            a_name="float32",
            b_name="bfloat16 autocast",
            note="The same step with B's forward pass under torch.autocast(bfloat16): autocast adds casts that A has "
            "not, so the runs part at B's first cast, a format change rather than a rounding difference.",
        ),
        TracePair(
            key="mlp-planted",
            label="Training step with a planted bug in one op",
            a=RunSettings(model="mlp-step"),
            b=RunSettings(model="mlp-step", perturb_op=PLANTED_OP),
            a_name="plain",
            b_name="planted bug",
            note=f"B multiplies the output of op {PLANTED_OP} by 1 + 2⁻¹⁰ on purpose: a bug, not rounding. The "
            "judgement should say so.",
        ),
    ]
}
DEFAULT_PAIR = "lm-batch"
ONLY_ONE = "only in one run"  # a timeline state beside the judgement's: an op that has no partner
STATE_ORDER = (IDENTICAL, f"{BORN}, {WITHIN_ROUNDING}", f"{BORN}, {BEYOND_ROUNDING}", INHERITED, FORMAT_CHANGE,
               NOT_COMPARABLE, ONLY_ONE)


@dataclass(frozen=True, kw_only=True)
class PairResult:
    pair: TracePair
    trace_a: dict
    trace_b: dict
    comparison: Comparison


def run_pair(key: str) -> PairResult:
    pair = PAIRS[key]
    a, b = make_trace(pair.a), make_trace(pair.b)
    return PairResult(pair=pair, trace_a=a, trace_b=b, comparison=compare(a, b))


@dataclass(frozen=True, kw_only=True)
class TimelinePoint:
    index: int  # op number in A (ops only in B: the A number of the op before them, + 0.5)
    state: str  # one of STATE_ORDER
    op: str
    module: str
    detail: str


def timeline(c: Comparison) -> list[TimelinePoint]:
    """Every op of both runs, in A's order, with its state for the timeline chart."""
    pts = []
    for r in c.rows:
        j = r.judgement
        state = j.state if j.state != BORN else f"{BORN}, {j.verdict}"
        detail = j.size.text() if j.size is not None and j.state != IDENTICAL else j.reason
        pts.append(
            TimelinePoint(
                index=r.a.index,
                state=state,
                op=packet(r.a.op),
                module=r.a.module + (" (backward)" if r.a.backward else ""),
                detail=detail,
            )
        )
    for o in c.only_a:
        pts.append(TimelinePoint(index=o.index, state=ONLY_ONE, op=packet(o.op), module=o.module, detail="only in A"))
    b_to_a = {r.b.index: r.a.index for r in c.rows}
    for o in c.only_b:
        before = max((bi for bi in b_to_a if bi < o.index), default=None)
        cast = cast_formats(o)
        pts.append(
            TimelinePoint(
                index=(b_to_a[before] if before is not None else 0) + 0.5,
                state=FORMAT_CHANGE if cast else ONLY_ONE,
                op=packet(o.op),
                module=o.module,
                detail=f"only in B (its op {o.index})" + (f": a cast from {cast[0]} to {cast[1]}" if cast else ""),
            )
        )
    return sorted(pts, key=lambda p: p.index)


def provenance(trace: dict) -> str:
    """One line: what ran where (plain text; the page shows it inert)."""
    s, m = trace["settings"], trace["machine"]
    row = f" (row {s['follow_row']} followed)" if s.get("follow_row") is not None else ""
    extra = [f"batch {s['batch']}{row}" if s.get("batch", 1) != 1 else "", str(s.get("dtype") or ""),
             f"op {s['perturb_op']} perturbed" if s.get("perturb_op") else ""]
    cpu = m.get("cpu_model") or ""
    return (f"{s['model']} on {m['device_name']}" + (f" ({cpu}, {m.get('cpu_capability')})" if cpu else "")
            + f", {s.get('threads_used')} threads, " + ", ".join(e for e in extra if e)
            + f", torch {m['torch_version']}, traced {trace['created']}")[:600]
