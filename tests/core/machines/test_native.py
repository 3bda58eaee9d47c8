"""The native libraries' settings (OpenMP's wait policy, oneDNN's cache sizes, glibc's allocator) are
chosen before torch loads, by every entry point, and an explicit choice stays."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys
import threading

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _settings(env: dict[str, str]) -> dict[str, str]:
    code = ("import core.machines.native, torch, os, json; "
            "print(json.dumps({k: os.environ[k] for k in core.machines.native.SETTINGS}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_set_unless_the_environment_chose():
    from core.machines.native import SETTINGS

    env = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    assert _settings(env) == {"OMP_WAIT_POLICY": "PASSIVE", "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64",
                              "LRU_CACHE_CAPACITY": "64", "NUMBA_DISABLE_INTEL_SVML": "1"}
    chosen = _settings({**env, "OMP_WAIT_POLICY": "ACTIVE", "LRU_CACHE_CAPACITY": "512"})
    assert chosen["OMP_WAIT_POLICY"] == "ACTIVE" and chosen["LRU_CACHE_CAPACITY"] == "512"
    assert chosen["ONEDNN_PRIMITIVE_CACHE_CAPACITY"] == "64"


def test_a_bfloat16_product_has_the_same_bits_whether_its_kernel_was_kept_or_compiled_again():
    """The caches hold compiled kernels, not results: with no cache at all, the same bits."""
    code = ("import core.machines.native, torch, torch.nn.functional as F; g = torch.Generator().manual_seed(0); "
            "x = torch.randn(7, 96, generator=g).bfloat16(); w = torch.randn(40, 96, generator=g).bfloat16(); "
            "print([F.linear(x[:m], w).view(torch.int16).sum().item() for m in (1, 3, 7, 3, 1)])")
    base = {k: v for k, v in os.environ.items()}
    outs = {subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                           env={**base, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": cap, "LRU_CACHE_CAPACITY": cap}).stdout
            for cap in ("1", "64", "1024")}
    assert len(outs) == 1, outs


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
        assert _first_project_import(ROOT / entry) == "core.machines.native", entry


GLIBC = sys.platform == "linux" and os.confstr("CS_GNU_LIBC_VERSION") is not None


def _run(code: str, env: dict[str, str]) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True).stdout


@pytest.mark.skipif(not GLIBC, reason="glibc's allocator settings apply only where the C library is glibc")
def test_the_allocator_settings_apply_unless_the_environment_chose():
    code = "import core.machines.native as n, json; print(json.dumps(n.MALLOC_APPLIED))"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    assert json.loads(_run(code, env)) == {"MALLOC_ARENA_MAX": 1}
    assert json.loads(_run(code, {**env, "MALLOC_ARENA_MAX": "4"})) == {}


@pytest.mark.skipif(not GLIBC, reason="malloc_trim is glibc's")
def test_freed_memory_pinned_behind_a_live_block_goes_back_to_the_system():
    """200 MB of heap blocks freed below one that stays alive: glibc keeps those pages until they are
    trimmed, and counts them in private memory; release_freed_memory gives them back."""
    code = """
import core.machines.native as n
def anon():
    return next(int(line.split()[1]) / 1024 for line in open("/proc/self/status") if line.startswith("RssAnon"))
blocks = [bytearray(100_000) for _ in range(2000)]
pin = bytearray(100_000)
del blocks
kept = anon()
n.release_freed_memory()
print(kept, anon(), len(pin))
"""
    kept, after, _ = map(float, _run(code, dict(os.environ)).split())
    assert kept - after > 150, (kept, after)


def test_release_does_nothing_harmful_where_it_cannot_trim(monkeypatch):
    import core.machines.native as native

    monkeypatch.setattr(native, "_LIBC", None)
    native.release_freed_memory()  # no C library to ask: nothing happens, nothing raises


def test_the_app_releases_freed_memory_after_every_run_even_one_that_stops_early():
    tree = ast.parse((ROOT / "app.py").read_text())
    tries = [node for node in ast.walk(tree) if isinstance(node, ast.Try)
             and any("PAGE.run" in ast.unparse(stmt) for stmt in node.body)]
    assert tries and any("release_freed_memory" in ast.unparse(stmt) for stmt in tries[0].finalbody)


def test_freezing_collects_todays_garbage_then_keeps_the_living_out_of_later_passes():
    """Cycles that are already garbage are freed first; what is alive is frozen, so a later full pass
    walks only what came after (the stall a room's viewers would share; see freeze_long_lived)."""
    code = """
import gc, json, weakref
import core.machines.native as n
class Node:
    pass
dead = Node(); dead.self = dead; gone = weakref.ref(dead); del dead
alive = [Node() for _ in range(50_000)]
for a in alive:
    a.self = a
frozen = n.freeze_long_lived()
after = [Node() for _ in range(10)]
print(json.dumps({"gone": gone() is None, "frozen": frozen, "count": gc.get_freeze_count(),
                  "oldest": len(gc.get_objects(generation=2))}))
"""
    out = json.loads(_run(code, dict(os.environ)))
    assert out["gone"] and out["frozen"] == out["count"] >= 50_000
    assert out["oldest"] < 1_000  # the 50,000 live objects are no longer in the oldest generation


def test_the_first_run_freezes_once_however_many_runs_arrive_together(monkeypatch):
    import core.machines.native as native

    calls = []
    monkeypatch.setattr(native, "freeze_long_lived", lambda: calls.append(1) or 0)
    monkeypatch.setattr(native, "_first_run_frozen", False)
    threads = [threading.Thread(target=native.freeze_after_first_run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    native.freeze_after_first_run()
    assert calls == [1]


def test_the_app_freezes_after_its_first_run():
    tree = ast.parse((ROOT / "app.py").read_text())
    tries = [node for node in ast.walk(tree) if isinstance(node, ast.Try)
             and any("PAGE.run" in ast.unparse(stmt) for stmt in node.body)]
    assert tries and any("freeze_after_first_run" in ast.unparse(stmt) for stmt in tries[0].finalbody)
