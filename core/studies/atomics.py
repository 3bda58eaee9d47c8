"""Scatter-add by atomic additions, the GPU arithmetic page's last section: one result per bucket.

``simulate_atomics`` adds each bucket's values one at a time, each addition rounded, in random arrival
orders (the model of atomics on a GPU), and sets the runs against the index order (one thread), torch's
index_add_ on this CPU and, where there is one, on a GPU (live, repeated), and the order-independent sum
(core.kernels.reprosum).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from core.arith.exact import as_numpy, exact_sum_fraction
from core.arith.formats import ARITHMETIC, FORMATS, Exact, FloatFormat, bit_view, bits_of, to_torch, value_of_bits
from core.arith.ulps import error_in_ulps
from core.arith.vectors import VectorError, round_array
from core.kernels.dot import DotValue
from core.kernels.reprosum import reproducible_sum
from core.studies.gpu_arithmetic import gpu_device, value_of

MAX_ATOMIC_WORK = 20_000_000  # values x simulated runs
ATOMIC_FORMATS = tuple(ARITHMETIC)  # atomics add in the stored format: one that has an addition


@dataclass(frozen=True, kw_only=True)
class AtomicsSpec:
    buckets: int = 4
    values: int = 4096
    runs: int = 500
    seed: int = 0
    storage: str = "float32"

    def validate(self) -> None:
        if not 1 <= self.buckets <= 64:
            raise VectorError(f"Buckets must be between 1 and 64 (got {self.buckets!r}).")
        if not 1 <= self.values <= 1_000_000:
            raise VectorError(f"Values must be between 1 and 1,000,000 (got {self.values!r}).")
        if not 1 <= self.runs <= 10_000:
            raise VectorError(f"Runs must be between 1 and 10,000 (got {self.runs!r}).")
        if self.values * self.runs > MAX_ATOMIC_WORK:
            raise VectorError(f"{self.values:,} values × {self.runs:,} runs is more than this page simulates "
                              f"({MAX_ATOMIC_WORK:,} additions); choose fewer runs or values.")
        if self.storage not in ATOMIC_FORMATS:
            raise VectorError(f"Unknown format {self.storage!r}; choose one of {', '.join(ATOMIC_FORMATS)}.")


@dataclass(frozen=True, kw_only=True)
class BucketResult:
    bucket: int
    count: int  # values that land in it
    exact: Exact
    fmt: FloatFormat
    runs: np.ndarray  # the simulated runs' results (storage dtype)
    distinct: int  # different bit patterns among them
    fixed: DotValue  # index order, one thread adding them in turn
    reproducible: DotValue  # core.kernels.reprosum.reproducible_sum: the same bits for every order
    cpu_index_add: DotValue  # torch's index_add_ on this CPU (live)
    gpu_distinct: int | None  # different results over the GPU repeats (live), None without a GPU
    gpu_values: np.ndarray | None

    def ulps(self, v: Exact) -> float:
        """A result's error in ULPs of the bucket's exact sum in its format."""
        return error_in_ulps(v, self.exact, self.fmt)

    def _finite_ulps(self, values: np.ndarray) -> list[float]:
        return [self.ulps(Fraction(float(v))) for v in values if math.isfinite(float(v))]

    @property
    def run_ulps(self) -> list[float]:
        """Each simulated run's error in ULPs (runs that overflowed left out)."""
        return self._finite_ulps(self.runs)

    @property
    def gpu_ulps(self) -> list[float] | None:
        """Each GPU repeat's error in ULPs (live; None without a GPU)."""
        return None if self.gpu_values is None else self._finite_ulps(self.gpu_values)


@dataclass(frozen=True)
class AtomicsResult:
    spec: AtomicsSpec
    buckets: tuple[BucketResult, ...]
    gpu: str | None


def atomic_inputs(spec: AtomicsSpec) -> tuple[np.ndarray, np.ndarray]:
    """N(0, 1) values rounded to the format, and a bucket index for each (seeded)."""
    rng = np.random.default_rng([spec.seed, 17])
    values = round_array(rng.standard_normal(spec.values), spec.storage)
    index = rng.integers(0, spec.buckets, spec.values)
    return values, index


def _np_value(v: np.generic, fmt: FloatFormat) -> DotValue:
    bits = bits_of(v)
    return DotValue(value_of_bits(bits, fmt), fmt, bits)


def simulate_atomics(spec: AtomicsSpec) -> AtomicsResult:
    """Scatter-add (``out[index[i]] += values[i]``) as atomic adds on a GPU do it: each bucket's
    values are added one at a time, each addition rounded, in the order the threads arrive.

    Model of the arrival order: a uniformly random permutation per run (seeded). Every addition
    is one IEEE round-to-nearest addition in the format (np.add.accumulate: a left-to-right
    loop). Against it: the index order (one thread), torch's index_add_ on this CPU (live), the
    app's order-independent sum, and, on a machine with a GPU, index_add_ there (live, repeated).
    """
    spec.validate()
    fmt = FORMATS[spec.storage]
    values, index = atomic_inputs(spec)
    rng = np.random.default_rng([spec.seed, 29])
    cpu = torch.zeros(spec.buckets, dtype=fmt.torch_dtype).index_add_(0, torch.from_numpy(index),
                                                                     to_torch(values, copy=True))
    device = gpu_device()
    gpu_runs = None
    if device is not None:
        gv, gi = to_torch(values, copy=True).to(device), torch.from_numpy(index).to(device)
        gpu_runs = torch.stack([torch.zeros(spec.buckets, dtype=fmt.torch_dtype, device=device).index_add_(0, gi, gv)
                                for _ in range(spec.runs)]).cpu()
    out = []
    for bucket in range(spec.buckets):
        w = values[index == bucket]
        if w.size == 0:
            w = np.zeros(1, dtype=values.dtype)  # an empty bucket stays +0
        with np.errstate(over="ignore", invalid="ignore"):
            fixed = np.add.accumulate(w)[-1]
            runs = np.add.accumulate(rng.permuted(np.tile(w, (spec.runs, 1)), axis=1), axis=1)[:, -1]
        gpu_values = gpu_distinct = None
        if gpu_runs is not None:
            g = as_numpy(gpu_runs[:, bucket])
            gpu_values, gpu_distinct = g, int(np.unique(bit_view(g)).size)
        out.append(
            BucketResult(
                bucket=bucket,
                count=int((index == bucket).sum()),
                exact=exact_sum_fraction(w),
                fmt=fmt,
                runs=runs,
                distinct=int(np.unique(bit_view(runs)).size),
                fixed=_np_value(fixed, fmt),
                reproducible=value_of(reproducible_sum(to_torch(w, copy=True))),
                cpu_index_add=value_of(cpu[bucket]),
                gpu_distinct=gpu_distinct,
                gpu_values=gpu_values,
            )
        )
    return AtomicsResult(spec, tuple(out), None if device is None else torch.cuda.get_device_name(device))
