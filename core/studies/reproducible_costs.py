"""What each setting of Make my runs reproducible costs, in × PyTorch's default's time, on the hardware the visitor
named: measured live on this server's CPU where the setup is a CPU (``live_costs``, ``batch_invariant_cost``), and
for a GPU setup the published figure against PyTorch's default, or a sentence saying that none is published (a CPU
measurement never stands in for a GPU's)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.crowd.bytecache import RESULTS
from core.kernels.reprosum import reproducible_sum
from core.machines.globalstate import deterministic_algorithms, torch_threads
from core.machines.timing import interleaved_times, median_and_quartiles
from core.studies.peak_rates import float64_peaks
from core.studies.reproducible_rules import CITED, CitedCost

COST_TTL_S = 1800  # live costs are measured again after this long (the cache keeps each for its period)
REPEATS = 15
BUDGET_S = 1.0  # the live timings stop repeating after this long (after at least 5 repeats)

# ------------------------------------------------------------------------------ live costs


@dataclass(frozen=True, kw_only=True)
class LiveCost:
    """One mitigation timed here against its default, in × the default's time."""

    key: str
    label: str
    what: str  # what was timed against what
    ratio: float  # median over the repeats of the per-repeat ratio
    iqr: tuple[float, float]
    repeats: int

    @property
    def text(self) -> str:
        return f"{self.ratio:.2f}×"

    @property
    def within_noise(self) -> bool:
        """1.0× lies between the quartiles: no cost this measurement can tell from none."""
        return self.iqr[0] <= 1.0 <= self.iqr[1]


@dataclass(frozen=True, kw_only=True)
class LiveCosts:
    where: str  # the device and threads, for the caption
    measured_at: float
    rows: dict[str, LiveCost]


def _training_step(x, w, idx, src, dest):
    """A small training step: a matmul forward and backward, and the scatter and index adds that deterministic
    mode replaces where it has to."""
    w.grad = None
    (x @ w).relu().sum().backward()
    dest.zero_()
    dest.index_add_(0, idx, src)
    dest.scatter_add_(0, idx[:, None].expand_as(src), src)


def _measure_live() -> LiveCosts:
    g = torch.Generator().manual_seed(0)
    a32, b32 = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
    a64, b64 = a32.double(), b32.double()
    v = torch.randn(1_000_000, generator=g)
    x, w = torch.randn(64, 256, generator=g), torch.randn(256, 256, generator=g).requires_grad_()
    idx, src = torch.randint(0, 128, (4096,), generator=g), torch.randn(4096, 64, generator=g)
    dest = torch.zeros(128, 64)

    def step_det():
        with deterministic_algorithms(True):
            _training_step(x, w, idx, src, dest)

    fns = {"mm32": lambda: a32 @ b32, "mm64": lambda: a64 @ b64, "sum": lambda: v.sum(),
           "sum64": lambda: v.sum(dtype=torch.float64), "reprosum": lambda: reproducible_sum(v),
           "step": lambda: _training_step(x, w, idx, src, dest), "step_det": step_det}
    with torch_threads(1):  # several threads on a shared machine time the waits for a core, not the work
        times = interleaved_times(fns, REPEATS, inner=3, budget_s=BUDGET_S)

    def row(key, label, what, num, den) -> LiveCost:
        med, iqr = median_and_quartiles([a / b for a, b in zip(times[num], times[den], strict=True)])
        return LiveCost(key=key, label=label, what=what, ratio=med, iqr=iqr, repeats=len(times[num]))

    rows = (row("float64", "float64", "a 256×256 matrix product in float64 against float32", "mm64", "mm32"),
            row("wider", "Wider accumulation", "torch.sum(x, dtype=torch.float64) against torch.sum(x), "
                "10⁶ float32 values", "sum64", "sum"),
            row("reprosum", "Order-independent sum", "core.kernels.reprosum against torch.sum, 10⁶ float32 values",
                "reprosum", "sum"),
            row("deterministic_cpu", "Deterministic mode (CPU)", "a small training step (matmul forward and "
                "backward, index_add_, scatter_add_) with torch.use_deterministic_algorithms(True) against "
                "without", "step_det", "step"))
    return LiveCosts(where=f"this server's CPU, one thread, torch {torch.__version__}", measured_at=time.time(),
                     rows={r.key: r for r in rows})


