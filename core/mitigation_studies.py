"""The Mitigations page's studies: each fix applied to fixed vectors and a fixed training pair,
measured live, with what the page needs to say about it.

The fixes themselves (wider accumulation, the determinism checks, the order-independent sum,
the throughput measurement) live in core.mitigations; this module runs them on the page's
inputs and turns the outcomes into small results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from core import mitigations
from core.devices import Device
from core.exact import shortest_repr
from core.formats import FORMATS, bits_of, value_of_bits
from core.metrics import exact_value
from core.mitigations import (
    VENDOR_RATIOS,
    AccumulationRow,
    DeterminismResult,
    Throughput,
    determinism,
    reproducible_sum,
    reproducible_sum_devices,
    wider_accumulation,
)
from core.orders import ORDERS, run_order
from core.sumlab import LabResult, run_lab
from core.training import PairedRun, TrainSettings, summarize
from core.vectors import VectorSpec, generate

DEFAULT_VECTOR = VectorSpec("normal", 1_000_000, 0, "float32")  # the Summation lab's default vector
HARD_VECTOR = VectorSpec("ill_conditioned", 100_000, 0, "float32", 1e12)
LAB_ORDERS = ("sequential", "reverse", "sorted_abs", "pairwise", "numpy", "torch_1", "torch_all", "kahan")
STORAGE_FORMATS = ("float32", "float16", "bfloat16")
WIDER = {"float32": "float64", "float16": "float32", "bfloat16": "float32"}


def cited_ratio(hardware: str) -> str:
    """A vendor's peak float64 : float32 ratio as cited in VENDOR_RATIOS."""
    for name, ratio, _ in VENDOR_RATIOS:
        if name == hardware:
            return ratio
    raise KeyError(hardware)


# ------------------------------------------------------------------------- float64


@dataclass(frozen=True)
class PrecisionPair:
    """The training pair (default settings) in one format."""

    dtype: str
    steps: int
    first_rel_1pct: int | None  # first step more than 1% apart; None within ``steps``
    final_distance: float  # ‖θA − θB‖ after the last step


def training_pair(dtype: str) -> PrecisionPair:
    run = PairedRun(TrainSettings(dtype=dtype))
    recs = run.run(run.settings.steps)
    return PrecisionPair(dtype, run.settings.steps, summarize(recs).first_rel_1pct, recs[-1].param_distance)


@dataclass(frozen=True)
class ThroughputRun:
    rows: tuple[Throughput, ...]
    failures: tuple[str, ...]  # one message per device whose measurement failed
    torch_version: str

    def first(self, op: str) -> Throughput | None:
        return next((t for t in self.rows if t.op == op), None)


def measure_devices(devices: list[Device], progress: Callable[[float, str], None] | None = None) -> ThroughputRun:
    """float32 against float64 on every device (core.mitigations.measure_throughput); a device that
    fails is reported and does not take the others' numbers down. ``progress(fraction, text)``."""
    rows, failures = [], []
    for i, d in enumerate(devices):
        def each(f, text, i=i):
            if progress is not None:
                progress((i + f) / len(devices), text)
        try:
            rows += mitigations.measure_throughput(d, progress=each)
        except RuntimeError as err:
            failures.append(f"{d.name}: {err}")
    return ThroughputRun(tuple(rows), tuple(failures), torch.__version__)


def lab(working: str, spec: VectorSpec = DEFAULT_VECTOR) -> LabResult:
    """The Summation lab's orders on a float32 vector, accumulating in ``working``."""
    return run_lab(generate(spec).values, "float32", working, LAB_ORDERS)


@dataclass(frozen=True)
class AccumulationError:
    order: str
    error32: Fraction  # |error| against the exact sum, accumulating in float32
    error64: Fraction  # the same order accumulating in float64
    shrink: Fraction | None  # error32 / error64; None when float64 is exact


def accumulation_errors(in32: LabResult, in64: LabResult) -> tuple[AccumulationError, ...]:
    """Order by order, how much smaller the error is when the same values are summed in float64."""
    return tuple(AccumulationError(a.order.name, a.metrics.abs_error, b.metrics.abs_error,
                                   a.metrics.abs_error / b.metrics.abs_error if b.metrics.abs_error else None)
                 for a, b in zip(in32.rows, in64.rows, strict=True))


