"""core.traces.record: digests, sample positions, hex bits, and what TraceMode records (and does not)."""

from __future__ import annotations

import math
import threading

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils._debug_mode import DebugMode

from core.arith.formats import FORMATS, value_of_bits
from core.arith.hexbits import decode_hex
from core.traces import bits, record
from core.traces.models import RunSettings, build
from core.traces.record import (
    SAMPLE,
    TooManyOps,
    digest,
    run_traced,
    sample_hex,
    sample_positions,
)
from tests.strategies import bit_patterns

FLOAT_NAMES = ("float64", "float32", "float16", "bfloat16")


@pytest.fixture(scope="module")
def mlp_step():
    """The bundled MLP step, traced once: (model before the step's weights, model, ops)."""
    root, inputs, fn = build(RunSettings())
    before = {n: p.detach().clone() for n, p in root.named_parameters()}
    ops = run_traced(fn, root, inputs)
    return before, root, ops


# ----------------------------------------------------------------------------------- digest


def test_digest_is_order_sensitive():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    swapped = torch.tensor([2.0, 1.0, 3.0, 4.0])
    assert digest(a) != digest(swapped)
    # an XOR-sum of the bits (DebugMode's hash_tensor) cannot tell them apart
    assert _xor(a.view(torch.int32).tolist()) == _xor(swapped.view(torch.int32).tolist())


def _xor(xs: list[int]) -> int:
    out = 0
    for x in xs:
        out ^= x
    return out


def test_digest_is_dtype_and_shape_sensitive_and_layout_blind():
    z32 = torch.zeros(6, dtype=torch.float32)
    assert digest(z32) != digest(torch.zeros(6, dtype=torch.int32))  # the same bytes, another dtype
    assert digest(z32) != digest(torch.zeros(2, 3)) != digest(torch.zeros(3, 2))
    assert digest(torch.zeros(0, 3)) != digest(torch.zeros(3, 0))  # empty tensors: the shape alone
    assert digest(z32) == digest(torch.zeros(6))  # equal tensors, equal digests
    g = torch.Generator().manual_seed(1)
    m = torch.randn(4, 5, generator=g)
    assert digest(m.t()) == digest(m.t().contiguous())  # row-major order, whatever the strides
    assert digest(m.t()) != digest(m)
    assert len(digest(m)) == 16 and int(digest(m), 16) >= 0
    assert digest(torch.tensor([True, False])) != digest(torch.tensor([False, True]))


# ------------------------------------------------------------------------- sample positions


@pytest.mark.parametrize("numel", [0, 1, 2, SAMPLE - 1, SAMPLE, SAMPLE + 1, 2 * SAMPLE - 1, 1000, 10**9])
def test_sample_positions_bounds(numel):
    idx = sample_positions(numel)
    assert idx == sorted(set(idx))
    assert all(0 <= i < numel for i in idx)
    assert len(idx) == min(numel, SAMPLE)
    if numel:
        assert idx[0] == 0 and idx[-1] == numel - 1
    if numel <= SAMPLE:
        assert idx == list(range(numel))


@given(st.integers(0, 10**7), st.integers(2, 64))
def test_sample_positions_any_size(numel, count):
    idx = sample_positions(numel, count)
    assert idx == sorted(set(idx)) and len(idx) == min(numel, count)
    assert all(0 <= i < numel for i in idx)


# -------------------------------------------------------------------------- hex bits round trip


def _tensor_of_bits(bits: int, name: str) -> torch.Tensor:
    fmt = FORMATS[name]
    signed = bits - (1 << fmt.width) if bits >= 1 << (fmt.width - 1) else bits
    return torch.tensor([signed], dtype=fmt.int_dtype).view(fmt.torch_dtype)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(FLOAT_NAMES).flatmap(lambda n: st.tuples(st.just(n), bit_patterns(FORMATS[n]))))
