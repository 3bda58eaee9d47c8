"""The tracer on kinds of model beyond transformers' (tests/corpus): a graph network whose batch is its graphs
(scatter ops), dynamically quantized MLP and LSTM (packed weights, quantized:: ops, a grid taken from the whole
batch), a quantization-aware layer (fake quantization), a spectral layer (complex FFTs), a custom
autograd.Function with float, integer and boolean outputs, and a diffusers UNet.

For each: two processes trace it alike; a planted scale is born beyond rounding where it was planted; thread
counts differ within rounding at most; bfloat16 computes in bfloat16 or is refused in one line that says why;
a batch against one of its rows gives no op born beyond rounding, and where the row cannot be compared, the
reason; engine against engine for the quantized ones; and a rounding-sized plant that flips a choice is named.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
from dataclasses import dataclass

import pytest
import torch

from core.traces.compare import LINE, compare
from core.traces.files import from_bytes
from core.traces.judge import BORN, IDENTICAL, NOT_COMPARABLE
from core.traces.models import RunSettings, load_factory
from core.traces.run import make_trace

ROOT = pathlib.Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class Kind:
    spec: str
    args: tuple = ()
    batch: tuple = (("batch", "4"),)  # make()'s arguments for a batch of 4
    batch_arg: str | None = None
    differentiable: bool = True
    quantized: bool = False


KINDS = {
    "gnn": Kind("tests/corpus/gnn.py:make", batch=(("graphs", "4"),), batch_arg="graphs"),
    "quantized-mlp": Kind("tests/corpus/quantized.py:make", (("kind", "mlp"),), differentiable=False, quantized=True),
    "quantized-lstm": Kind("tests/corpus/quantized.py:make", (("kind", "lstm"),), differentiable=False,
                           quantized=True),
    "fake-quantized": Kind("tests/corpus/quantized.py:make", (("kind", "fake"),)),
    "fft": Kind("tests/corpus/fft.py:make"),
    "custom-function": Kind("tests/corpus/custom.py:make"),
    "unet": Kind("tests/corpus/unet.py:make"),
}
REDUCING = {"mm", "addmm", "bmm", "convolution", "_fft_r2c", "quantized_lstm", "quantized.linear_dynamic"}


def settings(kind: str, args: tuple = (), **kw) -> RunSettings:
    k = KINDS[kind]
    return RunSettings(model=k.spec, args=k.args + tuple(args), **kw)


@pytest.fixture(scope="module")
def plain() -> dict[str, dict]:
    return {k: make_trace(settings(k)) for k in KINDS}


def answer(a: dict, b: dict):
    c = compare(a, b)
    assert LINE.fullmatch(c.line), c.line
    return c


def name(op: dict) -> str:
    ns, packet = op["op"].split(".")[:2]
    return packet if ns == "aten" else f"{ns}.{packet}"


# ------------------------------------------------------------------------------------- two processes

TRACE_ALL = """
import json, sys, warnings
warnings.simplefilter("ignore")
from core.traces.files import dumps
from core.traces.models import RunSettings
from core.traces.run import make_trace
for key, spec, args in json.loads(sys.argv[1]):
    trace = make_trace(RunSettings(model=spec, args=tuple(map(tuple, args))))
    open(f"{sys.argv[2]}/{key}.json", "w").write(dumps(trace))
