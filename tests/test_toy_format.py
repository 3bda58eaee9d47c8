"""Adding a format is one registry entry: a toy format, added to core.arith.floatformat.REGISTRY before the
app loads, reaches the pages and the models with no other change.

The toy is ml_dtypes' and torch's float8_e4m3fnuz ("finite, unsigned zero"): no infinities, no negative
zero, and its one NaN in the pattern of -0, a rule none of the app's own formats has. The app runs in a
fresh interpreter, so every table built from the registry at import is built with the toy in it, as it
would be after a real edit of the registry.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import math
    from fractions import Fraction

    import ml_dtypes
    import numpy as np
    import torch

    import core.arith.floatformat as ff

    TOY = ff.FloatFormat(name="float8_e4m3fnuz", precision=4, exponent_bits=4, bias=8,
                         torch_dtype=torch.float8_e4m3fnuz, int_dtype=torch.int8,
                         numpy_dtype=np.dtype(ml_dtypes.float8_e4m3fnuz), infinities=False,
                         nan_encoding="negative_zero", overflow="nan", numpy_overflow="nan", arithmetic=False)
    ff.REGISTRY = (*ff.REGISTRY, TOY)

    from streamlit.testing.v1 import AppTest

    from core.arith.exact import exact_sum_fraction
    from core.arith.formats import FORMATS, bit_view, from_bit_view, round_to_format, round_values, value_of_bits
    from core.arith.vectors import VectorSpec, generate
    from core.crowd.budget import sumlab_cost
    from core.studies.sumlab import LabRequest

    assert FORMATS["float8_e4m3fnuz"] is TOY and float(TOY.max_finite) == 240.0

    # every pattern decodes as torch and ml_dtypes read it; rounding follows both casts
    same = lambda a, b: float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    patterns = from_bit_view(np.arange(256, dtype=np.uint8), TOY)
    via_torch = torch.arange(256, dtype=torch.uint8).view(TOY.torch_dtype).float().tolist()
    assert all(same(value_of_bits(b, TOY), patterns[b]) and same(value_of_bits(b, TOY), via_torch[b])
               for b in range(256))
    probes = np.array([0.3, -0.0, 1e-9, -1e-9, 239.0, 247.9, 248.0, 1e6, np.inf, -np.inf, np.nan])
    ours = round_values(probes, TOY)
    assert bit_view(ours).tolist() == bit_view(torch.from_numpy(probes).to(TOY.torch_dtype)).tolist()
    assert bit_view(ours).tolist() == bit_view(probes.astype(TOY.numpy_dtype)).tolist()
    assert all(same(round_to_format(float(x), TOY), y) for x, y in zip(probes, ours.astype(np.float64)))

    # a vector of the toy, its exact sum against Fractions, its cost, and the lab's orders over it
    v = generate(VectorSpec(kind="normal", n=3000, seed=1, storage=TOY.name))
    assert v.values.dtype == TOY.numpy_dtype
    assert exact_sum_fraction(v.values) == sum((Fraction(float(x)) for x in v.values.astype(np.float64)),
                                               Fraction(0))
    assert sumlab_cost(3000, TOY.name, "same", ["sequential", "pairwise"], 0, "normal").fits

    def page(stem, **params):
        at = AppTest.from_file(f"pages/{stem}.py", default_timeout=120)
        at.query_params.update(params)
        at.run()
        assert not at.exception, (stem, at.exception)
        return at

    na = page("non_associativity", format=TOY.name)
    assert na.session_state["na_fmt"] == TOY.name and TOY.name in na.selectbox(key="na_fmt").options
    assert any(TOY.name in e.value for e in na.info)
    lab = page("summation_lab", storage=TOY.name, n="3000", permutations="0")
    assert lab.session_state["sl_storage"] == TOY.name
    assert any("accumulating in float32" in m.value for m in [*lab.markdown, *lab.caption, *lab.info])
    ga = page("gpu_arithmetic", inputs=TOY.name, K="512")
    assert ga.session_state["ga_storage"] == TOY.name
    rows = next(df.value for df in ga.dataframe if "model" in df.value.columns)
    assert {"FP8 tensor cores, 14-bit accumulation", "FP8 tensor cores, promoted to float32 every 128"} <= set(
        rows["model"])
    print("the toy format reached every page")
''')


def test_a_toy_format_is_one_registry_entry():
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(ROOT)})
    assert done.returncode == 0, done.stderr[-4000:]
    assert "the toy format reached every page" in done.stdout
