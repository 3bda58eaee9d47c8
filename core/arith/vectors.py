"""Test vectors for the summation lab: seeded generators and the user's own data.

Generators draw float64 values from a seeded ``numpy.random.Generator`` (the same seed
gives the same values on every machine and device) and round them once, correctly, to
the storage format. Everything downstream (exact sums, errors) is about the rounded
values actually summed.
"""

from __future__ import annotations

import decimal
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from core.arith.formats import FORMATS, FloatFormat, get_format, quantum_exponent, round_values
from core.arith.loader import (
    MAX_UPLOAD_BYTES,
    NpyWords,
    Numbers,
    check_upload,
    clip,
    errors_as,
    read_column,
    read_npy,
    read_text,
)

MAX_N = 10_000_000
MAX_PASTED = 100_000

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
        _check_storage(self.storage)
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


def _check_storage(storage: str) -> None:
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
    _check_storage(storage)
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


# -------------------------------------------------------------------- the user's data


def _vector(numbers: Numbers, values: np.ndarray, storage: str, what: str) -> Vector:
    """The numbers read by core.arith.loader and ``values``, each rounded to storage once (``round_numerals``):
    finite numerals only, none overflowing."""
    x64, numerals = numbers.values, numbers.numerals
    literal = np.isnan(x64)  # nan, inf and infinity as written; numerals too big for float64 overflow below
    for i in np.flatnonzero(np.isinf(x64)):
        literal[i] = _is_inf_literal(numerals[i])
    _reject_non_finite(x64, numerals, what, literal)
    _reject_overflow(values, numerals, storage, what)
    return Vector(values=values, storage=storage, source=f"{what}: {values.size:,} numbers rounded to {storage}")


def _is_inf_literal(t: str) -> bool:
    return t.lstrip("+-").lower() in ("inf", "infinity")


def _reject_non_finite(x64: np.ndarray, tokens: list[str] | None, what: str, mask: np.ndarray | None = None) -> None:
    bad = np.flatnonzero(~np.isfinite(x64) if mask is None else mask)
    if bad.size:
        shown = ", ".join(f"#{i + 1} ({clip(tokens[i], 20) if tokens is not None else x64[i]})" for i in bad[:5])
        raise VectorError(
            f"{what} contains NaN or infinity at position {shown}"
            f"{' and more' if bad.size > 5 else ''}. Any sum with NaN is NaN and inf swamps every order, "
            "so only finite numbers are accepted."
        )


def _reject_overflow(values: np.ndarray, tokens, storage: str, what: str) -> None:
    bad = np.flatnonzero(np.isinf(values))
    if bad.size:
        shown = ", ".join(f"#{i + 1} ({clip(tokens[i], 20) if tokens is not None else values[i]})" for i in bad[:5])
        fmt = get_format(storage)
        raise VectorError(
            f"{what}: {bad.size:,} number(s) overflow {storage} (largest finite ±{float(fmt.max_finite):.6g}), "
            f"for example {shown}. Choose a wider storage format or smaller numbers."
        )


def round_numerals(numerals, x64: np.ndarray, storage: str) -> np.ndarray:
    """Round decimal text to storage without double rounding through float64.

    float() is correctly rounded to float64. Rounding that again to a narrower format is
    wrong only when the float64 value lies exactly halfway between two storage values (or
    on the overflow threshold) while the text does not; for those few numerals the exact
    decimal value decides the side. ``Decimal`` holds every digit of the text, whatever
    its length, and compares exactly.
    """
    values = round_array(x64, storage)
    if storage == "float64":
        return values
    fmt = get_format(storage)
    ties, half_step = _midpoints(x64, fmt)
    if not ties.any():
        return values
    fixed = values.copy()
    for i in np.flatnonzero(ties):
        mid = float(x64[i])
        try:
            exact = decimal.Decimal(numerals[i])
        except (decimal.InvalidOperation, ValueError):  # cannot happen for text float() accepted
            continue
        if exact == decimal.Decimal(mid):
            continue  # a true tie: ties to even was right
        side = float(half_step[i]) if exact > decimal.Decimal(mid) else -float(half_step[i])
        fixed[i] = round_array(np.array([mid + side]), storage)[0]  # a storage value (or the overflow)
    fixed.setflags(write=False)
    return fixed


