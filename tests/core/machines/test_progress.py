"""One progress record and callback type for every long computation in core."""

from __future__ import annotations

import ast
import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.machines.progress import Progress, offset, report
from core.training.gloo_supervisor import WorkerProgress

CORE = pathlib.Path(__file__).resolve().parents[3] / "core"


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_a_bar_is_never_less_than_empty_or_more_than_full(done, total):
    f = Progress(done=done, total=total).fraction
    assert 0.0 <= f <= 1.0
    if total > 0 and 0 <= done <= total and done / total <= 1:
        assert f == pytest.approx(done / total)


def test_an_empty_total_is_an_empty_bar():
    assert Progress(done=3, total=0).fraction == 0.0


def test_records_are_built_by_keyword():
    with pytest.raises(TypeError):
        Progress(1, 2)  # type: ignore[misc]


def test_report_calls_back_only_when_there_is_a_callback():
    seen = []
    report(seen.append, done=2, total=5, what="orders")
    report(None, done=3, total=5)
    assert seen == [Progress(done=2, total=5, what="orders")]


def test_offset_counts_a_part_within_the_whole_and_keeps_what():
    seen = []
    part = offset(seen.append, before=40, total=100)
    part(Progress(done=10, total=20, what="steps"))
    assert seen == [Progress(done=50, total=100, what="steps")] and offset(None, before=1, total=2) is None


def test_a_live_runs_progress_is_read_as_a_progress():
    p = WorkerProgress(what="training", done=3, total=30, pids=(1, 2), rss_bytes=10)
    assert isinstance(p, Progress) and p.fraction == pytest.approx(0.1)


def _progress_parameters():
    for path in sorted(CORE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for arg in [*node.args.args, *node.args.kwonlyargs]:
                    if "progress" in arg.arg:
                        yield f"{path.relative_to(CORE)}:{node.name}({arg.arg})", arg.annotation


def test_every_computation_in_core_takes_the_one_callback_type():
    params = list(_progress_parameters())
    assert len(params) >= 12  # the studies, training runs and measurements that report
    wrong = [(where, ast.unparse(a) if a else None) for where, a in params
             if a is None or ast.unparse(a) not in ("OnProgress | None", "OnProgress")]
    assert not wrong, wrong
