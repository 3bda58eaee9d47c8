"""The GPU arithmetic page's study: one dot product through every model and torch on this machine.

The models themselves (FMA or not, TF32 and half-precision inputs, tiles, split-K), their exact
engine and their a-priori bounds are core.kernels.dot. This module puts them to work on the page's
inputs: the two vectors a ``DotSpec`` describes (``make_pair``); the real torch.dot and torch.mm
on this CPU, and on a GPU when one is present (``torch_results``, ``torch_gpu_results``: live);
each result against the exact dot product in ULPs and against its bound (``run_lab``, one
``DotRow`` each: its origin, live, model or exact, and its ``core.arith.metrics.ErrorReport``); the
error as K grows (``error_curves``); whether torch.mm's bits depend on the number of rows
(``batch_dependence``). Scatter-add by atomic additions, the page's last section, is
core.studies.atomics'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from core.arith.exact import exact_dot_fraction, exact_sum_fraction
from core.arith.formats import (
    FORMATS,
    Exact,
    FloatFormat,
    bits_of,
    bits_of_value,
    format_of,
    round_to_format,
    to_torch,
    value_of_bits,
    working_format,
)
from core.arith.metrics import ErrorReport, kappa, measure
from core.arith.ulps import error_in_ulps
from core.arith.vectors import (
    VectorSpec,
    check_choice,
    check_condition,
    check_count,
    check_seed,
    generate,
    ill_conditioned_dot,
    round_array,
)
from core.kernels.dot import (
    DOT_MODELS,
    MAX_K,
    TENSOR_CORE_INPUTS,
    DotModel,
    DotValue,
    ModelNotApplicable,
    accumulation_of,
    check_formats,
    conversion_error,
    dot_bound,
    model_inputs,
    model_name,
    rounding_counts,
    run_model,
)
from core.kernels.dot_fp8 import promoted_bound
from core.kernels.orders import ORIGIN_EXACT, ORIGIN_LIVE, ORIGIN_MODEL
from core.machines.globalstate import cuda_tf32, current_settings

# --------------------------------------------------------------------------- the vectors

DOT_GENERATORS: dict[str, str] = {
    "normal": "Normal: x_i, y_i ~ N(0, 1)",
    "uniform": "Uniform on [0, 1): every product positive",
    "lognormal": "Lognormal: wide exponent spread",
    "ill_conditioned_dot": "Ill-conditioned dot product with a chosen condition number (GenDot, after Ogita, "
                           "Rump and Oishi)",
}


@dataclass(frozen=True, kw_only=True)
class DotSpec:
    kind: str = "normal"
    k: int = 4096
    seed: int = 0
    storage: str = "float32"
    condition: float = 1e8

    def validate(self) -> None:
        check_choice(self.kind, DOT_GENERATORS, "generator")
        check_choice(self.storage, FORMATS, "input format")
        check_count(self.k, MAX_K, "K")
        check_seed(self.seed)
        if self.kind == "ill_conditioned_dot":
            check_condition(self.condition)


@dataclass(frozen=True, kw_only=True)
class DotPair:
    x: np.ndarray
    y: np.ndarray
    storage: str
    source: str
    notes: tuple[str, ...] = ()

    @property
    def k(self) -> int:
        return int(self.x.size)


def make_pair(spec: DotSpec) -> DotPair:
    """The two vectors a spec describes (deterministic in the spec)."""
    spec.validate()
    notes: tuple[str, ...] = ()
    if spec.kind == "ill_conditioned_dot":
        x, y, notes = ill_conditioned_dot(spec.k, spec.condition, spec.seed, spec.storage)
        source = f"{DOT_GENERATORS[spec.kind]}; K = {spec.k:,}, seed {spec.seed}, target condition " \
                 f"{spec.condition:.3g}, {spec.storage}"
    elif not FORMATS[spec.storage].arithmetic:  # FP8: scaled per tensor, as FP8 training recipes do
        both = generate(VectorSpec(kind=spec.kind, n=2 * spec.k, seed=spec.seed, storage="float64"))
        (x, ex), (y, ey) = (_scaled(v, FORMATS[spec.storage]) for v in (both.values[: spec.k], both.values[spec.k :]))
        notes = both.notes
        source = (f"{DOT_GENERATORS[spec.kind]}; K = {spec.k:,}, seed {spec.seed}, float64 times 2^{ex} (x) and "
                  f"2^{ey} (y), rounded to {spec.storage}: per-tensor scales, powers of two so that the largest "
                  f"value is at most {float(FORMATS[spec.storage].max_finite):g}")
    else:
        both = generate(VectorSpec(kind=spec.kind, n=2 * spec.k, seed=spec.seed, storage=spec.storage))
        x, y, notes = both.values[: spec.k], both.values[spec.k :], both.notes
        source = f"{DOT_GENERATORS[spec.kind]}; K = {spec.k:,}, seed {spec.seed}, float64 rounded to {spec.storage}"
    for v in (x, y):
        v.setflags(write=False)
    return DotPair(x=x, y=y, storage=spec.storage, source=source, notes=tuple(notes))


def _scaled(v: np.ndarray, fmt: FloatFormat) -> tuple[np.ndarray, int]:
    """v times 2^e rounded to fmt, and e: the largest e that keeps max |v| 2^e within fmt's largest value. A
    power of two scales exactly: only the rounding to fmt changes the values."""
    amax = float(np.max(np.abs(v))) if v.size else 0.0
    e = math.floor(math.log2(float(fmt.max_finite) / amax)) if amax > 0 and math.isfinite(amax) else 0
    return round_array(np.ldexp(v, e), fmt.name), e


def condition_number(x: np.ndarray, y: np.ndarray) -> float:
    """kappa = sum|x_i y_i| / |sum x_i y_i| from exact dot products (inf when the dot product is 0)."""
    return kappa(exact_dot_fraction(x, y), exact_dot_fraction(np.abs(x), np.abs(y)))


# --------------------------------------------------------------------------- torch, live

def _tensor(a: np.ndarray) -> torch.Tensor:
    return to_torch(a, copy=True)


def value_of(t: torch.Tensor) -> DotValue:
    """A torch result as a DotValue: its exact value, format and bits."""
    fmt, bits = format_of(t.dtype), bits_of(t)
    return DotValue(value_of_bits(bits, fmt), fmt, bits)


def _companions(pair: DotPair, rows: int) -> np.ndarray:
    """The other rows of the left matrix (seeded normals rounded to the input format)."""
    rng = np.random.default_rng([pair.k, rows, 2024])
    return round_array(rng.standard_normal((rows - 1) * pair.k), pair.storage).reshape(rows - 1, pair.k)


@dataclass(frozen=True, kw_only=True)
class LiveResult:
    key: str
    name: str
    result: DotValue
    provenance: str


def torch_results(pair: DotPair, device: str = "cpu", rows: int = 64) -> list[LiveResult]:
    """torch.dot(x, y), and torch.mm with x as the only row (M = 1) and as the first of 64 rows
    (M = 64) times y as a column: the same dot product, by whatever kernel torch picks for the shape."""
    tx, ty = _tensor(pair.x).to(device), _tensor(pair.y).to(device)
    big = torch.cat([tx[None], _tensor(_companions(pair, rows).reshape(-1)).reshape(rows - 1, pair.k).to(device)])
    where = (f"live: torch {torch.__version__} on this CPU, {current_settings()[0]} threads" if device == "cpu"
             else f"live: torch {torch.__version__} on {torch.cuda.get_device_name(device)}")
    if not format_of(tx.dtype).arithmetic:  # FP8: torch has no dot, only the scaled matrix product
        try:
            return _scaled_mm_results(tx, ty, big, rows, where)
        except RuntimeError:  # a format torch stores but has no product for on this device: no live rows
            return []
    return [
        LiveResult(key="torch_dot", name="torch.dot(x, y)", result=value_of(torch.dot(tx, ty)), provenance=where),
        LiveResult(
            key="torch_mm1",
            name="torch.mm, M = 1 row",
            result=value_of(torch.mm(tx[None], ty[:, None])[0, 0]),
            provenance=f"{where}; (1 × K) @ (K × 1)",
        ),
        LiveResult(
            key="torch_mm64",
            name=f"torch.mm, M = {rows} rows",
            result=value_of(torch.mm(big, ty[:, None])[0, 0]),
            provenance=f"{where}; ({rows} × K) @ (K × 1), row 0 (rows 1–{rows - 1}: seeded normals)",
        ),
    ]


def _scaled_mm(rows: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """rows @ y (a column) through torch._scaled_mm, scales 1, float32 out."""
    one = torch.tensor(1.0, device=rows.device)
    column = y[:, None].t().contiguous().t()  # the second operand column-major, as the kernel requires
    return torch._scaled_mm(rows, column, scale_a=one, scale_b=one, out_dtype=torch.float32)


def _scaled_mm_results(tx: torch.Tensor, ty: torch.Tensor, big: torch.Tensor, rows: int, where: str
                       ) -> list[LiveResult]:
    """FP8 inputs through torch._scaled_mm, the FP8 matrix product FP8 training uses, with scales of 1 and a
    float32 result (torch's private API: the one FP8 product it has)."""
    return [
        LiveResult(key="torch_mm1", name="torch._scaled_mm, M = 1 row",
                   result=value_of(_scaled_mm(tx[None], ty)[0, 0]),
                   provenance=f"{where}; (1 × K) @ (K × 1), scales 1, float32 out"),
        LiveResult(key="torch_mm64", name=f"torch._scaled_mm, M = {rows} rows",
                   result=value_of(_scaled_mm(big, ty)[0, 0]),
                   provenance=f"{where}; ({rows} × K) @ (K × 1), row 0 (rows 1–{rows - 1}: seeded normals), "
                              "scales 1, float32 out"),
    ]


def gpu_device() -> str | None:
    """The first CUDA device, or None on a machine without one."""
    return "cuda:0" if torch.cuda.is_available() else None


def torch_gpu_results(pair: DotPair) -> list[LiveResult]:
    """The same products on the GPU, float32 with TF32 off and on (live; [] without a GPU)."""
    device = gpu_device()
    if device is None:
        return []
    out = []
    settings = (False, True) if pair.storage == "float32" else (False,)
    for tf32 in settings:
        with cuda_tf32(tf32):
            for r in torch_results(pair, device):
                suffix = f", TF32 {'on' if tf32 else 'off'}" if pair.storage == "float32" else ""
                out.append(
                    LiveResult(
                        key=f"gpu_{r.key}_{'tf32' if tf32 else 'ieee'}",
                        name=r.name + suffix,
                        result=r.result,
                        provenance=r.provenance + suffix,
                    )
                )
    return out


# --------------------------------------------------------------------------- the lab


@dataclass(frozen=True, kw_only=True)
class DotRow:
    key: str
    name: str
    origin: str
    metrics: ErrorReport | None  # the result against the exact dot product; None: the model does not apply
    provenance: str
    note: str = ""  # why the model does not apply


@dataclass(frozen=True, kw_only=True)
class DotLab:
    pair: DotPair
    accumulate: str
    tile: int
    slices: int
    tf32_mode: str
    exact: Exact
    sum_abs: Fraction | float
    kappa: float
    rows: tuple[DotRow, ...]


def _row(key: str, name: str, origin: str, result: DotValue, exact: Exact, bound: Fraction | None,
         provenance: str) -> DotRow:
    report = measure(result.value, result.fmt, exact, bound, result.bits)
    return DotRow(key=key, name=name, origin=origin, metrics=report, provenance=provenance)


def model_bound(model: DotModel, pair: DotPair, accumulate: str, tile: int, slices: int, tf32_mode: str,
                sum_abs: Fraction) -> Fraction | None:
    fmt = accumulation_of(model, accumulate)
    depth, roundings = rounding_counts(model, pair.k, tile, slices)
    if model.structure == "promoted":
        return promoted_bound(pair.k, sum_abs, model.limited_bits, model.promote_every)
    if model.inputs == "stored":
        return dot_bound(depth, roundings, sum_abs, fmt)
    a, b = model_inputs(model, pair.x, pair.y, tf32_mode)
    converted = exact_dot_fraction(np.abs(a), np.abs(b))
    if isinstance(converted, float):  # an input overflowed its new format
        return None
    d = conversion_error(sum_abs, exact_sum_fraction(np.abs(pair.x)), exact_sum_fraction(np.abs(pair.y)), pair.k,
                         TENSOR_CORE_INPUTS[model.inputs], truncating=(model.inputs == "tf32" and tf32_mode == "rz"))
    return dot_bound(depth, roundings, converted, fmt, d)


def live_bound(pair: DotPair, sum_abs: Fraction) -> Fraction | None:
    """For torch's kernels, whose order is not derived here: a bound for every order, with every
    product and every partial sum possibly rounded twice (through a wider format first)."""
    fmt = FORMATS[working_format(pair.storage, "same")]  # FP8 products come out in float32
    return dot_bound(2 * pair.k, 4 * pair.k, sum_abs, fmt)


def run_lab(pair: DotPair, accumulate: str, models: tuple[str, ...], tile: int = 8, slices: int = 4,
            tf32_mode: str = "rna", live: bool = True) -> DotLab:
    """Every chosen model, the real torch results on this CPU (and a GPU when present), and the
    correctly rounded result, each against the exact dot product."""
    if (why := check_formats(pair.storage, accumulate)) is not None:
        raise ModelNotApplicable(why)
    exact = exact_dot_fraction(pair.x, pair.y)
    sum_abs = exact_dot_fraction(np.abs(pair.x), np.abs(pair.y))
    kappa = condition_number(pair.x, pair.y)
    rows = []
    for key in models:
        model = DOT_MODELS[key]
        if model.inputs == "fp8" and FORMATS[pair.storage].arithmetic:
            continue  # the FP8 tensor-core models are shown for FP8 inputs only
        name = model_name(model, tile, slices, tf32_mode)
        fmt = accumulation_of(model, accumulate)
        prov = f"model, computed exactly here; accumulates in {fmt.name}"
        try:
            result, _ = run_model(model, pair.x, pair.y, accumulate, tile, slices, tf32_mode)
        except ModelNotApplicable as err:
            rows.append(DotRow(key=key, name=name, origin=ORIGIN_MODEL, metrics=None, provenance=prov, note=str(err)))
            continue
        bound = None if isinstance(sum_abs, float) else model_bound(model, pair, accumulate, tile, slices,
                                                                    tf32_mode, sum_abs)
        rows.append(_row(key, name, ORIGIN_MODEL, result, exact, bound, prov))
    if live:
        lb = None if isinstance(sum_abs, float) else live_bound(pair, sum_abs)
        for r in torch_results(pair) + torch_gpu_results(pair):
            rows.append(_row(r.key, r.name, ORIGIN_LIVE, r.result, exact, lb, r.provenance))
    acc = FORMATS[accumulate]
    rounded = round_to_format(exact, acc)
    once = None if isinstance(exact, float) else acc.unit_roundoff * abs(exact)  # one rounding
    rows.append(_row("correct", f"Exact, rounded once to {accumulate}", ORIGIN_EXACT,
                     DotValue(rounded, acc, bits_of_value(rounded, acc)), exact, once,
                     "exact rational dot product, rounded once"))
    return DotLab(
        pair=pair,
        accumulate=accumulate,
        tile=tile,
        slices=slices,
        tf32_mode=tf32_mode,
        exact=exact,
        sum_abs=sum_abs,
        kappa=kappa,
        rows=tuple(rows),
    )


@dataclass(frozen=True, kw_only=True)
class DotLabSettings:
    """What the GPU arithmetic page asks for: the vectors, the accumulation format, the models and
    their parameters (tile width, split-K slices, TF32 conversion)."""

    spec: DotSpec = DotSpec()
    accumulate: str = "float32"
    models: tuple[str, ...] = ("separate", "fma", "tf32", "fp16", "bf16", "tiles", "split_k", "fp8_limited",
                               "fp8_promoted")
    tile: int = 8
    slices: int = 4
    tf32_mode: str = "rna"

    def run(self, pair: DotPair, live: bool = True) -> DotLab:
        return run_lab(pair, self.accumulate, self.models, self.tile, self.slices, self.tf32_mode, live)

    def curves(self, pair: DotPair, live: bool = True) -> list[CurvePoint]:
        return error_curves(pair, self.accumulate, self.models, self.tile, self.slices, self.tf32_mode, live)

    def model_name(self, key: str) -> str:
        return model_name(DOT_MODELS[key], self.tile, self.slices, self.tf32_mode)


def correctly_rounded(lab: DotLab) -> Exact:
    """The exact dot product rounded once to the accumulation format."""
    return round_to_format(lab.exact, FORMATS[lab.accumulate])


def bound_violations(lab: DotLab) -> list[str]:
    """The rows outside their a-priori bound (a bug if there is any)."""
    return [r.name for r in lab.rows if r.metrics is not None and r.metrics.within_bound is False]


def applicable_models(lab: DotLab) -> list[str]:
    """The model rows that gave a result (the ones a picture can be drawn for), in the lab's order."""
    return [r.key for r in lab.rows if r.origin == ORIGIN_MODEL and r.metrics is not None]


@dataclass(frozen=True)
class BatchDependence:
    """torch.mm on this device with x as the only row (M = 1) and as the first of 64 rows (M = 64)."""

    same_bits: bool
    ulps_apart: float  # |difference of their errors| in ULPs of the exact result
    product: str = "torch.mm"  # the call: torch._scaled_mm for FP8 inputs


def batch_dependence(lab: DotLab) -> BatchDependence | None:
    """Whether the M = 1 and M = 64 products gave the same bits; None without both live rows."""
    live = {r.key: r for r in lab.rows if r.origin == ORIGIN_LIVE}
    if "torch_mm1" not in live or "torch_mm64" not in live:
        return None
    one, many = live["torch_mm1"], live["torch_mm64"]
    return BatchDependence(one.metrics.bits == many.metrics.bits, abs(one.metrics.ulps - many.metrics.ulps),
                           one.name.split(",")[0])


# --------------------------------------------------------------------------- error against K


def k_grid(k: int) -> list[int]:
    """1, 2, 4, ... below K, and K itself."""
    out = [1 << i for i in range(max(k, 1).bit_length()) if 1 << i < k]
    return [*out, k]


@dataclass(frozen=True, kw_only=True)
class CurvePoint:
    name: str
    origin: str
    k: int
    ulps: float  # signed error in ULPs of the exact prefix dot product (nan when undefined)


def error_curves(pair: DotPair, accumulate: str, models: tuple[str, ...], tile: int = 8, slices: int = 4,
                 tf32_mode: str = "rna", live: bool = True) -> list[CurvePoint]:
    """Each model's error on the first k terms, for k = 1, 2, 4, ..., K. Sequential models give
    every prefix in one pass; tiled and split-K models are run once per k."""
    ks = k_grid(pair.k)
    exacts, running, prev = {}, Fraction(0), 0
    for k in ks:
        part = exact_dot_fraction(pair.x[prev:k], pair.y[prev:k])
        running = part if isinstance(part, float) or isinstance(running, float) else running + part
        exacts[k], prev = running, k
    out = []
    for key in models:
        model = DOT_MODELS[key]
        name = model_name(model, tile, slices, tf32_mode)
        try:
            if model.structure == "sequential":
                last, seen = run_model(model, pair.x, pair.y, accumulate, tile, slices, tf32_mode, tuple(ks))
                values = {k: seen.get(k, last) for k in ks}
            else:
                values = {k: run_model(model, pair.x[:k], pair.y[:k], accumulate, tile, slices, tf32_mode)[0]
                          for k in ks}
        except ModelNotApplicable:
            continue
        out += [
            CurvePoint(name=name, origin=ORIGIN_MODEL, k=k, ulps=error_in_ulps(v.value, exacts[k], v.fmt))
            for k, v in values.items()
        ]
    if live:
        for k in ks:
            try:
                name, v = _live_dot(_tensor(pair.x[:k]), _tensor(pair.y[:k]))
            except RuntimeError:  # no product torch runs for this format here
                break
            out.append(CurvePoint(name=name, origin=ORIGIN_LIVE, k=k, ulps=error_in_ulps(v.value, exacts[k], v.fmt)))
    return out


def _live_dot(tx: torch.Tensor, ty: torch.Tensor) -> tuple[str, DotValue]:
    """torch's own dot product of two vectors: torch.dot, or for FP8 (which has none) torch._scaled_mm."""
    if format_of(tx.dtype).arithmetic:
        return "torch.dot(x, y)", value_of(torch.dot(tx, ty))
    return "torch._scaled_mm, M = 1 row", value_of(_scaled_mm(tx[None], ty)[0, 0])
