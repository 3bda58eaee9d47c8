"""scripts.trace as a person runs it: `run` writes trace files, `compare` ends with the one-line answer,
bad input gets a message and exit status 2 (no traceback), and the command loads no Streamlit.

Most calls run the command's ``main`` in this process, with its standard streams captured and its exit
status taken from its return value (or argparse's SystemExit): a new interpreter per call spent its
time importing torch. The first test and the no-Streamlit test run it as a real process.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from scripts import trace as trace_cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
LINE = re.compile(r"first difference: (?:op (\d+) of (\d+), (aten\.\S+) in (\S+): (born here|inherited), "
                  r"(within rounding|beyond rounding)|none in (\d+) ops)")
MODEL_FILE = textwrap.dedent('''
    import torch
    import torch.nn as nn


    class Scaled(nn.Module):
        def __init__(self, width, scale):
            super().__init__()
            self.scale = scale
            self.fc = nn.Linear(width, width)
            g = torch.Generator().manual_seed(7)
            with torch.no_grad():
                self.fc.weight.copy_(torch.randn(width, width, generator=g) / width ** 0.5)
                self.fc.bias.copy_(torch.randn(width, generator=g))

        def forward(self, x):
            return torch.tanh(self.fc(x * self.scale))


    def make(width="32", scale="1.0"):
        w = int(width)
        x = torch.randn(4, w, generator=torch.Generator().manual_seed(8))
        return Scaled(w, float(scale)), (x,)
''')


def process(*args: str) -> subprocess.CompletedProcess:
    """``python -m scripts.trace`` in a new interpreter."""
    return subprocess.run([sys.executable, "-m", "scripts.trace", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def trace(*args: str) -> subprocess.CompletedProcess:
    """The command's ``main`` in this process: its exit status, standard output and error."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(ROOT):
        try:
            code = trace_cli.main(list(args))
        except SystemExit as e:  # argparse's usage errors
            code = e.code
    return subprocess.CompletedProcess(["scripts.trace", *args], code, out.getvalue(), err.getvalue())

FAILING_FILE = textwrap.dedent('''
    import torch


    class Fails(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("in forward")


    def make(where="make"):
        if where == "make":
            return 1 / 0
        return Fails(), (torch.ones(2),)
''')
LAST_COLUMN_FILE = textwrap.dedent('''
    import torch


    class Last(torch.nn.Module):
        def forward(self, x):
            return x[:, -1] * 2.0


    def make():
        return Last(), (torch.arange(16, dtype=torch.float32).reshape(1, 16),)
''')


def last_line(p: subprocess.CompletedProcess) -> str:
    return p.stdout.strip().splitlines()[-1]


