"""Match the ops of two traces whose sequences need not be equal.

A fused kernel on one device and a decomposition on another, an autocast that inserts casts, a
version that dispatches one more op: two runs of one model rarely give op lists of the same
length. The alignment matches in passes, each inside the gaps the previous one left, keeping the
order of both runs (the common head and tail, then ``difflib.SequenceMatcher``, a
longest-matching-blocks alignment, without its "junk" heuristic, on what lies between):

1. *exact*: the same module path, op, pass (forward or backward), input shapes and output shape;
2. *fuzzy*: the same module path, op name (any overload) and pass;
3. *by shape*: the same op name and output shape, in any module.

What is still unmatched is listed, never dropped: those ops exist in one run only (or lie in a
differing stretch of more than ``MAX_GAP_CELLS`` op pairs, which is not searched: it would cost minutes).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from core.traces.opclass import packet
from core.traces.oprecord import OpRecord

PASSES = ("exact", "fuzzy", "by shape")
MAX_GAP_CELLS = 4_000_000  # a differing stretch longer than about 2,000 x 2,000 ops stays unmatched (listed)


@dataclass(frozen=True)
class Match:
    a: int  # position in run A's op list (0-based)
    b: int
    how: str  # one of PASSES


@dataclass(frozen=True)
class Alignment:
    matches: list[Match]  # in the order of both runs
    only_a: list[int]  # positions in A with no partner
    only_b: list[int]


def _key(op: OpRecord, how: str):
    if how == "exact":
        return op.module, op.op, op.backward, tuple(map(tuple, op.in_shapes)), tuple(op.out_shape)
    if how == "fuzzy":
        return op.module, packet(op.op), op.backward
    return packet(op.op), tuple(op.out_shape)


def _pass(a: list[OpRecord], b: list[OpRecord], ia: list[int], ib: list[int], how: str) -> list[Match]:
    ka = [_key(a[i], how) for i in ia]
    kb = [_key(b[j], how) for j in ib]
    # the common head and tail first (as diff does): difflib's longest block alone can pair a run of
    # repeated ops with the wrong copies (x x x against x z x x: A's first two x with B's last two)
    head = 0
    while head < min(len(ka), len(kb)) and ka[head] == kb[head]:
        head += 1
    tail = 0
    while tail < min(len(ka), len(kb)) - head and ka[-1 - tail] == kb[-1 - tail]:
        tail += 1
    out = [Match(ia[t], ib[t], how) for t in range(head)]
    mid_a, mid_b = ka[head:len(ka) - tail], kb[head:len(kb) - tail]
    if len(mid_a) * len(mid_b) <= MAX_GAP_CELLS:  # difflib is quadratic on repeated keys: bound its work
        sm = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=False)
        for blk in sm.get_matching_blocks():
            out.extend(Match(ia[head + blk.a + t], ib[head + blk.b + t], how) for t in range(blk.size))
    out.extend(Match(ia[len(ka) - tail + t], ib[len(kb) - tail + t], how) for t in range(tail))
    return out


def _gaps(matches: list[Match], na: int, nb: int):
    """The unmatched runs of both sequences between consecutive matches."""
    pa, pb = -1, -1
    for m in [*matches, Match(na, nb, "end")]:
        if m.a - pa > 1 or m.b - pb > 1:
            yield list(range(pa + 1, m.a)), list(range(pb + 1, m.b))
        pa, pb = m.a, m.b


def align(a: list[OpRecord], b: list[OpRecord]) -> Alignment:
    matches = _pass(a, b, list(range(len(a))), list(range(len(b))), "exact")
    for how in PASSES[1:]:
        found = []
        for ga, gb in _gaps(matches, len(a), len(b)):
            if ga and gb:
                found.extend(_pass(a, b, ga, gb, how))
        matches = sorted(matches + found, key=lambda m: m.a)
    matched_a = {m.a for m in matches}
    matched_b = {m.b for m in matches}
    return Alignment(matches, [i for i in range(len(a)) if i not in matched_a],
                     [j for j in range(len(b)) if j not in matched_b])
