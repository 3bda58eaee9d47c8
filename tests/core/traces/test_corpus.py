"""The tracer on real model families (tests/corpus: transformers models from configs, seeded random
weights, nothing downloaded, and torch.nn's recurrent nets): no crash at batch 1, the one-line answer
right for repeats, planted bugs, thread counts, backward passes, bfloat16, and a batch against one of
its rows; a rounding-sized plant that flips a mixture of experts' routing and an argmax is named.

What is asserted is what holds on any machine: a run against itself is "none"; a planted 2^-10
scale is born beyond rounding at its op; other thread counts give "none" or a difference born
within rounding; batch 4 against its row 0 alone gives no op born beyond rounding, and where plain
torch's row 0 differs the trace finds a difference (a rounding difference inside a model can also
vanish before its output: Mamba's scan),
and where the followed row cannot be cut (a tensor not batch-first) or the op reads across the batch (a
sort of the whole batch's tokens), it is "not comparable" with that reason, never a rounding verdict.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch

from core.traces.compare import LINE, compare
from core.traces.files import dumps, from_bytes
from core.traces.judge import BORN, IDENTICAL, NOT_COMPARABLE
from core.traces.models import RunSettings, load_factory
from core.traces.record import UNINITIALISED
from core.traces.run import make_trace
from tests.core.traces.test_record import litter

FAMILIES = {
    "gpt2": "a decoder with learned positions",
    "llama": "a decoder with rotary embeddings, RMSNorm and grouped-query attention",
    "bert": "an encoder run with an attention mask and padding",
    "resnet": "a vision conv net with batch norm",
    "t5": "an encoder-decoder with relative position buckets (log(0) cast to int64)",
    "moe": "a mixture of experts with top-2 routing (Mixtral, grouped experts sorting the batch's tokens)",
    "vit": "a vision transformer",
    "wav2vec2": "an audio model with a conv front end",
    "whisper": "an audio encoder-decoder with a conv front end",
    "lstm": "an LSTM (oneDNN's kernel returns a workspace with autograd on)",
    "gru": "a GRU",
    "mamba": "a state-space model on transformers' sequential CPU path",
}
MATMULS = {"mm", "addmm", "bmm", "baddbmm", "convolution"}
RECURRENT = {"lstm": "lstm", "gru": "gru"}  # tests/corpus/rnn.py, by kind
FLOAT32_PARTS = {"t5", "moe", "mamba"}  # families that compute a large part in float32 on purpose


def spec(family: str) -> str:
    return f"tests/corpus/{'rnn' if family in RECURRENT else family}.py:make"


def settings(family: str, args: tuple = (), **kw) -> RunSettings:
    kind = (("kind", RECURRENT[family]),) if family in RECURRENT else ()
    return RunSettings(model=spec(family), args=kind + tuple(args), **kw)


@pytest.fixture(scope="module")
def plain() -> dict[str, dict]:
    """One forward trace of each family at batch 1 (the reference the other runs are compared with)."""
    return {f: make_trace(settings(f)) for f in FAMILIES}


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
        model, inputs = load_factory(spec(family))(batch="2", **({"kind": RECURRENT[family]} if family in RECURRENT
                                                                  else {}))
        with torch.no_grad():
            out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        assert out is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_traced_twice_is_none_and_batch_one_runs(plain, family):
    a = plain[family]
    assert a["settings"]["batch"] == 1 and len(a["ops"]) > 5  # an LSTM is 7 ops: a fused kernel per layer
    c = answer(a, make_trace(settings(family)))
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
    b = make_trace(settings(family, perturb_op=op["index"]))
    c = answer(a, b)
    assert c.line == (f"first difference: op {op['index']} of {len(a['ops'])}, {op['op']} in {op['module']}: "
                      "born here, beyond rounding")


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_threads_one_against_two(family, backward):
    one = make_trace(settings(family, threads=1), backward=backward)
    two = make_trace(settings(family, threads=2), backward=backward)
    assert one["settings"]["threads_used"] == 1 and two["settings"]["threads_used"] == 2
    _none_or_born_within(answer(one, two))


@pytest.mark.parametrize("family", FAMILIES)
def test_backward_traced_twice_is_none(family):
    a = make_trace(settings(family), backward=True)
    assert any(o["backward"] for o in a["ops"]) and a["settings"]["backward"]
    assert answer(a, make_trace(settings(family), backward=True)).first is None


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bfloat16_run_computes_in_bfloat16(plain, family):
    b = make_trace(settings(family, dtype="bfloat16"))
    floats = [o for o in b["ops"] if o["out_dtype"] in ("float32", "bfloat16")]
    # the weights and activations are bfloat16; a model may keep a part in float32 on purpose (Llama's rotary,
    # T5's position buckets, a router's softmax, Mamba's scan)
    share = sum(o["out_dtype"] == "bfloat16" for o in floats) / len(floats)
    assert share > (0.3 if family in FLOAT32_PARTS else 0.6), share
    assert answer(b, make_trace(settings(family, dtype="bfloat16"))).first is None
    c = answer(plain[family], b)
    m = LINE.fullmatch(c.line)
    assert (m["src"], m["dst"]) == ("float32", "bfloat16"), c.line


def _plain_rows_equal(family: str, batch: int) -> bool:
    """Plain torch, no tracer: is row 0 of the batch's output bit-identical to row 0 run alone?"""
    make = load_factory(spec(family))
    kind = {"kind": RECURRENT[family]} if family in RECURRENT else {}

    def out(b):
        model, inputs = make(batch=str(b), **kind)
        with torch.no_grad():
            y = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        return y[0] if isinstance(y, torch.Tensor) else y[0][0]

    return torch.equal(out(1), out(batch))


