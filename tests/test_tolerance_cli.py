"""``python -m scripts.tolerance``: one line of words saying which kind of tolerance it prints, then ``rtol=R atol=A``,
the core's suggestion for every dtype; with ``--guarantee`` a tolerance that every honest reordering passes (sorted
against unsorted, NumPy's outer-axis sum against torch's, a left-to-right loop against a library's sum, torch against
NumPy), where the typical one is exceeded; and exit status 2 with one line where K·u >= 1."""

from __future__ import annotations

import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch

from core.diagnose.tolerances import GUARANTEE_KIND, TYPICAL_KIND
from core.studies.reproducible import TOLERANCE_DTYPES, TOLERANCE_OPS, suggest_tolerance
from scripts import tolerance
from tests.core.studies.test_reproducible import ROOT_TOLERANCE_LINE

LAST = re.compile(ROOT_TOLERANCE_LINE)
HONEST_LENGTHS = (65_536, 262_144, 1_000_000)


def run(capsys, *argv: str) -> tuple[str, float, float]:
    """The command's line of words and its (rtol, atol), checking that it printed exactly those two lines."""
    assert tolerance.main(list(argv)) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2, lines
    rtol, atol = (float(v) for v in LAST.fullmatch(lines[1]).groups())
    return lines[0], rtol, atol


def test_the_command_prints_the_tolerance_last():
    run_ = subprocess.run([sys.executable, "-m", "scripts.tolerance", "--dtype", "bfloat16", "--length", "4096"],
                          capture_output=True, text=True, timeout=300, check=True)
    words, last = run_.stdout.strip().splitlines()
    assert LAST.fullmatch(last)
    assert last == suggest_tolerance("bfloat16", 4096).line
    assert words.startswith(TYPICAL_KIND + ":")


@pytest.mark.parametrize("dtype", TOLERANCE_DTYPES)
@pytest.mark.parametrize(("length", "scale"), [(1, 1.0), (4096, 1.0), (4096, 0.01), (10**6, 3.0)])
@pytest.mark.parametrize("op", TOLERANCE_OPS)
def test_every_dtype_and_length(capsys, dtype, length, scale, op):
    args = ["--dtype", dtype, "--length", str(length), "--scale", str(scale), "--op", op]
    tol = suggest_tolerance(dtype, length, scale, op=op)
    words, rtol, atol = run(capsys, *args)
    assert (rtol, atol) == (tol.rtol, tol.atol)
    assert words == tol.typical_words() and words.startswith(f"{TYPICAL_KIND}:")
    assert "behave independently" in words and "sorted or same-sign data" in words and tol.guarantee_line in words
    words, rtol, atol = run(capsys, *args, "--guarantee")
    assert (rtol, atol) == (tol.guarantee_rtol, tol.guarantee_atol)
    assert words == tol.guarantee_words() and words.startswith(f"{GUARANTEE_KIND}:")
    assert f"terms of RMS at most {scale:g}" in words and tol.line in words
    assert atol >= tol.atol  # the worst case is never below the typical size


def test_the_narrow_accumulation_is_an_option(capsys):
    _, _, wide = run(capsys, "--dtype", "bfloat16", "--length", "64", "--accumulate", "bfloat16")
    assert wide > suggest_tolerance("bfloat16", 64).atol


@pytest.mark.parametrize(("argv", "name"), [
    (["--dtype", "bfloat16", "--length", "4096", "--accumulate", "bfloat16"], "bfloat16"),  # K u = 16
    (["--dtype", "bfloat16", "--length", "256", "--accumulate", "bfloat16"], "bfloat16"),  # K u = 1
    (["--dtype", "float16", "--length", "2048", "--accumulate", "float16"], "float16"),
    (["--dtype", "float32", "--length", str(2**24)], "float32"),
    (["--dtype", "tf32", "--length", str(10**8)], "float32"),
])
@pytest.mark.parametrize("guarantee", [False, True])
def test_no_tolerance_where_k_u_reaches_one(capsys, argv, name, guarantee):
    assert tolerance.main(argv + (["--guarantee"] if guarantee else [])) == 2
    out, err = capsys.readouterr()
    assert not out
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("No tolerance can mean anything here: K·u = ") and f"accumulated in {name}" in err


def test_the_exit_status_is_2_with_one_line():
    run_ = subprocess.run([sys.executable, "-m", "scripts.tolerance", "--dtype", "bfloat16", "--length", "4096",
                           "--accumulate", "bfloat16"], capture_output=True, text=True, timeout=300)
    assert run_.returncode == 2 and not run_.stdout
    assert run_.stderr.strip().splitlines() == [
        "No tolerance can mean anything here: K·u = 16 ≥ 1 for 4,096-term sums accumulated in bfloat16 (u = 2^-8), "
        "where the worst-case bound γ(K) = K·u/(1 − K·u) does not exist (a loop adding ones in bfloat16 stops at "
        "256)."]


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


# --------------------------------------------------------------------------- honest reorderings


