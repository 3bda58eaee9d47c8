"""Not every difference comes from the order of a sum: exp, log, tanh and sigmoid are not correctly
rounded, and two libraries round them differently.

Live on this server: torch's CPU kernels and NumPy's, in float32 and float64, on a fixed grid of inputs
(hard cases: near overflow and underflow, tiny arguments, saturation, results near a half-way point),
each result against the correctly rounded one (core.arith.elementary). Beside them: the op fingerprint's
elementwise hashes recorded on other CPUs, and the causes that are neither a sum's order nor a library
function, with their sources.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from core.arith.elementary import FUNCTIONS, reference
from core.arith.formats import FORMATS, FloatFormat, format_of
from core.arith.ulps import ulp_array, ulp_distance_array
from core.crowd.bytecache import RESULTS
from core.machines.devices import machine_facts
from core.recordings.store import Recording, cached_recordings

STUDY_FORMATS: tuple[str, ...] = ("float32", "float64")
SEED = 20260
RANDOM = {"float32": 192, "float64": 64}  # random arguments per function (the hard cases come on top)
BOUNDARY_CANDIDATES = 1 << 14  # float32 arguments searched for results near a half-way point
BOUNDARY_KEEP = 24
STEPS = 6  # representable neighbours taken either side of a threshold

# CUDA's documented maximum errors (ULPs from the correctly rounded result), from the CUDA C++ Programming
# Guide, appendix "Mathematical Functions" (tables of single- and double-precision standard functions),
# whose bounds come from extensive but not exhaustive tests (the same figures are transcribed in intel/llvm's
# sycl/doc/cuda/cuda-vs-opencl-math-builtin-precisions.md). sigmoid is no CUDA function: torch composes it.
CUDA_MATH_SOURCE = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#mathematical-functions-appendix"
CUDA_MATH_API = "https://docs.nvidia.com/cuda/cuda-math-api/"
CUDA_DOCUMENTED: dict[tuple[str, str], int] = {
    ("exp", "float32"): 2, ("log", "float32"): 1, ("tanh", "float32"): 2,
    ("exp", "float64"): 1, ("log", "float64"): 1, ("tanh", "float64"): 1,
}
RECORDED_OPS: tuple[str, ...] = ("exp 100000", "tanh 100000", "log_softmax 128x3")


@dataclass(frozen=True, kw_only=True)
class Implementation:
    key: str
    label: str
    run: object  # (function name, NumPy array) -> NumPy array of the same dtype


def _torch(name: str, x: np.ndarray) -> np.ndarray:
    fn = {"exp": torch.exp, "log": torch.log, "tanh": torch.tanh, "sigmoid": torch.sigmoid}[name]
    return fn(torch.from_numpy(x)).numpy()


def _numpy(name: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        if name == "sigmoid":  # NumPy has no sigmoid: the formula people write, in the input's format
            one = x.dtype.type(1)
            return one / (one + np.exp(-x))
        return {"exp": np.exp, "log": np.log, "tanh": np.tanh}[name](x)


IMPLEMENTATIONS: tuple[Implementation, ...] = (
    Implementation(key="torch", label=f"torch {torch.__version__} CPU", run=_torch),
    Implementation(key="numpy", label=f"NumPy {np.__version__}", run=_numpy),
)


# ------------------------------------------------------------------------------------ inputs


def _around(center: float, dtype, steps: int = STEPS) -> list[float]:
    """``center`` rounded to ``dtype`` and its ``steps`` representable neighbours either side."""
    c = dtype.type(center)
    out, up, down = [c], c, c
    for _ in range(steps):  # the largest finite value's neighbour above is inf, dropped by inputs()
        with np.errstate(over="ignore"):
            up, down = np.nextafter(up, dtype.type(np.inf)), np.nextafter(down, dtype.type(-np.inf))
        out += [up, down]
    return [float(v) for v in out]


def _thresholds(name: str, fmt: FloatFormat) -> list[float]:
    """Arguments where the result leaves the normal range or saturates."""
    ln2 = math.log(2.0)
    overflow = (fmt.emax + 1) * ln2  # e^x above 2^(emax+1) rounds to inf
    normal = fmt.emin * ln2  # e^x below the smallest normal
    vanish = (fmt.emin - fmt.precision) * ln2  # e^x below half the smallest subnormal rounds to 0
    sat = (fmt.precision + 1) * ln2  # 1 - e^-x (sigmoid) rounds to 1 beyond here
    if name == "exp":
        return [overflow, normal, vanish]
    if name == "log":
        return [1.0, float(fmt.max_finite), float(fmt.min_normal), float(fmt.min_subnormal) * 4, math.e]
    if name == "tanh":
        return [sat / 2, 0.55, 1.0]  # 1 - 2e^-2x rounds to 1 beyond sat / 2
    return [sat, normal, vanish, -sat]


def _tiny(fmt: FloatFormat) -> list[float]:
    """±2^-k from just below 1 down to the smallest subnormal (float32) or to 2^-600 (float64)."""
    lowest = 149 if fmt.precision == 24 else 600
    ks = sorted({1, 8, fmt.precision // 2, fmt.precision - 1, fmt.precision, fmt.precision + 1, 2 * fmt.precision,
                 lowest // 2, lowest})
    return [s * 2.0**-k for k in ks for s in (1.0, -1.0)]


def _random(name: str, fmt: FloatFormat, rng: np.random.Generator) -> np.ndarray:
    n = RANDOM[fmt.name]
    big = float(np.log(float(fmt.max_finite)))
    if name == "log":  # log-uniform over the whole positive range, and a few in [0, 4)
        e = rng.uniform(fmt.emin - fmt.precision + 1, fmt.emax + 1, n)
        return np.concatenate([np.exp2(e), rng.uniform(0, 4, n // 4)])
    if name == "exp":
        return np.concatenate([rng.uniform(-big * 1.17, big, n), rng.uniform(-1, 1, n // 4)])
    if name == "tanh":
        return np.concatenate([rng.uniform(-10, 10, n), rng.uniform(-1, 1, n // 4)])
    return np.concatenate([rng.uniform(-big * 1.17, 40, n), rng.uniform(-4, 4, n // 4)])


def _near_halfway(name: str, rng: np.random.Generator) -> np.ndarray:
    """float32 arguments whose results lie closest to a half-way point between two float32 values, found
    with float64 (accurate enough to rank them; the reference then decides each exactly)."""
    x = _random(name, FORMATS["float32"], rng).astype(np.float32)
    x = np.resize(x, BOUNDARY_CANDIDATES) * rng.uniform(0.5, 1.0, BOUNDARY_CANDIDATES).astype(np.float32)
    if name == "log":
        x = np.abs(x)
    wide = _numpy(name, x.astype(np.float64))
    ok = np.isfinite(wide) & (np.abs(wide) >= float(FORMATS["float32"].min_normal)) & (np.abs(wide) < 3e38)
    x, wide = x[ok], wide[ok]
    pos = np.abs(wide) / ulp_array(wide, FORMATS["float32"])
    gap = np.abs(pos - np.floor(pos) - 0.5)
    return x[np.argsort(gap, kind="stable")[:BOUNDARY_KEEP]]


def inputs(name: str, fmt: FloatFormat) -> np.ndarray:
    """The study's arguments for one function in one format: thresholds and their neighbours, tiny
    arguments, random ones (seeded), and for float32 results near a half-way point; each once."""
    dtype = fmt.numpy_dtype
    rng = np.random.default_rng([SEED, FUNCTIONS.index(name), fmt.precision])
    hard = [v for c in _thresholds(name, fmt) for v in _around(c, dtype)] + _tiny(fmt)
    parts = [np.array(hard), _random(name, fmt, rng)]
    if fmt.name == "float32":
        parts.append(_near_halfway(name, rng))
    x = np.concatenate(parts).astype(dtype)
    if name == "log":
        x = np.abs(x)
    x = x[np.isfinite(x) & ((x != 0) | (name != "log"))]
    return np.unique(x)


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True, kw_only=True)
class FunctionRow:
    """One function in one format by one implementation, against the correctly rounded results."""

    function: str
    fmt: str
    implementation: str
    label: str
    inputs: int
    not_correctly_rounded: int
    max_ulps: int  # largest distance from the correctly rounded result, in ULPs (CUDA's measure), where
    # that result is a normal number, zero or infinite
    worst_input: float | None  # an argument where max_ulps is reached (None when every such result is correct)
    subnormal_inputs: int  # arguments whose correctly rounded result is subnormal, where one ULP is the
    subnormal_wrong: int  # smallest subnormal: how many, and how many of them this implementation missed
    zero_instead: int  # results 0 where the correctly rounded result is not
    cuda_documented: int | None  # CUDA's documented maximum, same measure (None: no such CUDA function)

    @property
    def share_wrong(self) -> float:
        return self.not_correctly_rounded / self.inputs if self.inputs else 0.0


@dataclass(frozen=True, kw_only=True)
class Disagreement:
    """Where torch and NumPy give other bits for the same argument."""

    function: str
    fmt: str
    inputs: int
    differing: int
    max_apart: int  # ULPs between the two results, at most


@dataclass(frozen=True, kw_only=True)
class RecordedOp:
    """One elementwise op of the fingerprint on the recorded machines: which give which bits."""

    op: str
    groups: tuple[tuple[str, ...], ...]  # machines with the same bits, one tuple per distinct result

    @property
    def differs(self) -> bool:
        return len(self.groups) > 1


@dataclass(frozen=True, kw_only=True)
class OtherCauses:
    rows: tuple[FunctionRow, ...]
    disagreements: tuple[Disagreement, ...]
    recorded: tuple[RecordedOp, ...]
    provenance: str  # where the live rows ran
    seconds: float

    def row(self, function: str, fmt: str, implementation: str) -> FunctionRow:
        return next(r for r in self.rows if (r.function, r.fmt, r.implementation) == (function, fmt, implementation))

    @property
    def total_differing(self) -> int:
        return sum(d.differing for d in self.disagreements)

    @property
    def total_compared(self) -> int:
        return sum(d.inputs for d in self.disagreements)


def ulps_from(got: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """ULPs between each result and the correctly rounded one (0 where both are nan), as float64."""
    same = (got == correct) | (np.isnan(got) & np.isnan(correct))
    dist = ulp_distance_array(np.where(same | np.isnan(got), correct, got), correct).astype(np.float64)
    return np.where(same, 0.0, np.where(np.isnan(got) | np.isnan(correct), np.inf, dist))


def _measure(name: str, fmt: FloatFormat, x: np.ndarray, impl: Implementation,
             correct: np.ndarray) -> tuple[FunctionRow, np.ndarray]:
    got = np.asarray(impl.run(name, x))
    if format_of(got.dtype) != fmt:
        raise TypeError(f"{impl.label} {name} returned {got.dtype} for {fmt.name} arguments")
    dist = ulps_from(got, correct)
    subnormal = (correct != 0) & (np.abs(correct) < float(fmt.min_normal))
    normal_dist = np.where(subnormal, 0.0, dist)
    worst = int(np.argmax(normal_dist)) if normal_dist.max(initial=0) > 0 else None
    row = FunctionRow(function=name, fmt=fmt.name, implementation=impl.key, label=impl.label, inputs=len(x),
                      not_correctly_rounded=int((dist > 0).sum()), max_ulps=int(normal_dist.max(initial=0)),
                      worst_input=None if worst is None else float(x[worst]),
                      subnormal_inputs=int(subnormal.sum()), subnormal_wrong=int((subnormal & (dist > 0)).sum()),
                      zero_instead=int(((got == 0) & (correct != 0)).sum()),
                      cuda_documented=CUDA_DOCUMENTED.get((name, fmt.name)))
    return row, got


def _recorded(recs: list[Recording]) -> tuple[RecordedOp, ...]:
    out = []
    for op in RECORDED_OPS:
        by_hash: dict[str, list[str]] = {}
        for rec in recs:
            h = rec.op_fingerprint.get(op)
            if h is not None and not rec.is_gpu:
                by_hash.setdefault(h, []).append(rec.device)
        if by_hash:
            out.append(RecordedOp(op=op, groups=tuple(tuple(v) for v in by_hash.values())))
    return tuple(out)


def other_causes(recs: list[Recording] | None = None) -> OtherCauses:
    """Every function in every study format by every implementation, and the recorded machines' hashes."""
    started = time.perf_counter()
    rows, disagreements = [], []
    for fmt_name in STUDY_FORMATS:
        fmt = FORMATS[fmt_name]
        for name in FUNCTIONS:
            x = inputs(name, fmt)
            correct = np.array([float(reference(name, float(v), fmt)) for v in x], dtype=fmt.numpy_dtype)
            results = []
            for impl in IMPLEMENTATIONS:
                row, got = _measure(name, fmt, x, impl, correct)
                rows.append(row)
                results.append(got)
            a, b = results
            gaps = ulps_from(a, b)
            finite = gaps[np.isfinite(gaps)]  # inf: one gave nan, the other did not (counted, no distance)
            disagreements.append(Disagreement(function=name, fmt=fmt_name, inputs=len(x),
                                              differing=int((gaps > 0).sum()), max_apart=int(finite.max(initial=0))))
    if recs is None:
        recs = cached_recordings()[0]
    facts = machine_facts()
    provenance = (f"live on this server's CPU ({facts['cpu_model']}, {facts['cpu_capability']}), "
                  f"torch {torch.__version__}, NumPy {np.__version__}, {torch.get_num_threads()} torch threads")
    return OtherCauses(rows=tuple(rows), disagreements=tuple(disagreements), recorded=_recorded(recs),
                       provenance=provenance, seconds=time.perf_counter() - started)


