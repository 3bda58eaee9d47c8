"""Compare two traces: align them, judge every matched op, and find where they part.

The answer is one line, in run A's numbering (ops counted from 1), either

    first difference: op <i> of <N>, <aten op> in <module path>: <state>, <verdict>

with <state> "born here" or "inherited" and <verdict> "within rounding" or "beyond rounding", or

    first difference: none in <N> ops

The first difference is the first matched op, in A's order, whose output bits differ. It is
usually born there; when it is inherited, no earlier matched op differs, so the difference came
in through ops only one run has (listed in ``only_a`` / ``only_b``) or through the runs' inputs
(their data or parameters), and ``note`` says so. For an inherited difference the size is set
against the same op's envelope: it says whether the difference is still rounding-sized there.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from core.traces.align import Alignment, align
from core.traces.files import ops_of
from core.traces.judge import Judgement, judge
from core.traces.record import OpRecord


@dataclass(frozen=True)
class Row:
    a: OpRecord
    b: OpRecord
    how: str  # how the alignment matched them
    judgement: Judgement


@dataclass(frozen=True)
class Comparison:
    rows: list[Row]
    only_a: list[OpRecord]
    only_b: list[OpRecord]
    n_a: int
    n_b: int
    first: Row | None
    note: str

    @property
    def line(self) -> str:
        if self.first is None:
            return f"first difference: none in {self.n_a} ops"
        j = self.first.judgement
        return (f"first difference: op {self.first.a.index} of {self.n_a}, {self.first.a.op} in "
                f"{self.first.a.module}: {j.state}, {j.verdict}")

    def counts(self) -> Counter:
        return Counter(r.judgement.state for r in self.rows)

    @property
    def born(self) -> list[Row]:
        return [r for r in self.rows if r.judgement.state == "born here"]

    @property
    def first_beyond(self) -> Row | None:
        """The first op born beyond rounding (a suspect), if any."""
        return next((r for r in self.born if r.judgement.verdict == "beyond rounding"), None)


def compare_ops(a: list[OpRecord], b: list[OpRecord]) -> Comparison:
    al: Alignment = align(a, b)
    rows = [Row(a[m.a], b[m.b], m.how, judge(a[m.a], b[m.b])) for m in al.matches]
    first = next((r for r in rows if r.judgement.state != "identical"), None)
    note = ""
    if first is not None and first.judgement.state == "inherited":
        before_a = [a[i] for i in al.only_a if a[i].index < first.a.index]
        before_b = [b[j] for j in al.only_b if b[j].index < first.b.index]
        if before_a or before_b:
            labelled = [(o, "A") for o in before_a] + [(o, "B") for o in before_b]
            unmatched = ", ".join(f"{o.op} (op {o.index} of {side})" for o, side in labelled[:4])
            note = (f"Its inputs differ although no earlier matched op differs: the difference enters through "
                    f"ops only one run has ({unmatched}{', ...' if len(before_a) + len(before_b) > 4 else ''}).")
        else:
            note = ("Its inputs differ although no earlier op differs: the two runs were given other inputs "
                    "(data or parameters).")
    return Comparison(rows, [a[i] for i in al.only_a], [b[j] for j in al.only_b], len(a), len(b), first, note)


def compare(trace_a: dict, trace_b: dict) -> Comparison:
    return compare_ops(ops_of(trace_a), ops_of(trace_b))


def table_lines(c: Comparison, limit: int = 400) -> list[str]:
    """A plain-text per-op table (the command line's), at most ``limit`` rows of matched ops."""
    out = [f"{'op A':>5} {'op B':>5}  {'state':<10} {'verdict':<16} {'aten op':<40} {'module':<28} size"]
    for r in c.rows[:limit]:
        j = r.judgement
        size = j.size.text() if j.size is not None and j.state != "identical" else ""
        out.append(f"{r.a.index:>5} {r.b.index:>5}  {j.state:<10} {j.verdict or '':<16} {r.a.op[:40]:<40} "
                   f"{(r.a.module + (' (bw)' if r.a.backward else ''))[:28]:<28} {size}")
    if len(c.rows) > limit:
        out.append(f"... {len(c.rows) - limit} more matched ops")
    for label, ops in (("A", c.only_a), ("B", c.only_b)):
        if ops:
            shown = ", ".join(f"{o.index} {o.op}" for o in ops[:12])
            out.append(f"only in {label} ({len(ops)}): {shown}{' ...' if len(ops) > 12 else ''}")
    counts = c.counts()
    out.append(f"{len(c.rows)} matched ops: {counts.get('identical', 0)} identical, {counts.get('born here', 0)} born "
               f"here, {counts.get('inherited', 0)} inherited; {len(c.only_a)} only in A, {len(c.only_b)} only in B")
    if c.note:
        out.append(c.note)
    return out
