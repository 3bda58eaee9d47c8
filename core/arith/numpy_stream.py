"""NumPy's default generator as a recipe another program can replay: the PCG64 state of
``numpy.random.default_rng(seed)`` and the tables of NumPy's ziggurat for ``standard_normal``.

The visitor's browser replays the recipe (ui/gpu_kernels/numpy_stream.js) to build the page's own vector instead
of downloading megabytes of it: the same float32 values, except in rare cases that the digest catches (the
browser's exp and log1p, used by lognormal values and the normal's tail, may differ from the C library's in a
float64 draw's last bit, and a float32 value only where that bit decides its rounding).
The ziggurat's tables are not written out here: they are
read off the installed NumPy itself. A draw that takes the ziggurat's fast path returns
``rabs * w[idx]`` (rabs the 52-bit integer and idx the low byte of one 64-bit word), so each width ``w[idx]``
is the one double that reproduces every such draw seen; the thresholds and heights follow from the widths
(Marsaglia and Tsang's construction, https://doi.org/10.18637/jss.v005.i08). Tests replay NumPy's
``standard_normal`` with these tables and compare every bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.formats import FORMATS, bit_view
from core.arith.vectors import VectorSpec

MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645  # PCG64's 128-bit LCG multiplier (O'Neill, pcg-random.org)
MASK128 = (1 << 128) - 1
MASK64 = (1 << 64) - 1
LAYERS = 256
# The generators whose float64 draws the browser can replay: each is NumPy's Generator method on the seed's
# stream, with the same arithmetic (core.arith.vectors.GENERATOR_REGISTRY).
REPLAYABLE = ("normal", "uniform", "lognormal", "alternating")


class ZigguratError(RuntimeError):
    """The installed NumPy's ziggurat could not be read off (another algorithm than the one replayed)."""


@dataclass(frozen=True, kw_only=True)
class Ziggurat:
    wi: tuple[float, ...]  # layer widths divided by 2^52
    ki: tuple[int, ...]  # fast-path thresholds on the 52-bit integer
    fi: tuple[float, ...]  # exp(-x^2 / 2) at each layer's edge
    r: float  # the start of the tail
    inv_r: float

    def as_dict(self) -> dict:
        return {"wi": list(self.wi), "ki": list(self.ki), "fi": list(self.fi), "r": self.r, "inv_r": self.inv_r}


def pcg64_state(seed: int) -> tuple[int, int]:
    """The 128-bit state and increment of ``default_rng(seed)``'s PCG64 before its first draw."""
    state = np.random.default_rng(seed).bit_generator.state["state"]
    return int(state["state"]), int(state["inc"])


def pcg64_raw(state: int, inc: int, k: int) -> tuple[list[int], int]:
    """k 64-bit outputs of PCG64 (step, then XSL-RR output of the new state), and the state after them:
    the reference the browser's replay is tested against."""
    out = []
    for _ in range(k):
        state = (state * MULTIPLIER + inc) & MASK128
        x = (state >> 64) ^ (state & MASK64)
        rot = state >> 122
        out.append(((x >> rot) | (x << ((64 - rot) & 63))) & MASK64)
    return out, state


def _fast_draws(seed: int, draws: int) -> dict[int, list[tuple[int, float]]]:
    """(rabs, |z|) of draws that consumed one word (any layer's fast path) or two words in a layer above the
    base (a wedge draw that was accepted): both return rabs * w[idx] exactly."""
    start = np.random.PCG64(seed).state
    words = np.random.PCG64(seed).random_raw(draws + 1)
    probe, after = np.random.PCG64(), np.random.PCG64()
    seen: dict[int, list[tuple[int, float]]] = {}
    for p in range(draws):
        probe.state = start
        probe.advance(p)
        z = float(np.random.Generator(probe).standard_normal())
        word = int(words[p])
        idx, rabs = word & 0xFF, (word >> 9) & ((1 << 52) - 1)
        used = probe.state["state"]["state"]
        for k in (1,) if idx == 0 else (1, 2):
            after.state = start
            after.advance(p + k)
            if after.state["state"]["state"] == used and rabs:
                seen.setdefault(idx, []).append((rabs, abs(z)))
                break
    return seen


def _width(samples: list[tuple[int, float]]) -> float:
    """The one double w with rabs * w == z (rounded) for every sample."""
    rabs, z = samples[0]
    w = z / rabs
    for _ in range(8):
        w = math.nextafter(w, -math.inf)
    found = []
    for _ in range(17):
        if all(float(r) * w == zz for r, zz in samples):
            found.append(w)
        w = math.nextafter(w, math.inf)
    if len(found) != 1:
        raise ZigguratError(f"{len(found)} widths fit {len(samples)} draws")
    return found[0]


@functools.lru_cache(maxsize=1)  # one table per process: it depends only on the installed NumPy
def ziggurat(seed: int = 20261206, draws: int = 12_000) -> Ziggurat:
    """The installed NumPy's ziggurat for ``standard_normal`` (ZigguratError where it cannot be read)."""
    seen = _fast_draws(seed, draws)
    if len(seen) != LAYERS:
        raise ZigguratError(f"draws reached {len(seen)} of {LAYERS} layers")
    wi = tuple(_width(seen[i]) for i in range(LAYERS))
    x = [Fraction(w) * 2**52 for w in wi]  # layer edges; x[0] is the base strip's width
    # rabs * w[i] < x[i - 1] for an integer rabs is rabs < ceil(2^52 x[i - 1] / x[i]); the top layer has none
    ki = (math.ceil(2**52 * x[LAYERS - 1] / x[0]), 0,
          *(math.ceil(2**52 * x[i - 1] / x[i]) for i in range(2, LAYERS)))
    fi = (1.0, *(math.exp(-0.5 * float(x[i]) ** 2) for i in range(1, LAYERS)))
    r = float(x[LAYERS - 1])
    return Ziggurat(wi=wi, ki=ki, fi=fi, r=r, inv_r=1.0 / r)


def replayable(spec: VectorSpec) -> bool:
    return spec.kind in REPLAYABLE and spec.storage == "float32"


def recipe(spec: VectorSpec) -> dict:
    """What the browser needs to build ``spec``'s float32 vector itself: a few kilobytes for any n."""
    if not replayable(spec):
        raise ValueError(f"the browser replays float32 vectors of {', '.join(REPLAYABLE)} only")
    state, inc = pcg64_state(spec.seed)
    sigma = 2.0 if FORMATS[spec.storage].emax < 20 else 4.0  # as GENERATOR_REGISTRY["lognormal"]
    return {"kind": spec.kind, "n": spec.n, "state": f"{state:032x}", "inc": f"{inc:032x}", "sigma": sigma,
            "ziggurat": ziggurat().as_dict()}


def digest(values: np.ndarray) -> tuple[int, int]:
    """Two 32-bit position-weighted sums of float32 bits (the browser's digest() computes the same): enough to
    tell the vector the browser built from another, not a cryptographic hash."""
    w = bit_view(np.asarray(values, dtype=np.float32)).astype(np.uint64)
    i = np.arange(w.size, dtype=np.uint64)
    m32 = np.uint64(0xFFFFFFFF)
    d1 = ((w * ((2 * i + 1) & m32)) & m32).sum(dtype=np.uint64) & m32
    d2 = (((w ^ i) & m32) * np.uint64(0x9E3779B1) & m32).sum(dtype=np.uint64) & m32
    return int(d1), int(d2)
