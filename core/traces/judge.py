"""Judge one matched pair of ops: identical, born here, inherited, not comparable or a format
change; and a difference's size against the rounding envelope of that op.

State. *identical*: the output bits are equal. *not comparable*: the output shapes differ (two
batch sizes, and no row followed), or, following one row, the op reads the whole batch (a
reduction over it, such as ``mask.all()``): no element has a partner, or the other rows count, so
no size is measured and no rounding verdict given. *format change*: the outputs are in two
floating formats (a bfloat16 run against a float32 one, autocast): the difference is the
format's, not rounding's. *born here*: the
inputs are bit-identical (every input tensor's digest, and the non-tensor arguments) and the
output is not: this op made the difference. *inherited*: an input already differed.

An op with several outputs (a layer norm's backward gives the gradients of its input, weight and
bias) has each output judged against its own envelope, with its own K and terms; the op is within
rounding when every differing output is, and its size is that of the worst one.

Size. Measured on the op's sampled output elements (the same flat positions in both traces):
|a - b|, in ULPs of the output format at max(|a|, |b|). It is compared with the same envelope
core.diagnose uses for a reordering (see core.diagnose.envelopes for the derivation), per element,
with K the op's reduction length and u the unit roundoff of the format torch accumulates in
(float32 for float16, bfloat16 and float32; float64 for float64):

- typical size T = u sqrt(K) max(s, |y|) + sqrt(K) minsub (s = sqrt(sum t^2), the probabilistic
  size of a reordered sum of terms of random sign, Higham and Mary 2019; |y| for terms of one sign);
- rigorous bound B = 2 gamma_K sum|t| + K minsub (Higham, eq. 3.4: two orders each within
  gamma_K sum|t| of the exact sum);
- envelope E = min(B, Z T) + one ULP of the output format where it is narrower than the
  accumulation (Z = core.diagnose.envelopes.ENVELOPE_FACTOR = 8). T and B, the output rounding, E
  and |a - b| / E come from core.diagnose.envelopes (reordering_sizes, output_rounding, envelope_of,
  ratio_to), for diagnose's verdict and this judge alike.

sum|t| and s come from the recorded terms of the op's inputs where the op is a matrix product or a
sum ("exact": B is rigorous); for a softmax or a norm the output is one row reduction and sum|t| =
s = |y| (1 for log-softmax, whose error is absolute), plus ``ELEMENTWISE_ULPS`` for the exp, rsqrt
and division inside; where only K is known (fused attention, convolutions, backward of softmax)
sum|t| is estimated as sqrt(K) |y| and the judgement says "estimated".

Ops that do not reduce (core.traces.opclass classes them): a correctly rounded op (``EXACT_OPS``: + - * / sqrt,
comparisons, copies, casts, indexing) gives the same bits from the same inputs on every IEEE machine, so any born
difference there is beyond rounding. Other elementwise functions (exp, tanh, rsqrt, pow, ...) are
not correctly rounded: two implementations, each within 2 ULPs of the exact value (the documented
maximum of CUDA's expf and tanhf; SLEEF's u10 functions promise 1), may differ by
``ELEMENTWISE_ULPS`` = 4 ULPs.

A difference no sampled element shows is checked over all elements through the L1 norms:
|L1(a) - L1(b)| <= sum |a_i - b_i|, so an L1 gap larger than the op's whole-output bound (from the
recorded total of sum|t|) is beyond rounding too. Within rounding means: every sampled element
inside its envelope and the L1 gap inside the whole-output bound.

An inherited difference is set against the same envelope: within it, rounding-sized; larger, *passed on* (the
inputs' difference, carried or grown: "beyond rounding" is kept for what an op adds, which only a born
difference shows). A complex output is judged by its real and imaginary parts (``parts``), each at the scale of
its value's modulus, where a complex product's parts round; a complex product of two complex operands is not
correctly rounded (elementwise). A quantizer's levels, a choice among its grid's, are discrete outputs
(core.traces.opclass.discrete_kind), which core.traces.compare names when a rounding-sized difference flips
them. An op of another namespace that nothing here knows is taken for an elementwise function, and its
size says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from core.arith.formats import FORMATS
from core.arith.hexbits import decode_hex
from core.arith.ulps import in_ulps, ulp_array
from core.diagnose.envelopes import (
    ENVELOPE_FACTOR,
    envelope_of,
    output_rounding,
    ratio_to,
    reordering_bound,
    reordering_sizes,
    summed_ulps,
)
from core.diagnose.rounding import accumulation_format, narrower
from core.traces.arguments import NOT_COMPARABLE as OPAQUE
from core.traces.bits import COMPONENTS
from core.traces.opclass import OpClass, discrete_kind, op_class, packet
from core.traces.oprecord import OpRecord
from core.traces.reductions import TermsKind

ELEMENTWISE_ULPS = 4.0
IDENTICAL, BORN, INHERITED, NOT_COMPARABLE, FORMAT_CHANGE = (
    "identical", "born here", "inherited", "not comparable", "format change")
STATES = (IDENTICAL, BORN, INHERITED, NOT_COMPARABLE, FORMAT_CHANGE)
# the rounding verdict of a difference that is born here or inherited
WITHIN_ROUNDING, BEYOND_ROUNDING = "within rounding", "beyond rounding"
# an inherited difference that an op with no rounding of its own passed on, larger than a rounding: the
# inputs' difference, not this op's error, so no rounding verdict of the op's own applies
CARRIED = "passed on"
WRITE_ONLY_FIRST = frozenset({"copy_", "fill_", "zero_", "normal_", "uniform_", "bernoulli_", "random_"})


@dataclass(frozen=True, kw_only=True)
class Size:
    """A difference's size on the sampled elements, and how it compares with the op's envelope."""

    differing: int  # sampled elements whose bits differ
    sampled: int
    max_ulps: float | None  # in ULPs of the output format (None: not a float output)
    worst_abs: float  # the largest |a - b| on the sample
    vs_typical: float | None  # worst |a - b| / T at that element (None: no typical size for this op)
    vs_bound: float | None  # worst |a - b| / B
    vs_envelope: float  # worst |a - b| / E (inf: a difference where E = 0)
    l1_gap: float | None  # |L1(a) - L1(b)|
    l1_bound: float | None  # the whole-output bound it is checked against
    within: bool
    basis: str  # what the envelope is: "reordering of K terms", "elementwise", "correctly rounded", ...
    rigorous: bool
    carried: bool = False  # an inherited difference an op that rounds correctly passed on (adding none)
    output: int = 1  # which output of the op this is (1-based), of ``outputs``
    outputs: int = 1

    def text(self) -> str:
        which = f"output {self.output} of {self.outputs}: " if self.outputs > 1 else ""
        return which + self._text()

    def _text(self) -> str:
        if self.max_ulps is None:
            what = self.basis.split(",")[0].split(":")[0] if self.basis != "other arguments" else "values"
            return (f"{self.differing} of {self.sampled} sampled {what.removeprefix('a ')} differ"
                    + (" (other choices, from inputs that already differed)" if "already differed" in self.basis
                       else " (no rounding in them)"))
        if self.differing == 0:
            return "no sampled element differs (the difference is elsewhere in the output)" + (
                f"; L1 gap {self.l1_gap:.3g}" + (f" against a bound of {self.l1_bound:.3g}" if self.l1_bound else "")
                if self.l1_gap else "")
        parts = [f"{_num(self.max_ulps)} ULPs"]
        if self.basis.startswith(("reordering", "a row reduction")):
            if self.vs_typical is not None:
                parts.append(f"{_num(self.vs_typical)}x the typical √K·u size")
            if self.vs_bound is not None:
                parts.append(f"{_num(self.vs_bound)}x the γ_K bound" + ("" if self.rigorous else " (estimated)"))
        elif self.basis.startswith("a difference carried"):
            parts.append(f"carried from its inputs (up to {ELEMENTWISE_ULPS:.0f} ULPs reads as rounding-sized)")
        elif self.vs_bound is not None:  # an elementwise function or formula: its allowance in ULPs
            parts.append(f"{_num(self.vs_bound)}x the {ELEMENTWISE_ULPS:.0f}-ULP allowance of {self.basis}"
                         + ("" if self.rigorous else " (estimated)"))
        return f"{self.differing} of {self.sampled} sampled elements differ, at most " + ", ".join(parts)


@dataclass(frozen=True, kw_only=True)
class Judgement:
    state: str  # one of STATES
    size: Size | None  # None when identical, or when the shapes differ
    reason: str  # one sentence: why this state
    detail: str | None = None  # the verdict of a state that has no rounding verdict (see ``verdict``)

    @property
    def verdict(self) -> str | None:
        """"within rounding" / "beyond rounding" for a difference ("passed on" for an inherited one larger than the
        op's own rounding: the inputs' difference, carried or grown, not this op's error); for one that is not
        comparable, why ("shapes differ", "reads the whole batch"); for a format change "<format A> to <format B>";
        None when identical."""
        if self.state == IDENTICAL:
            return None
        if self.state in (NOT_COMPARABLE, FORMAT_CHANGE):
            return self.detail
        if self.size is not None and self.size.within:
            return WITHIN_ROUNDING
        if self.state == INHERITED:  # (an inherited difference is never this op's error)
            return CARRIED
        return BEYOND_ROUNDING


def _num(x: float) -> str:
    return "∞" if not math.isfinite(x) else f"{x:.3g}" if x < 100 else f"{x:,.0f}"


def _values(rec: OpRecord) -> np.ndarray:
    return np.array([decode_hex(h, rec.out_dtype) for h in rec.sample_hex], dtype=np.float64)


def parts(rec: OpRecord) -> OpRecord:
    """A complex output as the record of its real and imaginary parts, in their format: each sample two (its
    hex split in halves), each element's terms for both parts, twice the elements (a part's |t| is at most its
    value's: the terms bound both)."""
    half = len(rec.sample_hex[0]) // 2 if rec.sample_hex else 0
    twice = (lambda v: None if v is None else [x for x in v for _ in (0, 1)])  # noqa: E731
    return replace(rec, out_dtype=COMPONENTS[rec.out_dtype], out_shape=[*rec.out_shape, 2],
                   sample_index=[2 * i + j for i in rec.sample_index for j in (0, 1)],
                   sample_hex=[h[k:k + half] for h in rec.sample_hex for k in (0, half)],
                   sum_abs=twice(rec.sum_abs), scale=twice(rec.scale), outputs=[],
                   total_abs=None if rec.total_abs is None else 2 * rec.total_abs)


@dataclass(frozen=True, kw_only=True)
class _Envelope:
    """How far apart two sampled outputs of an op may be from rounding alone, element by element (``env``),
    with its typical size and a-priori bound where the op has them, and the bound on the whole output's
    L1 gap (``total``, None where none is known)."""

    typical: np.ndarray | None
    bound: np.ndarray | None
    env: np.ndarray
    rigorous: bool
    basis: str
    total: float | None


def _envelope(a: OpRecord, b: OpRecord, kind: OpClass, fmt, acc, m: np.ndarray, ulp: np.ndarray) -> _Envelope:
    """The envelope of ``a``'s op class at the sampled magnitudes ``m`` (the larger of the two sides),
    in the output format ``fmt``, accumulated in ``acc``."""
    n = len(a.sample_index)
    out_round = output_rounding(m, fmt, acc)
    total = None
    numel = math.prod(a.out_shape) if a.out_shape else 1
    if kind == OpClass.REDUCTION:
        k = max(1, a.k or 1)
        if a.terms_kind == TermsKind.EXACT and a.sum_abs is not None and a.scale is not None and len(a.sum_abs) == n:
            sum_abs, s, rigorous, extra = np.array(a.sum_abs), np.array(a.scale), True, np.zeros_like(m)
            basis = f"reordering of {k:,} terms"
            if a.total_abs is not None:  # B_R over the whole output, and each output's rounding to fmt
                total = reordering_bound(k, a.total_abs, acc, numel) + (
                    summed_ulps(max(a.l1 or 0, b.l1 or 0), numel, fmt) if fmt.precision < acc.precision else 0.0)
        elif a.terms_kind in (TermsKind.RELATIVE, TermsKind.RELATIVE_FLOOR):
            one = np.ones_like(m) if packet(a.op) == "_log_softmax" else m
            if a.terms_kind == TermsKind.RELATIVE_FLOOR and n:  # a layer norm: absolute at the others' scale
                one = np.maximum(one, float(np.median(m)))
            sum_abs, s, rigorous, extra = one, one, True, ELEMENTWISE_ULPS * ulp
            basis = f"a row reduction of {k:,} terms"
        else:
            sum_abs, s, rigorous, extra = math.sqrt(k) * m, m, False, ELEMENTWISE_ULPS * ulp
            basis = f"reordering of {k:,} terms (terms estimated)"
        typical, bound = reordering_sizes(k, s, m, sum_abs, acc)
        env = envelope_of(bound, ENVELOPE_FACTOR * typical, out_round + extra)
    elif kind == OpClass.ELEMENTWISE and a.terms_kind == TermsKind.INPUTS and a.scale is not None and len(a.scale) == n:
        # a formula of its inputs that can cancel (tanh's backward g (1 - y^2), erf-based functions): an
        # absolute error at the inputs' scale, c = max |input| at that position (estimated, not a bound)
        c = np.array(a.scale)
        typical = ulp + float(fmt.unit_roundoff) * c * np.maximum(1.0, c)
        bound = ELEMENTWISE_ULPS * typical
        env, rigorous, basis = bound, False, "a formula of its inputs (its cancellation estimated from their size)"
    elif kind == OpClass.ELEMENTWISE:
        typical, bound = ulp, ELEMENTWISE_ULPS * ulp
        env, rigorous, basis = bound, True, "an elementwise function (not correctly rounded)"
        if not a.op.startswith("aten."):  # another namespace's op, of which nothing is known
            rigorous, basis = False, f"an op the tracer has no rounding model for ({packet(a.op)}), taken for " + basis
        total = ELEMENTWISE_ULPS * summed_ulps(max(a.l1 or 0, b.l1 or 0), numel, fmt)
    else:
        typical = bound = None
        env, rigorous, basis = np.zeros_like(m), True, "a correctly rounded op (no rounding freedom)"
        total = 0.0
    return _Envelope(typical=typical, bound=bound, env=env, rigorous=rigorous, basis=basis, total=total)


def _discrete_size(a: OpRecord, b: OpRecord, inherited: bool) -> Size:
    """The difference between two discrete outputs (indices, a mask, integers): equal or not, no rounding."""
    diff = sum(x != y for x, y in zip(a.sample_hex, b.sample_hex, strict=True))
    exact = a.out_digest == b.out_digest
    what = discrete_kind(a.op, a.out_dtype) or "integers"
    basis = (f"{what}, from inputs that already differed: a choice follows its input, so this is the input's "
             "difference passed on" if inherited else
             f"{what}: integers have no rounding, so the same inputs should give the same {what}")
    return Size(differing=diff, sampled=len(a.sample_index), max_ulps=None, worst_abs=float(diff), vs_typical=None,
                vs_bound=None, vs_envelope=0.0 if exact else math.inf, l1_gap=None, l1_bound=None, within=exact,
                basis=basis, rigorous=True, carried=inherited and not exact)


def _gaps(a: OpRecord, b: OpRecord, modulus: bool) -> tuple[np.ndarray, np.ndarray]:
    """(|a - b|, the larger magnitude of the two) at each sampled element: inf for NaN against a number, 0
    for two NaNs; ``modulus``: the samples are a complex value's parts, whose magnitude is the modulus."""
    va, vb = _values(a), _values(b)
    with np.errstate(invalid="ignore", over="ignore"):
        same = (va == vb) | (np.isnan(va) & np.isnan(vb))
        d = np.where(same, 0.0, np.abs(va - vb))
        d = np.where(np.isnan(d), np.inf, d)  # NaN against a number, or inf - inf of opposite signs
        m = np.maximum(np.abs(np.nan_to_num(va, posinf=0, neginf=0)), np.abs(np.nan_to_num(vb, posinf=0, neginf=0)))
    if modulus:
        m = np.repeat(np.hypot(m[0::2], m[1::2]), 2)  # a complex value's parts round at the scale of its modulus
    return d, m


def _carried(ulp: np.ndarray) -> _Envelope:
    """The envelope of an input's difference that an op with no rounding of its own carries: a few ULPs."""
    return _Envelope(typical=ulp, bound=ELEMENTWISE_ULPS * ulp, env=ELEMENTWISE_ULPS * ulp, rigorous=True,
                     basis=(f"a difference carried from its inputs (this op rounds correctly and adds none; up to "
                            f"{ELEMENTWISE_ULPS:.0f} ULPs reads as rounding-sized)"), total=None)


def _l1_gap(a: OpRecord, b: OpRecord, total: float | None) -> tuple[float | None, float | None]:
    """(|L1(a) - L1(b)|, its bound: ``total`` plus the float64 norms' own rounding, numel 2^-53 of each) or None."""
    l1_gap = abs(a.l1 - b.l1) if a.l1 is not None and b.l1 is not None else None
    if total is None or l1_gap is None:
        return l1_gap, None
    return l1_gap, total + (math.prod(a.out_shape) if a.out_shape else 1) * 2.0 ** -52 * max(a.l1, b.l1)


def _at_worst(d: np.ndarray, i: int | None, ref) -> float | None:
    """The difference at element ``i`` over ``ref`` there (an array, a number, or None: no such size)."""
    if ref is None or i is None:
        return None
    ref_v = float(np.asarray(ref)[i]) if np.ndim(ref) else float(ref)
    return float(d[i] / ref_v) if ref_v > 0 else (math.inf if d[i] > 0 else 0.0)


def size_of(a: OpRecord, b: OpRecord, inherited: bool = False, modulus: bool = False) -> Size | None:
    """The difference between two outputs of the same shape and dtype, against ``a``'s envelope.
    ``inherited``: an input already differed. An op with no rounding freedom (+, a copy) then carries its
    input's difference: up to ``ELEMENTWISE_ULPS`` ULPs of it reads as rounding-sized, not as this op's error.
    A discrete output (indices, a mask, integers) has no rounding: equal or not. A complex output is judged by its
    parts (``parts``), each against the envelope at its element's modulus (``modulus``), where its rounding lies.
    An inherited difference larger than the op's envelope is carried (``Size.carried``, "passed on"): the
    inputs' difference, carried or grown, not an error this op adds."""
    if a.out_shape != b.out_shape or a.sample_index != b.sample_index:
        return None
    if a.out_dtype != b.out_dtype and not (a.out_dtype in FORMATS and b.out_dtype in FORMATS) and not (
            a.out_dtype in COMPONENTS and b.out_dtype in COMPONENTS):
        return None
    if a.out_dtype in COMPONENTS:  # judged by its parts' rounding, at the scale of the element's modulus
        return size_of(parts(a), parts(b), inherited, modulus=True)
    if a.out_dtype not in FORMATS:
        return _discrete_size(a, b, inherited)
    n = len(a.sample_index)
    out_dtype = narrower(a.out_dtype, b.out_dtype)  # two formats (autocast against plain): the coarser one judges
    fmt = FORMATS[out_dtype]
    d, m = _gaps(a, b, modulus)
    ulp = ulp_array(m, fmt)
    differing = int(np.sum([x != y for x, y in zip(a.sample_hex, b.sample_hex, strict=True)]))
    kind = op_class(a)
    carried = inherited and kind == OpClass.EXACT  # no rounding of its own: the input's difference
    e = _carried(ulp) if carried else _envelope(a, b, kind, fmt, FORMATS[accumulation_format(out_dtype)], m, ulp)
    r_env = ratio_to(d, e.env)
    worst_i = int(np.argmax(r_env)) if n else None
    l1_gap, l1_bound = _l1_gap(a, b, e.total)
    within = bool(np.all(d <= e.env)) and (l1_bound is None or l1_gap is None or l1_gap <= l1_bound)
    basis = e.basis
    if kind == OpClass.EXACT and a.out_digest != b.out_digest and not carried:
        # the same numbers in other encodings (a NaN's payload, -0 against +0) are not a rounding difference
        # either; only where the sample shows other bits with equal values is that the explanation
        within = n > 0 and differing > 0 and bool(np.all(d == 0)) and l1_gap in (0.0, None)
        if within:
            basis = "a correctly rounded op: the same values, other encodings (NaN payloads or signed zeros)"
    return Size(differing=differing, sampled=n, max_ulps=float(np.max(in_ulps(d, m, fmt))) if n else 0.0,
                worst_abs=float(np.max(d)) if n else 0.0, vs_typical=_at_worst(d, worst_i, e.typical),
                vs_bound=_at_worst(d, worst_i, e.bound), vs_envelope=float(r_env[worst_i]) if n else 0.0,
                l1_gap=l1_gap, l1_bound=l1_bound, within=within, basis=basis, rigorous=e.rigorous,
                carried=carried or (inherited and not within))


def _sized(a: OpRecord, b: OpRecord, inherited: bool = False) -> Size | None:
    """The size of the difference; for several outputs, each against its own envelope: within when
    every differing output is, reported at the worst one."""
    outs_a, outs_b = a.output_records(), b.output_records()
    if len(outs_a) == 1 or len(outs_a) != len(outs_b):
        return size_of(a, b, inherited)
    sizes = [replace(s, output=i + 1, outputs=len(outs_a)) for i, (x, y) in enumerate(zip(outs_a, outs_b, strict=True))
             if x.out_digest != y.out_digest and (s := size_of(x, y, inherited)) is not None]
    if not sizes:  # the difference lies in an output past the recorded ones, or a shape differs
        return size_of(a, b, inherited)
    worst = max(sizes, key=lambda z: (not z.within, z.vs_envelope))
    return replace(worst, within=all(z.within for z in sizes))


def _shapes(r: OpRecord) -> list[list[int]]:
    return [o.out_shape for o in r.output_records()]


def judge(a: OpRecord, b: OpRecord) -> Judgement:
    if a.out_digest == b.out_digest and a.out_shape == b.out_shape:
        return Judgement(state=IDENTICAL, size=None, reason="same output bits")
    if a.mixes_rows or b.mixes_rows:
        return Judgement(state=NOT_COMPARABLE, size=None,
                         reason="it reads across the batch's rows (a reduction over the batch, a sort of the whole "
                         "batch's tokens, or an input whose rows were mixed so already), so the other rows count in "
                         "its result: it is not the followed row's arithmetic", detail="reads the whole batch")
    shapes_a, shapes_b = _shapes(a), _shapes(b)
    # (a version 1 file has no per-output fields: only its first shape is compared)
    if a.out_shape != b.out_shape or (len(shapes_a) == len(shapes_b) and shapes_a != shapes_b):
        sa, sb = (a.out_shape, b.out_shape) if a.out_shape != b.out_shape else (shapes_a, shapes_b)
        return Judgement(state=NOT_COMPARABLE, size=None, reason=_shapes_reason(a, b, sa, sb), detail="shapes differ")
    size = _sized(a, b, inherited=a.in_digests != b.in_digests or a.in_shapes != b.in_shapes)
    if a.out_dtype != b.out_dtype and ((a.out_dtype in FORMATS and b.out_dtype in FORMATS) or (
            a.out_dtype in COMPONENTS and b.out_dtype in COMPONENTS)):
        return Judgement(state=FORMAT_CHANGE, size=size,
                         reason=f"the outputs are in other formats ({a.out_dtype} against {b.out_dtype}): the "
                         "difference is the format's, not rounding's",
                         detail=f"{a.out_dtype} to {b.out_dtype}")
    skip = 1 if packet(a.op) in WRITE_ONLY_FIRST else 0  # copy_ and fill_ overwrite their first input
    inputs_same = a.in_digests[skip:] == b.in_digests[skip:] and a.in_shapes == b.in_shapes
    if inputs_same and a.args != b.args:
        return Judgement(state=BORN, size=_beyond(size),
                         reason=f"the same input bits with other arguments ({a.args} against {b.args})")
    if inputs_same and OPAQUE in a.args:
        return Judgement(state=BORN, size=size,
                         reason="its tensor inputs are bit-identical in both runs and its output is not, though an "
                         f"argument cannot be compared by its content ({a.args}), and it may differ")
    if inputs_same:
        return Judgement(state=BORN, size=size,
                         reason="its inputs are bit-identical in both runs and its output is not")
    changed = [i for i, (x, y) in enumerate(zip(a.in_digests, b.in_digests, strict=False)) if x != y]
    which = ", ".join(f"input {i + 1}" for i in changed[:4]) or "the inputs' shapes"
    return Judgement(state=INHERITED, size=size, reason=f"{which} already differed")


def _shapes_reason(a: OpRecord, b: OpRecord, sa, sb) -> str:
    """Why two output shapes differ, in words: a batch not in the first dimension, or two batch sizes."""
    head = f"the output shapes differ ({sa} against {sb}), so no element has a partner"
    if len(a.out_shape) == len(b.out_shape):
        apart = [d for d, (x, y) in enumerate(zip(a.out_shape, b.out_shape, strict=True)) if x != y]
        sideways = len(apart) == 1 and apart[0] > 0
        if sideways or a.not_batch_first or b.not_batch_first:
            d = apart[0] + 1 if sideways else None
            return (head + (f": they differ in dimension {d} only, where the batch sits" if d else "")
                    + "; this tensor is not batch-first (an RNN's [layers, batch, hidden] state, a sequence-first or "
                    "transposed tensor), and --follow-row cuts the first dimension only")
    if not a.in_shapes and not b.in_shapes:
        return (head + ": it makes a tensor from sizes alone, no input data, and its size follows the batch (an "
                "arange over the batch's rows): bookkeeping of the batch, which a followed row cannot cut")
    return head + ("; a batch against another batch compares one row of each (scripts.trace run --follow-row)")


def _beyond(size: Size | None) -> Size | None:
    return None if size is None else replace(size, within=False, basis="other arguments")