def test_hex_bits_and_decode_hex_round_trip(case):
    name, bits = case
    fmt = FORMATS[name]
    t = _tensor_of_bits(bits, name)
    (h,) = sample_hex(t, [0])
    assert h == format(bits, f"0{fmt.width // 4}x")  # exactly the stored bits, zero-padded
    value = decode_hex(h, name)
    exact = value_of_bits(bits, fmt)
    if isinstance(exact, float) and math.isnan(exact):
        assert math.isnan(value)
    else:
        assert value == exact  # every value of these formats is a float64
        assert math.copysign(1.0, value) == (-1.0 if bits >> (fmt.width - 1) else 1.0)  # -0 keeps its sign
    if not math.isnan(value):  # the bits come back from the value (NaN payloads aside)
        assert sample_hex(torch.tensor([value], dtype=torch.float64).to(fmt.torch_dtype), [0]) == [h]


@pytest.mark.parametrize("name", FLOAT_NAMES)
def test_hex_bits_special_values(name):
    dt = FORMATS[name].torch_dtype
    info = torch.finfo(dt)
    vals = [0.0, -0.0, info.tiny, info.tiny / 4, info.max, -info.max, math.inf, -math.inf]
    t = torch.tensor(vals, dtype=torch.float64).to(dt)
    hexes = sample_hex(t, list(range(len(vals))))
    back = [decode_hex(h, name) for h in hexes]
    assert back == [float(v) for v in t.to(torch.float64)]
    assert [math.copysign(1, v) for v in back[:2]] == [1, -1]
    assert math.isnan(decode_hex(sample_hex(torch.tensor([math.nan], dtype=dt), [0])[0], name))


def test_hex_bits_of_integers_pass_through():
    assert sample_hex(torch.tensor([3, -7, 0]), [0, 1, 2]) == ["3", "-7", "0"]
    assert decode_hex("-7", "int64") == -7.0


# ------------------------------------------------------------------------------ TraceMode


def test_module_paths_and_backward_flags(mlp_step):
    _, _, ops = mlp_step
    first = ops[0]
    assert (first.op, first.module, first.backward) == ("aten.addmm.default", "model.fc1", False)
    assert [o.module for o in ops if o.op == "aten.addmm.default"] == ["model.fc1", "model.fc2", "model.fc3"]
    assert not any(o.backward for o in ops if o.op in ("aten.addmm.default", "aten.tanh.default"))
    bw_mm = [o for o in ops if o.op == "aten.mm.default"]
    assert bw_mm and all(o.backward for o in bw_mm)
    assert [o.module for o in bw_mm] == ["model.fc3", "model.fc3", "model.fc2", "model.fc2", "model.fc1"]
    assert all(o.backward for o in ops if o.op == "aten.tanh_backward.default")
    # the optimizer runs outside every module: its scope names it
    assert {o.module for o in ops if o.op == "aten.add_.Tensor"} == {"optimizer"}
    assert [o.index for o in ops] == list(range(1, len(ops) + 1))


def test_in_place_ops_record_their_input_before_the_op(mlp_step):
    before, root, ops = mlp_step
    adds = [o for o in ops if o.op == "aten.add_.Tensor"]
    params = dict(root.named_parameters())
    names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "fc3.weight", "fc3.bias"]
    assert len(adds) == len(names)
    for o, n in zip(adds, names, strict=True):
        assert o.in_digests[0] == digest(before[n])  # the weight before SGD changed it
        assert o.out_digest == digest(params[n]) != o.in_digests[0]  # and after


def test_in_place_chain_follows_versions():
    x = torch.arange(4, dtype=torch.float32)

    def fn():
        y = x * 2
        y.add_(1)
        y.add_(1)
        return y

    mul, add1, add2 = run_traced(fn, None)
    y0 = x * 2
    assert add1.in_digests[0] == mul.out_digest == digest(y0)
    assert add1.out_digest == digest(y0 + 1) == add2.in_digests[0]
    assert add2.out_digest == digest(y0 + 2)
    assert {mul.module, add1.module} == {"model"}


