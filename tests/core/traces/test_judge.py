"""core.traces.judge: identical / born here / inherited, and a difference's size against the op's envelope.

Records are real ones (TraceMode on a small run) turned into dicts and changed field by field, as a second
run would differ. The bounds are checked where the docstring claims them rigorous: for a sum of float32
values in two orders the difference is always within 2 gamma_K sum|t| (Higham), checked with Fractions.
"""

from __future__ import annotations

import hashlib
import math
import struct
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from core.arith.formats import FORMATS
from core.arith.hexbits import decode_hex
from core.arith.metrics import gamma
from core.diagnose.envelopes import ENVELOPE_FACTOR
from core.traces.judge import ELEMENTWISE_ULPS, judge, size_of
from core.traces.opclass import op_class
from core.traces.record import OpRecord, run_traced
from tests.strategies import finite_values

F32 = FORMATS["float32"]
U32, MINSUB32 = float(F32.unit_roundoff), float(F32.min_subnormal)


@pytest.fixture(scope="module")
def recs() -> dict[str, OpRecord]:
    g = torch.Generator().manual_seed(3)
    a, b, c = torch.randn(16, 64, generator=g), torch.randn(64, 8, generator=g), torch.randn(16, 64, generator=g)

    def fn():
        torch.mm(a, b)
        torch.mul(a, c)
        torch.tanh(a)

    mm, mul, tanh = run_traced(fn, None)
    assert (mm.op, mul.op, tanh.op) == ("aten.mm.default", "aten.mul.Tensor", "aten.tanh.default")
    return {"mm": mm, "mul": mul, "tanh": tanh}


def _f32_hex(v: float) -> str:
    return struct.pack(">f", v).hex()


def _bits_plus(h: str, n: int) -> str:
    return format((int(h, 16) + n) % 2**32, "08x")


def _changed(rec: OpRecord, **fields) -> OpRecord:
    d = rec.to_dict() | fields
    if "sample_hex" in fields and "out_digest" not in fields:  # another output: another digest
        d["out_digest"] = hashlib.blake2b("".join(d["sample_hex"]).encode() + b"x", digest_size=8).hexdigest()
    return OpRecord.from_dict(d)


def _largest(rec: OpRecord) -> int:
    return int(np.argmax([abs(decode_hex(h, rec.out_dtype)) for h in rec.sample_hex]))


def _with_value(rec: OpRecord, pos: int, value: float) -> OpRecord:
    hexes = list(rec.sample_hex)
    hexes[pos] = _f32_hex(value)
    return _changed(rec, sample_hex=hexes)


# ------------------------------------------------------------------------------------- states


def test_identical(recs):
    for r in recs.values():
        j = judge(r, OpRecord.from_dict(r.to_dict()))
        assert j.state == "identical" and j.verdict is None and j.size is None


def test_born_here_and_inherited(recs):
    mm = recs["mm"]
    i = _largest(mm)
    b = _changed(mm, sample_hex=[_bits_plus(h, 1) if p == i else h for p, h in enumerate(mm.sample_hex)])
    j = judge(mm, b)
    assert j.state == "born here" and "bit-identical" in j.reason
    inherited = _changed(b, in_digests=[mm.in_digests[0], "0123456789abcdef"])
    j = judge(mm, inherited)
    assert j.state == "inherited" and j.reason == "input 2 already differed"
    other_shape = _changed(b, in_shapes=[[16, 64], [64, 9]])
    assert judge(mm, other_shape).state == "inherited"


def test_same_inputs_other_arguments_is_born_beyond(recs):
    mm = recs["mm"]
    b = _changed(mm, args="T, T, alpha=2", sample_hex=[_bits_plus(h, 1) for h in mm.sample_hex])
    j = judge(mm, b)
    assert j.state == "born here" and "other arguments" in j.reason and j.verdict == "beyond rounding"


# ---------------------------------------------------------------------------------- verdicts


def test_mm_one_ulp_is_within_rounding(recs):
    mm = recs["mm"]
    i = _largest(mm)
    for step in (1, -1):
        b = _changed(mm, sample_hex=[_bits_plus(h, step) if p == i else h for p, h in enumerate(mm.sample_hex)])
        j = judge(mm, b)
        assert j.state == "born here" and j.verdict == "within rounding", j.size
        assert j.size.differing == 1 and j.size.max_ulps == pytest.approx(1.0)
        assert j.size.rigorous and j.size.basis == "reordering of 64 terms"


def test_mm_relative_two_to_minus_ten_is_beyond_rounding(recs):
    mm = recs["mm"]
    grown = [_f32_hex(float(np.float32(decode_hex(h, "float32") * (1 + 2.0 ** -10)))) for h in mm.sample_hex]
    j = judge(mm, _changed(mm, sample_hex=grown, l1=mm.l1 * (1 + 2.0 ** -10)))
    assert j.state == "born here" and j.verdict == "beyond rounding"
    assert j.size.vs_envelope > 1


