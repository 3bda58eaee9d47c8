"""The visitor's own GPU: what the browser is asked to run, and the judgement of what it sends back.

The browser computes; the server models and judges. ``browser_job`` is everything the page's script needs (the
recipe of the page's vector, the kernels' shape, the elementwise arguments), a few kilobytes for any n.
``judge`` trusts nothing in a report: every field is checked for type, size and range, the vector's digest must
be the server's, and a sum farther from the exact sum than the rigorous bound for any order of n values allows
is refused as impossible. What passes becomes ``YourGpu``: each kernel's bits beside the CPU's, the model's
and the exact sum, in ULPs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from core.arith.elementary import reference
from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, bits_of, bits_of_value, round_to_format, value_of_bits
from core.arith.metrics import ErrorReport, a_priori_bound, gamma, measure
from core.arith.numpy_stream import digest, recipe, replayable
from core.arith.ulps import ulp, ulp_distance
from core.arith.vectors import VectorSpec
from core.crowd.room import RoomEntry
from core.kernels import webgpu
from core.kernels.sums import sequential
from core.recordings.store import vector_sha256

F32 = FORMATS["float32"]
JOB_VERSION = 1  # part of every job's name: a report for another version of the kernels is refused
ELEMENTWISE = 256  # arguments per function, and additions and multiply-adds on the vector's first values
NEEDS = 3 * ELEMENTWISE  # the multiply-adds read the vector's first 768 values
MAX_TEXT = 120  # characters kept of an adapter's or a browser's name
WGSL_ACCURACY = "https://www.w3.org/TR/WGSL/#concrete-float-accuracy"
# The elementwise arguments: spread over each function's interesting range, rounded to float32 once.
_RANGES = {"exp": (-10.0, 10.0), "tanh": (-5.0, 5.0), "log": (0.01, 100.0)}
FUNCTIONS = tuple(_RANGES)
SPEC_ALLOWANCE = {
    "exp": "3 + 2·|x| ULPs",
    "tanh": "the worse of an absolute error of 10⁻⁵ and what sinh(x)/cosh(x) inherits (counted here: 10⁻⁵)",
    "log": "3 ULPs outside [0.5, 2]; an absolute error of at most 2⁻²¹ inside",
}
# WGSL lets an implementation round an f32 addition either way and flush subnormals: a sum is refused only beyond
# the bound for any order with those freedoms (twice the unit roundoff, plus a subnormal lost at every step)
WGSL_U = 2 * Fraction(1, 2**24)
FLUSH = Fraction(1, 2**126)


class ReportError(ValueError):
    """A browser's report that cannot be true or cannot be read; ``str(err)`` says which."""


def arguments() -> dict[str, np.ndarray]:
    return {name: np.linspace(lo, hi, ELEMENTWISE).astype(np.float32) for name, (lo, hi) in _RANGES.items()}


def supported(spec: VectorSpec) -> bool:
    return replayable(spec) and spec.n >= NEEDS and spec.n <= webgpu.MAX_ELEMENTS


def job_name(spec: VectorSpec) -> str:
    return f"v{JOB_VERSION}-{spec.kind}-{spec.n}-{spec.seed}"


def browser_job(spec: VectorSpec) -> dict:
    """The page script's input: JSON-ready, a few kilobytes for any n."""
    args = arguments()
    return {"job": job_name(spec), "recipe": recipe(spec), "lanes": webgpu.LANES, "groups": webgpu.GROUPS,
            "atomic_runs": webgpu.ATOMIC_RUNS,
            "args": [int(b) for name in FUNCTIONS for b in _bits(args[name])]}


def _bits(a: np.ndarray) -> list[int]:
    return [bits_of(v) for v in a]


@dataclass(frozen=True, kw_only=True)
class Expected:
    """What the server knows of a vector before any browser answers: computed once per vector."""

    spec: VectorSpec
    digest: tuple[int, int]
    exact: Fraction
    sum_abs: Fraction
    cpu_sequential: int  # bits of the CPU's left-to-right float32 sum
    model_tree: int  # bits the workgroup-tree model predicts
    tree_depth: int
    any_order_bound: Fraction  # no order of n values, rounding either way and flushing subnormals, goes farther
    head: np.ndarray  # the vector's first NEEDS values
    sha256: str  # of the vector's bytes, as recordings name a vector


