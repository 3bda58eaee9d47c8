"""Make my runs reproducible: the settings for a visitor's own setup, what each guarantees, what it costs.

* ``SETTINGS``: the registry, one ``Setting`` per knob (its snippet line, which setups it applies to, what it
  guarantees and what it does not, where its cost comes from, the source's address); ``answer`` picks and
  orders them for one ``Choice`` (what runs, on what, what must match) and says plainly what cannot be had;
* ``live_costs``: what this server can run itself, timed here, in × the default's time (cached with a bound
  and refreshed every ``COST_TTL_S``); ``CITED``: the costs published for what it cannot run;
* ``gpu_generations``: one ``torch.sum`` as the CUDA reduction model (core.kernels.cuda_model) computes it
  with the launch of an A100, H100, H200 and RTX 4090: a model, labelled so wherever it is shown;
* ``suggest_tolerance``: two ``assert_close`` tolerances for two correct implementations, each named for what it
  is: the typical one, from the rounding envelope that the mismatch diagnosis and the traces use
  (core.diagnose.envelopes: a heuristic, for rounding errors that behave independently), and the guarantee for
  every order of summation, from the worst-case bound (far larger);
* ``headline_rows``: the overview's mitigation rows, from the same figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from core.arith.formats import ARITHMETIC, FORMATS, bits_of, get_format
from core.arith.hexbits import hex_bits
from core.arith.metrics import gamma, input_rounding_error
from core.arith.vectors import VectorSpec
from core.crowd.bytecache import RESULTS, vector_for
from core.diagnose.envelopes import (
    ENVELOPE_FACTOR,
    envelope_of,
    output_rounding,
    reduced_bound,
    reduced_sizes,
    reordering_bound,
    reordering_sizes,
    summed_ulps,
)
from core.diagnose.rounding import REDUCED_FORMATS, accumulation_format
from core.diagnose.tolerances import (
    GUARANTEE_FROM,
    GUARANTEE_KIND,
    TWO_DIGITS,
    TYPICAL_ASSUMES,
    TYPICAL_KIND,
    format_two_digits,
    nice_up,
    no_tolerance,
    ratio_text,
)
from core.kernels.cuda_model import cuda_config_for, cuda_launch, cuda_sum_model
from core.kernels.cuda_model import tree_depth as cuda_tree_depth
from core.kernels.numpy_model import tree_depth_numpy
from core.kernels.torch_cpu_model import GRAIN_SIZE, cascade_depth
from core.studies.reproducible_costs import (  # noqa: F401  (the page's and the tests' names for them)
    COST_TTL_S,
    CostLine,
    Linear,
    LiveCost,
    LiveCosts,
    batch_invariant_cost,
    cost_line,
    live_costs,
    peak_costs,
)
from core.studies.reproducible_rules import CITED, Answer, Choice, Setting, answer

# ------------------------------------------------------------------------------- tolerance

TOLERANCE_DTYPES = (*ARITHMETIC, "tf32")  # the formats torch computes in, and TF32's inputs
TOLERANCE_OPS = ("sum", "matmul")
MAX_THREADS = 64  # the CPU thread counts a tolerance for a library's sum covers


def reduction_depth(length: int, dtype: str) -> int:
    """The most roundings on one term's path through a library's sum of ``length`` values of ``dtype``: the
    largest of NumPy's pairwise sum, torch's CPU cascade (1 to 64 threads) and torch's CUDA reduction (the
    model's launch on 132 SMs), each from its model in core.kernels; at most length - 1."""
    dt = get_format(dtype).numpy_dtype
    threads = [2**i for i in range(MAX_THREADS.bit_length())]
    depths = [tree_depth_numpy(length)] + [cascade_depth(length, dt, threads=t) for t in threads]
    if length * np.dtype(dt).itemsize < 2**31:  # the model's 32-bit indexing
        depths.append(cuda_tree_depth(length, dtype=dt))
    return max(1, min(max(depths), length - 1))


