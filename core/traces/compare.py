"""Compare two traces: align them, judge every matched op, and find where they part.

The answer is one line, in run A's numbering (ops counted from 1), one of

    first difference: op <i> of <N>, <op> in <module path>: <born here|inherited>, <within|beyond> rounding
    first difference: op <i> of <N>, <op> in <module path>: inherited, passed on
    first difference: op <i> of <N>, <op> in <module path>: not comparable, <shapes differ|reads the whole batch>
    first difference: op <i> of <N>, <op> in <module path>: format change, <format A> to <format B>
    first difference: op <j> of <M> (only in B), <op> in <module path>: format change, <format> to <format>
    first difference: none in <N> ops

(``<op>``: aten.mm.default, or another namespace's quantized.linear_dynamic.default), and, where a rounding-sized
difference flips a discrete choice after the first difference, the line goes on with ``; a choice flips at op
<k>, <op> in <module path>`` (``flip``, below).

The fifth form is a cast that only one run has (autocast's, in B's numbering; "only in A" for
A's), found before any matched op differs: the runs part there, by a change of format, and every
difference after it descends from that choice, not from rounding.

The first difference is the first matched op, in A's order, whose output bits differ, past the batch's
bookkeeping (``bookkeeping``: a tensor made from the batch's size alone, ``torch.ones(batch)``, differs in shape
and is no op of the row's arithmetic; the note counts such ops, and the line names one only where nothing else
differs). It is usually born there; when it is inherited, no earlier matched op differs, so the difference came
in through ops only one run has (listed in ``only_a`` / ``only_b``) or through the runs' inputs
(their data or parameters), and ``note`` says so. For an inherited difference the size is set
against the same op's envelope: it says whether the difference is still rounding-sized there.
For one that is not comparable, ``note`` says whether anything after it differs: bookkeeping over
the batch (an index of its rows, a check of its whole mask) often differs in shape and changes
nothing the followed row computes.

A choice that flips (``flip``): an op whose discrete output (indices of a topk, a sort or an argmax, a
comparison's mask, signs, a quantizer's levels: a floating one where its difference is passed on, larger than
a rounding) differs while the floating inputs that differ carry only rounding-sized differences
(every differing op before it is within rounding, and one was born so). From there the runs take other paths:
another expert, another token, another branch of a mask. This is the moment a serving fork or a sudden jump in
training is made of, and the comparison names it in words (``flip_sentence``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from core.arith.formats import FORMATS
from core.traces.align import Alignment, align
from core.traces.bits import COMPONENTS
from core.traces.files import TraceFileError, digest_of, ops_of
from core.traces.judge import (
    BEYOND_ROUNDING,
    BORN,
    CARRIED,
    IDENTICAL,
    INHERITED,
    NOT_COMPARABLE,
    WITHIN_ROUNDING,
    Judgement,
    judge,
)
from core.traces.opclass import discrete_kind, packet
from core.traces.oprecord import OpRecord

# the one-line answer's whole grammar (the module docstring's six forms)
LINE = re.compile(r"first difference: (?:op (?P<index>\d+) of (?P<n>\d+)(?: \(only in (?P<side>[AB])\))?, "
                  r"(?P<op>\w+\.\S+) in (?P<module>\S+): (?:(?P<state>born here|inherited), "
                  r"(?P<verdict>within rounding|beyond rounding|passed on)|not comparable, "
                  r"(?P<why>shapes differ|reads the whole batch)|format change, (?P<src>\w+) to (?P<dst>\w+))"
                  r"(?:; a choice flips at op (?P<flip>\d+), "
                  r"(?P<flip_op>\w+\.\S+) in (?P<flip_module>\S+))?|none in (?P<none>\d+) ops)")
CASTS = frozenset({"_to_copy", "to", "copy_", "_autocast_to_reduced_precision", "_autocast_to_full_precision",
                   "convert_element_type"})


def cast_formats(o: OpRecord) -> tuple[str, str] | None:
    """(from, to) when ``o`` converts one floating format into another (copy_ reads its second input)."""
    if packet(o.op) not in CASTS or not o.in_dtypes:
        return None
    src = o.in_dtypes[1] if packet(o.op) == "copy_" and len(o.in_dtypes) > 1 else o.in_dtypes[0]
    if src != o.out_dtype and src in FORMATS and o.out_dtype in FORMATS:
        return src, o.out_dtype
    return None


@dataclass(frozen=True, kw_only=True)
class Row:
    a: OpRecord
    b: OpRecord
    how: str  # how the alignment matched them
    judgement: Judgement


@dataclass(frozen=True, kw_only=True)
class Comparison:
    rows: list[Row]
    only_a: list[OpRecord]
    only_b: list[OpRecord]
    n_a: int
    n_b: int
    first: Row | None
    note: str
    cast: OpRecord | None = None  # a format change only one run has, before any matched op differs
    cast_side: str = ""  # "A" or "B": the run that has it
    flip: Row | None = None  # the first op whose discrete choice a rounding-sized difference flipped

    @property
    def line(self) -> str:
        if self.cast is not None:
            src, dst = cast_formats(self.cast)
            n = self.n_b if self.cast_side == "B" else self.n_a
            return (f"first difference: op {self.cast.index} of {n} (only in {self.cast_side}), {self.cast.op} in "
                    f"{self.cast.module}: format change, {src} to {dst}")
        if self.first is None:
            return f"first difference: none in {self.n_a} ops"
        j = self.first.judgement
        flip = "" if self.flip is None else (f"; a choice flips at op {self.flip.a.index}, {self.flip.a.op} in "
                                             f"{self.flip.a.module}")
        return (f"first difference: op {self.first.a.index} of {self.n_a}, {self.first.a.op} in "
                f"{self.first.a.module}: {j.state}, {j.verdict}{flip}")

    @property
    def flip_sentence(self) -> str:
        """The flip in one sentence ("" when no choice flips)."""
        if self.flip is None:
            return ""
        r = self.flip
        what = next((k for x in r.a.output_records() if (k := discrete_kind(x.op, x.out_dtype))), "choice")
        differ = f"{what} differs" if what.startswith("a ") else f"{what} differ"
        return (f"op {r.a.index}, {r.a.op.rsplit('.', 1)[0]} in {r.a.module}{' (backward)' if r.a.backward else ''}: a "
                f"rounding-sized difference in its input changed its choice ({differ}); from here the runs take "
                "different paths")

    def counts(self) -> Counter:
        return Counter(r.judgement.state for r in self.rows)

    @property
    def parted(self) -> bool:
        """Whether the runs differ anywhere (a matched op, or a cast one run has)."""
        return self.first is not None or self.cast is not None

    @property
    def born(self) -> list[Row]:
        return [r for r in self.rows if r.judgement.state == BORN]

    @property
    def first_beyond(self) -> Row | None:
        """The first op born beyond rounding (a suspect), if any."""
        return next((r for r in self.born if r.judgement.verdict == BEYOND_ROUNDING), None)


def bookkeeping(r: Row) -> bool:
    """Whether the op made a tensor from sizes alone, no input data, whose shape follows the batch (``torch.ones(
    batch)``, ``arange``): bookkeeping of the batch, which a followed row cannot cut, not the row's arithmetic."""
    j = r.judgement
    return j.state == NOT_COMPARABLE and j.detail == "shapes differ" and not r.a.in_shapes and not r.b.in_shapes


