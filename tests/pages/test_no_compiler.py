"""No page a room opens loads torch's compiler.

TorchDynamo, with SymPy and the inductor's settings, adds about 66 MB of private memory to a server
process (measured on the 2-core development VM, torch 2.13), and a few of torch's eager functions import
it on their first call (``torch.use_deterministic_algorithms`` does). The app compiles nothing, so the
home page and every talk link run here, in a fresh process, and none of those modules may be loaded after.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPILER = ("torch._dynamo", "torch._inductor", "sympy")

CODE = """
import json, sys
import core.machines.native
from streamlit.testing.v1 import AppTest
from core.studies.talk import scenarios

def run(script, params):
    at = AppTest.from_file(script, default_timeout=300)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    return [str(e.value) for e in at.exception]

errors = run("app.py", {"talk": "1"})
for _, page, params, _ in scenarios():
    errors += run(page, {**params, "talk": "1"})
print(json.dumps({"errors": errors, "loaded": [m for m in %r if m in sys.modules]}))
"""


@pytest.mark.timeout(600)
def test_the_home_page_and_the_talk_links_leave_the_compiler_unloaded():
    out = subprocess.run([sys.executable, "-c", CODE % (COMPILER,)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"errors": [], "loaded": []}, result