@dataclass(frozen=True, kw_only=True)
class Tolerance:
    """Two (rtol, atol) pairs for ``torch.testing.assert_close`` of K-term sums (or matrix products) whose terms
    have the root mean square ``scale``, |a - b| <= atol + rtol |b|: the *typical* one (``rtol``, ``atol``) holds
    wherever the rounding envelope does (rounding errors that behave independently); the *guarantee*
    (``guarantee_rtol``, ``guarantee_atol``) holds for every order of summation, from the worst-case bound."""

    dtype: str
    length: int
    scale: float
    accumulate: str
    op: str
    depth: int  # the roundings on a term's path that the envelope counts: K for a product, the tree's for a sum
    rtol: float
    atol: float
    rtol0: float  # before rounding up to two significant digits
    atol0: float
    guarantee_rtol: float
    guarantee_atol: float
    guarantee_rtol0: float
    guarantee_atol0: float

    @property
    def line(self) -> str:
        return f"rtol={format_two_digits(self.rtol)} atol={format_two_digits(self.atol)}"

    @property
    def guarantee_line(self) -> str:
        return f"rtol={format_two_digits(self.guarantee_rtol)} atol={format_two_digits(self.guarantee_atol)}"

    @property
    def ratio(self) -> float:
        """How many times the typical atol the guarantee's is."""
        return self.guarantee_atol0 / self.atol0

    def what(self, path: bool = True) -> str:
        """The computation in words; ``path``: with the roundings on a term's path the typical tolerance counts."""
        if self.dtype == "tf32":
            return (f"float32 matrix products of {self.length:,} terms on TF32 tensor cores against the same in "
                    "float32, accumulated in float32")
        kind = "sums (a library's reduction, " if self.op == "sum" else "matrix products or loops ("
        kind = kind + f"{self.depth:,} roundings on a path)" if path else kind.split(" (")[0]
        return f"{self.dtype} results of {self.length:,}-term {kind} accumulated in {self.accumulate}"

    def typical_words(self) -> str:
        """The typical tolerance's line of words: what it is, what it assumes, how far the guarantee is."""
        return (f"{TYPICAL_KIND}: {self.what()}, terms of RMS {self.scale:g}; from the rounding envelope the "
                f"mismatch diagnosis uses (a multiple of the typical rounding error), rtol {self.rtol0:.3g} and atol "
                f"{self.atol0:.3g} before rounding up. {TYPICAL_ASSUMES} The guarantee for every order is "
                f"{self.guarantee_line}, its atol {ratio_text(self.ratio)} this one's.")

    def guarantee_words(self) -> str:
        """The guarantee's line of words: what it is, what it assumes, how far it is from the typical one."""
        extra = ""
        if self.dtype == "tf32":
            extra = " plus the inputs' rounding to TF32 (rounded or truncated; inputs not subnormal)"
        elif FORMATS[self.dtype].precision < FORMATS[self.accumulate].precision:
            extra = f" plus each result's rounding to {self.dtype}"
        loose = self.length * FORMATS[self.accumulate].unit_roundoff >= 0.5  # gamma >= 1: atol >= 2 sum|x|
        return (f"{GUARANTEE_KIND}: {self.what(path=False)}, terms of RMS at most {self.scale:g} (so Σ|x| ≤ K·RMS "
                f"= {self.length * self.scale:.4g}), results that do not overflow, each addition rounding to nearest "
                f"in {self.accumulate} (hardware that truncates, as tensor cores may, needs twice the unit roundoff); "
                f"from {GUARANTEE_FROM}{extra}, rtol {self.guarantee_rtol0:.3g} and atol {self.guarantee_atol0:.3g} "
                f"before rounding up. Its atol is {ratio_text(self.ratio)} the typical tolerance's ({self.line})."
                + (" At this length it is at least twice the terms' total, so it passes a result of either sign: "
                   "it tells nothing." if loose else ""))