def ok(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert p.returncode == 0, p.stderr
    return p


def test_bundled_model_threads(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert last_line(ok(process("run", "--model", "mlp-step", "--out", str(a)))).startswith(f"wrote {a} (")
    ok(trace("run", "--model", "mlp-step", "--threads", "1", "--out", str(b)))
    line = last_line(ok(trace("compare", str(a), str(b))))
    m = LINE.fullmatch(line)
    assert m, line
    if m.group(7) is None:  # a difference here: born in a reduction, within rounding (machine-dependent)
        assert m.group(5, 6) == ("born here", "within rounding"), line


def test_own_module_with_backward_and_a_changed_argument(tmp_path):
    src = tmp_path / "mymodel.py"
    src.write_text(MODEL_FILE)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    spec = f"{src}:make"
    ok(trace("run", "--module", spec, "--backward", "--out", str(a)))
    ok(trace("run", "--module", spec, "--arg", "scale=1.001", "--backward", "--out", str(b)))
    same = last_line(ok(trace("compare", str(a), str(a))))
    assert LINE.fullmatch(same) and same.startswith("first difference: none in ")
    line = last_line(ok(trace("compare", str(a), str(b))))
    m = LINE.fullmatch(line)
    assert m, line
    assert m.group(1) == "1" and m.group(3) == "aten.mul.Tensor" and m.group(5, 6) == ("born here", "beyond rounding")
    assert int(m.group(2)) > 4  # forward and backward ops


def bad(p: subprocess.CompletedProcess, *words: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert p.stderr.strip() and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in p.stderr, p.stderr


def test_bad_input(tmp_path):
    out = str(tmp_path / "x.json")
    other = tmp_path / "other.json"
    other.write_text('{"hello": "world"}')
    failing = tmp_path / "failing.py"
    failing.write_text(FAILING_FILE)
    cases = [
        (["run", "--out", out], ["--model", "--module"]),
        (["run", "--model", "mlp-step", "--arg", "nokey", "--out", out], ["key=value"]),
        (["compare", str(tmp_path / "missing.json"), str(other)], ["missing.json"]),
        (["compare", str(other), str(other)], ["not a valid trace file"]),
        (["run", "--module", f"{tmp_path / 'nofile.py'}:make", "--out", out], ["no Python file"]),
        (["run", "--module", f"{failing}:make", "--out", out], ["ZeroDivisionError", "division by zero"]),
        (["run", "--module", f"{failing}:make", "--arg", "where=forward", "--out", out],
         ["RuntimeError", "in forward"]),
        (["run", "--model", "mlp-step", "--perturb-op", "100000", "--out", out], ["cannot perturb op 100000", "only"]),
        (["run", "--model", "tiny-lm", "--follow-row", "1", "--out", out], ["--follow-row", "--module"]),
        (["run", "--module", "tests/corpus/gpt2.py:make", "--arg", "batch=2", "--follow-row", "2", "--out", out],
         ["--follow-row 2", "has 2 rows"]),
        (["run", "--model", "tiny-lm", "--dtype", "float64", "--out", out],
         ["the tiny language model runs in float16, bfloat16, float32 or autocast-bfloat16"]),
        (["run", "--model", "mlp-step", "--batch", "2", "--out", out], ["128 examples", "--batch is for tiny-lm"]),
    ]
    for args, words in cases:
        bad(trace(*args), *words)
    assert not (tmp_path / "x.json").exists()
    with pytest.raises(ZeroDivisionError):  # --debug lets the traceback through
        trace("run", "--module", f"{failing}:make", "--debug", "--out", out)


def test_batch_one_with_a_strided_one_element_view(tmp_path):
    """A [1, 16] batch and ``x[:, -1]``: a one-element view with stride 16, which transformers' masks make."""
    model = tmp_path / "last.py"
    model.write_text(LAST_COLUMN_FILE)
    for k in "ab":
        ok(trace("run", "--module", f"{model}:make", "--out", str(tmp_path / f"{k}.json")))
    same = ok(trace("compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")))
    assert re.fullmatch(r"first difference: none in \d+ ops", last_line(same)), same.stdout


def test_run_loads_no_streamlit(tmp_path):
    p = tmp_path / "t.json"
    code = (f"import sys; import scripts.trace as t; t.main(['run','--model','mlp-step','--out',{str(p)!r}]); "
            "print('streamlit' in sys.modules, 'altair' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert last_line(done) == "False False" and p.is_file()


def test_a_transformers_batch_against_its_row(tmp_path):
    """GPT-2 from a config (tests/corpus): batch 4 following row 0 against row 0 alone, in bfloat16; the
    header shows each trace's real batch, and the answer is one of the grammar's forms."""
    from core.traces.compare import LINE as GRAMMAR

    a, b = tmp_path / "one.json", tmp_path / "four.json"
    spec = "tests/corpus/gpt2.py:make"
    for extra, path in (([], a), (["--arg", "batch=4", "--follow-row", "0"], b)):
        ok(trace("run", "--module", spec, "--dtype", "bfloat16", *extra, "--out", str(path)))
    out = ok(trace("compare", str(a), str(b))).stdout.splitlines()
    assert ", batch 1, bfloat16," in out[0] and ", batch 4 (row 0 followed), bfloat16," in out[1], out[:2]
    assert GRAMMAR.fullmatch(out[-1]), out[-1]


def test_compare_answers_first_and_names_a_flipped_choice(tmp_path):
    """tests/corpus/argmax.py: a rounding-sized plant (--perturb-size 2^-22 at op 1, which --list-ops shows)
    flips the argmax; compare says so before its table and ends with the line."""
    spec = str(ROOT / "tests" / "corpus" / "argmax.py") + ":make"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    listed = trace("run", "--module", spec, "--list-ops", "--out", str(a))
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^\s+1  aten\.mm\.default\s+model\.scores\s+float32 \[1, 3\]$", listed.stdout, re.M)
    assert re.search(r"^\s+3  aten\.argmax\.default\s+model\s+int64 \[1\]$", listed.stdout, re.M)
    assert "threads)" not in listed.stdout.splitlines()[-1]  # the run's thread count only, not the machine's too
    planted = trace("run", "--module", spec, "--perturb-op", "1", "--perturb-size", str(2.0 ** -22), "--out", str(b))
    assert planted.returncode == 0, planted.stderr
    out = trace("compare", str(a), str(b)).stdout.splitlines()
    line = ("first difference: op 1 of 3, aten.mm.default in model.scores: born here, within rounding; a choice flips "
            "at op 3, aten.argmax.default in model")
    assert out[2] == line and out[-1] == line
    assert out[3].startswith("Why: its inputs are bit-identical in both runs and its output is not. ")
    assert out[4] == ("A choice flips: op 3, aten.argmax in model: a rounding-sized difference in its input changed "
                      "its choice (indices differ); from here the runs take different paths.")
    bad = trace("run", "--module", spec, "--perturb-op", "1", "--perturb-size", "2", "--out", str(b))
    assert bad.returncode == 2 and "between 0 and 1" in bad.stderr


def test_a_batch_of_graphs_named_by_batch_arg(tmp_path):
    """tests/corpus/gnn.py: x has a row per node; --batch-arg graphs makes the batch its 4 graphs, so following
    row 0 compares with graph 0 alone (its bookkeeping, torch.ones over the edges, is not the answer)."""
    from core.traces.compare import LINE as GRAMMAR

    a, b = tmp_path / "one.json", tmp_path / "four.json"
    spec = "tests/corpus/gnn.py:make"
    ok(trace("run", "--module", spec, "--out", str(a)))
    ok(trace("run", "--module", spec, "--arg", "graphs=4", "--batch-arg", "graphs", "--follow-row", "0", "--out",
             str(b)))
    out = ok(trace("compare", str(a), str(b))).stdout.splitlines()
    assert ", batch 4 (row 0 followed), float32," in out[1], out[:2]
    m = GRAMMAR.fullmatch(out[-1])
    assert m and m["op"] not in ("aten.ones.default", "aten.zeros.default"), out[-1]
    bad(trace("run", "--module", spec, "--arg", "graphs=4", "--batch-arg", "graphs", "--follow-row", "4", "--out",
              str(b)), "--follow-row 4", "make()'s graphs", "has 4 rows")
    bad(trace("run", "--model", "tiny-lm", "--batch-arg", "graphs", "--out", str(b)), "--batch-arg", "--module")


def test_quantized_ops_are_listed_and_a_format_they_lack_is_refused_in_one_line(tmp_path):
    spec = "tests/corpus/quantized.py:make"
    out = tmp_path / "q.json"
    listed = ok(trace("run", "--module", spec, "--list-ops", "--out", str(out))).stdout
    layers = re.findall(r"^\s+\d+  quantized\.linear_dynamic\.default\s+(model\.model\.fc\d)\s+float32", listed, re.M)
    assert layers == ["model.model.fc1", "model.model.fc2", "model.model.fc3"], listed
    p = trace("run", "--module", spec, "--dtype", "bfloat16", "--out", str(tmp_path / "b.json"))
    bad(p, "does not run in bfloat16", "quantized.linear_dynamic.default in model.model.fc1")
    assert len(p.stderr.strip().splitlines()) == 1 and "report a bug" not in p.stderr


def test_a_perturbation_size_outside_zero_and_one_is_refused(tmp_path):
    for size in ("-0.001", "0", "1.5"):
        bad(trace("run", "--model", "mlp-step", "--perturb-op", "1", "--perturb-size", size, "--out",
                  str(tmp_path / "x.json")), "between 0 and 1")