def test_an_in_place_output_is_hashed_once_and_read_back_right(monkeypatch):
    """The digest taken of an in-place op's output serves the next op that reads the tensor (torch counts the
    write in the version only after the op returns), and it is the digest of the new bits."""
    x = torch.arange(6, dtype=torch.float32)

    def fn():
        y = x * 2
        y.add_(1)
        z = y * 3  # reads y after the write
        y.mul_(0.5)
        return z + y  # reads y after the second write

    calls = []
    real, real_of = record.digest, record.digest_of  # (the recorder hashes through digest_of)
    monkeypatch.setattr(record, "digest_of", lambda shape, *a: calls.append(tuple(shape)) or real_of(shape, *a))
    _, add_, mul3, mul_, add = run_traced(fn, None)
    y1 = x * 2 + 1
    assert add_.out_digest == real(y1) == mul3.in_digests[0]
    assert mul_.in_digests[0] == real(y1) and mul_.out_digest == real(y1 * 0.5) == add.in_digests[1]
    assert len(calls) == 1 + 5  # x once, then each op's output once: no input hashed again


def test_every_output_of_an_in_place_op_with_many_outputs_is_hashed_after_the_op():
    """An in-place op on a list longer than the outputs recorded one by one: the outputs past those are in
    the combined digest with their new bits, not the ones cached before the op."""
    ts = [torch.full((3,), float(i)) for i in range(record.MAX_OUTPUTS + 3)]

    def fn():
        for t in ts:
            t.mul_(1.0)  # a digest of each, cached before the list op below
        torch._foreach_add_(ts, 1.0)

    *_, op = run_traced(fn, None)
    assert op.op == "aten._foreach_add_.Scalar"
    each = [digest(t) for t in ts]  # the bits after the run
    assert [o["out_digest"] for o in op.outputs] == each[:record.MAX_OUTPUTS]
    assert op.out_digest == record._combined([each[0], "".join(each[1:])])


def test_views_and_detach_are_not_recorded():
    x = torch.arange(6, dtype=torch.float32)

    def fn():
        v = x.view(2, 3).t()
        w = v.detach()
        u = x.reshape(3, 2)[1:]
        _ = x.unsqueeze(0).expand(2, 6)
        return (w + 1, u)

    ops = run_traced(fn, None)
    assert [o.op for o in ops] == ["aten.add.Tensor"]
    assert ops[0].in_shapes == [[3, 2]] and ops[0].out_shape == [3, 2]


def test_too_many_ops_is_refused_and_the_lock_released():
    x = torch.ones(3)

    def fn():
        for _ in range(5):
            x.mul(2)

    with pytest.raises(TooManyOps, match="more than 3 ops"):
        run_traced(fn, None, max_ops=3)
    got: list[bool] = []

    def probe():  # another thread can take the lock: the failed trace released it
        ok = record.TRACE_LOCK.acquire(blocking=False)
        got.append(ok)
        if ok:
            record.TRACE_LOCK.release()

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert got == [True]
    assert len(run_traced(fn, None, max_ops=5)) == 5


def test_follow_batch_cuts_derived_tensors_not_parameters():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(8, 3, generator=g)
    w = torch.randn(3, 4, generator=g)
    p = torch.randn(8, 5, generator=g)  # a parameter whose first dimension happens to be the batch

    def fn():
        h = x.reshape(8, 3, 1).squeeze(-1)  # views of an input stay derived
        y = h @ w
        z = p * 2
        return y.tanh(), z

    mm, mul, tanh = run_traced(fn, None, inputs=(x,), follow_batch=8)
    assert mm.op == "aten.mm.default"
    assert mm.in_shapes == [[1, 3], [3, 4]] and mm.out_shape == [1, 4] and mm.full_shape == [8, 4]
    assert mm.in_digests == [digest(x[:1]), digest(w)] and mm.out_digest == digest((x @ w)[:1])
    assert mm.sample_index == [0, 1, 2, 3]
    assert mm.k == 3 and len(mm.sum_abs) == 4
    assert mm.sum_abs == pytest.approx((x[:1].double().abs() @ w.double().abs()).reshape(-1).tolist(), rel=1e-12)
    assert mul.out_shape == mul.full_shape == [8, 5] and mul.in_digests == [digest(p)]
    assert tanh.out_shape == [1, 4] and tanh.in_digests == [mm.out_digest]
    # with follow_batch 1 nothing is cut
    mm1 = run_traced(fn, None, inputs=(x,))[0]
    assert mm1.out_shape == [8, 4] and mm1.out_digest == digest(x @ w)