@pytest.mark.parametrize("family", FAMILIES)
def test_batch_four_against_its_row_alone(plain, family):
    a = plain[family]
    b = make_trace(settings(family, (("batch", "4"),), follow_row=0))
    assert b["settings"]["batch"] == 4 and b["settings"]["follow_row"] == 0
    c = answer(a, b)
    rounding = [r for r in c.rows if r.judgement.state not in (IDENTICAL, NOT_COMPARABLE)]
    if c.first is not None and c.first.judgement.state == NOT_COMPARABLE:
        # a reason a reader can follow: not batch-first, bookkeeping of the batch, or reading across it
        assert any(w in c.first.judgement.reason for w in ("not batch-first", "bookkeeping of the batch",
                                                            "across the batch")), c.first.judgement.reason
    # no op of the followed row is born beyond rounding: batch sizes change the order of sums, nothing else
    assert all(r.judgement.verdict == "within rounding" for r in rounding if r.judgement.state == BORN), c.line
    if c.first is not None and c.first.judgement.state == NOT_COMPARABLE and c.first.judgement.detail != \
            "shapes differ":
        # the rows part inside ops that read across the batch (a whole batch's tokens through grouped experts):
        # what reaches the followed row again is inherited from them, no op of the row's own was born so
        assert not rounding or rounding[0].judgement.state != BORN, c.line
    elif rounding:
        assert rounding[0].judgement.state == BORN, c.line
    elif not _plain_rows_equal(family, 4):
        # plain torch's row 0 differs, so the trace names where: a rounding difference, or the output itself
        # cannot be cut (an RNN's, behind a state that is not batch-first)
        assert c.first is not None and "not batch-first" in c.first.judgement.reason, c.line
    # shapes that differ have a reason: the batch in another dimension, or a size made from the batch alone
    assert all(r.judgement.verdict != "shapes differ" or "not batch-first" in r.judgement.reason
               or "bookkeeping of the batch" in r.judgement.reason or r.a.not_batch_first or r.b.not_batch_first
               for r in c.rows), c.line


def test_batch_four_unfollowed_is_not_comparable(plain):
    a = plain["gpt2"]
    b = make_trace(RunSettings(model=spec("gpt2"), args=(("batch", "4"),)))
    c = answer(a, b)
    assert c.first is not None and c.first.judgement.state == NOT_COMPARABLE
    assert c.line.endswith(": not comparable, shapes differ") and c.first.judgement.size is None


def test_an_int64_made_from_minus_infinity_leaves_a_valid_trace(plain):
    """T5's position buckets take log(0) and cast -inf to int64 (its most negative value): the trace's L1
    norms stay non-negative and the file passes its own schema."""
    t = plain["t5"]
    assert any(h == str(-2**63) for o in t["ops"] for h in o["sample_hex"])
    assert all(o["l1"] is None or o["l1"] >= 0 for o in t["ops"])
    from_bytes(dumps(t).encode(), "t5.json")


def test_an_lstm_workspace_is_scratch_and_never_judged():
    a = make_trace(settings("lstm"), backward=True)
    rnn = [o for o in a["ops"] if o["op"] == "aten.mkldnn_rnn_layer.default"]
    assert rnn and all([x.get("scratch", False) for x in o["outputs"]] == [False, False, False, True] for o in rnn)
    assert answer(a, make_trace(settings("lstm"), backward=True)).first is None