def expected(spec: VectorSpec, values: np.ndarray) -> Expected:
    x = np.asarray(values, dtype=np.float32)
    sum_abs = exact_sum_fraction(np.abs(x))
    return Expected(spec=spec, digest=digest(x), exact=exact_sum_fraction(x), sum_abs=sum_abs,
                    cpu_sequential=bits_of(sequential(x)), model_tree=bits_of(webgpu.workgroup_tree(x)),
                    tree_depth=webgpu.workgroup_tree_depth(x.size),
                    any_order_bound=(gamma(max(x.size - 1, 0), WGSL_U) or 0) * sum_abs + 2 * x.size * FLUSH,
                    head=x[:NEEDS].copy(), sha256=vector_sha256(x))


@dataclass(frozen=True, kw_only=True)
class KernelSum:
    kernel: str  # "sequential", "tree", "subgroup" or "atomic"
    order: str  # the order in words
    bits: tuple[int, ...]  # one per run (the atomic kernel runs several times)
    errors: tuple[ErrorReport, ...]
    check: str  # what it was checked against, and the outcome, in words
    matched: bool | None  # equal to its prediction (CPU or model); None where there is none


@dataclass(frozen=True, kw_only=True)
class FunctionErrors:
    name: str
    worst_ulps: int  # largest distance from the correctly rounded result, in ULPs
    exact_share: float  # share of the arguments with the correctly rounded result
    beyond: int  # arguments beyond the WGSL specification's allowance (0 where it gives none)
    allowance: str


@dataclass(frozen=True, kw_only=True)
class YourGpu:
    spec: VectorSpec
    vector_sha256: str
    vendor: str
    architecture: str
    browser: str
    n: int
    sums: tuple[KernelSum, ...]
    functions: tuple[FunctionErrors, ...]
    add_matches: int  # of ELEMENTWISE additions, bit-identical to the CPU's IEEE float32 addition
    mul_add: dict  # {"written": (fused, unfused), "fma": (fused, unfused), "differ": k}
    subgroup_size: int | None
    first_ms: int
    total_ms: int

    @property
    def adapter(self) -> str:
        return " ".join(p for p in (self.vendor, self.architecture) if p) or "an unnamed adapter"

    @property
    def distinct_atomic(self) -> int:
        return len(set(next(s for s in self.sums if s.kernel == "atomic").bits))


@dataclass(frozen=True, kw_only=True)
class Unavailable:
    reason: str


# ------------------------------------------------------------------------------------------ reading a report