def distinct_results(result: LabResult) -> int:
    """How many different values the lab's orders gave."""
    return len({r.metrics.value for r in result.rows})


# ---------------------------------------------------------------- wider accumulation


@dataclass(frozen=True)
class WiderStudy:
    storage: str
    rows: tuple[AccumulationRow, ...]

    @property
    def base(self) -> AccumulationRow:
        """Plain torch.sum on one thread."""
        return next(r for r in self.rows if r.accumulate == self.storage and r.threads == 1)

    @property
    def wide(self) -> AccumulationRow:
        """torch.sum with the wider dtype on one thread."""
        return next(r for r in self.rows if r.accumulate != self.storage and r.threads == 1)

    @property
    def slowdown(self) -> float:
        """The wider sum's time over the plain one's (one thread): the median of the per-repeat ratios."""
        return self.wide.vs_base

    @property
    def threads_slower(self) -> tuple[AccumulationRow, ...]:
        """Rows on more than one thread that took longer than the same sum on one thread (median ratio)."""
        one = {r.accumulate: r.vs_base for r in self.rows if r.threads == 1}
        return tuple(r for r in self.rows if r.threads > 1 and r.vs_base > one[r.accumulate])

    @property
    def wide_differs_across_threads(self) -> bool:
        return len({r.value for r in self.rows if r.accumulate != self.storage}) > 1


def wider_study(storage: str, n: int = 1_000_000) -> WiderStudy:
    """``n`` normal values stored in ``storage``, summed by torch.sum plainly and one format wider."""
    if storage not in WIDER:
        raise ValueError(f"storage must be one of {', '.join(WIDER)}")
    v = generate(VectorSpec("normal", n, 0, storage))
    t = torch.from_numpy(v.values.astype(np.float32)).to(FORMATS[storage].torch_dtype)
    return WiderStudy(storage, tuple(wider_accumulation(t, FORMATS[WIDER[storage]].torch_dtype)))


# --------------------------------------------------------------------- determinism


def determinism_study(spec: VectorSpec = DEFAULT_VECTOR) -> DeterminismResult:
    return determinism(torch.from_numpy(generate(spec).values.copy()))


# ------------------------------------------------------------ order-independent sum


@dataclass(frozen=True)
class ReproducibleStudy:
    ordinary: tuple[tuple[str, str], ...]  # (order, its float32 sum, shortest decimal)
    shuffles: int
    shuffled_bits: tuple[int, ...]  # distinct float32 bit patterns of the order-independent sum over the shuffles
    devices: tuple[tuple[str, int], ...]  # (where, bits) of the order-independent sum

    @property
    def distinct_ordinary(self) -> int:
        return len({value for _, value in self.ordinary})

    @property
    def value(self) -> str:
        """The order-independent sum (the first shuffle's), shortest decimal."""
        fmt = FORMATS["float32"]
        return shortest_repr(value_of_bits(self.shuffled_bits[0], fmt), fmt)


def reproducible_study(spec: VectorSpec = DEFAULT_VECTOR, shuffles: int = 5, seed: int = 7) -> ReproducibleStudy:
    """The lab's ordinary orders against the order-independent sum, over ``shuffles`` orders of the
    values (the first unshuffled; the others from a seeded generator) and on every device."""
    fmt = FORMATS["float32"]
    v = generate(spec).values
    ordinary = tuple((ORDERS[key].name, shortest_repr(exact_value(run_order(key, v, "float32").value, fmt), fmt))
                     for key in LAB_ORDERS)
    rng = np.random.default_rng(seed)
    bits: list[int] = []
    for i in range(shuffles):
        perm = v if i == 0 else v[rng.permutation(v.size)]
        b = bits_of(reproducible_sum(torch.from_numpy(np.array(perm))))
        if b not in bits:
            bits.append(b)
    return ReproducibleStudy(ordinary, shuffles, tuple(bits),
                             tuple(reproducible_sum_devices(torch.from_numpy(v.copy()))))