def test_a_sort_of_the_whole_batch_is_not_comparable_and_nothing_after_it_differs(plain):
    b = make_trace(settings("moe", (("batch", "4"),), follow_row=0))
    c = answer(plain["moe"], b)
    assert c.first is not None and c.line.endswith("not comparable, reads the whole batch"), c.line
    assert c.first.a.op.startswith("aten.sort"), c.line
    # the followed row's own ops are identical after it, or inherit what the batch-wide ops computed
    assert c.note.startswith("Nothing after it that can be compared") or "not born in an op of the followed row" \
        in c.note, c.note
    assert not [r for r in c.rows if r.judgement.state == BORN], c.note


def test_an_rnn_state_that_is_not_batch_first_is_named(plain):
    b = make_trace(settings("gru", (("batch", "4"),), follow_row=0))
    assert any("another dimension than the first" in n for n in b["settings"]["notes"])
    c = answer(plain["gru"], b)
    assert c.first.judgement.state == NOT_COMPARABLE and "not batch-first" in c.first.judgement.reason


def test_backward_modules_do_not_depend_on_the_hash_seed(tmp_path):
    """Siblings of one depth (k_proj, v_proj) are both running in a backward pass; which one names an op must
    not follow PYTHONHASHSEED (it did when the deepest was picked from a set)."""
    modules = []
    for seed in ("1", "2"):
        out = tmp_path / f"bw{seed}.json"
        env = {**os.environ, "PYTHONHASHSEED": seed}
        subprocess.run([sys.executable, "-m", "scripts.trace", "run", "--module", spec("llama"), "--backward",
                        "--out", str(out)], check=True, env=env, capture_output=True)
        modules.append([o["module"] for o in from_bytes(out.read_bytes(), out.name)["ops"]])
    assert modules[0] == modules[1]


@pytest.mark.parametrize("family", ["moe", "vit", "wav2vec2"])
def test_writes_into_empty_tensors_leave_two_runs_files_equal(family):
    """The MoE puts rows into a fresh ``empty`` buffer (``index_put_``), ViT's and wav2vec2's backward passes copy
    into one (``copy_``): the buffer's leftover bytes are recorded as uninitialised, not digested, so two runs with
    other garbage in the allocator write the same file, byte for byte, but for the time it was made."""
    texts = []
    for seed in (1, 2):
        litter(seed)
        t = make_trace(settings(family), backward=True)
        assert any(o["backward"] for o in t["ops"])
        texts.append(dumps(t | {"created": "2026-01-01T00:00:00Z"}))
    assert texts[0] == texts[1]
    assert UNINITIALISED in texts[0]  # (the buffer is there, and recorded as such)


def _o_proj(trace: dict) -> dict:
    return next(o for o in trace["ops"]
                if o["module"].endswith("layers.0.self_attn.o_proj") and o["op"] == "aten.mm.default")


@pytest.mark.parametrize("experts", ["grouped_mm", "eager"])
def test_a_rounding_sized_plant_that_flips_the_routing_is_named(experts):
    """The router of tests/corpus/moe.py (near_tie) puts one token's second and third experts a hair apart;
    a 2^-21 plant at the attention's output, within rounding there, makes topk choose the other one."""
    args = (("near_tie", "21"), ("experts", experts))
    a = make_trace(settings("moe", args))
    op = _o_proj(a)
    b = make_trace(settings("moe", args, perturb_op=op["index"], perturb_size=2.0 ** -21))
    c = answer(a, b)
    m = LINE.fullmatch(c.line)
    assert (m["index"], m["state"], m["verdict"]) == (str(op["index"]), "born here", "within rounding"), c.line
    assert m["flip_op"] == "aten.topk.default" and m["flip_module"].endswith("layers.0.mlp.gate"), c.line
    assert c.flip_sentence == (f"op {c.flip.a.index}, aten.topk in {c.flip.a.module}: a rounding-sized difference in "
                               "its input changed its choice (indices differ); from here the runs take different paths")
    # the topk's input differs within a few ULPs; its indices differ
    assert c.flip.judgement.size.basis.startswith("indices")


def test_a_rounding_sized_plant_that_flips_an_argmax_is_named():
    a = make_trace(RunSettings(model="tests/corpus/argmax.py:make"))
    b = make_trace(RunSettings(model="tests/corpus/argmax.py:make", perturb_op=1, perturb_size=2.0 ** -22))
    c = answer(a, b)
    assert c.line == ("first difference: op 1 of 3, aten.mm.default in model.scores: born here, within rounding; "
                      "a choice flips at op 3, aten.argmax.default in model")
    assert "aten.argmax in model: a rounding-sized difference in its input changed its choice" in c.flip_sentence
    assert [o["sample_hex"] for o in (a["ops"][2], b["ops"][2])] == [["2"], ["0"]]
