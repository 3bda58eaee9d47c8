"""core/ is pure numerics: it never imports streamlit, directly or through a dependency."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

CORE = pathlib.Path(__file__).resolve().parents[1] / "core"


def test_no_streamlit_import_statement_in_core():
    offenders = []
    for path in sorted(CORE.glob("**/*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in {"streamlit", "ui", "pages"}]
    assert not offenders, offenders


def test_importing_every_core_module_loads_no_streamlit():
    modules = [f"core.{p.stem}" for p in sorted(CORE.glob("*.py")) if p.stem != "__init__"]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'streamlit']\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n"
    )
    root = str(CORE.parent)
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
