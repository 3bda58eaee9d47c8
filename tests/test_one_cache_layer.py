"""Caches live in one layer: every cache of the process is a named ``ByteLRU`` declared in
``core.crowd.bytecache`` with its budget, and no page, ui module or app.py declares one of its own
(Streamlit's ``st.cache_data``/``st.cache_resource``, ``functools`` caches, module-level stores
guarded by a lock). Inside core a ``functools`` cache may keep what a process computes once (a compiled
kernel, this machine's facts, a small table), and only where it cannot grow without bound: an
``lru_cache`` with an integer ``maxsize``, or a ``functools.cache`` on a function without parameters
(one entry per process)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from core.crowd.bytecache import CACHES, ByteLRU

ROOT = pathlib.Path(__file__).resolve().parents[1]
DRAWING = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "ui").glob("*.py"))]
CACHE_MAKERS = {"cache_data", "cache_resource", "lru_cache", "cache", "experimental_memo", "experimental_singleton",
                "ByteLRU", "named", "Lock", "RLock"}


def _cache_makers(path: pathlib.Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in CACHE_MAKERS:
            found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in ("functools", "threading", "core.crowd.bytecache"):
            found += [f"{path.name}:{node.lineno} {a.name}" for a in node.names if a.name in CACHE_MAKERS]
    return found


@pytest.mark.parametrize("path", DRAWING, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_or_ui_module_declares_a_cache(path):
    assert not _cache_makers(path), "declare the cache in core/crowd/bytecache.py with named(...)"


def test_the_scan_sees_a_streamlit_cache(tmp_path):
    page = tmp_path / "page.py"
    page.write_text("import streamlit as st\n\n@st.cache_data(ttl=60)\ndef f(x):\n    return x\n")
    assert _cache_makers(page) == ["page.py:3 .cache_data"]


def test_every_cache_in_core_is_named_and_bounded():
    """No cache without a budget: each has bytes, and those that count entries or ages say so."""
    assert {"vectors", "results", "chart specifications"} <= set(CACHES)
    for name, cache in CACHES.items():
        assert isinstance(cache, ByteLRU) and cache.name == name
        assert 0 < cache.max_entry <= cache.capacity


CORE = sorted((ROOT / "core").rglob("*.py"))
# Unbounded functools caches in core that the rule below would refuse, each with why it cannot grow
# ("core/<package>/<module>.py:<function>": reason); empty while every one is bounded or takes no parameters.
UNBOUNDED_ALLOWED: dict[str, str] = {}


def _unbounded_functools_caches(path: pathlib.Path) -> list[str]:
    """Where one module's functools caches can grow without bound: a ``functools.cache``, or an ``lru_cache``
    without an integer literal ``maxsize`` (None, or left out: a bound nobody chose), decorating a function
    with parameters; or either one called or passed other than as a decorator, unless bounded (what it
    wraps cannot be read here)."""
    tree = ast.parse(path.read_text(), str(path))
    modules = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
               if a.name == "functools"}
    imported = {a.asname or a.name: a.name for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom) and n.module == "functools"
                for a in n.names if a.name in ("cache", "lru_cache")}

    def maker(node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            return node.attr if node.attr in ("cache", "lru_cache") else None
        return imported.get(node.id) if isinstance(node, ast.Name) else None

    def bounded(node: ast.expr) -> bool:
        """Whether this use of a cache maker states an integer bound: ``lru_cache(N)`` or ``lru_cache(maxsize=N)``."""
        if not isinstance(node, ast.Call) or maker(node.func) != "lru_cache":
            return False
        size = [k.value for k in node.keywords if k.arg == "maxsize"] or node.args[:1]
        return bool(size) and isinstance(size[0], ast.Constant) and type(size[0].value) is int

    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    found, seen = [], set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            a = fn.args
            takes_nothing = not (a.posonlyargs or a.args or a.vararg or a.kwonlyargs or a.kwarg)
            for d in fn.decorator_list:
                if maker(d.func if isinstance(d, ast.Call) else d):
                    seen.update(id(n) for n in ast.walk(d))
                    if not bounded(d) and not takes_nothing:
                        found.append(f"{where}:{fn.name}")
    for node in ast.walk(tree):
        if id(node) not in seen and isinstance(node, ast.Call) and maker(node.func):
            seen.update(id(n) for n in ast.walk(node))
            if not bounded(node):
                found.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    for node in ast.walk(tree):
        if id(node) not in seen and isinstance(node, ast.Attribute | ast.Name) and maker(node):
            found.append(f"{where}:{node.lineno} {ast.unparse(node)} used other than as a decorator")
    return found


def test_every_functools_cache_in_core_is_bounded_or_takes_no_arguments():
    found = [f for path in CORE for f in _unbounded_functools_caches(path) if f not in UNBOUNDED_ALLOWED]
    assert found == [], ("bound it with lru_cache(maxsize=N), or take no parameters, or keep the value in a "
                         "named ByteLRU (core/crowd/bytecache.py)")


def test_the_core_scan_refuses_an_unbounded_cache_on_a_function_with_parameters(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import functools\nfrom functools import cache, lru_cache\n\n"
        "@functools.cache\ndef a(x):\n    return x\n\n"
        "@lru_cache(maxsize=None)\ndef b(x):\n    return x\n\n"
        "@functools.lru_cache\ndef c(x):\n    return x\n\n"
        "@cache\ndef d():\n    return 1\n\n"
        "@functools.lru_cache(maxsize=8)\ndef e(x):\n    return x\n\n"
        "@lru_cache(4)\ndef f(x):\n    return x\n\n"
        "g = functools.cache(len)\n"
        "h = lru_cache(maxsize=2)(len)\n"
    )
    assert _unbounded_functools_caches(module) == ["module.py:a", "module.py:b", "module.py:c",
                                                   "module.py:28 functools.cache(len)"]