def honest_orders(xs: np.ndarray, dtype: str) -> dict[str, np.ndarray]:
    """Each row of ``xs`` (float32 values of ``dtype``) summed as libraries and loops do, each result as the library
    returns it (torch's sums of a bfloat16 tensor are bfloat16, NumPy's of float32 values float32), in float64."""
    outer = np.ascontiguousarray(xs.T)  # the same sums along the outer axis: NumPy adds them row by row
    rows, cols = torch.from_numpy(xs), torch.from_numpy(outer)
    if dtype == "bfloat16":
        rows, cols = rows.bfloat16(), cols.bfloat16()
    out = {"np.sum": np.sum(xs, axis=1), "np.sum of sorted": np.sum(np.sort(xs, axis=1), axis=1),
           "np.sum(axis=0)": np.sum(outer, axis=0), "torch.sum(dim=0)": cols.sum(dim=0).double().numpy(),
           "left-to-right loop": np.cumsum(xs, axis=1)[:, -1], "torch.sum": rows.sum(dim=1).double().numpy()}
    return {k: np.asarray(v).astype(np.float64) for k, v in out.items()}


PAIRS = (("np.sum", "np.sum of sorted"), ("np.sum(axis=0)", "torch.sum(dim=0)"), ("left-to-right loop", "np.sum"),
         ("torch.sum", "np.sum"), ("np.sum(axis=0)", "np.sum"))


def sums(dtype: str, k: int, mean: float = 0.0, rows: int = 4) -> tuple[np.ndarray, float]:
    """Seeded normal values (plus ``mean``) of ``dtype``, as float32, and their root mean square."""
    xs = (np.random.default_rng(k).standard_normal((rows, k)) + mean).astype(np.float32)
    if dtype == "bfloat16":
        xs = xs.astype(ml_dtypes.bfloat16).astype(np.float32)
    return xs, float(np.sqrt(np.mean(xs.astype(np.float64) ** 2)))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])  # bfloat16 inputs accumulate in float32
@pytest.mark.parametrize("k", HONEST_LENGTHS)
def test_every_honest_reordering_passes_the_guarantee(capsys, dtype, k):
    xs, rms = sums(dtype, k)
    _, rtol, atol = run(capsys, "--dtype", dtype, "--length", str(k), "--scale", repr(rms), "--guarantee")
    results = honest_orders(xs, dtype)
    for a, b in PAIRS:
        torch.testing.assert_close(torch.from_numpy(results[a]), torch.from_numpy(results[b]), rtol=rtol, atol=atol)


def test_the_typical_tolerance_is_exceeded_by_honest_reorderings(capsys):
    """What its words say: sorted data, a long loop and NumPy's outer-axis sum exceed the typical tolerance at K = 10^6
    (about 3x), where every library's own order passes it."""
    k = 1_000_000
    xs, rms = sums("float32", k)
    _, rtol, atol = run(capsys, "--dtype", "float32", "--length", str(k), "--scale", repr(rms))
    r = honest_orders(xs, "float32")
    for a, b in PAIRS[:3]:
        with pytest.raises(AssertionError):
            torch.testing.assert_close(torch.from_numpy(r[a]), torch.from_numpy(r[b]), rtol=rtol, atol=atol)
    torch.testing.assert_close(torch.from_numpy(r["torch.sum"]), torch.from_numpy(r["np.sum"]), rtol=rtol, atol=atol)


def test_a_loop_of_equal_terms_passes_the_guarantee_and_not_the_typical_tolerance(capsys):
    """10^6 copies of 0.1 added one at a time in float32 drift by about 1 % (their rounding errors all have one sign),
    20x the typical tolerance of a loop; the guarantee holds it with room."""
    k = 1_000_000
    x = np.full(k, 0.1, dtype=np.float32)
    loop, tree = torch.tensor(float(np.cumsum(x)[-1])), torch.tensor(float(np.sum(x)))
    args = ["--dtype", "float32", "--length", str(k), "--scale", repr(float(np.float32(0.1))), "--op", "matmul"]
    _, rtol, atol = run(capsys, *args)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(loop, tree, rtol=rtol, atol=atol)
    _, rtol, atol = run(capsys, *args, "--guarantee")
    torch.testing.assert_close(loop, tree, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("k", (4096, *HONEST_LENGTHS))
def test_the_typical_tolerance_fails_a_planted_error_of_100_ulps(capsys, dtype, k):
    """100 ULPs of each result, on sums well away from zero (a mean of 0.05: at least about 3 sqrt(K) RMS). Near zero
    100 ULPs of a small result is less than the rounding noise of a cancelled sum, which the atol must admit."""
    xs, rms = sums(dtype, k, mean=0.05)
    _, rtol, atol = run(capsys, "--dtype", dtype, "--length", str(k), "--scale", repr(rms))
    y = np.sum(xs, axis=1)
    y = y if dtype == "float32" else y.astype(ml_dtypes.bfloat16)
    planted = y.astype(np.float64) + 100 * np.spacing(np.abs(y)).astype(np.float64)
    expected, actual = torch.from_numpy(y.astype(np.float64)), torch.from_numpy(planted)
    assert not torch.isclose(actual, expected, rtol=rtol, atol=atol).any()  # every element fails
    with pytest.raises(AssertionError):
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol)