def compare_ops(a: list[OpRecord], b: list[OpRecord]) -> Comparison:
    al: Alignment = align(a, b)
    rows = [Row(a=a[m.a], b=b[m.b], how=m.how, judgement=judge(a[m.a], b[m.b])) for m in al.matches]
    differ = [r for r in rows if r.judgement.state != IDENTICAL]
    # the first difference of the arithmetic, past the batch's bookkeeping (where anything else differs)
    first = next((r for r in differ if not bookkeeping(r)), differ[0] if differ else None)
    kept = [r for r in differ if bookkeeping(r) and first is not None and r.a.index < first.a.index]
    cast, side = None, ""
    for side_name, ops, idx, pos in (("B", b, al.only_b, (lambda r: r.b.index)), ("A", a, al.only_a,
                                                                                  (lambda r: r.a.index))):
        found = next((ops[i] for i in idx if cast_formats(ops[i]) and (first is None or ops[i].index < pos(first))),
                     None)
        if found is not None:
            cast, side = found, side_name
            break
    note = ""
    if cast is not None:
        note = (f"Run {side} converts {cast_formats(cast)[0]} to {cast_formats(cast)[1]} at its op {cast.index} "
                f"({cast.op} in {cast.module}), which the other run has no counterpart for: the runs compute in "
                "other formats from there, so the differences after it are the format's, not rounding's.")
    elif first is not None and first.judgement.state == INHERITED:
        before_a = [a[i] for i in al.only_a if a[i].index < first.a.index]
        before_b = [b[j] for j in al.only_b if b[j].index < first.b.index]
        if before_a or before_b:
            labelled = [(o, "A") for o in before_a] + [(o, "B") for o in before_b]
            unmatched = ", ".join(f"{o.op} (op {o.index} of {side})" for o, side in labelled[:4])
            note = (f"Its inputs differ although no earlier matched op differs: the difference enters through "
                    f"ops only one run has ({unmatched}{', ...' if len(before_a) + len(before_b) > 4 else ''}).")
        elif kept:
            note = (f"Its inputs differ where {len(kept)} earlier op{'s' if len(kept) > 1 else ''} made tensors from "
                    f"the batch's size alone (the first at op {kept[0].a.index}, {kept[0].a.op}): bookkeeping of the "
                    "batch, whose shape a followed row cannot cut; no earlier op of the arithmetic differs.")
        else:
            note = ("Its inputs differ although no earlier op differs: the two runs were given other inputs "
                    "(data or parameters).")
    elif first is not None and first.judgement.state == NOT_COMPARABLE:
        note = _after_not_comparable(first, rows, [a[i] for i in al.only_a if a[i].index > first.a.index],
                                     [b[j] for j in al.only_b if b[j].index > first.b.index])
    if kept and "bookkeeping" not in note:
        note = (note + " " if note else "") + (
            f"Before it, {len(kept)} op{'s' if len(kept) > 1 else ''} made tensors from the batch's size alone (the "
            f"first at op {kept[0].a.index}, {kept[0].a.op} in {kept[0].a.module}): bookkeeping of the batch, which "
            "a followed row cannot cut, not the row's arithmetic.")
    return Comparison(
        flip=_flip(rows) if cast is None else None,
        rows=rows,
        only_a=[a[i] for i in al.only_a],
        only_b=[b[j] for j in al.only_b],
        n_a=len(a),
        n_b=len(b),
        first=first,
        note=note,
        cast=cast,
        cast_side=side,
    )


