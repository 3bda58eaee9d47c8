"""OpenMP's wait policy is chosen before torch loads, by every entry point, and an explicit choice stays."""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _policy(env: dict[str, str]) -> str:
    code = "import core.machines.openmp, torch, os; print(os.environ['OMP_WAIT_POLICY'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_passive_unless_the_environment_chose():
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _policy(env) == "PASSIVE"
    assert _policy({**env, "OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"


def _first_project_import(path: pathlib.Path) -> str:
    for node in ast.parse(path.read_text()).body:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module] if isinstance(node, ast.ImportFrom) and node.module != "__future__" else []
        for name in names:
            if name.split(".")[0] in ("core", "ui", "pages", "torch", "numpy"):
                return name
    return ""


def test_every_entry_point_sets_it_before_anything_that_loads_torch():
    for entry in ("app.py", "scripts/serve.py", "tests/conftest.py"):
        assert _first_project_import(ROOT / entry) == "core.machines.openmp", entry
