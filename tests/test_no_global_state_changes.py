"""No page, helper or core module changes process-global numeric state directly.

Every viewer shares one process, so these calls are allowed only inside
core/machines/globalstate.py, which holds a lock and restores the previous value.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALLOWED = {ROOT / "core" / "globalstate.py"}
FORBIDDEN_CALLS = {
    "set_num_threads", "set_num_interop_threads", "use_deterministic_algorithms", "manual_seed_all",
    "set_default_dtype", "set_default_tensor_type", "set_rng_state", "set_flush_denormal",
}
FORBIDDEN_ATTR_ASSIGN = {"prec", "dps", "allow_tf32", "allow_fp16_reduced_precision_reduction", "deterministic",
                         "benchmark"}


def _sources():
    files = [ROOT / "app.py", *ROOT.glob("core/*.py"), *ROOT.glob("pages/*.py"), *ROOT.glob("ui/*.py")]
    return [f for f in files if f not in ALLOWED]


def _violations(path: pathlib.Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            base = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
            if name in FORBIDDEN_CALLS:
                out.append(f"{path.name}:{node.lineno} {name}()")
            # global seeding: torch.manual_seed, np.random.seed, random.seed (a Generator's own is fine)
            if name in {"manual_seed", "seed"} and base in {"torch", "np.random", "numpy.random", "random",
                                                            "torch.cuda", "torch.random"}:
                out.append(f"{path.name}:{node.lineno} {base}.{name}()")
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in FORBIDDEN_ATTR_ASSIGN:
                    out.append(f"{path.name}:{node.lineno} {ast.unparse(t)} = ...")
    return out


def test_no_direct_global_numeric_state_changes():
    found = [v for f in _sources() for v in _violations(f)]
    assert not found, found


def test_the_checker_catches_what_it_should(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import torch, mpmath, numpy as np\n"
        "torch.set_num_threads(1)\nmpmath.mp.prec = 200\nnp.random.seed(0)\ntorch.manual_seed(0)\n"
        "torch.backends.cuda.matmul.allow_tf32 = True\n"
        "g = torch.Generator().manual_seed(3)\n"  # allowed: a local generator
    )
    assert len(_violations(bad)) == 5