class NoTolerance(ValueError):
    """K u >= 1 in the accumulation format: no tolerance can mean anything (the message says so in one line)."""


def _check_request(dtype: str, length: int, scale: float, op: str) -> None:
    if dtype not in TOLERANCE_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(TOLERANCE_DTYPES)}")
    if op not in TOLERANCE_OPS:
        raise ValueError(f"op must be one of {', '.join(TOLERANCE_OPS)}")
    if not (isinstance(length, int) and 1 <= length <= 10**9):
        raise ValueError("the length K must be a whole number from 1 to 10^9")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError("the scale (RMS of the terms) must be a positive number")


def suggest_tolerance(dtype: str, length: int, scale: float = 1.0, accumulate: str | None = None,
                      op: str = "sum") -> Tolerance:
    """The typical tolerance (``_typical``) and the guarantee (``_guarantee``) for K-term sums of terms of RMS
    ``scale``, with no inputs to measure.

    ``op``: a matrix product, or any loop adding one term at a time (``"matmul"``), rounds up to K times on a
    term's path; a library's sum (``"sum"``: NumPy's, torch's on a CPU or a GPU) is a tree whose longest path is
    ``reduction_depth``. "tf32" is a float32 product on TF32 tensor cores against float32. ``accumulate``: the
    format the sums run in (default: float32 below float64, as torch's kernels do); a sum accumulated in the
    narrow format itself (NumPy's of bfloat16 is a loop) is counted as a loop. Both pairs are rounded up to two
    significant digits. Raises ``NoTolerance`` where K u >= 1 in the accumulation format.
    """
    _check_request(dtype, length, scale, op)
    acc_name = "float32" if dtype == "tf32" else accumulate or accumulation_format(dtype)  # TF32: an input format
    if dtype != "tf32" and (acc_name not in FORMATS or FORMATS[acc_name].precision < FORMATS[dtype].precision):
        raise ValueError(f"accumulate must be {dtype} or a wider format")
    reason = no_tolerance(length, FORMATS[acc_name])
    if reason:
        raise NoTolerance(reason)
    loop = op == "matmul" or dtype == "tf32" or acc_name != accumulation_format(dtype)
    depth = length if loop else reduction_depth(length, dtype)
    rtol0, atol0 = _typical(dtype, length, scale, acc_name, depth, loop)
    g_rtol0, g_atol0 = _guarantee(dtype, length, scale, acc_name, split=not loop and length > GRAIN_SIZE)
    if g_rtol0 <= rtol0 and g_atol0 <= atol0:  # the envelope is capped by the bound (very short sums)
        rtol0, atol0 = g_rtol0, g_atol0
    return Tolerance(dtype=dtype, length=length, scale=scale, accumulate=acc_name, op=op, depth=depth,
                     rtol=nice_up(rtol0, TWO_DIGITS), atol=nice_up(atol0, TWO_DIGITS), rtol0=rtol0, atol0=atol0,
                     guarantee_rtol=nice_up(g_rtol0, TWO_DIGITS), guarantee_atol=nice_up(g_atol0, TWO_DIGITS),
                     guarantee_rtol0=g_rtol0, guarantee_atol0=g_atol0)


