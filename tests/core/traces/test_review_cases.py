"""Cases an independent review found: legitimate reorderings and formulas that must be within rounding,
ops that must not crash the recorder, outputs that must all count, and files that must be refused."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from core.arith.hexbits import decode_hex
from core.traces.files import TraceFileError, dumps, from_bytes
from core.traces.judge import judge
from core.traces.models import RunSettings
from core.traces.opclass import op_class
from core.traces.record import run_traced
from core.traces.run import make_trace


def _hexes(values: np.ndarray, idx: list[int]) -> list[str]:
    return [format(int(v), "08x") for v in values.astype(np.float32).reshape(-1)[idx].view(np.uint32)]


def _as_other_run(rec, values: np.ndarray):
    """The record of the same op in a run that computed ``values`` (same inputs: a born difference)."""
    return dataclasses.replace(rec, sample_hex=_hexes(values, rec.sample_index), out_digest="0" * 16, l1=None)


@pytest.mark.parametrize("k", [256, 1024, 4096])
def test_a_same_sign_mean_in_another_order_is_within_rounding(k):
    """mean(x^2) over K (what rms_norm decomposes into), torch's order against one left-to-right sum."""
    g = torch.Generator().manual_seed(k)
    x = torch.rand(8, k, generator=g) + 0.5
    sq = x * x
    rec = next(o for o in run_traced(lambda: sq.mean(dim=1, keepdim=True), None) if "mean" in o.op)
    seq = np.zeros(8, dtype=np.float32)
    for j in range(k):  # float32 running sum, left to right
        seq = (seq + sq[:, j].numpy()).astype(np.float32)
    other = _as_other_run(rec, (seq / np.float32(k)).astype(np.float32)[:, None])
    j = judge(rec, other)
    assert j.state == "born here" and j.verdict == "within rounding", j.size


def test_tanh_backward_with_and_without_fma_is_within_rounding():
    g = torch.Generator().manual_seed(1)
    grad = torch.randn(64, 64, generator=g)
    y = torch.tanh(3 * torch.randn(64, 64, generator=g))  # many |y| near 1: 1 - y^2 cancels
    rec = next(o for o in run_traced(lambda: torch.ops.aten.tanh_backward(grad, y), None))
    fused = (grad.double() * (1 - y.double() * y.double())).float().numpy()  # one rounding, as an FMA chain
    j = judge(rec, _as_other_run(rec, fused))
    assert op_class(rec) == "elementwise" and rec.terms_kind == "inputs"
    assert j.verdict == "within rounding", j.size


def test_the_recorder_survives_unusual_runs():
    x = torch.tensor(3.0)
    ops = run_traced(lambda: (x.sum(0), x.mean(-1)), None)
    assert [o.op for o in ops] == ["aten.sum.dim_IntList", "aten.mean.dim"]
    with torch.inference_mode():
        t = torch.ones(4)
        assert len(run_traced(lambda: (t * 2).sum(), None)) == 2
    base = torch.ones(3)
    assert run_traced(lambda: base.new_empty(5), None) == []  # uninitialised memory is not a result


def test_accumulating_index_put_is_a_reduction():
    w = torch.zeros(4)
    idx = torch.tensor([0, 1, 1, 1])
    vals = torch.ones(4)
    rec = next(o for o in run_traced(lambda: w.index_put((idx,), vals, accumulate=True), None))
    assert rec.k == 4 and op_class(rec) == "reduction"


def test_every_output_counts():
    """torch.max over a dim: the same maximum, another index: the outputs differ."""
    a = run_traced(lambda: torch.max(torch.tensor([[5.0, 5.0, 1.0]]), 1), None)[0]
    b = run_traced(lambda: torch.max(torch.tensor([[1.0, 5.0, 5.0]]), 1), None)[0]
    assert decode_hex(a.sample_hex[0], "float32") == decode_hex(b.sample_hex[0], "float32") == 5.0
    assert a.out_digest != b.out_digest


@pytest.fixture(scope="module")
def trace() -> dict:
    return make_trace(RunSettings())


@pytest.mark.parametrize(("change", "why"), [
    (lambda op: op.update(sample_hex=op["sample_hex"][:-1]), "differ in length"),
    (lambda op: op.update(sample_hex=["zz"] * len(op["sample_hex"])), "hex digits"),
    (lambda op: op.update(out_shape=[2**41]), "maximum"),
    (lambda op: op.update(k=10**400), "at ops/0/k"),
    (lambda op: op.update(sample_index=[10**9] * len(op["sample_index"])), "outside the output"),
])
def test_odd_values_are_refused_before_any_comparison(trace, change, why):
    t = json.loads(dumps(trace))
    change(t["ops"][0])
    with pytest.raises(TraceFileError, match=why):
        from_bytes(json.dumps(t).encode(), "odd.json")


def test_a_huge_integer_is_refused():
    with pytest.raises(TraceFileError, match="too large to read"):
        from_bytes(b'{"format": "op-trace", "version": ' + b"9" * 5000 + b"}", "big.json")
