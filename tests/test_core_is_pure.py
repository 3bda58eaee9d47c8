"""core/ is pure numerics: it never imports streamlit, not even through a dependency.

Its own import statements are checked by the import-linter contract "core imports neither streamlit
nor ui nor pages" (.importlinter, run by `make test`); this test covers what a static check cannot
see: a third-party package that core imports pulling streamlit in at run time."""

from __future__ import annotations

import pathlib
import subprocess
import sys

CORE = pathlib.Path(__file__).resolve().parents[1] / "core"


def test_importing_every_core_module_loads_no_streamlit():
    modules = [".".join(p.relative_to(CORE.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in sorted(CORE.glob("**/*.py"))]
    assert len(modules) > 30, modules  # every module of every package, not a glob that found nothing
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = [m for m in sys.modules if m.split('.')[0] == 'streamlit']\n"
        "print(len(bad)); sys.exit(1 if bad else 0)\n"
    )
    root = str(CORE.parent)
    proc = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
