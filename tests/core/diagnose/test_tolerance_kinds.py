"""The two kinds of tolerance a diagnosis gives for other runs: the typical one (its explanation's envelope) and the one
guaranteed for every order (its a-priori bound, by ``scaled_cover``); and the line where no tolerance means anything."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from core.arith.formats import FORMATS
from core.diagnose.tolerances import TYPICAL_ASSUMES, format_tol, no_tolerance, ratio_text, scaled_cover
from core.diagnose.verdict import diagnose
from ui.diagnose_view import envelope_tolerance_lines


def _orders(x: np.ndarray) -> dict[str, np.ndarray]:
    """Row sums of float32 ``x`` in honest orders: NumPy's pairwise sum, torch's, a left-to-right loop, NumPy's
    outer-axis sum (a loop per column) and the sorted values' pairwise sum."""
    return {"numpy": np.sum(x, axis=1), "torch": torch.from_numpy(x).sum(dim=1).numpy(),
            "loop": np.cumsum(x, axis=1)[:, -1], "outer": np.sum(np.ascontiguousarray(x.T), axis=0),
            "sorted": np.sum(np.sort(x, axis=1), axis=1)}


def _guarantee(d) -> tuple[float, float, float]:
    env = d.envelope(d.explanation) if d.verdict == "reduced_precision" else d.envelopes[0]
    return scaled_cover((d.envelope_rtol, d.envelope_atol), env.envelope, env.bound)


@pytest.mark.parametrize("with_inputs", [True, False])
@pytest.mark.parametrize("mean", [0.0, 1.0])  # random signs; one sign
def test_the_guarantee_covers_every_elements_bound_and_every_honest_order(with_inputs, mean):
    x = (np.random.default_rng(7).standard_normal((16, 65_536)) + mean).astype(np.float32)
    r = _orders(x)
    d = diagnose(r["numpy"], r["torch"], reduction_length=x.shape[1], inputs=x if with_inputs else None,
                 simulate_orders=False)
    assert d.verdict == "reordering" and d.envelopes[0].bound_rigorous == with_inputs
    rtol, atol, ratio = _guarantee(d)
    env = d.envelopes[0]
    e = r["torch"].astype(np.float64)
    assert np.all(env.bound <= atol + rtol * np.abs(e))  # every element's a-priori bound
    assert np.all(env.envelope <= d.envelope_atol + d.envelope_rtol * np.abs(e))
    assert ratio >= 1 and rtol >= d.envelope_rtol and atol >= d.envelope_atol
    for name in ("loop", "outer", "sorted"):  # orders the typical envelope need not hold
        torch.testing.assert_close(torch.from_numpy(r[name].astype(np.float64)), torch.from_numpy(e), rtol=rtol,
                                   atol=atol, msg=name)


def test_the_typical_tolerance_is_exceeded_where_its_words_say():
    """A left-to-right loop of 10^6 terms near 0.1 (one sign, nearly equal: its rounding errors do not behave
    independently) against a library's sum: about 3x beyond the typical tolerance a diagnosis of two library orders
    gives, well within its guarantee."""
    x = (0.1 * (1 + 0.01 * np.random.default_rng(3).standard_normal((16, 1_000_000)))).astype(np.float32)
    r = _orders(x)
    d = diagnose(r["numpy"], r["torch"], reduction_length=x.shape[1], simulate_orders=False)
    assert d.verdict == "reordering"
    loop, e = torch.from_numpy(r["loop"].astype(np.float64)), torch.from_numpy(r["numpy"].astype(np.float64))
    with pytest.raises(AssertionError):
        torch.testing.assert_close(loop, e, rtol=d.envelope_rtol, atol=d.envelope_atol)
    rtol, atol, _ = _guarantee(d)
    torch.testing.assert_close(loop, e, rtol=rtol, atol=atol)


def test_the_page_lines_name_each_kind():
    x = np.random.default_rng(1).standard_normal((32, 4096)).astype(np.float32)
    r = _orders(x)
    d = diagnose(r["numpy"], r["torch"], reduction_length=4096, inputs=x)
    typical, guarantee = envelope_tolerance_lines(d)
    assert typical.startswith("Typical tolerance, not a guarantee, for what this explanation typically allows")
    assert TYPICAL_ASSUMES in typical
    rtol, atol, ratio = _guarantee(d)
    assert guarantee.startswith(f"Guaranteed for every order of summation: rtol={format_tol(rtol)}, "
                                f"atol={format_tol(atol)}, from ")
    assert "computed from the inputs" in guarantee and f"up to {ratio_text(ratio)} the envelope" in guarantee
    d = diagnose(r["numpy"], r["torch"], reduction_length=4096)
    assert "estimated as √K × its scale (no inputs given)" in envelope_tolerance_lines(d)[1]


def test_no_tolerance_where_k_u_reaches_one():
    f32, bf16 = FORMATS["float32"], FORMATS["bfloat16"]
    assert no_tolerance(2**24 - 1, f32) is None and no_tolerance(255, bf16) is None
    assert no_tolerance(256, bf16).startswith("No tolerance can mean anything here: K·u = 1 ≥ 1 for 256-term sums")
    assert "(a loop adding ones in float32 stops at 16,777,216)" in no_tolerance(2**24, f32)
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    r = _orders(x)
    d = diagnose(r["numpy"], r["loop"], reduction_length=2**25)
    assert envelope_tolerance_lines(d) == [no_tolerance(2**25, f32)]


def test_scaled_cover():
    env, bound = np.array([1.0, 2.0, np.nan]), np.array([9.0, 4.0, np.nan])
    rtol, atol, r = scaled_cover((1e-3, 1e-2), env, bound)
    assert r == pytest.approx(9.0) and r >= 9.0 and (rtol, atol) == (0.01, 0.1)
    assert scaled_cover((1e-3, 1e-2), env, np.array([math.inf, 4.0, np.nan])) is None
    assert scaled_cover((1e-3, 1e-2), env, env)[2] == pytest.approx(1.0)  # the bound is the envelope
    assert [ratio_text(v) for v in (1.0, 4.13, 8960.0, 2.67e7)] == ["1×", "4.1×", "9,000×", "27,000,000×"]