def test_perturbation_multiplies_one_op():
    x = torch.ones(4)
    ops = run_traced(lambda: (x * 3).tanh(), None, perturb=(1, 2.0 ** -10))
    assert decode_hex(ops[0].sample_hex[0], "float32") == 3 * (1 + 2.0 ** -10)
    assert ops[1].in_digests == [ops[0].out_digest]


def test_same_compute_ops_as_debug_mode(mlp_step):
    """TraceMode sees exactly the compute ops torch's DebugMode logs, in the same order (the views, detach
    and allocation-only ops that record._SKIP names left out) on the bundled MLP step."""
    _, _, ops = mlp_step
    _, _, fn = build(RunSettings())
    with DebugMode() as dm:
        fn()
    calls = [c.op for c in dm.operators if isinstance(getattr(c, "op", None), torch._ops.OpOverload)]
    assert len(calls) > len(ops)  # DebugMode also logs the views
    computing = [str(op) for op in calls if not op.is_view and op.overloadpacket.__name__ not in record._SKIP]
    assert computing == [o.op for o in ops]


LAYOUT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
                 torch.bool, torch.complex64)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LAYOUT_DTYPES), st.lists(st.integers(0, 4), min_size=1, max_size=3), st.data())
def test_digest_and_samples_depend_on_values_not_layout(dtype, shape, data):
    """Any view (strided, transposed, one-element with odd strides, zero-size, conjugate or negative bits)
    has the digest and the sampled bits of a fresh row-major copy of the same values."""
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
    padded = [n + data.draw(st.integers(0, 3)) for n in shape]
    base = (torch.randn(padded, generator=g, dtype=torch.float64) * 100).to(dtype) if dtype != torch.bool \
        else torch.randn(padded, generator=g) > 0
    view = base[tuple(slice(data.draw(st.integers(0, p - n)), None) for p, n in zip(padded, shape, strict=True))]
    view = view[tuple(slice(0, n) for n in shape)]
    step = data.draw(st.integers(1, 2))
    view = view[..., ::step]
    if view.dim() > 1 and data.draw(st.booleans()):
        view = view.transpose(0, -1)
    if dtype.is_complex and data.draw(st.booleans()):
        view = view.conj()
    if dtype.is_floating_point and data.draw(st.booleans()):
        view = torch._neg_view(view)
    plain = torch.empty(view.shape, dtype=view.dtype)
    plain.copy_(view)
    assert digest(view) == digest(plain)
    idx = sample_positions(view.numel())
    assert sample_hex(view, idx) == sample_hex(plain, idx)


def test_one_element_view_with_an_odd_stride():
    x = torch.arange(16, dtype=torch.float32).reshape(1, 16)
    last = x[:, -1]  # shape [1], stride 16, and contiguous as torch counts it
    assert last.stride() == (16,) and last.is_contiguous()
    assert digest(last) == digest(torch.tensor([15.0])) and sample_hex(last, [0]) == ["41700000"]


def test_sparse_tensors_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="only dense"):
        digest(torch.eye(3).to_sparse())


# ------------------------------------------------------------------- several outputs, rows, perturbations