def _typical(dtype: str, k: int, scale: float, acc_name: str, depth: int, loop: bool) -> tuple[float, float]:
    """(rtol0, atol0) from the envelope of core.diagnose.envelopes, the roundings on a term's path as its K.

    With s = sqrt(K) * scale (the terms' sqrt(sum t^2)) and sum|t| estimated as K * scale, as the envelope does
    without inputs, two correct results differ by at most E(y) = min(B_R, Z T_R(s, |y|)) + out(|y|), T_R linear in
    max(s, |y|) <= s + |y| and the output rounding ulp_F(y) <= ulp_F(1) |y| + ulp_F(0). So atol = E at y = 0 and
    rtol = Z dT_R/d|y| + ulp_F(1). TF32: the reduced-precision envelope, Z T_P(s) plus its truncation bias
    2 u_P |y|."""
    z, s, sum_abs = ENVELOPE_FACTOR, math.sqrt(k) * scale, k * scale
    if dtype == "tf32":
        p = REDUCED_FORMATS["tf32"]
        return 2 * float(p.fmt.unit_roundoff), z * float(reduced_sizes(p, k, s))
    fmt, acc = FORMATS[dtype], FORMATS[acc_name]
    t0, bound = reordering_sizes(depth, s, 0.0, sum_abs, acc)
    slope = float(reordering_sizes(depth, 0.0, 1.0, 0.0, acc)[0] - reordering_sizes(depth, 0.0, 0.0, 0.0, acc)[0])
    out = output_rounding(np.array([0.0, 1.0]), fmt, acc)
    atol0 = float(envelope_of(bound, z * float(t0), float(out[0])))
    rtol0 = z * slope + float(out[1])
    if not loop and fmt.precision < acc.precision and k >= GRAIN_SIZE:
        # from this length torch's CPU sum splits the values over its threads and rounds each thread's partial
        # sum to the result's format before adding them: up to ulp_F of each of up to 64 partials, whose
        # magnitudes add up to about sqrt(threads) s (random signs) or |y| (one sign)
        atol0 += float(summed_ulps(math.sqrt(MAX_THREADS) * s, MAX_THREADS, fmt))
        rtol0 += 2 * float(fmt.unit_roundoff)
    return rtol0, atol0


def _guarantee(dtype: str, k: int, scale: float, acc_name: str, split: bool) -> tuple[float, float]:
    """(rtol0, atol0) that hold for every order, for terms of RMS at most ``scale`` (so sum|t| <= K scale).

    Any order computes s with |s - S| <= G = gamma_K sum|t| (+ half of A's smallest subnormal per underflowing
    product), so two orders differ by 2G = B_R (``reordering_bound``). A result narrower than A (F) is s rounded
    once more, |r - s| <= u_F |r| + h_F (h_F half F's smallest subnormal); with |r_a| <= |r_b| + D that gives
    D (1 - u_F) <= 2 u_F |r_b| + 2G + 2 h_F. ``split``: torch's CPU sum from GRAIN_SIZE values also rounds each
    thread's partial sum to F before adding them: G is then (1 + u_F)(1 + gamma_K) - 1 times sum|t| (Higham's
    Lemma 3.3: no path has K additions) plus 2 h_F per partial, up to MAX_THREADS. The terms' RMS bounds
    sum|t| <= sqrt(K sum t^2) = K RMS (Cauchy-Schwarz). TF32: B_P (``reduced_bound``) with the inputs' relative
    rounding to TF32, truncated or rounded (inputs not subnormal)."""
    acc, sum_abs = FORMATS[acc_name], k * scale
    if dtype == "tf32":
        p = REDUCED_FORMATS["tf32"]
        e_in = input_rounding_error(sum_abs, k, float(p.fmt.unit_roundoff), 0.0, truncating=p.may_truncate,
                                    rows_abs=0.0)
        return 0.0, float(reduced_bound(k, sum_abs, e_in, acc))
    fmt = FORMATS[dtype]
    two_g = float(reordering_bound(k, sum_abs, acc))
    if fmt.precision >= acc.precision:
        return 0.0, two_g
    u_f, h_f = float(fmt.unit_roundoff), float(fmt.min_subnormal) / 2
    if split:
        g = float(gamma(k, float(acc.unit_roundoff), math.inf))
        two_g += 2 * (((1 + u_f) * (1 + g) - 1 - g) * sum_abs + 2 * MAX_THREADS * h_f)
    return 2 * u_f / (1 - u_f), (two_g + 2 * h_f) / (1 - u_f)


# ---------------------------------------------------------------------------- GPU generations

