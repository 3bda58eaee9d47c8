"""Non-associativity of floating-point addition, computed live and checked exactly.

``evaluate_triple`` adds three numbers of one format in both groupings with torch on
each available device, and explains every rounding with exact rational arithmetic.
``search_counterexamples`` measures how often the two groupings differ over random
triples and returns one that does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import torch

from core.arith.exact import shortest_repr
from core.arith.formats import (
    Exact,
    FloatFormat,
    add,
    bits_differ,
    bits_of,
    bits_of_value,
    format_of,
    get_format,
    round_to_format,
    tensor_of,
    value_of_bits,
)
from core.arith.parse import ParsedNumber
from core.arith.ulps import error_in_ulps, ulp_distance
from core.arith.vectors import check_seed
from core.machines.devices import Device, available_devices, cpu_device


def add_exact(x: Exact, y: Exact) -> Exact:
    """Exact sum; infinities and NaN follow IEEE (inf + -inf = nan)."""
    if isinstance(x, float) or isinstance(y, float):
        return float(x) + float(y)  # only reached when one side is not finite
    return x + y


@dataclass(frozen=True, kw_only=True)
class Step:
    """One addition as the hardware does it: exact sum of the operands, then one rounding."""

    expression: str  # e.g. "a + b"
    exact: Exact  # the real sum of the two stored operands
    rounded: Exact  # what torch returned
    bits: int
    model_rounded: Exact  # round_to_format(exact): what IEEE round-to-nearest must give

    @property
    def rounding_error(self) -> Exact:
        if isinstance(self.rounded, float) or isinstance(self.exact, float):
            return math.inf if isinstance(self.rounded, float) else math.nan
        return self.rounded - self.exact

    @property
    def was_exact(self) -> bool:
        return self.rounded == self.exact

    @property
    def matches_model(self) -> bool:
        return self.rounded == self.model_rounded or (
            isinstance(self.rounded, float)
            and isinstance(self.model_rounded, float)
            and math.isnan(self.rounded)
            and math.isnan(self.model_rounded)
        )


@dataclass(frozen=True, kw_only=True)
class Grouping:
    name: str  # "(a + b) + c"
    inner: Step
    outer: Step
    error_ulps: float  # (result - exact sum) / ulp(exact sum), in the format

    @property
    def result(self) -> Exact:
        return self.outer.rounded

    @property
    def bits(self) -> int:
        return self.outer.bits


@dataclass(frozen=True, kw_only=True)
class DeviceOutcome:
    device: Device
    left_bits: int | None
    right_bits: int | None
    message: str | None = None  # why a device could not compute, if it could not


@dataclass(frozen=True, kw_only=True)
class TripleResult:
    fmt: FloatFormat
    numbers: tuple[ParsedNumber, ParsedNumber, ParsedNumber]
    stored_bits: tuple[int, int, int]
    exact_sum: Fraction
    correctly_rounded: Exact
    correctly_rounded_bits: int
    left: Grouping
    right: Grouping
    devices: tuple[DeviceOutcome, ...]

    @property
    def differ(self) -> bool:
        return self.left.bits != self.right.bits

    def agrees_with_cpu(self, outcome: DeviceOutcome) -> bool:
        """Whether a device produced the CPU's bits for both groupings."""
        return (outcome.left_bits, outcome.right_bits) == (self.left.bits, self.right.bits)

    @property
    def ulps_apart(self) -> int | None:
        """Representable values between the two results; None if one is not finite."""
        if not all(math.isfinite(float(g.result)) for g in (self.left, self.right)):
            return None
        return ulp_distance(self.left.bits, self.right.bits, self.fmt)

    @property
    def correct_groupings(self) -> list[str]:
        """The groupings whose result is the exact sum correctly rounded (bit for bit)."""
        return [g.name for g in (self.left, self.right) if g.bits == self.correctly_rounded_bits]

    @property
    def model_mismatches(self) -> list[str]:
        """The additions where torch's result is not IEEE round-to-nearest-even of the exact sum."""
        return [s.expression for g in (self.left, self.right) for s in (g.inner, g.outer) if not s.matches_model]

    def step_ulps(self, step: Step) -> float:
        """How far one addition's rounded result is from its exact sum, in ULPs of the format."""
        return error_in_ulps(step.rounded, step.exact, self.fmt)

    def stored_ulps(self, number: ParsedNumber) -> float:
        """How far a stored value is from the typed one, in ULPs of the format."""
        return error_in_ulps(number.stored, number.exact, self.fmt)


def _step(expression: str, x: torch.Tensor, y: torch.Tensor) -> tuple[Step, torch.Tensor]:
    fmt_result = add(x, y)  # one rounding, in x's format, on x's device
    fmt = format_of(x.dtype)
    exact = add_exact(value_of_bits(bits_of(x), fmt), value_of_bits(bits_of(y), fmt))
    bits = bits_of(fmt_result)
    step = Step(
        expression=expression,
        exact=exact,
        rounded=value_of_bits(bits, fmt),
        bits=bits,
        model_rounded=round_to_format(exact, fmt),
    )
    return step, fmt_result