def test_every_output_of_a_layer_norm_backward_is_recorded_with_its_own_k():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(6, 8, generator=g, requires_grad=True)
    norm = torch.nn.LayerNorm(8)

    ops = run_traced(lambda: norm(x).square().sum().backward(), norm, inputs=(x,))
    fwd = next(o for o in ops if o.op == "aten.native_layer_norm.default")
    bwd = next(o for o in ops if o.op == "aten.native_layer_norm_backward.default")
    assert [o["out_shape"] for o in fwd.outputs] == [[6, 8], [6, 1], [6, 1]]
    assert [o["k"] for o in fwd.outputs] == [8, 8, 8]
    assert [o["out_shape"] for o in bwd.outputs] == [[6, 8], [8], [8]]
    # grad x: a row's sums of 8 terms; grad weight and grad bias: sums over the 6 rows, with exact terms
    assert [(o["k"], o["terms_kind"]) for o in bwd.outputs] == [(8, "estimated"), (6, "exact"), (6, "exact")]
    gy = 2 * norm(x).detach()
    assert bwd.outputs[2]["sum_abs"] == pytest.approx(gy.abs().sum(0).double().tolist(), rel=1e-6)
    views = bwd.output_records()
    assert [v.out_shape for v in views] == [[6, 8], [8], [8]] and all(not v.outputs for v in views)
    assert len({v.out_digest for v in views}) == 3 and bwd.out_digest not in {v.out_digest for v in views}


def test_a_convolution_has_exact_terms():
    g = torch.Generator().manual_seed(4)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1, stride=2, bias=True)
    x = torch.randn(2, 3, 7, 7, generator=g)
    (op,) = run_traced(lambda: conv(x), conv, inputs=(x,))
    assert op.k == 3 * 9 + 1 and op.terms_kind == "exact"
    y = torch.nn.functional.conv2d(x.double().abs(), conv.weight.detach().double().abs(),
                                   conv.bias.detach().double().abs(),
                                   stride=2, padding=1)
    flat = y.reshape(-1)
    assert op.sum_abs == pytest.approx([float(flat[i]) for i in op.sample_index], rel=1e-12)
    assert op.total_abs == pytest.approx(float(flat.sum()), rel=1e-12)


def test_following_a_row_other_than_the_first():
    x = torch.arange(12.0).reshape(4, 3)
    w = torch.ones(3, 2)
    (mm,) = run_traced(lambda: x @ w, None, inputs=(x,), follow_batch=4, follow_row=2)
    assert mm.out_shape == [1, 2] and mm.in_digests[0] == digest(x[2:3]) and mm.out_digest == digest((x @ w)[2:3])
    with pytest.raises(ValueError, match="row 4 is not in a batch of 4"):
        run_traced(lambda: x @ w, None, inputs=(x,), follow_batch=4, follow_row=4)


def test_an_op_over_the_whole_batch_is_marked_and_a_batch_shaped_buffer_followed():
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(5))
    ids = torch.zeros(1, 3)  # a buffer, expanded to the batch as token type ids are

    def fn():
        return x.sum(0), x + ids.expand(4, 3), x * 2

    total, add, mul = run_traced(fn, None, inputs=(x,), follow_batch=4)
    assert total.mixes_rows and total.out_shape == [3]
    assert not add.mixes_rows and add.out_shape == [1, 3] and add.in_shapes == [[1, 3], [1, 3]]
    assert not mul.mixes_rows and mul.out_shape == [1, 3]
    assert not any(o.mixes_rows for o in run_traced(fn, None, inputs=(x,)))  # nothing followed, nothing marked


def test_a_perturbation_that_would_do_nothing_is_refused():
    x = torch.randn(4, 3)
    with pytest.raises(ValueError, match="only 2 ops"):
        run_traced(lambda: (x * 2).tanh(), None, perturb=(3, 2.0 ** -10))
    with pytest.raises(ValueError, match=r"cannot perturb op 1 \(aten\.argmax\.default\): it has no floating"):
        run_traced(lambda: x.argmax(-1).float(), None, perturb=(1, 2.0 ** -10))
    ops = run_traced(lambda: torch.max(x, -1), None, perturb=(1, 2.0 ** -10))  # values and indices: values
    planted = x.max(-1).values[0] * torch.tensor(1 + 2.0 ** -10)  # the same float32 product
    assert decode_hex(ops[0].sample_hex[0], "float32") == float(planted)