# (name, SMs, max threads per SM): SM counts from NVIDIA's data sheets and whitepapers (A100 108, H100 SXM and
# H200 132, RTX 4090 128); threads per SM from the CUDA programming guide's table of compute capabilities
# (2048 for 8.0 and 9.0, 1536 for 8.9).
GPU_MODELS = (("A100", 108, 2048), ("H100 SXM", 132, 2048), ("H200", 132, 2048), ("RTX 4090", 128, 1536))
# 4·10^6 is past the size where the grids reach their SM limits (10^7 took 80 MB more memory to model)
GENERATION_SIZES = (1_000_000, 4_000_000)


@dataclass(frozen=True, kw_only=True)
class GpuModelSum:
    gpu: str
    sms: int
    max_threads: int
    n: int
    blocks: int
    threads_per_block: int
    bits: int
    hex: str


@dataclass(frozen=True, kw_only=True)
class Generations:
    rows: tuple[GpuModelSum, ...]

    def groups(self, n: int) -> tuple[tuple[str, ...], ...]:
        """The GPUs whose modelled sums of n values have equal bits, one tuple per distinct result."""
        out: dict[int, list[str]] = {}
        for r in self.rows:
            if r.n == n:
                out.setdefault(r.bits, []).append(r.gpu)
        return tuple(tuple(v) for v in out.values())


def gpu_generations() -> Generations:
    """torch.sum of 10^6 and 4·10^6 standard normal float32 values (seed 0) as the CUDA model computes it with
    each GPU's launch: a MODEL of torch 2.13's kernel, not a measurement. Cached for every viewer."""

    def compute() -> Generations:
        rows = []
        fmt = FORMATS["float32"]
        for n in GENERATION_SIZES:
            values = vector_for(VectorSpec(kind="normal", n=n, seed=0, storage="float32")).values
            for name, sms, threads in GPU_MODELS:
                cfg = cuda_config_for(n, values.dtype, sm_count=sms, max_threads_per_sm=threads)
                launch = cuda_launch(n, cfg)
                b = bits_of(cuda_sum_model(values, cfg))
                rows.append(GpuModelSum(gpu=name, sms=sms, max_threads=threads, n=n, blocks=launch.blocks,
                                        threads_per_block=launch.threads_per_block, bits=b, hex=hex_bits(b, fmt)))
        return Generations(rows=tuple(rows))

    return RESULTS.get_or_compute(("reproducible-generations",), compute)


# ------------------------------------------------------------------------------ the page


@dataclass(frozen=True)
class ReproSettings:
    """The page's settings: the visitor's setup, and the tolerance's dtype, K and scale."""

    workload: str = "eager"
    hardware: str = "gpu"
    target: str = "run_to_run"
    dtype: str = "bfloat16"
    length: int = 4096
    scale: float = 1.0
    op: str = "sum"

    @property
    def choice(self) -> Choice:
        return Choice(self.workload, self.hardware, self.target)


@dataclass(frozen=True, kw_only=True)
class ReproPage:
    settings: ReproSettings
    answer: Answer
    tolerance: Tolerance | None  # None where no tolerance can mean anything (``no_tolerance`` says why)
    costs: LiveCosts
    batch_invariant: LiveCost | None
    no_tolerance: str | None = None

    def cost_of(self, s: Setting) -> CostLine:
        return cost_line(s.cost, self.costs, self.batch_invariant, self.settings.hardware)

    @property
    def snippet(self) -> str:
        if self.tolerance is None:
            return self.answer.snippet()
        return self.answer.snippet(format_two_digits(self.tolerance.rtol), format_two_digits(self.tolerance.atol))


def reproducible_page(s: ReproSettings, batch_kernels: tuple[Linear, Linear] | None = None) -> ReproPage:
    """What the page shows first for ``s``: the answer (cheap), the tolerance (cheap) and the live costs (cached for
    every viewer); the modelled GPU sums (``gpu_generations``) are the page's folded section, made once opened.
    ``batch_kernels``: (default, batch-invariant) linear."""
    try:
        tol, reason = suggest_tolerance(s.dtype, s.length, s.scale, op=s.op), None
    except NoTolerance as err:
        tol, reason = None, str(err)
    batch = batch_invariant_cost(*batch_kernels) if batch_kernels else None
    return ReproPage(settings=s, answer=_tolerance_named(answer(s.choice), tol, reason), tolerance=tol,
                     costs=live_costs(), batch_invariant=batch, no_tolerance=reason)