def _discrete_changed(r: Row) -> bool:
    """Whether a discrete output of the op differs: indices, a mask, integers, signs or a quantizer's levels. A
    quantizer whose output is floating (a fake quantization, a quantized layer's result) counts where the
    difference is larger than a rounding ("passed on"): a level that moved, not a grid nudged by a rounding."""
    outs_a, outs_b = r.a.output_records(), r.b.output_records()
    pairs = zip(outs_a, outs_b, strict=True) if len(outs_a) == len(outs_b) else [(r.a, r.b)]
    return any(x.out_digest != y.out_digest and (kind := discrete_kind(x.op, x.out_dtype)) and (
        kind != "quantization levels" or (x.out_dtype not in FORMATS and x.out_dtype not in COMPONENTS)
        or r.judgement.verdict == CARRIED) for x, y in pairs)


def _flip(rows: list[Row]) -> Row | None:
    """The first op whose discrete output differs, with a floating input that differs, when every difference
    born before it is born within rounding (and the first is): a choice that a rounding difference flipped.
    An inherited difference may have grown on the way (a sum that cancels turns a few ULPs of its terms into
    many of its result); it still descends from a rounding-sized one."""
    born_within = False
    for r in rows:
        j = r.judgement
        if j.state == IDENTICAL or bookkeeping(r):
            continue
        floats_differ = any(x != y and t in FORMATS
                            for x, y, t in zip(r.a.in_digests, r.b.in_digests, r.a.in_dtypes, strict=False))
        if born_within and j.state == INHERITED and floats_differ and _discrete_changed(r):
            return r
        if j.state == INHERITED and born_within:
            continue
        if j.state != BORN or j.verdict != WITHIN_ROUNDING:
            return None
        born_within = True
    return None