def _int_bits(v, what: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2**32:
        raise ReportError(f"{what} is not a 32-bit pattern")
    return v


def _bit_list(report: Mapping, key: str, length: int) -> tuple[int, ...]:
    v = report.get(key)
    if not isinstance(v, list) or len(v) != length:
        raise ReportError(f"{key} must hold {length} bit patterns")
    return tuple(_int_bits(b, key) for b in v)


def _text(v, what: str) -> str:
    if v is None:
        return ""
    if not isinstance(v, str):
        raise ReportError(f"{what} is not text")
    return "".join(c for c in v[:MAX_TEXT] if c.isprintable())


def _ms(v) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v < 1e7 else 0


def read_status(report, job: str) -> Unavailable | None:
    """None for a report with results for ``job``; Unavailable with the browser's reason; ReportError else."""
    if not isinstance(report, Mapping):
        raise ReportError("the report is not an object")
    status = report.get("status")
    if status in ("unavailable", "error"):
        return Unavailable(reason=_text(report.get("reason"), "the reason") or "no reason given")
    if status != "ok":
        raise ReportError("the report has no known status")
    if report.get("job") != job:
        raise ReportError("the report is for another vector than this page's")
    return None


# ------------------------------------------------------------------------------------------ judging


def _sum_error(bits: int, exp: Expected, what: str, bound: Fraction | None) -> ErrorReport:
    value = value_of_bits(bits, F32)
    if isinstance(value, float) or abs(value - exp.exact) > exp.any_order_bound:
        raise ReportError(f"{what}'s sum is farther from the exact sum than any order of the {exp.spec.n:,} values "
                          "can give, even rounding either way and flushing subnormals as WGSL allows: refused as "
                          "impossible")
    return measure(value, F32, exp.exact, bound, bits)


def _sums(report: Mapping, exp: Expected) -> tuple[tuple[KernelSum, ...], int | None]:
    n = exp.spec.n
    tree_bound = a_priori_bound("tree", n, exp.sum_abs, F32, exp.tree_depth)
    seq = _int_bits(report.get("sequential"), "sequential")
    tree = _int_bits(report.get("tree"), "tree")
    out = [
        KernelSum(kernel="sequential", order="one invocation, left to right", bits=(seq,),
                  errors=(_sum_error(seq, exp, "the left-to-right kernel", exp.any_order_bound),),
                  matched=seq == exp.cpu_sequential,
                  check="the same bits as this server's CPU adding left to right" if seq == exp.cpu_sequential
                  else f"{ulp_distance(seq, exp.cpu_sequential, F32):,} ULPs from this server's CPU adding left to "
                  "right: your GPU or its shader compiler did not keep the order, rounded some additions the other "
                  "way, or flushed subnormals (WGSL allows the last two)"),
        KernelSum(kernel="tree", order=f"{webgpu.LANES:,} strided lanes, a halving tree per workgroup of "
                  f"{webgpu.WORKGROUP}, then {webgpu.GROUPS} workgroup sums left to right", bits=(tree,),
                  errors=(_sum_error(tree, exp, "the workgroup tree", tree_bound),), matched=tree == exp.model_tree,
                  check="the model matched your GPU bit for bit" if tree == exp.model_tree
                  else f"the model missed: {ulp_distance(tree, exp.model_tree, F32):,} ULPs from its prediction (a "
                  "GPU may round an addition the other way or flush subnormals: WGSL allows both)"),
    ]
    size = None
    sub = report.get("subgroup")
    if sub is not None:
        if not isinstance(sub, Mapping):
            raise ReportError("subgroup is not an object")
        bits = _int_bits(sub.get("bits"), "subgroup")
        size = sub.get("size")
        if not isinstance(size, int | float) or size not in (1, 2, 4, 8, 16, 32, 64, 128):
            raise ReportError("the subgroup size is not a power of two up to 128")
        size = int(size)
        out.append(KernelSum(kernel="subgroup", order=f"the same lanes, combined by subgroupAdd ({size} lanes a "
                             "subgroup): the hardware's own order", bits=(bits,),
                             errors=(_sum_error(bits, exp, "the subgroup kernel", exp.any_order_bound),),
                             matched=None, check="within the bound that holds for any order"))
    atomic = _bit_list(report, "atomic", webgpu.ATOMIC_RUNS)
    errors = tuple(_sum_error(b, exp, "an atomic run", exp.any_order_bound) for b in atomic)
    out.append(KernelSum(kernel="atomic", order=f"the {webgpu.GROUPS} workgroup sums added to one float by atomic "
                         f"compare-exchange, as each finishes; run {webgpu.ATOMIC_RUNS} times", bits=atomic,
                         errors=errors, matched=None,
                         check=f"{len(set(atomic))} different sum{'s' if len(set(atomic)) > 1 else ''} in "
                         f"{webgpu.ATOMIC_RUNS} runs, each within the bound that holds for any order"))
    return tuple(out), size


def _allowed(name: str, x: Fraction, correct: Fraction, got: Fraction) -> bool:
    if name == "exp":
        return abs(got - correct) <= (3 + 2 * abs(x)) * ulp(correct, F32)
    if name == "log" and Fraction(1, 2) <= x <= 2:
        return abs(got - correct) <= Fraction(1, 2**21)
    if name == "log":
        return abs(got - correct) <= 3 * ulp(correct, F32)
    # tanh: within 10^-5 is always allowed; beyond it, the inherited allowance (not computed here) may still be
    return abs(got - correct) <= Fraction(1, 10**5)


def _functions(report: Mapping) -> tuple[FunctionErrors, ...]:
    out = []
    for name, args in arguments().items():
        got = _bit_list(report, name, ELEMENTWISE)
        dists, beyond = [], 0
        for x, g in zip(args, got, strict=True):
            xv = Fraction(float(x))
            correct = reference(name, float(x), F32)
            value = value_of_bits(g, F32)
            if isinstance(value, float) or isinstance(correct, float):
                raise ReportError(f"{name} gave a value that is not finite where the exact result is")
            dists.append(ulp_distance(g, bits_of_value(correct, F32), F32))
            beyond += not _allowed(name, xv, correct, value)
        out.append(FunctionErrors(name=name, worst_ulps=max(dists), exact_share=dists.count(0) / len(dists),
                                  beyond=beyond, allowance=SPEC_ALLOWANCE[name]))
    return tuple(out)


def _multiply_adds(report: Mapping, head: np.ndarray) -> tuple[int, dict]:
    a, b = head[0:2 * ELEMENTWISE:2], head[1:2 * ELEMENTWISE:2]
    add = _bit_list(report, "add", ELEMENTWISE)
    with np.errstate(all="ignore"):
        add_matches = sum(g == bits_of(v) for g, v in zip(add, a + b, strict=True))
        p, q, r = head[0:NEEDS:3], head[1:NEEDS:3], head[2:NEEDS:3]
        unfused = [bits_of(v) for v in p * q + r]  # NumPy rounds the product, then the sum
    fused = [bits_of_value(round_to_format(Fraction(float(u)) * Fraction(float(v)) + Fraction(float(w)), F32), F32)
             for u, v, w in zip(p, q, r, strict=True)]
    out: dict = {"differ": sum(f != u for f, u in zip(fused, unfused, strict=True))}
    for key in ("mul_add", "fma"):
        got = _bit_list(report, key, ELEMENTWISE)
        out[key] = (sum(g == f for g, f in zip(got, fused, strict=True)),
                    sum(g == u for g, u in zip(got, unfused, strict=True)))
    return add_matches, out


def judge(report, exp: Expected) -> YourGpu | Unavailable:
    """A browser's report on ``exp``'s vector, checked (ReportError says why it is refused)."""
    waiting = read_status(report, job_name(exp.spec))
    if waiting is not None:
        return waiting
    if report.get("n") != exp.spec.n:
        raise ReportError("the report is for a vector of another length")
    dig = report.get("digest")
    if not isinstance(dig, list) or tuple(dig) != exp.digest:
        raise ReportError("your browser built other values than this page's vector, so its sums are not compared")
    sums, size = _sums(report, exp)
    add_matches, mul_add = _multiply_adds(report, exp.head)
    adapter = report.get("adapter") if isinstance(report.get("adapter"), Mapping) else {}
    return YourGpu(spec=exp.spec, vector_sha256=exp.sha256, vendor=_text(adapter.get("vendor"), "the vendor"),
                   architecture=_text(adapter.get("architecture"), "the architecture"),
                   browser=_text(report.get("browser"), "the browser"), n=exp.spec.n, sums=sums,
                   functions=_functions(report), add_matches=add_matches, mul_add=mul_add, subgroup_size=size,
                   first_ms=_ms(report.get("first_ms")), total_ms=_ms(report.get("total_ms")))


def atomic_spread(result: YourGpu) -> float:
    """The atomic runs' largest distance from each other, in ULPs."""
    bits = next(s for s in result.sums if s.kernel == "atomic").bits
    return float(max(ulp_distance(a, b, F32) for a in bits for b in bits)) if bits else math.nan


def live_sentence(r: YourGpu, cpu_bits: int, exact_bits: int) -> str:
    """The first screen's line on the visitor's GPU: its tree kernel against this server's CPU and the exact sum."""
    tree = r.sums[1]
    apart, off = ulp_distance(tree.bits[0], cpu_bits, F32), ulp_distance(tree.bits[0], exact_bits, F32)
    return (f"Your GPU ({r.adapter}), live: its workgroup tree is {apart:,} ULP from this server's CPU and {off:,} "
            f"from the exact sum, rounded once; the model {'predicted its bits exactly' if tree.matched else 'missed'}"
            ".")


def as_recording(r: YourGpu, captured_at: str) -> dict:
    """The visitor's results as a recording (format 2, core.recordings.schema): one sum, the workgroup tree's,
    whose order the WebGPU model predicts; the upload of the own-runs pages reads it back."""
    tree = next(s for s in r.sums if s.kernel == "tree")
    provenance = dict.fromkeys(("sm_count", "cuda_version", "driver", "threads", "cpu_model", "cpu_capability",
                                "logical_cores", "blas", "numpy_version", "os"))
    provenance |= {"device_name": r.adapter, "device_kind": "webgpu", "architecture": r.architecture or None,
                   "torch_version": "not used: WGSL shaders through WebGPU", "captured_at": captured_at,
                   "browser": r.browser or "an unnamed browser",
                   "facts_note": "Sent by the visitor's browser and checked by the server that wrote this file: the "
                                 "vector's digest and every sum's distance from the exact sum."}
    return {"format_version": 2, "provenance": provenance,
            "sums": [{"generator": r.spec.kind, "seed": r.spec.seed, "n": r.spec.n, "dtype": r.spec.storage,
                      "vector_sha256": r.vector_sha256, "sum_hex": f"{tree.bits[0]:08x}"}],
            "matmuls": [], "training": [], "throughput": [], "op_fingerprint": {}}


def room_entry(r: YourGpu) -> RoomEntry:
    """What the room keeps of a judged result: the sums' bits and the adapter's vendor and architecture."""
    by = {s.kernel: s for s in r.sums}
    sub = by.get("subgroup")
    return RoomEntry(job=job_name(r.spec), vendor=r.vendor, architecture=r.architecture,
                     sequential=by["sequential"].bits[0], tree=by["tree"].bits[0],
                     subgroup=sub.bits[0] if sub else None, subgroup_size=r.subgroup_size, atomic=by["atomic"].bits,
                     cpu_match=bool(by["sequential"].matched), model_match=bool(by["tree"].matched))


@dataclass(frozen=True, kw_only=True)
class RoomSummary:
    spec: VectorSpec
    gpus: int  # sessions that shared results for this vector
    kernels: tuple[tuple[str, int, int], ...]  # (kernel, GPUs that ran it, different sums among them)
    adapters: tuple[tuple[str, int], ...]  # (vendor and architecture, GPUs), most first
    cpu_matches: int  # GPUs whose left-to-right sum had this server's CPU bits
    model_matches: int  # GPUs whose workgroup tree had the model's bits
    other_vectors: int  # entries for other vectors, not counted here


def room_summary(entries: list[RoomEntry], spec: VectorSpec) -> RoomSummary:
    job = job_name(spec)
    mine = [e for e in entries if e.job == job]
    subs = [e.subgroup for e in mine if e.subgroup is not None]
    kernels = (("left to right", len(mine), len({e.sequential for e in mine})),
               ("workgroup tree (modelled)", len(mine), len({e.tree for e in mine})),
               ("subgroupAdd", len(subs), len(set(subs))),
               (f"atomic ({webgpu.ATOMIC_RUNS} runs each)", len(mine), len({b for e in mine for b in e.atomic})))
    names: dict[str, int] = {}
    for e in mine:
        name = " ".join(p for p in (e.vendor, e.architecture) if p) or "unnamed adapter"
        names[name] = names.get(name, 0) + 1
    return RoomSummary(spec=spec, gpus=len(mine), kernels=kernels,
                       adapters=tuple(sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))),
                       cpu_matches=sum(e.cpu_match for e in mine), model_matches=sum(e.model_match for e in mine),
                       other_vectors=len(entries) - len(mine))