def _groupings(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, exact_sum: Fraction, fmt: FloatFormat):
    ab, ab_t = _step("a + b", a, b)
    left_outer, _ = _step("(a + b) + c", ab_t, c)
    bc, bc_t = _step("b + c", b, c)
    right_outer, _ = _step("a + (b + c)", a, bc_t)
    left = Grouping(
        name="(a + b) + c", inner=ab, outer=left_outer, error_ulps=error_in_ulps(left_outer.rounded, exact_sum, fmt)
    )
    right = Grouping(
        name="a + (b + c)", inner=bc, outer=right_outer, error_ulps=error_in_ulps(right_outer.rounded, exact_sum, fmt)
    )
    return left, right


def evaluate_triple(
    numbers: tuple[ParsedNumber, ParsedNumber, ParsedNumber],
    devices: list[Device] | None = None,
) -> TripleResult:
    """Add three stored numbers both ways on the CPU (and every other device given)."""
    fmt = numbers[0].fmt
    if any(n.fmt != fmt for n in numbers):
        raise ValueError("all three numbers must be in one format")
    exact_sum = sum((n.stored for n in numbers), Fraction(0))
    cpu = [tensor_of(n.stored, fmt) for n in numbers]
    left, right = _groupings(*cpu, exact_sum, fmt)
    correctly_rounded = round_to_format(exact_sum, fmt)

    outcomes = []
    for dev in devices if devices is not None else available_devices():
        if dev.kind == "cpu":
            outcomes.append(DeviceOutcome(device=dev, left_bits=left.bits, right_bits=right.bits))
            continue
        if not dev.supports(fmt.torch_dtype):
            outcomes.append(
                DeviceOutcome(
                    device=dev, left_bits=None, right_bits=None, message=f"{dev.name} has no {fmt.name} support."
                )
            )
            continue
        try:
            a, b, c = (t.to(dev.torch_device) for t in cpu)
            outcomes.append(DeviceOutcome(device=dev, left_bits=bits_of(add(add(a, b), c)),
                                           right_bits=bits_of(add(a, add(b, c)))))
        except (RuntimeError, AssertionError) as err:  # driver errors, device lost, OOM
            outcomes.append(
                DeviceOutcome(device=dev, left_bits=None, right_bits=None, message=f"{dev.name} failed: {err}")
            )

    return TripleResult(
        fmt=fmt,
        numbers=numbers,
        stored_bits=tuple(bits_of_value(n.stored, fmt) for n in numbers),
        exact_sum=exact_sum,
        correctly_rounded=correctly_rounded,
        correctly_rounded_bits=bits_of_value(correctly_rounded, fmt),
        left=left,
        right=right,
        devices=tuple(outcomes),
    )


# ---------------------------------------------------------------------------- searching

DISTRIBUTIONS: dict[str, str] = {
    "normal": "standard normal",
    "uniform": "uniform on [-1, 1)",
    "wide": "random sign, magnitude 2^U(-E, E) (E = 20, or 7 for float16)",
}
MAX_TRIPLES = 1_000_000


@dataclass(frozen=True, kw_only=True)
class SearchSettings:
    fmt_name: str = "float32"
    n_triples: int = 100_000
    seed: int = 0
    distribution: str = "normal"

    def validate(self) -> None:
        get_format(self.fmt_name)
        if not 1 <= self.n_triples <= MAX_TRIPLES:
            raise ValueError(f"the number of triples must be between 1 and {MAX_TRIPLES:,}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"unknown distribution {self.distribution!r}")
        check_seed(self.seed, ValueError)


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    settings: SearchSettings
    n_differ: int
    example: tuple[str, str, str] | None  # shortest decimal strings, exact in the format
    device: str

    @property
    def fraction(self) -> float:
        return self.n_differ / self.settings.n_triples

    @property
    def ci95(self) -> tuple[float, float]:
        """Wilson score interval for the fraction of triples whose groupings differ."""
        n, k, z = self.settings.n_triples, self.n_differ, 1.959963984540054
        p = k / n
        denom = 1 + z * z / n
        centre = (p + z * z / (2 * n)) / denom
        half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
        return max(0.0, centre - half), min(1.0, centre + half)


def random_triples(settings: SearchSettings) -> torch.Tensor:
    """(n, 3) tensor of the format's values, from a local generator (global RNG untouched)."""
    settings.validate()
    fmt = get_format(settings.fmt_name)
    gen = torch.Generator(device="cpu").manual_seed(settings.seed)
    shape = (settings.n_triples, 3)
    if settings.distribution == "normal":
        x = torch.randn(shape, generator=gen, dtype=torch.float64)
    elif settings.distribution == "uniform":
        x = torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1
    else:
        e = 7 if fmt.emax < 20 else 20
        mag = torch.exp2((torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * e)
        sign = torch.where(torch.rand(shape, generator=gen, dtype=torch.float64) < 0.5, -1.0, 1.0)
        x = mag * sign
    return x.to(fmt.torch_dtype)


def search_counterexamples(settings: SearchSettings) -> SearchResult:
    """Count random triples whose two groupings give different bits (vectorized, CPU)."""
    fmt = get_format(settings.fmt_name)
    t = random_triples(settings)
    a, b, c = t[:, 0], t[:, 1], t[:, 2]
    left = add(add(a, b), c)
    right = add(a, add(b, c))
    differ = bits_differ(left, right)
    n_differ = int(differ.sum())
    example = None
    if n_differ:
        i = int(torch.nonzero(differ)[0, 0])
        example = tuple(
            shortest_repr(value_of_bits(bits_of(t[i, j]), fmt), fmt) for j in range(3)
        )
    return SearchResult(settings=settings, n_differ=n_differ, example=example, device=cpu_device().label)