def test_exact_op_any_bit_difference_is_beyond(recs):
    mul = recs["mul"]
    assert op_class(mul) == "exact"
    i = _largest(mul)
    b = _changed(mul, sample_hex=[_bits_plus(h, 1) if p == i else h for p, h in enumerate(mul.sample_hex)])
    j = judge(mul, b)
    assert j.state == "born here" and j.verdict == "beyond rounding"
    # a difference no sample shows (only the digest differs) is still beyond for a correctly rounded op
    j = judge(mul, _changed(mul, out_digest="0123456789abcdef"))
    assert j.state == "born here" and j.verdict == "beyond rounding" and j.size.differing == 0


def test_elementwise_function_gets_a_few_ulps(recs):
    tanh = recs["tanh"]
    assert op_class(tanh) == "elementwise"
    i = _largest(tanh)
    for n, verdict in ((int(ELEMENTWISE_ULPS), "within rounding"), (int(ELEMENTWISE_ULPS) + 2, "beyond rounding")):
        b = _changed(tanh, sample_hex=[_bits_plus(h, n) if p == i else h for p, h in enumerate(tanh.sample_hex)])
        assert judge(tanh, b).verdict == verdict


@pytest.mark.parametrize("name", ["mm", "mul", "tanh"])
def test_nan_against_a_number_is_beyond(recs, name):
    r = recs[name]
    b = _changed(r, sample_hex=["7fc00000", *r.sample_hex[1:]])
    j = judge(r, b)
    assert j.verdict == "beyond rounding" and j.size.vs_envelope == math.inf
    assert judge(b, b).state == "identical"  # NaN against the same NaN bits


# ---------------------------------------------------------------------- the envelope's formula


def _env(k: int, sum_abs: float, scale: float, m: float = 0.0) -> tuple[float, float]:
    """(rigorous bound B, envelope min(B, Z T)) of a float32 reduction of k terms (float32 output: no extra
    output rounding); T is set by max(||t||_2, |y|) with m the larger |y| of the two runs."""
    bound = 2 * gamma(k, U32) * sum_abs + k * MINSUB32
    typical = U32 * math.sqrt(k) * max(scale, m) + math.sqrt(k) * MINSUB32
    return bound, min(bound, ENVELOPE_FACTOR * typical)


def test_size_is_measured_against_gamma_k(recs):
    mm = recs["mm"]
    i = _largest(mm)
    y = decode_hex(mm.sample_hex[i], "float32")
    for factor, within in ((0.5, True), (2.0, False)):
        bound, env = _env(mm.k, mm.sum_abs[i], mm.scale[i], abs(y))
        b = _with_value(mm, i, float(np.float32(y + math.copysign(factor * env, y))))
        bound, env = _env(mm.k, mm.sum_abs[i], mm.scale[i], max(abs(y), abs(decode_hex(b.sample_hex[i], "float32"))))
        s = size_of(mm, b)
        d = abs(decode_hex(b.sample_hex[i], "float32") - y)
        assert s.worst_abs == d and (d <= env) == within == s.within
        assert s.vs_bound == pytest.approx(d / bound, rel=1e-12)
        assert s.vs_envelope == pytest.approx(d / env, rel=1e-12)


def test_the_l1_check_catches_what_no_sample_shows(recs):
    mm = recs["mm"]
    numel = math.prod(mm.out_shape)
    near = _changed(mm, out_digest="0123456789abcdef", l1=mm.l1 * (1 + 2.0 ** -40))
    s = size_of(mm, near)
    # the whole-output bound: 2 gamma_K total sum|t| (+ subnormal spacing), plus the float64 norms' own rounding
    expected = 2 * gamma(mm.k, U32) * mm.total_abs + mm.k * numel * MINSUB32 + numel * 2.0 ** -52 * near.l1
    assert s.l1_bound == pytest.approx(expected, rel=1e-12)
    assert s.within and s.differing == 0
    far = _changed(mm, out_digest="0123456789abcdef", l1=mm.l1 + 2 * s.l1_bound)
    j = judge(mm, far)
    assert j.state == "born here" and j.verdict == "beyond rounding" and j.size.differing == 0


# ------------------------------------------- two summation orders: within the rigorous bound, always


