"""Test vectors for the summation lab: seeded generators (the user's own data is core.arith.user_vectors').

Generators draw float64 values from a seeded ``numpy.random.Generator`` (the same seed
gives the same values on every machine and device) and round them once, correctly, to
the storage format. Everything downstream (exact sums, errors) is about the rounded
values actually summed.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from core.arith.formats import FORMATS, FloatFormat, get_format, round_values

MAX_N = 10_000_000

# The generators are a registry: see GENERATOR_REGISTRY below (GENERATORS is its view of labels).


class VectorError(ValueError):
    """Input that cannot become a vector; ``str(err)`` is the message for the user."""


@dataclass(frozen=True, kw_only=True)
class VectorSpec:
    kind: str = "normal"
    n: int = 1_000_000
    seed: int = 0
    storage: str = "float32"
    condition: float = 1e8  # for ill_conditioned

    def validate(self) -> None:
        check_choice(self.kind, GENERATOR_REGISTRY, "generator")
        check_storage(self.storage)
        check_count(self.n, MAX_N, "n")
        check_seed(self.seed)
        if self.kind == "ill_conditioned":
            check_condition(self.condition)


# The checks every seeded generator's settings share (the lab's vectors, the dot products, the
# triple search, the training runs): one rule each, so their limits and messages cannot drift apart.

SEED_LIMIT = 2**63  # seeds are whole numbers below 2^63: NumPy's and torch's generators take them all


def check_choice(value, choices, what: str, error: type[ValueError] = VectorError) -> None:
    if value not in choices:
        raise error(f"Unknown {what} {value!r}; choose one of {', '.join(choices)}.")


def check_count(n, high: int, what: str, error: type[ValueError] = VectorError) -> None:
    """``n`` is a whole number (not a bool) in [1, high]."""
    if not _is_whole(n) or not 1 <= n <= high:
        raise error(f"{what} must be a whole number between 1 and {high:,} (asked for {n!r}).")


def check_seed(seed, error: type[ValueError] = VectorError) -> None:
    if not _is_whole(seed) or not 0 <= seed < SEED_LIMIT:
        raise error(f"The seed must be a whole number between 0 and 2^63 - 1 (got {seed!r}).")


def check_condition(condition, error: type[ValueError] = VectorError) -> None:
    if not (isinstance(condition, numbers.Real) and 1 <= condition <= 1e300):
        raise error(f"The condition number must be between 1 and 1e300 (got {condition!r}).")


def check_storage(storage: str) -> None:
    check_choice(storage, FORMATS, "storage format")


def _is_whole(x) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_)


@dataclass(frozen=True, kw_only=True)
class Vector:
    values: np.ndarray = field(repr=False)  # 1-D, storage dtype, read-only
    storage: str
    source: str  # how it was made, for provenance
    notes: tuple[str, ...] = ()  # what happened on the way (overflow, clipping to n = 3, ...)

    @property
    def fmt(self) -> FloatFormat:
        return FORMATS[self.storage]

    @property
    def n(self) -> int:
        return int(self.values.size)


# ------------------------------------------------------------------- correct rounding


def round_array(x64: np.ndarray, storage: str) -> np.ndarray:
    """Round float64 values to the storage format once, to nearest even, overflowing by the format's rule
    (core.arith.formats.round_values), as a read-only array."""
    check_storage(storage)
    out = round_values(x64, FORMATS[storage])
    out.setflags(write=False)
    return out


# ------------------------------------------------------------------------- generators


def _tiny_huge_span(fmt: FloatFormat) -> int:
    return 14 if fmt.emax < 20 else 20


def _ill_conditioned(rng: np.random.Generator, n: int, condition: float, fmt: FloatFormat) -> np.ndarray:
    """After Ogita, Rump and Oishi's GenSum: exponents spread over log2(c)/2, a second
    half that cancels the first, then a random permutation.

    Vectorized variant: the second half is the negated first half (shuffled) plus small
    terms sized so that their sum is about sum|x| / c. Rounding to the storage format
    decides the final cancellation; the achieved condition number is measured, not
    assumed.
    """
    if n < 2:
        return rng.standard_normal(n)
    half_b = min(math.log2(condition) / 2, fmt.emax - 2 - math.log2(n))  # keep sum|x| finite
    # Exponents spread over [0, half_b]. When the cap is negative (float16, large n) the
    # spread collapses to the single exponent round(half_b) so that |x| <= ~2^half_b.
    spread = max(half_b, 0.0)
    shift = min(round(half_b), 0)
    n1 = n // 2  # values that get cancelled ...
    n2 = n - n1  # ... by as many (plus one lone small term when n is odd)
    exps = np.rint(rng.random(n1) * spread) + shift
    exps[0] = round(spread) + shift
    first = (2 * rng.random(n1) - 1) * np.exp2(exps)
    first = round_array(first, fmt.name).astype(np.float64)
    s_abs = 2 * np.abs(first).sum()
    small = (2 * rng.random(n2) - 1) * (s_abs / condition / max(math.sqrt(n2), 1.0))
    second = small.copy()
    second[:n1] -= first[rng.permutation(n1)]
    x = np.concatenate([first, second])
    return x[rng.permutation(n)]


def _one_then_tiny(rng: np.random.Generator, spec: VectorSpec, fmt: FloatFormat, notes: list[str]) -> np.ndarray:
    x = np.full(spec.n, float(fmt.unit_roundoff))  # half an ULP of 1: a tie that rounds back to 1
    x[0] = 1.0
    return x


def _large_one_minus_large(rng: np.random.Generator, spec: VectorSpec, fmt: FloatFormat,
                           notes: list[str]) -> np.ndarray:
    large = float(2 ** (fmt.precision + 1))
    if spec.n != 3:
        notes.append(f"This case always has 3 values (n = {spec.n:,} ignored).")
    return np.array([large, 1.0, -large])


@dataclass(frozen=True, kw_only=True)
class Generator:
    """One seeded generator: ``make(rng, spec, fmt, notes)`` draws float64 values (``generate``
    rounds them to the storage format) and may append notes. ``work`` and ``memory``: core.crowd.budget's
    weights per value (value operations; bytes held while generating), measured by
    benchmarks/bench_budget.py."""

    key: str
    label: str
    make: Callable[[np.random.Generator, VectorSpec, FloatFormat, list[str]], np.ndarray]
    work: float
    memory: float


GENERATOR_REGISTRY: dict[str, Generator] = {
    g.key: g
    for g in [
        Generator(
            key="normal",
            label="Normal: N(0, 1)",
            make=lambda rng, spec, fmt, notes: rng.standard_normal(spec.n),
            work=8.5,
            memory=17,
        ),
        Generator(
            key="uniform",
            label="Uniform on [0, 1)",
            make=lambda rng, spec, fmt, notes: rng.random(spec.n),
            work=2.4,
            memory=17,
        ),
        Generator(
            key="lognormal",
            label="Lognormal, wide exponent spread: exp(N(0, σ²)), σ = 4 (2 for float16)",
            make=lambda rng, spec, fmt, notes: rng.lognormal(0.0, 2.0 if fmt.emax < 20 else 4.0, spec.n),
            work=7.5,
            memory=17,
        ),
        Generator(
            key="tiny_huge",
            label="All positive, tiny and huge mixed: 2^U(-E, E)",
            make=lambda rng, spec, fmt, notes: np.exp2(
                rng.uniform(-_tiny_huge_span(fmt), _tiny_huge_span(fmt), spec.n)
            ),
            work=6.5,
            memory=17,
        ),
        Generator(
            key="alternating",
            label="Alternating signs, near-cancelling: (-1)^i (1 + N(0, 0.01²))",
            make=lambda rng, spec, fmt, notes: (
                (1 + 0.01 * rng.standard_normal(spec.n)) * np.where(np.arange(spec.n) % 2 == 0, 1.0, -1.0)
            ),
            work=15,
            memory=25,
        ),
        Generator(
            key="ill_conditioned",
            label="Ill-conditioned with a chosen condition number (after Ogita, Rump and Oishi)",
            make=lambda rng, spec, fmt, notes: _ill_conditioned(rng, spec.n, spec.condition, fmt),
            work=36,
            memory=41,
        ),
        Generator(
            key="tenths",
            label="0.1 repeated n times",
            make=lambda rng, spec, fmt, notes: np.full(spec.n, 0.1),
            work=1.6,
            memory=17,
        ),
        Generator(
            key="one_then_tiny",
            label="1 followed by n - 1 values of half an ULP of 1",
            make=_one_then_tiny,
            work=1.9,
            memory=17,
        ),
        Generator(
            key="large_one_minus_large", label="large, 1, -large (n = 3)", make=_large_one_minus_large, work=0, memory=0
        ),
    ]
}
GENERATORS: dict[str, str] = {k: g.label for k, g in GENERATOR_REGISTRY.items()}  # the pickers' labels


def describe_spec(spec: VectorSpec) -> str:
    """The provenance line of the vector ``spec`` describes (``Vector.source``), without making it."""
    size = 3 if spec.kind == "large_one_minus_large" else spec.n
    source = f"{GENERATOR_REGISTRY[spec.kind].label}; n = {size:,}, seed {spec.seed}, float64 rounded to {spec.storage}"
    if spec.kind == "ill_conditioned":
        source += f"; target condition {spec.condition:.3g}"
    return source


def generate(spec: VectorSpec) -> Vector:
    """Make the vector a spec describes (deterministic in spec)."""
    spec.validate()
    fmt = get_format(spec.storage)
    rng = np.random.default_rng(spec.seed)
    notes: list[str] = []
    x = GENERATOR_REGISTRY[spec.kind].make(rng, spec, fmt, notes)
    values = round_array(x, spec.storage)
    n_inf = int(np.isinf(values).sum())
    if n_inf:
        notes.append(f"{n_inf:,} value(s) overflowed to ±inf when rounded to {spec.storage}.")
    if spec.kind == "ill_conditioned" and spec.n >= 2 and (
            math.log2(spec.condition) / 2 > fmt.emax - 2 - math.log2(spec.n)):
        notes.append(f"The exponent spread was capped to keep sum|x| finite in {spec.storage}.")
    return Vector(values=values, storage=spec.storage, source=describe_spec(spec), notes=tuple(notes))


# ------------------------------------------------------------------ dot-product pairs


def ill_conditioned_dot(n: int, condition: float, seed: int,
                        storage: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Two vectors whose dot product has about the chosen condition number
    kappa = sum|x_i y_i| / |sum x_i y_i|: Ogita, Rump and Oishi's GenDot ("Accurate sum and dot
    product", SIAM J. Sci. Comput. 26(6), 2005, Algorithm 6.1), with the running dot product
    kept exactly instead of in twice the working precision.

    The first half has exponents spread over [0, b/2] in both vectors; in the second half the
    exponents fall linearly to 0 and each y_i is chosen (then rounded to storage) to cancel the
    exact dot product so far, so the final dot product is about 1, and b is chosen so that
    sum|x_i y_i| is about c. Finally both are shuffled by one permutation. For narrow formats
    the spread is capped so that sum|x_i y_i| stays finite; the achieved
    condition number is measured, not assumed.
    """
    check_storage(storage)
    fmt = get_format(storage)
    rng = np.random.default_rng(seed)
    if n < 2:
        return round_array(rng.standard_normal(n), storage), round_array(rng.standard_normal(n), storage), ()
    notes: list[str] = []
    n1 = n // 2
    # sum|x_i y_i| is about n1 * 2^b / (1.5 b) (the largest exponents dominate) while the final dot
    # product is about 1: take b so that this is about the chosen condition number
    log_c = math.log2(condition)
    half_b = max(log_c - math.log2(max(1.0, n1 / (0.75 * max(log_c, 1.0)))), 0.0) / 2
    cap = (fmt.emax - 2 - math.log2(n)) / 2  # |x_i y_i| <= 2^(2 cap) keeps sum|x_i y_i| finite
    if half_b > cap:
        notes.append(f"The exponent spread was capped at 2^{cap:.1f} to keep sum|x·y| finite in {storage}.")
        half_b = max(cap, 0.0)
    e = np.rint(rng.random(n1) * half_b)
    e[0], e[-1] = round(half_b), 0
    x, y = np.empty(n), np.empty(n)
    x[:n1] = round_array((2 * rng.random(n1) - 1) * np.exp2(e), storage)
    y[:n1] = round_array((2 * rng.random(n1) - 1) * np.exp2(e), storage)
    scale = 2 * (fmt.precision - fmt.emin - 1)  # every product of two storage values is an integer / 2^scale
    running = sum(_scaled_product(a, b, scale) for a, b in zip(x[:n1].tolist(), y[:n1].tolist(), strict=True))
    e2 = np.rint(np.linspace(half_b, 0, n - n1)).tolist()
    r = (2 * rng.random((n - n1, 2)) - 1).tolist()
    for i, (ei, (rx, ry)) in enumerate(zip(e2, r, strict=True)):
        xi = float(round_array(np.array([rx * 2.0**ei]), storage)[0]) or 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            target = ry * 2.0**ei - running / (1 << scale)  # int / int: correctly rounded
            yi = float(round_array(np.array([target / xi]), storage)[0])
        if not math.isfinite(yi):
            yi = 0.0
        x[n1 + i], y[n1 + i] = xi, yi
        running += _scaled_product(xi, yi, scale)
    order = rng.permutation(n)
    return round_array(x[order], storage), round_array(y[order], storage), tuple(notes)


def _scaled_product(a: float, b: float, scale: int) -> int:
    """a * b * 2^scale as an exact integer (the caller's scale makes it one)."""
    ma, ea = math.frexp(a)
    mb, eb = math.frexp(b)
    m = int(ma * (1 << 53)) * int(mb * (1 << 53))
    shift = ea + eb - 106 + scale
    return m << shift if shift >= 0 else m >> -shift
