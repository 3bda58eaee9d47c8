"""core.traces.align: three passes (exact, fuzzy, by shape) that keep both runs' order and drop nothing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from core.traces.align import PASSES, _key, align
from core.traces.record import OpRecord


def op(name: str = "aten.add.Tensor", module: str = "model", out=(2, 3), ins=((2, 3),), bw: bool = False,
       index: int = 1) -> OpRecord:
    return OpRecord(index=index, op=name, module=module, backward=bw, in_shapes=[list(s) for s in ins],
                    in_dtypes=["float32"] * len(ins), in_digests=["00" * 8] * len(ins), args="T", out_shape=list(out),
                    full_shape=list(out), out_dtype="float32", out_digest="00" * 8, l1=None, sample_index=[],
                    sample_hex=[], k=None, terms_kind=None, sum_abs=None, scale=None, total_abs=None)


def numbered(ops: list[OpRecord]) -> list[OpRecord]:
    return [OpRecord.from_dict(o.to_dict() | {"index": i}) for i, o in enumerate(ops, start=1)]


# a small alphabet of ops, as a model's trace repeats them
ALPHABET = [
    op("aten.mm.default", "model.fc1", (4, 8), ((4, 2), (2, 8))),
    op("aten.add.Tensor", "model.fc1", (4, 8), ((4, 8), (8,))),
    op("aten.tanh.default", "model.act1", (4, 8), ((4, 8),)),
    op("aten.mm.default", "model.fc2", (4, 8), ((4, 8), (8, 8))),
    op("aten.mm.default", "model.fc2", (8, 8), ((8, 4), (4, 8)), bw=True),
    op("aten.sum.dim_IntList", "model.fc2", (1, 8), ((4, 8),), bw=True),
    op("aten.mul.Tensor", "model", (4, 8), ((4, 8), (4, 8))),
]
STRANGER = op("aten._to_copy.default", "model.cast", (7, 7), ((7, 7),))  # an op no other list has


def check_invariants(a: list[OpRecord], b: list[OpRecord]):
    al = align(a, b)
    pa, pb = [m.a for m in al.matches], [m.b for m in al.matches]
    assert pa == sorted(set(pa)) and pb == sorted(set(pb))  # strictly increasing in both runs: order kept
    assert sorted(pa + al.only_a) == list(range(len(a)))  # every op matched or listed, never both
    assert sorted(pb + al.only_b) == list(range(len(b)))
    for m in al.matches:
        assert m.how in PASSES and _key(a[m.a], m.how) == _key(b[m.b], m.how)
    return al


def test_identical_sequences_match_exactly():
    a = numbered(ALPHABET * 3)
    al = check_invariants(a, numbered(ALPHABET * 3))
    assert [(m.a, m.b, m.how) for m in al.matches] == [(i, i, "exact") for i in range(len(a))]
    assert al.only_a == al.only_b == []


def test_one_op_inserted_in_b():
    a = numbered(ALPHABET * 2)
    b = numbered([*ALPHABET, STRANGER, *ALPHABET])
    al = check_invariants(a, b)
    assert al.only_b == [len(ALPHABET)] and al.only_a == []
    assert all(m.how == "exact" for m in al.matches) and len(al.matches) == len(a)


def test_another_overload_or_input_shape_matches_fuzzily():
    a = numbered(ALPHABET)
    other = list(ALPHABET)
    other[1] = op("aten.add.Scalar", "model.fc1", (4, 8), ((4, 8),))  # another overload of the same op
    other[3] = op("aten.mm.default", "model.fc2", (4, 8), ((4, 16), (16, 8)))  # other input shapes
    al = check_invariants(a, numbered(other))
    how = {m.a: m.how for m in al.matches}
    assert how == {0: "exact", 1: "fuzzy", 2: "exact", 3: "fuzzy", 4: "exact", 5: "exact", 6: "exact"}


def test_another_module_matches_by_shape():
    a = numbered(ALPHABET)
    other = list(ALPHABET)
    other[2] = op("aten.tanh.default", "model.some.fused.block", (4, 8), ((4, 8),))
    al = check_invariants(a, numbered(other))
    assert {m.a: m.how for m in al.matches}[2] == "by shape" and not al.only_a and not al.only_b


def test_unrelated_ops_stay_unmatched():
    al = check_invariants(numbered([ALPHABET[0], ALPHABET[2]]), numbered([ALPHABET[0], STRANGER]))
    assert al.only_a == [1] and al.only_b == [1]


def test_repeated_ops_around_an_insertion():
    """x x x against x z x x: all three x match (difflib's longest block alone pairs A's first two x with B's
    last two and drops A's third)."""
    x = ALPHABET[2]
    al = check_invariants(numbered([x, x, x]), numbered([x, STRANGER, x, x]))
    assert [(m.a, m.b) for m in al.matches] == [(0, 0), (1, 2), (2, 3)] and al.only_b == [1]


ops_lists = st.lists(st.sampled_from(ALPHABET), min_size=0, max_size=14)
edits = st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 20),
                           st.sampled_from([*ALPHABET, STRANGER])), max_size=5)


def apply(ops: list[OpRecord], todo) -> list[OpRecord]:
    out = list(ops)
    for kind, at, new in todo:
        if kind == "insert":
            out.insert(at % (len(out) + 1), new)
        elif out:
            i = at % len(out)
            if kind == "delete":
                del out[i]
            else:
                out[i] = new
    return out


@settings(max_examples=300, deadline=None)
@given(ops_lists, edits)
def test_random_edits_keep_order_and_drop_nothing(a, todo):
    check_invariants(numbered(a), numbered(apply(a, todo)))


@settings(max_examples=300, deadline=None)
@given(ops_lists, st.integers(0, 20), st.sampled_from(["insert", "delete"]))
def test_one_edit_leaves_every_other_op_matched_exactly(a, at, kind):
    if kind == "insert":
        b = apply(a, [("insert", at, STRANGER)])
        al = check_invariants(numbered(a), numbered(b))
        assert al.only_b == [b.index(STRANGER)] and al.only_a == []
    else:
        if not a:
            return
        b = apply(a, [("delete", at, None)])
        al = check_invariants(numbered(a), numbered(b))
        assert len(al.only_a) == 1 and al.only_b == []
    assert all(m.how == "exact" for m in al.matches)