def _sum_record(values: list[float], result: np.float32) -> OpRecord:
    exact = [Fraction(v) for v in values]
    sum_abs = float(sum(abs(x) for x in exact))
    h = _f32_hex(float(result))
    return OpRecord(index=1, op="aten.sum.default", module="model", backward=False, in_shapes=[[len(values)]],
                    in_dtypes=["float32"], in_digests=["00" * 8], args="T", out_shape=[], full_shape=[],
                    out_dtype="float32", out_digest=hashlib.blake2b(h.encode(), digest_size=8).hexdigest(),
                    l1=abs(float(result)), sample_index=[0], sample_hex=[h], k=len(values), terms_kind="exact",
                    sum_abs=[sum_abs], scale=[math.sqrt(float(sum(x * x for x in exact)))], total_abs=sum_abs)


def _left_to_right(v: np.ndarray) -> np.float32:
    s = np.float32(0)
    for x in v:
        s = np.float32(s + x)
    return s


# float32 values of moderate size (64 of them cannot overflow), from the project's bit-pattern strategy
f32_values = finite_values(F32).filter(lambda v: abs(v) <= 2**100).map(float)
ONE_AND_CRUMBS = [1.0] + [0.4 * 2.0 ** -24] * 63  # each crumb is lost left to right, kept pairwise


@settings(max_examples=200, deadline=None)
@given(st.lists(f32_values, min_size=1, max_size=64), st.sampled_from(["pairwise", "reversed"]))
@example(ONE_AND_CRUMBS, "pairwise")
def test_two_orders_differ_within_the_rigorous_bound(values, other):
    v = np.array(values, dtype=np.float32)
    first = _left_to_right(v)
    second = np.sum(v) if other == "pairwise" else _left_to_right(v[::-1])
    exact = sum(Fraction(float(x)) for x in v)
    sum_abs = sum(abs(Fraction(float(x))) for x in v)
    g = Fraction(gamma(len(v), U32))
    for s in (first, second):  # Higham (3.4): each order within gamma sum|t| (addition never underflows)
        assert abs(Fraction(float(s)) - exact) <= g * sum_abs
    a, b = _sum_record(values, first), _sum_record(values, second)
    size = size_of(a, b)
    assert size.vs_bound <= 1
    _, env = _env(len(v), a.sum_abs[0], a.scale[0])
    d = abs(float(first) - float(second))
    assert size.worst_abs == d
    if abs(d - env) > 1e-9 * env:
        assert size.within == (d <= env)  # within rounding means: inside min(B, Z T), nothing else here
    j = judge(a, b)
    assert j.state == ("identical" if first.tobytes() == second.tobytes() else "born here")


def test_the_typical_cap_is_not_rigorous():
    """The envelope is min(B, Z T) with T the probabilistic size: one large term and many tiny ones lost left
    to right but kept pairwise part by more than Z T (still well within the rigorous B). The judgement calls
    that beyond rounding: the envelope is a typical size, as core.diagnose's, not a bound."""
    v = np.array([1.0] + [0.4 * 2.0 ** -24] * 999, dtype=np.float32)
    a, b = _sum_record(v.tolist(), _left_to_right(v)), _sum_record(v.tolist(), np.sum(v))
    s = size_of(a, b)
    assert s.vs_bound < 1 < s.vs_envelope and not s.within


# ------------------------------------------------------------ several outputs, shapes, formats


def _f32_next(h: str, steps: int) -> str:
    return f"{struct.unpack('>I', bytes.fromhex(h))[0] + steps:08x}"


@pytest.fixture(scope="module")
def norm_backward() -> OpRecord:
    g = torch.Generator().manual_seed(6)
    x = torch.randn(32, 16, generator=g, requires_grad=True)
    norm = torch.nn.LayerNorm(16)
    ops = run_traced(lambda: (norm(x) * torch.randn(32, 16, generator=g)).sum().backward(), norm, inputs=(x,))
    return next(o for o in ops if o.op == "aten.native_layer_norm_backward.default")


def _changed_output(rec: OpRecord, which: int, steps: int) -> OpRecord:
    """``rec`` with output ``which`` (0-based) moved by ``steps`` ULPs at its largest sampled element."""
    outs = [dict(o) for o in rec.outputs]
    o = outs[which]
    vals = [abs(decode_hex(h, "float32")) for h in o["sample_hex"]]
    i = int(np.argmax(vals))
    o["sample_hex"] = [*o["sample_hex"][:i], _f32_next(o["sample_hex"][i], steps), *o["sample_hex"][i + 1:]]
    o["out_digest"] = hashlib.blake2b(str(o["sample_hex"]).encode(), digest_size=8).hexdigest()
    return OpRecord.from_dict(rec.to_dict() | {"outputs": outs, "out_digest": "f" * 16})


def test_each_output_is_judged_against_its_own_envelope(norm_backward):
    a = norm_backward
    near = judge(a, _changed_output(a, 1, 1))  # grad weight, one ULP: a reordering of the 32 rows' terms
    assert near.state == "born here" and near.verdict == "within rounding"
    assert (near.size.output, near.size.outputs) == (2, 3) and near.size.text().startswith("output 2 of 3: ")
    assert near.size.basis == "reordering of 32 terms" and near.size.rigorous
    far = judge(a, _changed_output(a, 2, 2**16))  # grad bias, far off
    assert far.verdict == "beyond rounding" and far.size.output == 3