def _midpoints(x64: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
    """Which finite values are exactly halfway between two neighbours in ``fmt`` (with an
    unbounded exponent, so the overflow threshold counts), and half the neighbours' spacing."""
    finite = np.isfinite(x64)
    mag = np.abs(np.where(finite, x64, 0.0))
    half_exp = quantum_exponent(mag, fmt.precision, fmt.emin) - 1
    t = np.ldexp(mag, -half_exp)  # exact: at most p + 1 significant bits above the binary point
    ties = finite & (t == np.floor(t)) & (np.fmod(t, 2.0) == 1.0)
    return ties, np.ldexp(np.ones_like(mag), half_exp)


def read_pasted(text: str, storage: str, *, what: str = "The pasted text", max_chars: int = MAX_UPLOAD_BYTES,
                max_numbers: int = MAX_PASTED, accepted: str = "are accepted",
                error: type[ValueError] = VectorError) -> tuple[Numbers, np.ndarray]:
    """The one parser of pasted numbers, for the lab and the mismatch diagnosis: numbers separated by commas,
    whitespace, semicolons or new lines (core.arith.loader's text) within the caller's limits, and each
    numeral rounded once to ``storage`` (``round_numerals``). ``what`` names the text in messages and
    ``accepted`` ends the one on too many numbers; problems raise the caller's ``error``. NaN and infinities
    are kept: whether they are allowed is the caller's rule."""
    check_choice(storage, FORMATS, "storage format", error)
    with errors_as(error):
        numbers = read_text(text, what, max_chars=max_chars, max_numbers=max_numbers, accepted=accepted)
    return numbers, round_numerals(numbers.numerals, numbers.values, storage)


def parse_pasted(text: str, storage: str) -> Vector:
    """The lab's vector from pasted numbers (``read_pasted``): finite numerals only, none overflowing."""
    numbers, values = read_pasted(text, storage)
    return _vector(numbers, values, storage, "The pasted text")


def parse_upload(name: str, data: bytes, storage: str) -> Vector:
    """A .npy array (1-D, real numbers) or a CSV file (one column, or the first numeric column)."""
    _check_storage(storage)
    with errors_as(VectorError):
        check_upload(name, data)
    if name.lower().endswith(".npy"):
        return _parse_npy(name, data, storage)
    if name.lower().endswith((".csv", ".txt")):
        return _parse_csv(name, data, storage)
    raise VectorError(f"{clip(name)}: upload a .csv or .npy file.")


_UNREADABLE_NPY = "{name} is not a readable .npy file (object arrays are not accepted)."
_NPY_WORDS = NpyWords(not_npy=_UNREADABLE_NPY, pickled=_UNREADABLE_NPY, damaged=_UNREADABLE_NPY,
                      not_array="{name} holds no data; a real-number array is needed.",
                      empty="{name} holds an empty array.")


def _parse_npy(name: str, data: bytes, storage: str) -> Vector:
    """A 1-D array of real numbers (core.arith.loader.read_npy), finite, each exact in float64, rounded to
    storage once where its dtype is another."""
    with errors_as(VectorError):
        arr = read_npy(name, data, accept=lambda dt: dt.kind in "fiu", needed="a real-number array is needed.",
                       max_values=MAX_N, ndim=1, words=_NPY_WORDS)
    with np.errstate(over="ignore"):
        x64 = arr.astype(np.float64)
    if arr.dtype.kind == "f":
        _reject_non_finite(arr, None, clip(name))
        if arr.dtype.itemsize > 8 and np.any(x64.astype(arr.dtype) != arr):
            raise VectorError(f"{clip(name)} holds {arr.dtype} values that float64 cannot hold exactly; "
                              "save them as float64 (or narrower).")
    elif not _ints_exact(arr, x64):
        raise VectorError(f"{clip(name)} holds integers too large for exact float64 conversion.")
    note = ()
    if arr.dtype == FORMATS[storage].numpy_dtype:
        values = arr.copy()
        values.setflags(write=False)
    else:
        values = round_array(x64, storage)
        note = (f"{clip(name)} held {arr.dtype}; its values were rounded to {storage}.",)
    _reject_overflow(values, None, storage, clip(name))
    return Vector(values=values, storage=storage, source=f"{name}: {values.size:,} values as {storage}", notes=note)


def _ints_exact(arr: np.ndarray, x64: np.ndarray) -> bool:
    """Whether the float64 values equal the integers (no out-of-range cast is attempted)."""
    info = np.iinfo(arr.dtype)
    in_range = (x64 >= float(info.min)) & (x64 < float(info.max) + 1)  # float(info.max) + 1 is a power of 2
    back = np.where(in_range, x64, 0.0).astype(arr.dtype)
    return bool(np.all(in_range & (back == arr)))


def _parse_csv(name: str, data: bytes, storage: str) -> Vector:
    with errors_as(VectorError):
        numbers = read_column(name, data, max_numbers=MAX_PASTED)
    vec = _vector(numbers, round_numerals(numbers.numerals, numbers.values, storage), storage, clip(name))
    if not numbers.first_column:
        return vec
    return Vector(values=vec.values, storage=storage, source=vec.source + " (first column)", notes=numbers.notes)


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
    _check_storage(storage)
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