"""


def test_two_processes_trace_every_kind_alike(tmp_path):
    """Each kind traced in two processes (other addresses, other allocators' leftovers): the files are valid
    (complex samples, quantized ops' packed weights included) and compare as none."""
    kinds = json.dumps([[k, v.spec, v.args] for k, v in KINDS.items()])
    runs = []
    for p in ("one", "two"):
        (tmp_path / p).mkdir()
        runs.append(subprocess.Popen([sys.executable, "-c", TRACE_ALL, kinds, str(tmp_path / p)], cwd=ROOT,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for r in runs:
        _, err = r.communicate(timeout=300)
        assert r.returncode == 0, err
    for k in KINDS:
        a, b = (from_bytes((tmp_path / p / f"{k}.json").read_bytes()) for p in ("one", "two"))
        assert answer(a, b).line == f"first difference: none in {len(a['ops'])} ops", k
        assert not any(" at 0x" in o["args"] for o in a["ops"]), k  # no argument is written by its address


def test_every_op_is_recorded_whatever_its_namespace(plain):
    assert [name(o) for o in plain["quantized-mlp"]["ops"]] == [
        "quantized.linear_dynamic", "relu", "add", "cat", "quantized.linear_dynamic", "relu",
        "quantized.linear_dynamic"]
    lstm = [name(o) for o in plain["quantized-lstm"]["ops"]]
    assert lstm == ["zeros", "quantized_lstm", "quantized.linear_dynamic"]
    packed = [o["args"] for o in plain["quantized-mlp"]["ops"] if "linear_dynamic" in o["op"]]
    assert all(a.startswith("T, quantized.LinearPackedParamsBase#") for a in packed), packed
    assert len(set(packed)) == 3  # three layers, three packed weights, told apart by their content


def test_complex_outputs_are_recorded_as_their_parts(plain):
    fft = [o for o in plain["fft"]["ops"] if o["out_dtype"] == "complex64"]
    assert {name(o) for o in fft} >= {"_fft_r2c", "bmm", "copy_"}
    assert all(len(h) == 16 for o in fft for h in o["sample_hex"])  # the real part's bits, then the imaginary's
    r2c = next(o for o in fft if name(o) == "_fft_r2c")
    assert r2c["k"] == 32 and r2c["terms_kind"] == "exact" and r2c["l1"] > 0


# ------------------------------------------------------------------------------------------- plants


def _planted_op(trace: dict) -> dict:
    ops = trace["ops"]
    return next(o for o in ops[len(ops) // 3:] if name(o) in REDUCING and o["k"] is not None) \
        if len(ops) > 6 else next(o for o in ops if name(o) in REDUCING)


@pytest.mark.parametrize("kind", KINDS)
def test_a_planted_scale_is_born_beyond_rounding_at_its_op(plain, kind):
    a = plain[kind]
    op = _planted_op(a)
    c = answer(a, make_trace(settings(kind, perturb_op=op["index"])))
    assert c.line == (f"first difference: op {op['index']} of {len(a['ops'])}, {op['op']} in {op['module']}: "
                      "born here, beyond rounding")
    # every difference after it is passed on or within rounding: beyond rounding is kept for what an op adds
    assert all(r.judgement.verdict != "beyond rounding" for r in c.rows if r.judgement.state != BORN), c.line


@pytest.mark.parametrize("kind, backward", [(k, bw) for k, v in KINDS.items() for bw in (False, True)
                                             if v.differentiable or not bw])  # (dynamic quantization: no gradient)
def test_threads_one_against_two(kind, backward):
    one = make_trace(settings(kind, threads=1), backward=backward)
    two = make_trace(settings(kind, threads=2), backward=backward)
    c = answer(one, two)
    if c.first is not None:
        assert (c.first.judgement.state, c.first.judgement.verdict) == (BORN, "within rounding"), c.line


# ------------------------------------------------------------------------------------------ formats


@pytest.mark.parametrize("kind", [k for k, v in KINDS.items() if not v.quantized])
def test_bfloat16_computes_in_bfloat16(plain, kind):
    b = make_trace(settings(kind, dtype="bfloat16"))
    assert any(o["out_dtype"] == "bfloat16" for o in b["ops"])
    assert answer(b, make_trace(settings(kind, dtype="bfloat16"))).first is None
    m = LINE.fullmatch(answer(plain[kind], b).line)
    assert (m["src"], m["dst"]) == ("float32", "bfloat16"), m[0]


@pytest.mark.parametrize("kind, args, where", [
    ("quantized-mlp", (), "at quantized.linear_dynamic.default in model.model.fc1"),
    ("quantized-lstm", (), "at aten.quantized_lstm.input in model.model.rnn"),
    ("fft", (("spectral", "input"),), "in model.layers.0"),  # (torch.fft checks the format before any op runs)
])
def test_a_model_that_cannot_run_in_bfloat16_is_refused_in_one_line(kind, args, where):
    with pytest.raises(ValueError) as e:
        make_trace(settings(kind, args, dtype="bfloat16"))
    text = str(e.value)
    assert text.startswith(f"the model does not run in bfloat16 on this cpu: it failed {where} ("), text
    assert "\n" not in text and "report a bug" not in text


# ------------------------------------------------------------------------------------------ batches


def _row_alone_differs(kind: str) -> bool:
    """Plain torch, no tracer: does row 0 of a batch of 4 differ from row 0 alone?"""
    k = KINDS[kind]
    make = load_factory(k.spec)

    def first_row(args):
        model, inputs = make(**dict(k.args + args))
        with torch.no_grad():
            y = model(*inputs)
        return y if isinstance(y, torch.Tensor) else y[0]

    return not torch.equal(first_row(())[0], first_row(k.batch)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_a_batch_against_its_row_alone(plain, kind):
    k = KINDS[kind]
    b = make_trace(settings(kind, k.batch, follow_row=0, batch_arg=k.batch_arg))
    assert b["settings"]["batch"] == 4
    c = answer(plain[kind], b)
    assert not [r for r in c.rows if r.judgement.state == BORN and r.judgement.verdict != "within rounding"], c.line
    assert not [r for r in c.rows if r.judgement.verdict == "beyond rounding"], c.line  # inherited: passed on
    if c.first is not None and any(r.a.in_shapes for r in c.rows if r.judgement.state != IDENTICAL):
        assert c.first.a.in_shapes, c.line  # a tensor made from the batch's size alone is not the answer
    if k.quantized:  # each layer quantizes on the whole batch's grid: row 0 differs, and the trace says why
        assert _row_alone_differs(kind)
        assert c.line.endswith("not comparable, reads the whole batch") and "linear_dynamic" in c.note, c.line
        assert "the followed row's results depend on the other rows" in c.note
    elif kind != "fft":  # the followed row is compared op for op, all the way
        assert all(r.judgement.state != NOT_COMPARABLE or not r.a.in_shapes for r in c.rows), c.line
    else:  # the spectral mixing's product has its batch in another dimension, named; its copy back resumes
        bad = [r for r in c.rows if r.judgement.state == NOT_COMPARABLE]
        assert bad and all("not batch-first" in r.judgement.reason or r.a.op.startswith("aten.copy_")
                           for r in bad), [r.judgement.reason for r in bad]
        assert c.rows[-1].judgement.state != NOT_COMPARABLE


def test_a_batch_of_graphs_follows_a_graph_not_a_node(plain):
    b = make_trace(settings("gnn", (("graphs", "4"),), follow_row=0, batch_arg="graphs"))
    first = b["ops"][0]
    assert first["full_shape"] == [24, 8] and first["out_shape"] == [6, 8]  # 4 graphs of 6 nodes: one graph's
    c = answer(plain["gnn"], b)
    assert not [r for r in c.rows if r.judgement.detail == "reads the whole batch"], c.line  # gathers stay in it
    apart = [r for r in c.rows if r.judgement.state == NOT_COMPARABLE]
    assert apart and all("bookkeeping of the batch" in r.judgement.reason for r in apart)  # torch.ones over edges


@pytest.mark.parametrize("wrong, words", [
    ((("graphs", "four"),), "is not a whole number"),
    ((), "make() has no argument sizes"),
])
def test_a_batch_argument_is_checked(wrong, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        make_trace(settings("gnn", wrong, follow_row=0, batch_arg="sizes" if not wrong else "graphs"))


# ------------------------------------------------------------------------------------------ engines


@pytest.mark.parametrize("kind, first", [("quantized-mlp", "model.model.fc1"), ("quantized-lstm", "model.model.rnn")])
def test_engine_against_engine(plain, kind, first):
    """qnnpack ignores reduce_range: another grid, born in the first quantized layer beyond rounding; onednn
    quantizes alike and rounds the float result otherwise at most, within rounding."""
    x86 = plain[kind]
    m = LINE.fullmatch(answer(x86, make_trace(settings(kind, (("engine", "qnnpack"),)))).line)
    assert (m["module"], m["state"], m["verdict"]) == (first, "born here", "beyond rounding"), m[0]
    c = answer(x86, make_trace(settings(kind, (("engine", "onednn"),))))
    if c.first is not None:
        assert (c.first.a.module, c.first.judgement.state, c.first.judgement.verdict) == (
            first, BORN, "within rounding"), c.line


# ------------------------------------------------------------------------------------------- flips


@pytest.mark.parametrize("kind, planted, flips", [
    ("gnn", lambda ops: [o for o in ops if name(o) == "scatter_reduce"][-1], "aten.argmax.default in model"),
    ("quantized-mlp", lambda ops: ops[0], "quantized.linear_dynamic.default in model.model.fc2"),
    ("fake-quantized", lambda ops: ops[0], "aten.fake_quantize_per_tensor_affine_cachemask.default in model"),
    ("custom-function", lambda ops: ops[0], "aten.gt.Scalar in model"),
])
def test_a_rounding_sized_plant_that_flips_a_choice_is_named(kind, planted, flips):
    tie = (("near_tie", "1"),)
    a = make_trace(settings(kind, tie))
    op = planted(a["ops"])
    c = answer(a, make_trace(settings(kind, tie, perturb_op=op["index"], perturb_size=2.0 ** -22)))
    m = LINE.fullmatch(c.line)
    assert (int(m["index"]), m["state"], m["verdict"]) == (op["index"], "born here", "within rounding"), c.line
    assert f"{m['flip_op']} in {m['flip_module']}" == flips, c.line
    assert "a rounding-sized difference in its input changed its choice" in c.flip_sentence


# --------------------------------------------------------------------------------------- mechanisms


def test_opaque_arguments_are_written_by_their_content_never_their_address():
    from core.traces.arguments import Opaque, arg_text

    class Handle:  # its repr names its address
        pass

    make = load_factory(KINDS["quantized-mlp"].spec)
    packed = [make()[0].model.fc1._packed_params._packed_params for _ in range(2)]  # two objects, one content
    texts = [arg_text((torch.ones(1), p, Handle(), 0.5), {"generator": torch.Generator()}, Opaque()) for p in packed]
    assert texts[0] == texts[1] and " at 0x" not in texts[0]
    assert texts[0].startswith("T, quantized.LinearPackedParamsBase#")
    assert texts[0].endswith(", Handle(not comparable), 0x1.0000000000000p-1, generator=Generator(not comparable)")
    long = arg_text(([1.5] * 200,), {}, Opaque())
    assert len(long) == 200 and long != arg_text(([1.5] * 199 + [2.5],), {}, Opaque())  # the rest as a digest


def test_an_op_with_an_argument_that_cannot_be_compared_says_so():
    from core.traces.record import OpRecord, run_traced

    rec = run_traced(lambda: torch.ones(3) * 2, None)[0]
    a = OpRecord.from_dict(rec.to_dict() | {"args": "Handle(not comparable)"})
    b = OpRecord.from_dict(a.to_dict() | {"out_digest": "1" * 16, "sample_hex": ["40000001"] * 3})
    from core.traces.judge import judge

    j = judge(a, b)
    assert j.state == BORN and "cannot be compared by its content (Handle(not comparable))" in j.reason


def test_other_namespaces_are_recorded_and_the_profilers_named_as_not_recorded():
    from core.traces.record import run_traced

    x = torch.randn(3, 3)

    def run():
        with torch.autograd.profiler.record_function("block"):
            return (x @ x).sum()

    notes: list[str] = []
    assert [o.op for o in run_traced(run, None, notes=notes)] == ["aten.mm.default", "aten.sum.default"]
    assert notes == ["not recorded: profiler._record_function_enter_new.default (1 call), "
                     "profiler._record_function_exit._RecordFunction (1 call): they mark a profiler's ranges "
                     "(record_function) and compute nothing"]


def test_a_quantized_tensor_is_recorded_as_its_levels_on_its_grid():
    from core.traces.files import dumps
    from core.traces.record import run_traced

    x = torch.tensor([0.1, 0.26, -0.3])
    ops = [run_traced(lambda s=s: torch.quantize_per_tensor(x, s, 0, torch.qint8), None)[0] for s in (0.1, 0.05)]
    assert [o.out_dtype for o in ops] == ["qint8", "qint8"] and ops[0].sample_hex == ["1", "3", "-3"]
    twice = run_traced(lambda: torch.quantize_per_tensor(x * 2, 0.2, 0, torch.qint8), None)[1]
    assert twice.sample_hex == ops[0].sample_hex and twice.out_digest != ops[0].out_digest  # another grid
    dumps({"format": "op-trace", "version": 2, "created": "2026-01-01T00:00:00", "settings": {"model": "q"},
           "machine": {"device_name": "cpu", "device_kind": "cpu", "torch_version": torch.__version__},
           "ops": [o.to_dict() | {"index": i + 1} for i, o in enumerate(ops)]})


def test_complex_values_are_judged_by_their_parts_at_their_modulus():
    from core.traces.judge import judge
    from core.traces.opclass import op_class
    from core.traces.record import OpRecord, run_traced

    z = torch.tensor([3 + 4j, 1e-3 - 2j], dtype=torch.complex64)
    w = torch.tensor([1 - 1j, 2 + 0.5j], dtype=torch.complex64)
    mul = run_traced(lambda: z * w, None)[0]
    add = run_traced(lambda: z + w, None)[0]
    assert op_class(mul) == "elementwise" and op_class(add) == "exact"
    re, im = mul.sample_hex[0][:8], mul.sample_hex[0][8:]
    nudged = f"{int(re, 16) + 2:08x}{im}"  # two ULPs of the real part (7 here): within the modulus's allowance
    other = OpRecord.from_dict(mul.to_dict() | {"sample_hex": [nudged, mul.sample_hex[1]], "out_digest": "2" * 16})
    j = judge(mul, other)
    assert (j.state, j.verdict) == (BORN, "within rounding") and j.size.sampled == 4, j.size


def test_an_inherited_difference_larger_than_the_ops_rounding_is_passed_on():
    from core.traces.judge import CARRIED, INHERITED, judge
    from core.traces.record import OpRecord, run_traced

    rec = run_traced(lambda: torch.exp(torch.tensor([1.0, 2.0])), None)[0]
    far = [f"{int(h, 16) + 100:08x}" for h in rec.sample_hex]
    other = OpRecord.from_dict(rec.to_dict() | {"sample_hex": far, "out_digest": "3" * 16, "in_digests": ["4" * 16]})
    j = judge(rec, other)
    assert (j.state, j.verdict) == (INHERITED, CARRIED), j.size


def test_a_group_norm_is_a_reduction_of_its_group():
    from core.traces.opclass import op_class
    from core.traces.record import run_traced

    x = torch.randn(2, 8, 4, 4, generator=torch.Generator().manual_seed(1))
    norm = torch.nn.GroupNorm(4, 8)
    rec = next(o for o in run_traced(lambda: norm(x), norm) if "group_norm" in o.op)
    assert op_class(rec) == "reduction" and rec.k == 2 * 16 and rec.terms_kind == "relative-floor"
    assert [o["k"] for o in rec.outputs] == [32, 32, 32]  # the output, each group's mean and its rstd


def test_an_internal_assert_is_not_passed_on_as_the_reason():
    from core.traces.record import OpFailed
    from core.traces.run import failure_line

    error = RuntimeError('t.is_floating_point() INTERNAL ASSERT FAILED at "/x/y.cpp":12, please report a bug to '
                         "PyTorch. Expected a float tensor\nmore")
    line = failure_line(OpFailed(error, "mylib.op.default", "model.block"), settings("gnn", dtype="bfloat16"))
    assert line == ("the model does not run in bfloat16 on this cpu: it failed at mylib.op.default in model.block "
                    "(RuntimeError: PyTorch's internal check failed (t.is_floating_point()) Expected a float tensor); "
                    "an op without a bfloat16 kernel (quantized layers, the CPU's FFT) runs in float32 only")