def test_other_shapes_are_not_comparable_and_other_formats_a_format_change(recs):
    a = recs["mm"]
    wider = OpRecord.from_dict(a.to_dict() | {"out_shape": [32, 8], "out_digest": "e" * 16})
    j = judge(a, wider)
    assert (j.state, j.verdict, j.size) == ("not comparable", "shapes differ", None)
    bf = OpRecord.from_dict(a.to_dict() | {"out_dtype": "bfloat16", "out_digest": "e" * 16,
                                           "sample_hex": [h[:4] for h in a.sample_hex]})
    j = judge(a, bf)
    assert (j.state, j.verdict) == ("format change", "float32 to bfloat16")
    assert j.size is not None and j.size.max_ulps is not None  # still measured, in the coarser format
    rows = OpRecord.from_dict(a.to_dict() | {"out_digest": "e" * 16, "mixes_rows": True})
    assert judge(a, rows).verdict == "reads the whole batch"


# ------------------------------------------------------------------- inherited and discrete outputs


def test_an_exact_op_carrying_a_few_ulps_is_not_beyond_rounding(recs):
    """An inherited difference through + or x is its input's: a few ULPs of it read as rounding-sized; many as
    passed on (the input's difference has grown, or was never rounding: not this op's error, so not "beyond
    rounding", which says an op added it)."""
    mul = recs["mul"]
    i = _largest(mul)
    for ulps, verdict in ((3, "within rounding"), (40, "passed on")):
        b = _changed(mul, sample_hex=[_bits_plus(h, ulps) if p == i else h for p, h in enumerate(mul.sample_hex)],
                     in_digests=["f" * 16, *mul.in_digests[1:]])
        j = judge(mul, b)
        assert (j.state, j.verdict) == ("inherited", verdict), j.size
        assert "carried from its inputs" in j.size.text()


def _topk_indices() -> tuple[OpRecord, OpRecord]:
    x = torch.tensor([[0.5, 0.25, 0.125, 1.0]])
    (rec,) = run_traced(lambda: torch.topk(x, 2), None)
    indices = OpRecord.from_dict(rec.outputs[1] | {k: v for k, v in rec.to_dict().items() if k not in rec.outputs[1]}
                                 | {"outputs": []})
    return rec, indices


def test_indices_are_judged_as_a_choice():
    _, idx = _topk_indices()
    assert idx.out_dtype == "int64" and idx.sample_hex == ["3", "0"]
    other = _changed(idx, sample_hex=["3", "1"], out_digest="0" * 16)
    born = judge(idx, other)
    assert born.state == "born here" and born.verdict == "beyond rounding"
    assert born.size.text() == "1 of 2 sampled indices differ (no rounding in them)"
    inherited = judge(idx, _changed(other, in_digests=["e" * 16]))
    assert inherited.state == "inherited"
    assert inherited.size.text() == "1 of 2 sampled indices differ (other choices, from inputs that already differed)"


def test_a_scratch_workspace_is_recorded_and_never_judged():
    """oneDNN's LSTM returns a uint8 workspace beside its results when autograd is on: recorded as scratch (its
    shape, no bits), so two runs whose workspaces differ are identical."""
    lstm = torch.nn.LSTM(4, 8)
    x = torch.randn(5, 1, 4, generator=torch.Generator().manual_seed(0))
    a, b = (next(o for o in run_traced(lambda: lstm(x), None) if o.op == "aten.mkldnn_rnn_layer.default")
            for _ in range(2))
    assert [o.get("scratch", False) for o in a.outputs] == [False, False, False, True]
    assert a.outputs[3]["out_dtype"] == "uint8" and a.outputs[3]["sample_hex"] == [] and a.outputs[3]["l1"] is None
    assert judge(a, b).state == "identical"


def test_shapes_that_differ_say_why():
    a = OpRecord.from_dict(_topk_indices()[0].to_dict() | {"out_shape": [2, 1, 16], "outputs": []})
    b = OpRecord.from_dict(a.to_dict() | {"out_shape": [2, 4, 16], "out_digest": "1" * 16})
    j = judge(a, b)
    assert j.verdict == "shapes differ" and "dimension 2 only" in j.reason and "not batch-first" in j.reason
    made = OpRecord.from_dict(a.to_dict() | {"in_shapes": [], "in_digests": [], "in_dtypes": [], "out_shape": [1]})
    j = judge(made, OpRecord.from_dict(made.to_dict() | {"out_shape": [4], "out_digest": "1" * 16}))
    assert "bookkeeping of the batch" in j.reason
