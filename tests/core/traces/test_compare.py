"""core.traces.compare: the one-line answer on the bundled models (invariants, not this machine's answer)."""

from __future__ import annotations

import re

import pytest

from core.traces.compare import compare, compare_ops, table_lines
from core.traces.models import RunSettings
from core.traces.record import OpRecord
from core.traces.run import make_trace

LINE = re.compile(r"first difference: (?:op (\d+) of (\d+), (aten\.\S+) in (\S+): (born here|inherited), "
                  r"(within rounding|beyond rounding)|none in (\d+) ops)")


@pytest.fixture(scope="module")
def traces() -> dict[str, dict]:
    return {
        "mlp": make_trace(RunSettings()),
        "mlp-1-thread": make_trace(RunSettings(threads=1)),
        "mlp-perturbed": make_trace(RunSettings(perturb_op=3)),
        "lm-1": make_trace(RunSettings(model="tiny-lm")),
        "lm-8": make_trace(RunSettings(model="tiny-lm", batch=8)),
    }


def test_a_trace_against_itself(traces):
    for t in traces.values():
        c = compare(t, t)
        n = len(t["ops"])
        assert c.line == f"first difference: none in {n} ops" and LINE.fullmatch(c.line)
        assert c.counts() == {"identical": n} and not c.only_a and not c.only_b and c.first_beyond is None
        assert table_lines(c)[-1].startswith(f"{n} matched ops: {n} identical")


def test_the_planted_difference_is_found_born_and_beyond(traces):
    a, b = traces["mlp"], traces["mlp-perturbed"]
    c = compare(a, b)
    assert c.line == (f"first difference: op 3 of {len(a['ops'])}, aten.addmm.default in model.fc2: born here, "
                      f"beyond rounding")
    assert c.first_beyond is c.first and c.note == ""
    assert b["settings"]["perturb_op"] == 3 and b["settings"]["perturb_size"] == 2.0 ** -10
    later = [r for r in c.rows if r.a.index > 3 and r.judgement.state != "identical"]
    assert later and all(r.judgement.state == "inherited" for r in later[:3])


def _reduction_within(c) -> None:
    """If the two runs differ at all, the first difference is born in a reduction, within rounding."""
    assert LINE.fullmatch(c.line), c.line
    if c.first is None:
        return
    j = c.first.judgement
    assert j.state == "born here" and c.first.a.k is not None, c.line
    assert j.verdict == "within rounding", (c.line, j.size)
    assert all(r.judgement.state == "identical" for r in c.rows if r.a.index < c.first.a.index)


def test_batch_one_against_batch_eight(traces):
    a, b = traces["lm-1"], traces["lm-8"]
    assert len(a["ops"]) == len(b["ops"])  # following request 0, the two traces align op for op
    c = compare(a, b)
    assert all(r.how == "exact" for r in c.rows) and not c.only_a and not c.only_b
    assert [o["out_shape"] for o in a["ops"]] == [o["out_shape"] for o in b["ops"]]
    _reduction_within(c)


def test_one_thread_against_the_process_threads(traces):
    _reduction_within(compare(traces["mlp-1-thread"], traces["mlp"]))


def test_an_extra_op_between_repeated_ops_is_not_a_difference():
    """A run with one more op (a cast, say) between ops that repeat: every common op pairs with its copy,
    so bit-identical runs have no difference (a longest-block alignment alone paired the wrong copies)."""
    def rec(i: int, name: str, out: str, inp: str) -> OpRecord:
        return OpRecord(index=i, op=name, module="model", backward=False, in_shapes=[[2]], in_dtypes=["float32"],
                        in_digests=[inp], args="T", out_shape=[2], full_shape=[2], out_dtype="float32", out_digest=out,
                        l1=2.0, sample_index=[0, 1], sample_hex=["3f800000", "3f800000"], k=None, terms_kind=None,
                        sum_abs=None, scale=None, total_abs=None)

    d = [f"{n:016x}" for n in range(6)]
    a = [rec(1, "aten.tanh.default", d[1], d[0]), rec(2, "aten.tanh.default", d[2], d[1]),
         rec(3, "aten.tanh.default", d[3], d[2])]
    b = [a[0], rec(2, "aten.clone.default", d[5], d[1]), *(OpRecord.from_dict(o.to_dict() | {"index": o.index + 1})
                                                           for o in a[1:])]
    c = compare_ops(a, b)
    assert c.line == "first difference: none in 3 ops"
    assert [o.op for o in c.only_b] == ["aten.clone.default"] and not c.only_a