def _tolerance_named(a: Answer, tol: Tolerance | None, reason: str | None) -> Answer:
    """The answer with its tolerance setting saying which kind its tolerance is (the typical one, with the
    guarantee beside it), or, where no tolerance can mean anything, saying so instead of giving one."""
    def named(st: Setting) -> Setting:
        if st.key != "tolerance":
            return st
        if tol is None:
            return replace(st, title="No meaningful tolerance", lines="# no tolerance can mean anything for these "
                           "sums: K·u >= 1 in their accumulation format (see the tolerance below)", guarantees=reason,
                           not_guaranteed="That any tolerance tells rounding from a bug here: accumulate in float64.")
        return replace(st, title="A typical tolerance (the rounding envelope)",
                       lines=st.lines + f"\n# typical, not a guarantee; for every order of summation: "
                       f"{tol.guarantee_line.replace(' ', ', ')}",
                       guarantees="Two results that differ only in the order of their K-term sums, of terms of this "
                       "size, usually pass: this is the typical tolerance, which assumes that the rounding errors "
                       "behave independently.",
                       not_guaranteed="That every order passes: sorted or same-sign data, long left-to-right loops "
                       "and NumPy reductions along an outer axis can exceed it. The tolerance that holds for every "
                       f"order ({tol.guarantee_line.replace(' ', ', ')}) has an atol {ratio_text(tol.ratio)} as large.")
    return replace(a, settings=tuple(named(st) for st in a.settings))


# ------------------------------------------------------------------------------- the overview


@dataclass(frozen=True, kw_only=True)
class HeadlineRow:
    key: str
    mitigation: str
    effect: str
    cost: str  # in × the default's time, saying where the figure comes from


def headline_rows() -> tuple[HeadlineRow, ...]:
    """The overview's mitigation rows with their costs in × the default's time, from this page's figures: the
    same cached live measurement, and the one cited table of vendor peaks (``peak_costs``)."""
    c = live_costs()
    f64, wide, det = c.rows["float64"], c.rows["wider"], c.rows["deterministic_cpu"]
    gpu64 = cost_line("float64", c, None, "gpu")
    return (
        HeadlineRow(key="float64", mitigation="Compute in float64",
                    effect="Each rounding about 2²⁹ times smaller than float32's",
                    cost=f"{f64.text} on this server's CPU (a matrix product, measured); NVIDIA GPUs, against "
                    f"PyTorch's default float32 at peak rates (cited): {gpu64.text}"),
        HeadlineRow(key="wider", mitigation="Accumulate in a wider format",
                    effect="The reduction's own rounding errors shrink sharply; the order still matters",
                    cost=f"{wide.text} for torch.sum of 10⁶ float32 values (measured here)"),
        HeadlineRow(key="aggregates", mitigation="Accept the divergence, compare aggregates",
                    effect="Runs still differ bit for bit; judge them by final loss and accuracy over several seeds",
                    cost="1.0× per run; k seeds are k runs"),
        HeadlineRow(key="settings", mitigation="Reproducible settings (Make my runs reproducible)",
                    effect="The same bits run to run on one machine; not across devices or batch sizes",
                    cost=f"deterministic mode {det.text} on this server's CPU, where it switches no kernel (measured); "
                    "on a GPU no figure is published. Batch-invariant serving on GPUs "
                    f"{CITED['sglang'].low:.2f}× (SGLang) to {CITED['thinking_machines'].low:.2f}× (Thinking "
                    "Machines' kernels in vLLM) (cited)"),
    )
