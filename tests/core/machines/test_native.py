"""The native libraries' settings (OpenMP's wait policy, oneDNN's cache sizes) are chosen before torch
loads, by every entry point, and an explicit choice stays."""

from __future__ import annotations

import ast
import json
import os
import pathlib
import subprocess
import sys

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
                              "LRU_CACHE_CAPACITY": "64"}
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
