"""NumPy's generator as a recipe: PCG64's words, the ziggurat read off the installed NumPy, and the digest,
each checked against NumPy itself. ``replay`` below is the browser's algorithm (ui/gpu_kernels/numpy_stream.js)
written in Python; the browser tests check the JavaScript against the same vectors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.arith.formats import bit_view
from core.arith.numpy_stream import ZigguratError, digest, pcg64_raw, pcg64_state, recipe, replayable, ziggurat
from core.arith.vectors import VectorSpec, generate


def replay(spec_recipe: dict, n: int) -> np.ndarray:
    """The float64 draws the browser makes from a recipe, before its one rounding to float32."""
    state, inc = int(spec_recipe["state"], 16), int(spec_recipe["inc"], 16)
    z = spec_recipe["ziggurat"]
    words: list[int] = []

    def word() -> int:
        nonlocal state, words
        if not words:
            words, state = pcg64_raw(state, inc, 4096)
            words.reverse()
        return words.pop()

    def next_double() -> float:
        return (word() >> 11) * (1.0 / 9007199254740992.0)

    def normal() -> float:
        while True:
            r = word()
            idx, sign, rabs = r & 0xFF, (r >> 8) & 1, (r >> 9) & ((1 << 52) - 1)
            x = rabs * z["wi"][idx]
            x = -x if sign else x
            if rabs < z["ki"][idx]:
                return x
            if idx == 0:
                while True:
                    xx = -z["inv_r"] * math.log1p(-next_double())
                    yy = -math.log1p(-next_double())
                    if yy + yy > xx * xx:
                        return -(z["r"] + xx) if (rabs >> 8) & 1 else z["r"] + xx
            if (z["fi"][idx - 1] - z["fi"][idx]) * next_double() + z["fi"][idx] < math.exp(-0.5 * x * x):
                return x

    kind = spec_recipe["kind"]
    if kind == "uniform":
        return np.array([next_double() for _ in range(n)])
    draws = np.array([normal() for _ in range(n)])
    if kind == "lognormal":
        return np.exp(spec_recipe["sigma"] * draws)
    if kind == "alternating":
        return (1 + 0.01 * draws) * np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    return draws


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**63 - 1])
def test_pcg64_words_are_numpys(seed):
    state, inc = pcg64_state(seed)
    words, _ = pcg64_raw(state, inc, 1000)
    assert words == [int(w) for w in np.random.PCG64(seed).random_raw(1000)]


@pytest.mark.parametrize("seed", [0, 7, 2026])
def test_standard_normal_replayed_bit_for_bit(seed):
    spec = VectorSpec(kind="normal", n=60_000, seed=seed, storage="float32")
    mine = replay(recipe(spec), spec.n)
    numpys = np.random.default_rng(seed).standard_normal(spec.n)
    assert np.array_equal(bit_view(mine), bit_view(numpys))  # every float64 bit, tail and wedge draws included


@pytest.mark.parametrize("kind", ["uniform", "lognormal", "alternating", "normal"])
def test_every_replayable_generator_gives_the_page_vector(kind):
    spec = VectorSpec(kind=kind, n=20_000, seed=3, storage="float32")
    mine = replay(recipe(spec), spec.n).astype(np.float32)
    assert np.array_equal(bit_view(mine), bit_view(generate(spec).values))


def test_the_tables_are_read_once_and_are_the_ziggurat():
    z = ziggurat()
    assert ziggurat() is z
    assert z.r == pytest.approx(3.6541528853610088, rel=1e-15)  # Marsaglia and Tsang's 256-layer tail start
    assert z.ki[1] == 0 and all(0 < k < 2**52 for i, k in enumerate(z.ki) if i != 1)
    assert z.fi[0] == 1.0 and all(a > b for a, b in zip(z.fi, z.fi[1:], strict=False))


def test_too_few_draws_to_read_the_tables_is_an_error():
    with pytest.raises(ZigguratError):
        ziggurat.__wrapped__(seed=1, draws=50)


def test_digest_is_the_position_weighted_sums():
    x = np.array([1.0, -0.0, np.inf, 3.5, 1e-45], dtype=np.float32)
    w = [int(b) for b in bit_view(x)]
    d1 = sum(b * (2 * i + 1) % 2**32 for i, b in enumerate(w)) % 2**32
    d2 = sum(((b ^ i) * 0x9E3779B1) % 2**32 for i, b in enumerate(w)) % 2**32
    assert digest(x) == (d1, d2)
    y = x.copy()
    y[1] = 0.0  # -0 and +0: one bit apart
    assert digest(y) != digest(x)


def test_only_float32_of_numpys_own_generators_is_replayable():
    assert replayable(VectorSpec(kind="normal", storage="float32"))
    assert not replayable(VectorSpec(kind="normal", storage="float16"))
    assert not replayable(VectorSpec(kind="ill_conditioned", storage="float32"))
    with pytest.raises(ValueError):
        recipe(VectorSpec(kind="tenths", storage="float32"))
