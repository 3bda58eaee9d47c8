"""Caches live in one layer: every cache of the process is a named ``ByteLRU`` declared in
``core.crowd.bytecache`` with its budget, and no page, ui module or app.py declares one of its own
(Streamlit's ``st.cache_data``/``st.cache_resource``, ``functools`` caches, module-level stores
guarded by a lock)."""

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