def _after_not_comparable(first: Row, rows: list[Row], later_a: list[OpRecord], later_b: list[OpRecord]) -> str:
    """What follows an op that cannot be compared element by element: whether anything after it differs.
    Batch bookkeeping (an index over the batch, a check of the whole batch's mask) is often not
    comparable and yet changes nothing the followed row computes; the note says which it was. Where the ops that
    read the whole batch go on to the end of the run (no op that can be compared follows the last of them), the
    row's results depend on the other rows, and the note says that instead."""
    after = [r for r in rows if r.a.index > first.a.index and r.judgement.state != IDENTICAL]
    later = [r for r in after if r.judgement.state != NOT_COMPARABLE]
    batchwide = len(after) - len(later)
    whole = [r for r in (first, *after) if r.judgement.detail == "reads the whole batch"]
    if whole and not later and not any(r.a.index > whole[-1].a.index and r.judgement.state != NOT_COMPARABLE
                                       for r in rows):
        end = whole[-1].a
        return (f"The ops that read the whole batch go on to the end of the run ({len(whole)} differ, the last at op "
                f"{end.index}, {end.op} in {end.module}), and no op that can be compared follows them: the followed "
                "row's results depend on the other rows there (a quantizer's grid taken from the whole batch, a sum "
                "over it), so the runs part in these ops, not in an op of the row's own.")
    if not later and not later_a and not later_b:
        if not batchwide:
            return ("Nothing after it differs: every later matched op is identical, so its difference reaches nothing "
                    "the runs compute after it.")
        return (f"Nothing after it that can be compared differs: every later matched op is identical or, like it, "
                f"not comparable ({batchwide} op{'s' if batchwide != 1 else ''}), so its difference reaches nothing "
                "the followed row computes.")
    parts = []
    if later:
        j = later[0].judgement
        parts.append(f"{len(later)} later matched {'op differs' if len(later) == 1 else 'ops differ'}, the first at op "
                     f"{later[0].a.index} ({later[0].a.op}: {j.state}{', ' + j.verdict if j.verdict else ''})"
                     + (": inherited from what the ops that read across the batch computed (a whole batch rounds "
                        "in other blocks than one row), not born in an op of the followed row"
                        if j.state == INHERITED and any(r.judgement.detail == "reads the whole batch"
                                                        for r in after if r.a.index < later[0].a.index) else ""))
    if later_a or later_b:
        parts.append(f"after it {len(later_a)} ops are only in A and {len(later_b)} only in B (the runs take other "
                     "paths from there)")
    return "; ".join(parts)[:1].upper() + "; ".join(parts)[1:] + "."


def compare(trace_a: dict, trace_b: dict) -> Comparison:
    """Compare two trace files (their digests must be made the same way: bits are compared through them)."""
    da, db = digest_of(trace_a), digest_of(trace_b)
    if da != db:
        raise TraceFileError(f"the two traces hash their bits in other ways ({da} against {db}): one was written by "
                             "an older version of the tracer; trace both runs with the same version")
    return compare_ops(ops_of(trace_a), ops_of(trace_b))


def table_lines(c: Comparison, limit: int = 400, only_differences: bool = False,
                note: bool = True) -> list[str]:
    """A plain-text per-op table (the command line's), at most ``limit`` rows of matched ops (``only_differences``:
    of those that differ), then the counts and, with ``note``, the flip and the note."""
    shown_rows = [r for r in c.rows if r.judgement.state != IDENTICAL] if only_differences else c.rows
    out = [f"{'op A':>5} {'op B':>5}  {'state':<14} {'verdict':<22} {'op name':<40} {'module':<28} size"]
    for r in shown_rows[:limit]:
        j = r.judgement
        size = j.size.text() if j.size is not None and j.state != IDENTICAL else ""
        out.append(f"{r.a.index:>5} {r.b.index:>5}  {j.state:<14} {j.verdict or '':<22} {r.a.op[:40]:<40} "
                   f"{(r.a.module + (' (bw)' if r.a.backward else ''))[:28]:<28} {size}")
    if len(shown_rows) > limit:
        out.append(f"... {len(shown_rows) - limit} more matched ops{' that differ' if only_differences else ''} "
                   "(--limit N shows more)")
    for label, ops in (("A", c.only_a), ("B", c.only_b)):
        if ops:
            shown = ", ".join(f"{o.index} {o.op}" for o in ops[:12])
            out.append(f"only in {label} ({len(ops)}): {shown}{' ...' if len(ops) > 12 else ''}")
    counts = c.counts()
    out.append(f"{len(c.rows)} matched ops: {counts.get('identical', 0)} identical, {counts.get('born here', 0)} born "
               f"here, {counts.get('inherited', 0)} inherited; {len(c.only_a)} only in A, {len(c.only_b)} only in B")
    if note and c.flip_sentence:
        out.append("A choice flips: " + c.flip_sentence + ".")
    if note and c.note:
        out.append(c.note)
    return out
