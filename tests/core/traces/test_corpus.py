"""The tracer on real model families (tests/corpus: transformers models from configs, seeded random
weights, nothing downloaded): no crash at batch 1, the one-line answer right for repeats, planted
bugs, thread counts, backward passes, bfloat16, and a batch against one of its rows.

What is asserted is what holds on any machine: a run against itself is "none"; a planted 2^-10
scale is born beyond rounding at its op; other thread counts give "none" or a difference born
within rounding; batch 4 against its row 0 alone agrees with what plain torch says of the same two
runs (bit-identical rows give no rounding difference; rows that differ give one born within rounding).
"""

from __future__ import annotations

import socket

import pytest
import torch

from core.traces.compare import LINE, compare
from core.traces.judge import BORN, IDENTICAL, NOT_COMPARABLE
from core.traces.models import RunSettings, load_factory
from core.traces.run import make_trace

FAMILIES = {
    "gpt2": "a decoder with learned positions",
    "llama": "a decoder with rotary embeddings, RMSNorm and grouped-query attention",
    "bert": "an encoder run with an attention mask and padding",
    "resnet": "a vision conv net with batch norm",
}
MATMULS = {"mm", "addmm", "bmm", "baddbmm", "convolution"}


def spec(family: str) -> str:
    return f"tests/corpus/{family}.py:make"


@pytest.fixture(scope="module")
def plain() -> dict[str, dict]:
    """One forward trace of each family at batch 1 (the reference the other runs are compared with)."""
    return {f: make_trace(RunSettings(model=spec(f))) for f in FAMILIES}


def answer(a: dict, b: dict):
    c = compare(a, b)
    assert LINE.fullmatch(c.line), c.line
    return c


def _none_or_born_within(c) -> None:
    """Other thread counts: no difference, or one born here within rounding in a reduction (and no op
    before it differs)."""
    if c.first is None:
        assert c.line.startswith("first difference: none in "), c.line
        return
    j = c.first.judgement
    assert (j.state, j.verdict) == (BORN, "within rounding"), (c.line, j.size)
    assert all(r.judgement.state == IDENTICAL for r in c.rows if r.a.index < c.first.a.index)


def test_nothing_is_fetched_from_the_network(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("the corpus tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    for family in FAMILIES:
        model, inputs = load_factory(spec(family))(batch="2")
        with torch.no_grad():
            out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        assert out is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_traced_twice_is_none_and_batch_one_runs(plain, family):
    a = plain[family]
    assert a["settings"]["batch"] == 1 and len(a["ops"]) > 10
    c = answer(a, make_trace(RunSettings(model=spec(family))))
    assert c.line == f"first difference: none in {len(a['ops'])} ops"


def test_batch_one_without_an_attention_mask():
    a = make_trace(RunSettings(model=spec("bert"), args=(("mask", "0"),)))
    assert answer(a, a).first is None and a["settings"]["batch"] == 1


def _middle_matmul(trace: dict) -> dict:
    ops = trace["ops"]
    mid = [o for o in ops[len(ops) // 3:] if o["op"].split(".")[1] in MATMULS and o["out_dtype"] == "float32"]
    return mid[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_planted_scale_is_born_beyond_rounding_at_its_op(plain, family):
    a = plain[family]
    op = _middle_matmul(a)
    b = make_trace(RunSettings(model=spec(family), perturb_op=op["index"]))
    c = answer(a, b)
    assert c.line == (f"first difference: op {op['index']} of {len(a['ops'])}, {op['op']} in {op['module']}: "
                      "born here, beyond rounding")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_threads_one_against_two(family, backward):
    one = make_trace(RunSettings(model=spec(family), threads=1), backward=backward)
    two = make_trace(RunSettings(model=spec(family), threads=2), backward=backward)
    assert one["settings"]["threads_used"] == 1 and two["settings"]["threads_used"] == 2
    _none_or_born_within(answer(one, two))


@pytest.mark.parametrize("family", FAMILIES)
def test_backward_traced_twice_is_none(family):
    a = make_trace(RunSettings(model=spec(family)), backward=True)
    assert any(o["backward"] for o in a["ops"]) and a["settings"]["backward"]
    assert answer(a, make_trace(RunSettings(model=spec(family)), backward=True)).first is None


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bfloat16_run_computes_in_bfloat16(plain, family):
    b = make_trace(RunSettings(model=spec(family), dtype="bfloat16"))
    floats = [o for o in b["ops"] if o["out_dtype"] in ("float32", "bfloat16")]
    # the weights and activations are bfloat16; a model may keep a part in float32 on purpose (Llama's rotary)
    share = sum(o["out_dtype"] == "bfloat16" for o in floats) / len(floats)
    assert share > 0.6, share
    assert answer(b, make_trace(RunSettings(model=spec(family), dtype="bfloat16"))).first is None
    c = answer(plain[family], b)
    m = LINE.fullmatch(c.line)
    assert (m["src"], m["dst"]) == ("float32", "bfloat16"), c.line


def _plain_rows_equal(family: str, batch: int) -> bool:
    """Plain torch, no tracer: is row 0 of the batch's output bit-identical to row 0 run alone?"""
    make = load_factory(spec(family))

    def out(b):
        model, inputs = make(batch=str(b))
        with torch.no_grad():
            y = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        return y[0][0]

    return torch.equal(out(1), out(batch))


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_four_against_its_row_alone(plain, family):
    a = plain[family]
    b = make_trace(RunSettings(model=spec(family), args=(("batch", "4"),), follow_row=0))
    assert b["settings"]["batch"] == 4 and b["settings"]["follow_row"] == 0
    c = answer(a, b)
    rounding = [r for r in c.rows if r.judgement.state not in (IDENTICAL, NOT_COMPARABLE)]
    if _plain_rows_equal(family, 4):
        # the same bits in plain torch: the trace finds no rounding difference (a reduction over the
        # whole batch, like a padding mask's all(), is named as not comparable)
        assert not rounding, c.line
    else:
        assert rounding and rounding[0].judgement.state == BORN, c.line
        assert rounding[0].judgement.verdict == "within rounding", (c.line, rounding[0].judgement.size)
    assert all(r.judgement.verdict != "shapes differ" for r in c.rows), c.line


def test_batch_four_unfollowed_is_not_comparable(plain):
    a = plain["gpt2"]
    b = make_trace(RunSettings(model=spec("gpt2"), args=(("batch", "4"),)))
    c = answer(a, b)
    assert c.first is not None and c.first.judgement.state == NOT_COMPARABLE
    assert c.line.endswith(": not comparable, shapes differ") and c.first.judgement.size is None
