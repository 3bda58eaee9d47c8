"""app.py imports neither torch nor NumPy: values reach a page computed and typed by core.

The page scripts under pages/ are held to the same rule by the import-linter contract "pages import
neither torch nor numpy" (.importlinter); app.py is a script outside every package, which
import-linter does not see, so this test checks it."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPTS = [ROOT / "app.py"]
NUMERICS = {"torch", "numpy"}


def _imported_roots(path: pathlib.Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_no_page_imports_torch_or_numpy(path):
    assert not _imported_roots(path) & NUMERICS, f"{path.name} imports {_imported_roots(path) & NUMERICS}"


def test_the_check_sees_imports_anywhere_in_a_file(tmp_path):
    f = tmp_path / "p.py"
    f.write_text("def f():\n    import numpy as np\n    from torch.nn import Linear\n")
    assert _imported_roots(f) == {"numpy", "torch"}