def test_a_version_one_op_reads_without_the_new_fields(mlp_step):
    d = mlp_step[2][0].to_dict()
    d.pop("outputs")
    d.pop("mixes_rows")
    back = record.OpRecord.from_dict(d)
    assert back.outputs == [] and back.mixes_rows is False and back.output_records() == [back]


def test_tensor_map_is_keyed_by_identity_and_forgets_a_freed_tensor():
    m = record.TensorMap()
    a, b = torch.zeros(3), torch.zeros(3)  # equal values, different tensors
    m[a] = "a"
    assert m.get(a) == "a" and m.get(b) is None and m.get(b, False) is False
    m[a] = "again"  # replaced, not added
    assert m.get(a) == "again" and len(m) == 1
    view = a[:2]  # a view is a tensor of its own
    assert m.get(view) is None
    del a, view  # (a view holds its base alive)
    assert len(m) == 0  # dropped when the tensor was freed
    # a new tensor, which may get the freed one's id, is not mistaken for it
    for _ in range(50):
        c = torch.zeros(3)
        assert m.get(c) is None
        m[c] = "c"
        assert m.get(c) == "c"
        del c
    assert len(m) == 0
    m[b] = 1
    assert m.get(b) == 1 and len(m) == 1


def test_l1_norm_in_float64_for_every_dtype():
    x = torch.tensor([1.0, -2.0**-30, 3.0], dtype=torch.float32)
    assert record.l1_norm(x) == 4.0 + 2.0**-30  # float32 alone would round the small term away
    assert record.l1_norm(x.to(torch.bfloat16)) == pytest.approx(4.0, rel=0, abs=2.0**-29)
    assert record.l1_norm(torch.tensor([True, False, True])) == 2.0
    assert record.l1_norm(torch.tensor([-3, 4], dtype=torch.int64)) == 7.0
    assert record.l1_norm(torch.tensor([1.0, float("nan")])) is None
    assert record.l1_norm(torch.tensor([1.0, float("inf")], dtype=torch.float16)) is None
    assert record.l1_norm(torch.zeros(0)) is None
    assert record.l1_norm(torch.tensor([1 - 2j])) == 3.0  # a complex value counts |re| + |im|, the parts judged
    big = torch.full((4,), 65504.0, dtype=torch.float16)  # the largest float16: its sum overflows float16, not float64
    assert record.l1_norm(big) == 4 * 65504.0


def test_tracing_leaves_the_compiler_unloaded():
    # torch would wrap a mode's dispatch to keep its compiler out, importing that compiler to do so
    import pathlib
    import subprocess
    import sys

    code = ("import sys; from core.traces.models import RunSettings; from core.traces.run import make_trace; "
            "make_trace(RunSettings(model='tiny-lm', batch=2)); make_trace(RunSettings()); "
            "print('torch._dynamo' in sys.modules)")
    root = pathlib.Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------- integers, rows read across the batch


def test_the_l1_norm_of_any_integer_is_non_negative():
    from core.traces.record import l1_norm
    t = torch.tensor([-2**63, 5, -7], dtype=torch.int64)
    assert l1_norm(t) == pytest.approx(2.0**63 + 12)
    assert l1_norm(torch.tensor([True, False, True])) == 2.0