# ------------------------------------------------------------------------- three numbers, both groupings


def triple_job(stored_bits: tuple[int, int, int]) -> dict:
    """Non-associativity's three float32 values, for the browser to add both ways on the visitor's GPU."""
    return {"job": f"v{JOB_VERSION}-triple-" + "-".join(f"{b:08x}" for b in stored_bits), "kind": "triple",
            "values": list(stored_bits)}


@dataclass(frozen=True, kw_only=True)
class TripleOnGpu:
    vendor: str
    architecture: str
    browser: str
    left: int  # bits of (a + b) + c on the visitor's GPU
    right: int  # bits of a + (b + c)
    same_as_cpu: bool  # both groupings gave this server's CPU bits

    @property
    def adapter(self) -> str:
        return " ".join(p for p in (self.vendor, self.architecture) if p) or "an unnamed adapter"


def judge_triple(report, stored_bits: tuple[int, int, int], cpu: tuple[int, int]) -> TripleOnGpu | Unavailable:
    """The browser's two groupings, checked: two 32-bit patterns for this job. Any pair of float32 values is
    possible in principle (a GPU that flushed subnormals or regrouped would give others), so nothing more is
    refused; the result says whether it is the CPU's."""
    waiting = read_status(report, triple_job(stored_bits)["job"])
    if waiting is not None:
        return waiting
    left, right = _bit_list(report, "groupings", 2)
    adapter = report.get("adapter") if isinstance(report.get("adapter"), Mapping) else {}
    return TripleOnGpu(vendor=_text(adapter.get("vendor"), "the vendor"),
                       architecture=_text(adapter.get("architecture"), "the architecture"),
                       browser=_text(report.get("browser"), "the browser"), left=left, right=right,
                       same_as_cpu=(left, right) == tuple(cpu))