def cached_other_causes() -> OtherCauses:
    """``other_causes()`` once per process while it stays in RESULTS (simultaneous callers wait for one)."""
    return RESULTS.get_or_compute(("elementwise-other-causes",), other_causes)


# ------------------------------------------------------------------------------------ sentences


def headline(result: OtherCauses) -> str:
    """One sentence from the measurements: how often each library missed the correctly rounded result,
    how far at most (normal results), and how often the two disagreed."""
    missed = []
    for impl in IMPLEMENTATIONS:
        mine = [r for r in result.rows if r.implementation == impl.key]
        missed.append(f"{impl.label.split()[0]} on {sum(r.not_correctly_rounded for r in mine):,}")
    worst = max(result.rows, key=lambda r: r.max_ulps)
    total = result.total_compared
    if not any(r.not_correctly_rounded for r in result.rows):
        return (f"Live on this server, torch and NumPy returned the correctly rounded result on all {total:,} "
                "arguments of the grid, hard cases included.")
    how_far = (f"by at most {worst.max_ulps} ULP{'s' if worst.max_ulps != 1 else ''} where the result is a normal "
               "number" if worst.max_ulps else "only where the result is subnormal")
    return (f"Live on this server, exp, log, tanh and sigmoid missed the correctly rounded result on some of the "
            f"grid's {total:,} arguments (hard cases included): {' and '.join(missed)}, {how_far}; the two "
            f"libraries gave other bits for {result.total_differing:,} of them.")