def _period() -> int:
    return int(time.time() // COST_TTL_S)


def live_costs() -> LiveCosts:
    """The live measurements, made once per ``COST_TTL_S`` for every viewer (the shared bounded results cache;
    simultaneous callers wait for one measurement). The first one compiles the order-independent sum's
    pass (seconds)."""
    return RESULTS.get_or_compute(("reproducible-costs", _period()), _measure_live)


Linear = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def batch_invariant_cost(default: Linear, invariant: Linear) -> LiveCost:
    """A linear layer (1024 × 1024 weight) at batch sizes 1, 8, 24 and 40, with ``invariant`` (the serving
    page's batch-invariant linear, core.serving.kernels) against ``default`` (torch's F.linear), timed here.
    The kernels are passed in: core.studies and core.serving are independent packages."""

    def measure() -> LiveCost:
        g = torch.Generator().manual_seed(0)
        weight = torch.randn(1024, 1024, generator=g)
        batches = [torch.randn(m, 1024, generator=g) for m in (1, 8, 24, 40)]
        with torch_threads(1):
            times = interleaved_times({"default": lambda: [default(b, weight) for b in batches],
                                       "invariant": lambda: [invariant(b, weight) for b in batches]},
                                      REPEATS, inner=3, budget_s=BUDGET_S)
        med, iqr = median_and_quartiles([a / b for a, b in zip(times["invariant"], times["default"], strict=True)])
        return LiveCost(key="batch_invariant", label="Batch-invariant linear (this app's)",
                        what="one linear layer (1024×1024 float32) at batches of 1, 8, 24 and 40 rows, fixed "
                        "32-row tiles against torch's F.linear", ratio=med, iqr=iqr, repeats=len(times["default"]))

    names = tuple(f"{f.__module__}.{f.__qualname__}" for f in (default, invariant))
    return RESULTS.get_or_compute(("reproducible-batch-invariant", names, _period()), measure)


@dataclass(frozen=True, kw_only=True)
class CostLine:
    """A setting's cost as the page shows it: in × the default's time, measured here or cited, or why not."""

    text: str  # "1.02×", "1.34×", "1.0× (no work at run time)", "no figure cited"
    origin: str  # "measured here", "cited", "none"
    detail: str
    source: str | None



def peak_costs() -> tuple[CitedCost, ...]:
    """Costs read from the one cited table of vendor peak rates (core.studies.peak_rates.float64_peaks):
    float64 against float32 as training runs it (tensor cores, TF32 or bfloat16) or plainly, and float32
    matmuls without TF32 against TF32 tensor cores, each at peak."""
    out = []
    for p in float64_peaks():
        src = p.url or p.source
        if p.tensor_cost:
            lo, hi = sorted(p.tensor_cost)
            out.append(CitedCost(key=f"float64:{p.hardware}", label=f"float64 on {p.hardware}", low=lo, high=hi,
                                 what=f"{p.source}: peak float64 rate against float32 training's tensor-core rate "
                                 "(TF32 to bfloat16)", source=src))
        elif p.plain_cost:
            out.append(CitedCost(key=f"float64:{p.hardware}", label=f"float64 on {p.hardware}", low=p.plain_cost,
                                 high=p.plain_cost, what=f"{p.source}: peak FP32 : FP64 rate", source=src))
        if p.tf32_tensor and p.fp32 and p.tf32_tensor > p.fp32:
            out.append(CitedCost(key=f"tf32_off:{p.hardware}", label=f"TF32 off on {p.hardware}", low=1.0,
                                 high=p.tf32_tensor / p.fp32, what=f"{p.source}: float32 matmuls on the plain units "
                                 "against TF32 tensor cores, at peak (up to this for matmul-bound work)", source=src))
    return tuple(out)


def cost_line(key: str, costs: LiveCosts, batch: LiveCost | None, hardware: str = "cpu") -> CostLine:
    """A setting's cost on ``hardware`` (a key of reproducible_rules.HARDWARE), in × PyTorch's default's time."""
    if key == "free":
        return CostLine(text="1.0×", origin="none", detail="no work at run time", source=None)
    if key == "aggregates":
        return CostLine(text="1.0× per run", origin="none", detail="k seeds are k runs, to measure the spread",
                        source=None)
    if hardware != "cpu" and key in GPU_COSTS:
        return GPU_COSTS[key](costs, hardware)
    live = batch if key == "batch_invariant" else costs.rows.get(key)
    if live is not None:
        where = "" if hardware == "cpu" else "on this server's CPU, not on your GPU: "
        return CostLine(text=live.text, origin="measured here",
                        detail=f"{where}{live.what}; median of {live.repeats} interleaved repeats, quartiles "
                        f"{live.iqr[0]:.2f}–{live.iqr[1]:.2f}× against PyTorch's default", source=None)
    if key in CITED:
        c = CITED[key]
        return CostLine(text=c.text, origin="cited", detail=c.what, source=c.source)
    return CostLine(text="no figure cited", origin="none", detail="no figure from its source; not measurable on this "
                    "server's CPU", source=None)


def _deterministic_on_gpu(costs: LiveCosts, hardware: str) -> CostLine:
    cpu = costs.rows.get("deterministic_cpu")
    here = (f" On this server's CPU it measured {cpu.text}, but there the flag switches no kernel (the same bits "
            "with it and without), so that is no GPU figure." if cpu else "")
    return CostLine(text="no figure published", origin="none", source=None,
                    detail="On a GPU it costs what the kernels it switches cost (atomics replaced by ordered "
                    f"reductions), which depends on the model; PyTorch publishes no figure.{here}")


def _nvidia_peaks() -> list:
    return [p for p in float64_peaks() if p.hardware.startswith("NVIDIA") and p.fp32]


def _float64_on_gpu(costs: LiveCosts, hardware: str) -> CostLine:
    """float64 against PyTorch's default float32 (matmuls off TF32 tensor cores), at each GPU's peak rates."""
    if hardware == "mps":
        return CostLine(text="not available", origin="none", source=None,
                        detail="PyTorch's MPS backend has no float64 tensors.")
    rows = [(p, p.fp32 / max(p.fp64, p.fp64_tensor or 0.0)) for p in _nvidia_peaks() if p.fp64]
    lo, hi = min(r for _, r in rows), max(r for _, r in rows)
    return CostLine(text=f"matmuls {lo:.1f}× to {hi:.0f}×; other float64 work at least 2×", origin="cited",
                    source=rows[0][0].url,
                    detail="peak float64 rate (on FP64 tensor cores where they exist: A100, H100) against the peak "
                    "float32 rate PyTorch's default float32 matmuls use (TF32 off): " + "; ".join(
                        f"{p.hardware.removeprefix('NVIDIA ')} {r:.1f}×" for p, r in rows)
                    + ". Elementwise work and reductions run off the tensor cores and move twice the bytes: about "
                    "2× or more. Against bfloat16 or TF32 training the gap is wider. Vendor peak rates (each GPU's "
                    "page in the float64 table of Mitigations), not measured here.")


def _tf32_off_on_gpu(costs: LiveCosts, hardware: str) -> CostLine:
    """Against PyTorch's defaults: float32 matmuls already run without TF32; convolutions use it (cuDNN)."""
    convs = [(p, p.tf32_tensor / p.fp32) for p in _nvidia_peaks() if p.tf32_tensor and p.tf32_tensor > p.fp32]
    worst = max((r for _, r in convs), default=1.0)
    return CostLine(text=f"1.0× for matmuls; convolutions up to {worst:.1f}×", origin="cited",
                    source=convs[0][0].url if convs else None,
                    detail="PyTorch's default already runs float32 matmuls without TF32 (allow_tf32 is False), so "
                    "turning it off costs them nothing; convolutions use TF32 by default (cudnn.allow_tf32), and "
                    "off it they run at the plain float32 rate: " + "; ".join(
                        f"{p.hardware.removeprefix('NVIDIA ')} up to {r:.1f}×" for p, r in convs)
                    + " at peak, for convolution-bound work.")


def _batch_invariant_on_gpu(costs: LiveCosts, hardware: str) -> CostLine:
    """The published figure for batch-invariant kernels on a GPU, not this app's CPU kernel."""
    c = CITED["thinking_machines"]
    return CostLine(text=c.text, origin="cited", detail=c.what, source=c.source)


# The costs a CPU measurement cannot stand for on a GPU: each says what it is on the hardware named
GPU_COSTS: dict[str, Callable[[LiveCosts, str], CostLine]] = {
    "deterministic_cpu": _deterministic_on_gpu,
    "float64": _float64_on_gpu,
    "tf32_off": _tf32_off_on_gpu,
    "batch_invariant": _batch_invariant_on_gpu,
}
