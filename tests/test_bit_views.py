"""Bit patterns are read and written in one module: core/arith/formats.py.

Reinterpreting memory as another dtype (``x.view(np.uint32)``, ``t.view(torch.int32)``, ``bits.view(np.float32)``,
``x.view(fmt.uint_dtype)``) gives the same bits only when the widths and the formats match, so the project does it
in formats.py alone (``bit_view``, ``from_bit_view``, ``same_bits``, ``bits_differ``, ``last_bit_even``,
``byte_view``) and every other module calls those. A ``.view`` with a shape is no reinterpretation and is allowed.
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALLOWED = {ROOT / "core" / "arith" / "formats.py"}
# a dtype named through a library: np.uint32, torch.int16, numpy.float32, ml_dtypes.bfloat16, np.dtype("u4") ...
_LIBRARY_DTYPE = re.compile(r"^(np|numpy|torch|ml_dtypes)\.(u?int\d+|float\d+|bfloat16|half|double|short|long|"
                            r"dtype\(.*\))$")
_FORMAT_DTYPES = {"int_dtype", "uint_dtype", "numpy_dtype", "torch_dtype"}  # a FloatFormat's dtypes
_DTYPE_TEXT = re.compile(r"^[<>=|]?([uifb]\d+|u?int\d+|float\d+|bfloat16)$")  # "u4", "<u4", "uint32"


def _sources() -> list[pathlib.Path]:
    files = [ROOT / "app.py"]
    for folder in ("core", "ui", "pages", "scripts", "benchmarks"):
        files += sorted((ROOT / folder).rglob("*.py"))
    return [f for f in files if f not in ALLOWED]


def _is_dtype(node: ast.expr) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in _FORMAT_DTYPES:
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(_DTYPE_TEXT.match(node.value))
    return bool(_LIBRARY_DTYPE.match(ast.unparse(node)))


def _views(path: pathlib.Path) -> list[tuple[int, str]]:
    """(line, code) of each ``.view`` call in the file that names a dtype, in line order."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "view":
            given = [*node.args, *(k.value for k in node.keywords if k.arg == "dtype")]
            if len(given) == 1 and _is_dtype(given[0]):
                out.append((node.lineno, ast.unparse(node)))
    return sorted(out)


def test_no_raw_bit_views_outside_formats():
    files = _sources()
    assert len(files) > 100, len(files)  # every module of every package, not a glob that found nothing
    found = [f"{f.relative_to(ROOT)}:{line} {code}" for f in files for line, code in _views(f)]
    assert not found, "reinterpret bits through core.arith.formats (bit_view, from_bit_view, ...):\n" + "\n".join(found)


def test_formats_itself_holds_the_views():
    """The one allowed module does reinterpret (so the checker reads views it should not miss)."""
    assert len(_views(ROOT / "core" / "arith" / "formats.py")) >= 5


def test_the_checker_catches_what_it_should(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import numpy as np, torch, ml_dtypes\n"
        "a = x.view(np.uint32)\nb = t.view(torch.int32)\nc = u.view(np.float32)\nd = x.view(fmt.uint_dtype)\n"
        "e = t.view(dtype=torch.uint16)\nf = x.view('<u4')\ng = x.view(ml_dtypes.bfloat16)\n"
        "h = x.view(np.dtype('u8'))\n"
        "ok1 = t.view(-1)\nok2 = t.view(3, 4)\nok3 = t.view(x.shape)\nok4 = t.view(len(rows), -1)\nok5 = t.view(n)\n"
    )
    found = _views(bad)
    assert [line for line, _ in found] == [2, 3, 4, 5, 6, 7, 8, 9], found
