"""``python -m scripts.tolerance``: its last line is ``rtol=R atol=A``, the core's suggestion for every dtype."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from core.studies.reproducible import TOLERANCE_DTYPES, TOLERANCE_OPS, suggest_tolerance
from scripts import tolerance
from tests.core.studies.test_reproducible import ROOT_TOLERANCE_LINE

LAST = re.compile(ROOT_TOLERANCE_LINE)


def test_the_command_prints_the_tolerance_last():
    run = subprocess.run([sys.executable, "-m", "scripts.tolerance", "--dtype", "bfloat16", "--length", "4096"],
                         capture_output=True, text=True, timeout=300, check=True)
    last = run.stdout.strip().splitlines()[-1]
    assert LAST.fullmatch(last)
    assert last == suggest_tolerance("bfloat16", 4096).line


@pytest.mark.parametrize("dtype", TOLERANCE_DTYPES)
@pytest.mark.parametrize(("length", "scale"), [(1, 1.0), (4096, 1.0), (4096, 0.01), (10**6, 3.0)])
@pytest.mark.parametrize("op", TOLERANCE_OPS)
def test_every_dtype_and_length(capsys, dtype, length, scale, op):
    assert tolerance.main(["--dtype", dtype, "--length", str(length), "--scale", str(scale), "--op", op]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    rtol, atol = (float(v) for v in LAST.fullmatch(last).groups())
    tol = suggest_tolerance(dtype, length, scale, op=op)
    assert (rtol, atol) == (tol.rtol, tol.atol)


def test_the_narrow_accumulation_is_an_option(capsys):
    tolerance.main(["--dtype", "bfloat16", "--length", "4096", "--accumulate", "bfloat16"])
    wide = float(LAST.fullmatch(capsys.readouterr().out.strip().splitlines()[-1]).group(2))
    assert wide > suggest_tolerance("bfloat16", 4096).atol


@pytest.mark.parametrize(("argv", "message"), [
    (["--dtype", "float8", "--length", "4"], "invalid choice"),
    (["--dtype", "float32", "--length", "0"], "whole number"),
    (["--dtype", "float32", "--length", "4", "--scale", "nan"], "positive"),
    (["--dtype", "float32", "--length", "4", "--op", "conv"], "invalid choice"),
])
def test_bad_arguments_say_what_is_accepted(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        tolerance.main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err