def test_a_sort_of_the_whole_batch_reads_across_it_and_a_gather_by_the_rows_restores_them():
    """Following row 0 of 4: a sort of the flattened batch mixes its rows (recorded whole, marked), a gather
    by an index whose rows are the batch's puts them back (cut again), and the backward is untouched."""
    x = torch.tensor([[3.0, 1.0], [0.5, 2.0], [4.0, 0.25], [1.5, 5.0]])

    def fn():
        flat = x.reshape(-1)
        values, perm = torch.sort(flat)
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(perm.numel())
        back = (values * 2)[inv]  # each entry's own value, doubled, in the batch's order
        return back.view(4, 2) + 1

    ops = run_traced(fn, None, inputs=(x,), follow_batch=4)
    by = {o.op.split(".")[1]: o for o in ops}
    assert by["sort"].mixes_rows and by["sort"].out_shape == [8]
    assert by["mul"].mixes_rows and by["mul"].out_shape == [8]
    assert not by["index"].mixes_rows and by["index"].out_shape == [2]
    assert not by["add"].mixes_rows and by["add"].out_shape == [1, 2]
    assert by["add"].sample_hex == run_traced(lambda: fn_one(x[:1]), None, inputs=(x[:1],))[-1].sample_hex


def fn_one(x):
    flat = x.reshape(-1)
    values, perm = torch.sort(flat)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel())
    return ((values * 2)[inv]).view(1, 2) + 1


def test_a_transposed_batch_is_not_cut_and_is_named():
    x = torch.randn(4, 3, 2, generator=torch.Generator().manual_seed(1))
    ops = run_traced(lambda: x.transpose(0, 1) * 2, None, inputs=(x,), follow_batch=4)
    (mul,) = ops
    assert mul.out_shape == [3, 4, 2] and mul.not_batch_first and not mul.mixes_rows


def test_backward_modules_break_ties_by_entry_order_not_by_hash():
    """Two sibling linears of one depth: in the backward pass each op is named after the one whose backward is
    running (entered last), the same in every process."""

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k_proj, self.v_proj = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.k_proj(x).sum() + 2 * self.v_proj(x).sum()

    torch.manual_seed(0)
    m = Two()
    x = torch.randn(2, 3, requires_grad=True)
    ops = run_traced(lambda: m(x).backward(), m, inputs=(x,))
    bw = [o.module for o in ops if o.backward and o.op == "aten.mm.default"]
    assert bw and set(bw) <= {"model.k_proj", "model.v_proj"} and len(set(bw)) == 2, bw


# ------------------------------------------------------------------------- uninitialised memory


def litter(seed: int) -> None:
    """Leave garbage where the next small allocations will land: tensors of the sizes the tests below allocate
    (and a spread of others), filled with values that depend on ``seed``, then freed. Small blocks are reused
    by the allocator, so an ``empty`` tensor made next holds some of these bytes."""
    g = torch.Generator().manual_seed(seed)
    kept = [torch.rand(n, generator=g) * 1e6 for n in (*range(1, 257), 512, 1024, 2048, 4096) for _ in range(3)]
    del kept


def _written_into_empty(x: torch.Tensor, w: torch.Tensor, idx: torch.Tensor):
    def fn():
        a = torch.empty(8, 8)
        a.copy_(x)  # the engineer's case: a copy into a fresh buffer
        b = torch.empty(8, 8).index_put_((idx,), x)  # the MoE's: rows put into a fresh buffer
        c = x.new_empty(8, 8)
        c[:4].copy_(x[:4])  # two halves written through views
        c[4:].copy_(x[4:])
        d = torch.empty_strided((8, 8), (1, 8))
        torch.mul(x, 2.0, out=d)  # an out= buffer
        e = torch.empty_like(x).fill_(0.5)
        return (a @ w) + (b @ w) + (c @ w) + (d @ w) + e

    return fn