def test_autocast_parts_at_its_first_cast(traces):
    """B under bfloat16 autocast: the first difference is a cast only B has, named as a format change."""
    from core.traces.compare import LINE as GRAMMAR

    a, b = traces["mlp"], make_trace(RunSettings(dtype="autocast-bfloat16"))
    c = compare(a, b)
    m = GRAMMAR.fullmatch(c.line)
    assert m and m["side"] == "B" and (m["src"], m["dst"]) == ("float32", "bfloat16"), c.line
    assert m["op"] == "aten._to_copy.default" and int(m["n"]) == len(b["ops"])
    assert c.cast is not None and c.cast in c.only_b and c.parted and "converts float32 to bfloat16" in c.note
    # every op B has before the cast is matched and identical
    assert all(r.judgement.state == "identical" for r in c.rows if r.b.index < c.cast.index)


def test_every_line_fits_the_grammar(traces):
    from core.traces.compare import LINE as GRAMMAR

    for x in traces.values():
        for y in traces.values():
            assert GRAMMAR.fullmatch(compare(x, y).line)


def _op(i: int, name: str, out: str, inp: str, shape: list[int], hexes: list[str]) -> OpRecord:
    return OpRecord(index=i, op=name, module="model", backward=False, in_shapes=[shape], in_dtypes=["float32"],
                    in_digests=[inp], args="T", out_shape=shape, full_shape=shape, out_dtype="float32",
                    out_digest=out, l1=float(len(hexes)), sample_index=list(range(len(hexes))), sample_hex=hexes,
                    k=None, terms_kind=None, sum_abs=None, scale=None, total_abs=None)


def test_a_not_comparable_op_says_whether_anything_after_it_differs():
    """An index over the batch has another shape in a batch of 4 than alone; if nothing after it differs,
    the note says so (the answer stays the not-comparable one); if something does, it names the first."""
    one = ["3f800000"] * 2
    a = [_op(1, "aten.arange.default", "a1", "x", [1], one[:1]), _op(2, "aten.tanh.default", "a2", "x", [2], one),
         _op(3, "aten.tanh.default", "a3", "a2", [2], one)]
    b = [_op(1, "aten.arange.default", "b1", "x", [4], one * 2), *a[1:]]
    c = compare_ops(a, b)
    assert c.line == "first difference: op 1 of 3, aten.arange.default in model: not comparable, shapes differ"
    assert c.note.startswith("Nothing after it differs: every later matched op is identical"), c.note

    b2 = [b[0], a[1], _op(3, "aten.tanh.default", "b3", "a2", [2], ["3f800001", "3f800000"])]
    c2 = compare_ops(a, b2)
    assert c2.line == c.line
    assert c2.note.startswith("1 later matched op differs, the first at op 3 (aten.tanh.default: born here, "), c2.note
    assert "only in" not in c2.note


def test_an_exact_op_passes_on_an_inherited_difference_larger_than_a_rounding():
    """A copy of inputs that already differ by 64 ULPs adds no error of its own: "inherited, passed on", not
    "beyond rounding" (kept for what an op adds); 2 ULPs carried reads as rounding-sized."""
    from core.traces.judge import CARRIED, INHERITED, WITHIN_ROUNDING

    def clone(i, out, inp, hexes):
        return _op(i, "aten.clone.default", out, inp, [2], hexes)

    a = [clone(1, "a1", "x", ["3f800000", "40000000"])]
    far = compare_ops(a, [clone(1, "b1", "y", ["3f800040", "40000000"])])  # 1 + 64 ULPs
    j = far.rows[0].judgement
    assert j.state == INHERITED and j.verdict == CARRIED and j.size.carried and not j.size.within
    assert far.line == "first difference: op 1 of 1, aten.clone.default in model: inherited, passed on"
    from core.traces.compare import LINE as GRAMMAR

    assert GRAMMAR.fullmatch(far.line)
    near = compare_ops(a, [clone(1, "b1", "y", ["3f800002", "40000000"])])
    assert near.rows[0].judgement.verdict == WITHIN_ROUNDING
    born = compare_ops(a, [clone(1, "b1", "x", ["3f800040", "40000000"])])  # the same input: born, not carried
    assert born.rows[0].judgement.verdict == "beyond rounding"