def subnormal_sentence(result: OtherCauses) -> str:
    """What the misses in the subnormal range are (they are left out of the largest distances)."""
    wrong = sum(r.subnormal_wrong for r in result.rows)
    if not wrong:
        return "No result in the subnormal range was missed."
    zeros = [r for r in result.rows if r.zero_instead]
    text = (f"{wrong} of the misses lie in the subnormal range, where one ULP is the smallest subnormal number, so "
            "they are left out of the largest distances")
    if zeros:
        names = list(dict.fromkeys(f"{r.label.split()[0]}'s {r.function}" for r in zeros))
        text += (f"; {sum(r.zero_instead for r in zeros)} of them are 0 where the correctly rounded result is not "
                 f"({_and(names)})")
    return text + "."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def recorded_sentence(result: OtherCauses) -> str:
    """Which recorded ops differ between the recorded CPUs (or that none does)."""
    if not result.recorded:
        return "No recorded CPU carries these operations' hashes."
    machines = {m for r in result.recorded for g in r.groups for m in g}
    differing = [r.op for r in result.recorded if r.differs]
    same = [r.op for r in result.recorded if not r.differs]
    if not differing:
        return f"The {len(machines)} recorded CPU setups gave the same bits for {_and(same)}."
    text = (f"Recorded on {len(machines)} CPU setups, {_and(differing)} did not give the same bits "
            "everywhere")
    return text + (f"; {_and(same)} did." if same else ".")


# ------------------------------------------------------------------------------------ causes as text

OTHER_CAUSES: tuple[tuple[str, str, str], ...] = (
    ("FMA contraction",
     "A compiler may fuse a·b + c into one fused multiply-add, rounded once instead of twice; whether it does "
     "depends on the compiler, its flags and the target, so the same source can give other bits on another build "
     "(nvcc contracts by default: --fmad=true).",
     "https://docs.nvidia.com/cuda/floating-point/index.html"),
    ("cuDNN's TF32 default for convolutions",
     "torch.backends.cudnn.allow_tf32 is True by default, so on Ampere and later GPUs a float32 convolution "
     "may round its inputs to TF32 (10 mantissa bits); float32 matrix products do not by default "
     "(torch.backends.cuda.matmul.allow_tf32 is False since PyTorch 1.12).",
     "https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices"),
    ("Fusion by compilers",
     "torch.compile fuses operations into one kernel, where a bfloat16 or float16 intermediate can stay in "
     "float32 instead of being rounded to its dtype after every operation as in eager mode: the rounding points "
     "move, and so do the last bits.",
     "https://pytorch.org/docs/stable/notes/numerical_accuracy.html"),
)