def test_an_op_writing_into_an_empty_tensor_records_the_same_in_two_runs():
    """An op that writes into ``torch.empty`` (and its kin) reads no data from it: its input is recorded as
    uninitialised, not digested, so two runs with different garbage in the allocator record the same; what it
    writes is data and is digested as usual."""
    x, w = torch.randn(8, 8, generator=torch.Generator().manual_seed(1)), torch.randn(8, 8)
    idx = torch.randperm(8, generator=torch.Generator().manual_seed(2))
    runs = []
    for seed in (1, 2):
        litter(seed)
        runs.append([o.to_dict() for o in run_traced(_written_into_empty(x, w, idx), None)])
    assert runs[0] == runs[1]
    ops = run_traced(_written_into_empty(x, w, idx), None)
    by = {}
    for o in ops:
        by.setdefault(o.op, []).append(o)
    copy, index_put, half1, half2 = by["aten.copy_.default"][0], by["aten.index_put_.default"][0], \
        *by["aten.copy_.default"][1:]
    assert copy.in_digests[0] == index_put.in_digests[0] == half1.in_digests[0] == record.UNINITIALISED
    assert half2.in_digests[0] == record.UNINITIALISED  # the second half's view: its memory is not written yet
    assert copy.out_digest == digest(x) != record.UNINITIALISED and len(copy.sample_hex) == len(copy.sample_index) > 0
    assert index_put.out_digest == digest(torch.zeros(8, 8).index_put_((idx,), x))
    mm = by["aten.mm.default"]
    # every product reads data: the halves written through views count as a write of the whole
    assert [m.in_digests[0] for m in mm] == [digest(x), digest(torch.zeros(8, 8).index_put_((idx,), x)), digest(x),
                                             digest(x * 2)]
    assert by["aten.fill_.Scalar"][0].out_digest == digest(torch.full((8, 8), 0.5))


def test_what_is_made_of_uninitialised_memory_is_uninitialised_until_written():
    """An op that reads an empty tensor's garbage makes garbage: no digest of its bits, no samples, no norm,
    and so on down the line, until an op overwrites it; an op that reads only its shape (``zeros_like``) makes
    data."""
    x = torch.arange(16, dtype=torch.float32)

    def fn():
        e = torch.empty(16)
        y = e * 2  # garbage in, garbage out
        s = y.sum()
        z = torch.zeros_like(e)  # the shape alone
        y.copy_(x)  # overwritten: data again
        return s, z + 1, y + 1

    runs = []
    for seed in (3, 4):
        litter(seed)
        runs.append([o.to_dict() for o in run_traced(fn, None)])
    assert runs[0] == runs[1]
    mul, total, zeros, copy, add_z, add_y = run_traced(fn, None)
    for o in (mul, total):
        assert o.in_digests[0] == o.out_digest == record.UNINITIALISED
        assert (o.l1, o.sample_index, o.sample_hex, o.k, o.sum_abs) == (None, [], [], None, None)
    assert zeros.in_digests == [record.UNINITIALISED] and zeros.out_digest == digest(torch.zeros(16))
    assert copy.in_digests == [record.UNINITIALISED, digest(x)] and copy.out_digest == digest(x)
    assert add_z.in_digests[0] == digest(torch.zeros(16)) and add_y.in_digests[0] == digest(x)
    assert add_y.l1 == float((x + 1).sum())


def test_a_copy_of_uninitialised_memory_into_data_is_uninitialised():
    x = torch.arange(8, dtype=torch.float32)

    def fn():
        y = x * 1
        y.copy_(torch.empty(8))
        return y + 1

    _, copy, add = run_traced(fn, None)
    assert copy.in_digests == [digest(x), record.UNINITIALISED]
    assert copy.out_digest == add.in_digests[0] == add.out_digest == record.UNINITIALISED


def test_memory_too_large_to_track_is_taken_for_data(monkeypatch):
    monkeypatch.setattr(bits, "MAX_TRACKED_BYTES", 63)
    x = torch.arange(16, dtype=torch.float32)

    def fn():
        torch.empty(16).copy_(x)  # 64 bytes: not tracked
        torch.empty(15).copy_(x[:15])  # 60 bytes: tracked

    big, small = run_traced(fn, None)
    assert big.in_digests[0] != record.UNINITIALISED == small.in_digests[0]
