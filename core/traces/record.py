"""Record every op of a run: what it computed, where in the model, and the bits it made.

Why a dispatch mode of our own and not torch's DebugMode
--------------------------------------------------------
torch 2.13 ships ``torch.utils._debug_mode.DebugMode`` (private, a prototype). It records every
dispatched op and, with ``DebugMode.log_tensor_hashes``, a hash of each tensor, and
``check_hash_mismatches`` compares two runs. What a trace here needs and DebugMode lacks:

- *bits*: its hashes are a float64 L1 norm or an XOR-sum of the bits, which is blind to order (two
  elements swapped hash the same). "Inputs bit-identical, output not" needs a digest of the bytes in
  order: XXH3's 64 bits here (xxhash; 35x SHA-256 on the 2-core development VM, where a traced forward
  pass of the tiny language model hashed 5 MB, 3.7 ms of SHA-256 against 15 ms for the untraced pass;
  a digest only has to tell two runs' bits apart, not withstand an adversary);
- *the reduction length and terms*: K and sum|t| need the op's live inputs as it runs; DebugMode keeps
  its arguments as strings unless ``store_original_args``, which keeps every tensor alive to the end;
- *one module path per op*: ``record_nn_module`` logs module entries as separate calls;
- *runs that differ*: ``check_hash_mismatches`` raises when the op sequences differ in length or names,
  the case of a fused kernel on one device and a decomposition on the other (core.traces.align).

So ``TraceMode`` is a ``TorchDispatchMode`` (DebugMode's mechanism) with a module tracker
(core.traces.oprules.OrderedTracker, torch's ModuleTracker with entry order) for module paths (core.traces.modulepath).
tests/core/traces/test_record.py checks that it sees DebugMode's compute ops, in order, on the MLP step.

What is kept per op is an ``OpRecord`` (core.traces.oprecord says what it holds). Every namespace's ops are
recorded (``quantized::``, a library's custom ops) but views, ops that compute nothing and the profiler's range
markers (core.traces.opfacts says which); an error the run raises comes out as ``OpFailed``, naming its module
and the op that raised it.

Memory allocated without data (``empty`` and its kin, not recorded themselves) is tracked byte by byte
(core.traces.bits.UninitialisedMemory): a tensor none of whose bytes an op has written since is uninitialised,
its digest the marker ``UNINITIALISED`` and, as an output, with no samples, norm or terms; so is what an op
makes by reading one. Two runs with other leftovers in the allocator then record alike (docs/tracing.md says
what is beyond it).

Following one row (``follow_batch``, ``follow_row``): with a batch of B rows, a tensor derived from
the run's inputs whose first dimension is a multiple of B is cut to row r's share (rows r·n/B to
(r+1)·n/B - 1) before it is hashed, sampled and sized, so a trace at batch 8 describes one request
and aligns with a trace of that request alone. Parameters are never cut (they do not derive from
the inputs), nor is the backward pass (parameter gradients sum over the whole batch), nor a tensor
whose rows are no longer the batch's or whose batch is not first (core.traces.oprules says which).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.module_tracker import ModuleTracker

from core.traces import oprules, reductions
from core.traces.arguments import MAX_ARG_TEXT as MAX_ARG_TEXT
from core.traces.arguments import Opaque, arg_text
from core.traces.arguments import tensors_of as tensors_of
from core.traces.bits import DIGEST as DIGEST
from core.traces.bits import SAMPLE as SAMPLE
from core.traces.bits import UNINITIALISED as UNINITIALISED
from core.traces.bits import TensorMap as TensorMap
from core.traces.bits import (
    UninitialisedMemory,
    digest_of,
    dtype_name,
    flat_values,
    l1_norm,
    l1_of,
    positions,
    quant_params,
    rows_values,
    sample_hex,
    sample_text,
    scratch_digest,
    values_of,
    write_samples,
)
from core.traces.bits import _combined as _combined
from core.traces.bits import digest as digest
from core.traces.bits import sample_positions as sample_positions
from core.traces.modulepath import ModulePath
from core.traces.opfacts import _SKIP as _SKIP
from core.traces.opfacts import OpFacts, inputs_of, op_facts
from core.traces.oprecord import NO_OUTPUT, OpRecord

MAX_OPS = 20_000  # ops recorded per trace; a run with more is refused, not truncated
MAX_INPUTS = 64  # input tensors recorded one by one (a longer list's rest is one digest)
MAX_OUTPUTS = 8  # outputs of one op recorded one by one (more are only digested)
# module hooks are process-global: two traces at once would see each other's modules (one at a time)
TRACE_LOCK = threading.RLock()


class TooManyOps(RuntimeError):
    pass


class OpFailed(RuntimeError):
    """The run raised ``error`` in module ``module``, out of op ``op`` where one raised it (its text, as a trace
    names it; None where the error came from elsewhere): the trace names where, which the error's own message
    often does not (raised from ``run_traced``, from the error)."""

    def __init__(self, error: Exception, op: str | None, module: str) -> None:
        super().__init__(f"{op + ' in ' if op else 'in '}{module}: {type(error).__name__}: {error}")
        self.error, self.op, self.module = error, op, module


def _version(t: torch.Tensor) -> int | None:
    """The tensor's version counter; None for an inference-mode tensor, which has none (not cached)."""
    try:
        return t._version
    except RuntimeError:
        return None


class TraceMode(TorchDispatchMode):
    """Records an ``OpRecord`` for every computing op dispatched while it is active: aten's and every other
    namespace's (``quantized::linear_dynamic``, a library's custom ops), but for the namespaces in
    ``oprules.SKIPPED_NAMESPACES``, which it counts in ``skipped`` instead. ``failure``: (the exception, the op,
    its module) of the last op that raised one.

    ``perturb``: (1-based op index, relative size): that op's first floating output is multiplied
    by (1 + size) in place after it runs: a deliberately planted difference, for testing the
    judgement (the trace says so in its settings). ``perturbed`` says afterwards whether it was.

    ``follow_batch``, ``follow_row``: in a batch of ``follow_batch`` rows, keep row ``follow_row`` of
    every tensor derived from the inputs whose first dimension is a multiple of the batch (its
    ``1/follow_batch`` share of rows). The backward pass is recorded whole: parameter gradients sum over
    the batch, and no row of theirs belongs to one request."""

    def __init__(self, tracker: ModuleTracker, root_name: str, follow_batch: int = 1,
                 perturb: tuple[int, float] | None = None, max_ops: int = MAX_OPS, follow_row: int = 0) -> None:
        super().__init__()
        self.tracker = tracker
        self._paths = ModulePath(tracker, root_name)
        self.follow = max(1, int(follow_batch))
        self.row = int(follow_row)
        if not 0 <= self.row < self.follow:
            raise ValueError(f"row {follow_row} is not in a batch of {self.follow}")
        self.perturb = perturb
        self.perturbed: str | None = None  # the op that was perturbed (its name), once it was
        self.perturb_seen: str | None = None  # the op at the perturbed index, perturbed or not
        self.max_ops = max_ops
        self.ops: list[OpRecord] = []
        self.skipped: dict[str, int] = {}  # ops of a namespace that is not recorded -> calls
        self.failure: tuple | None = None
        self._opaque = Opaque()  # the text of arguments that are neither tensors nor numbers, by their content
        self._derived = TensorMap()  # tensors that derive from the run's inputs
        self._digests = TensorMap()  # tensor -> (version, digest of its followed bits)
        # ids of the tensors the op being recorded writes in place (alive while it is recorded: args hold them)
        self._written: frozenset[int] = frozenset()
        # following a row: derived tensors whose first dimension is not the batch's rows (their rows mix the
        # batch's, or the batch moved to another dimension): recorded whole, never cut
        self._mixed = TensorMap()
        self._scratch = TensorMap()  # outputs that are scratch (a kernel's workspace), not results
        self._uninit = UninitialisedMemory()  # tensors in memory allocated without data (an empty tensor's)
        self.not_batch_first: list[OpRecord] = []  # ops with an output whose batch is not its first dimension
        self._counter = 0
        self._bw = False  # whether the op being recorded runs in the backward pass (asked once per op)
        self._samples: list = []  # float samples whose text is written when the mode exits (write_samples)

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch wraps a mode's __torch_dispatch__ to keep its compiler out of it, which imports the
        # compiler (torch._dynamo, about 68 MB) and costs every dispatched op a few frame-hook calls.
        # Nothing here compiles, so the plain method serves.
        return False

    def __exit__(self, *exc):
        write_samples(self._samples)
        return super().__exit__(*exc)

    def mark_inputs(self, tensors) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._derived[t] = True

    def _share(self, t: torch.Tensor) -> int | None:  # rows of t that are the followed row's (None: not cut)
        if self.follow > 1 and not self._bw and self._derived.get(t, False) and t.dim() \
                and t.shape[0] % self.follow == 0 and not (self._mixed._d and self._mixed.get(t, False)):
            return t.shape[0] // self.follow
        return None

    def _followed(self, t: torch.Tensor, share: int | bool | None = False) -> torch.Tensor:
        share = self._share(t) if share is False else share
        return t if share is None else t.narrow(0, self.row * share, share)

    def _values(self, t: torch.Tensor, share: int | None):
        """(shape, values, flat) of t's followed rows (``share``: ``_share(t)``): as ``rows_values`` gives them
        with flat None, or else through torch (``flat_values`` of the cut, and ``values_of`` of that)."""
        got = rows_values(t, share, self.row)
        if got is not None:
            return *got, None
        flat = flat_values(followed := self._followed(t, share))
        return tuple(followed.shape), values_of(flat), flat

    def _digest(self, t: torch.Tensor, after: bool = False, share: int | bool | None = False) -> str:
        """The digest of t's followed bits (``share``: ``_share(t)`` where the caller has it), kept for t until
        its version changes (a cached one needs no cut). ``after``: t is an output of the op just run."""
        if self._scratch._d and self._scratch.get(t, False):
            return scratch_digest(t)
        if self._uninit.tracked and self._uninit.holds_no_data(t):
            return UNINITIALISED
        version = _version(t)
        written = after and self._written and self._is_written(t)  # its cached digest is of the bits before the op
        if version is not None and not written:
            e = self._digests._d.get(id(t))  # (TensorMap.get, inline: a trace asks this for every input)
            if e is not None and e[0]() is t and e[1][0] == version:
                return e[1][1]
        shape, values, flat = self._values(t, self._share(t) if share is False else share)
        d = digest_of(shape, t.dtype, values, quant_params(t) if flat is not None and t.is_quantized else b"")
        self._remember(t, d, after)
        return d

    def _is_written(self, t: torch.Tensor) -> bool:
        return id(t) in self._written

    def _remember(self, t: torch.Tensor, d: str, after: bool) -> None:
        """Keep ``d`` as the digest of t's bits (``after``: taken after the op ran). An op that writes an
        argument in place returns here before torch counts the write in that tensor's version (the autograd
        layer above this mode does it on the way out), so a written output's digest is that of the next
        version. Were the count not made, the next lookup would only miss and hash again."""
        if (v := _version(t)) is not None:
            self._digests[t] = (v + 1 if after and self._written and self._is_written(t) else v, d)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        f = op_facts(func)
        tensors_in = inputs_of(args, kwargs)
        get = self._derived.get
        derived = any(get(a, False) for a in tensors_in)
        if f.skip:
            return self._pass_through(f, args, kwargs, tensors_in, derived)
        self._bw = bw = self.tracker.is_bw
        shares = [self._share(a) for a in tensors_in] if self.follow > 1 else [None] * len(tensors_in)
        reads = self.follow > 1 and derived and not bw and (
            f.dim_arg is not None or self._mixed._d or f.reads_whole or f.name in oprules.GATHERS)
        taint, mixes = oprules.taint(self._mixed, f.name, f.dim_arg, args, kwargs, tensors_in, shares, self.row,
                                     f.reads_whole) if reads else (None, False)
        head = self._inputs(tensors_in, shares)  # taken before the op runs: it may write its inputs
        out = self._run(f, args, kwargs)
        outs, places = f.outputs(out, args)
        derived, taint = self._mark_outputs(f.name, out, outs, tensors_in, derived, taint)
        self._counter += 1
        if self._counter > self.max_ops:
            raise TooManyOps(f"the run dispatched more than {self.max_ops:,} ops (the cap of one trace)")
        if self.perturb is not None and self.perturb[0] == self._counter:
            self._perturb(outs, f.text)
        written = f.written(args, kwargs)
        self._written = frozenset(map(id, written)) if written else frozenset()
        if self._uninit.tracked:
            self._uninit.after_op(f.name, tensors_in, outs, written)
        try:
            self.ops.append(self._record(f, args, kwargs, tensors_in, head, outs, places, taint, mixes, derived))
        finally:
            self._written = frozenset()
        return out

    def _run(self, f: OpFacts, args, kwargs):
        """The op's result; an error it raises is kept in ``failure`` with the op and its module."""
        try:
            return f.func(*args, **kwargs)
        except Exception as e:
            self.failure = (e, f.text, self._paths.current())
            raise

    def _pass_through(self, f: OpFacts, args, kwargs, tensors_in, derived: bool):
        """Run an op that is not recorded (a view, an allocation, a namespace not recorded): what it returns is
        followed as its inputs are (derived from the run's inputs or not, its rows mixed or not, holding data or
        not); one of a namespace not recorded is counted in ``skipped``."""
        if f.unrecorded:
            self.skipped[f.text] = self.skipped.get(f.text, 0) + 1
        out = self._run(f, args, kwargs)
        name = f.name
        if f.allocates:
            self._uninit.allocated(tensors_of(out, []))
        elif self._uninit.tracked:
            self._uninit.after_view(tensors_in, tensors_of(out, []))
        made = self.follow > 1 and name in oprules.BROADCASTS and oprules.batch_made(out, tensors_in, self.follow)
        if derived or made:
            for o in tensors_of(out, []):
                self._derived[o] = True
            if self.follow > 1 and derived and name not in oprules.SHAPE_ONLY:
                got = [self._mixed.get(a) for a in tensors_in] if len(self._mixed) else []
                taint = "rows" if "rows" in got else "layout" if "layout" in got or (
                    name in oprules.REORDERING_VIEWS and oprules.moves_first_dim(out)) else None
                if taint:
                    for o in tensors_of(out, []):
                        self._mixed[o] = taint
        return out

    def _inputs(self, tensors_in: list[torch.Tensor], shares: list[int | None]) -> dict:
        """The record's input fields (``in_shapes``, ``in_dtypes``, ``in_digests``) of the followed rows; past
        ``MAX_INPUTS`` tensors (a cat of hundreds) the rest is one digest (equal iff all are)."""
        in_digests, in_shapes, in_dtypes = [], [], []
        for a, c in zip(tensors_in, shares, strict=True):
            in_digests.append(self._digest(a, share=c))
            shape = list(a.shape)
            if c is not None:
                shape[0] = c
            in_shapes.append(shape)
            in_dtypes.append(dtype_name(a.dtype))
        if len(tensors_in) > MAX_INPUTS:
            rest = _combined(in_digests[MAX_INPUTS - 1:])
            in_digests = [*in_digests[:MAX_INPUTS - 1], rest]
            in_shapes = [*in_shapes[:MAX_INPUTS - 1], [len(tensors_in) - MAX_INPUTS + 1]]
            in_dtypes = [*in_dtypes[:MAX_INPUTS - 1], "the rest"]
        return {"in_shapes": in_shapes, "in_dtypes": in_dtypes, "in_digests": in_digests}

    def _mark_outputs(self, name: str, out, outs: list[torch.Tensor], tensors_in: list[torch.Tensor],
                      derived: bool, taint: str | None) -> tuple[bool, str | None]:
        """Mark the outputs as derived from the run's inputs where they are (and as ``taint`` says their rows
        mix); (derived, taint), which a batch made from no data sets."""
        if self.follow > 1 and not derived and (name in oprules.BROADCASTS or not tensors_in):
            if oprules.batch_made(out, tensors_in if name in oprules.BROADCASTS else [], self.follow):
                derived = True  # a batch made from no data (positions repeated over the batch)
            elif not tensors_in and isinstance(out, torch.Tensor) and oprules.sideways([out], self.follow):
                derived, taint = True, "layout"  # an RNN's initial state, [layers, batch, hidden]
        if derived:
            for o in outs:
                self._derived[o] = True
            if taint:
                for o in outs:
                    self._mixed[o] = taint
        return derived, taint

    def _perturb(self, outs: list[torch.Tensor], text: str) -> None:
        """Multiply the first floating output of the op at the perturbed index by (1 + size), in place."""
        self.perturb_seen = text
        target = next((o for o in outs if (o.is_floating_point() or o.is_complex()) and o.numel()), None)
        if target is not None:
            with torch.no_grad():
                target.mul_(1.0 + self.perturb[1])
            self.perturbed = text

    def _output(self, f: OpFacts, args, kwargs, tensors_in, out: torch.Tensor, which: int,
                scratch: bool = False) -> dict:
        """One output's fields (``OUTPUT_FIELDS``): shape, dtype, digest, L1 norm, samples and terms (a scratch
        output, a kernel's workspace: its shape and dtype only, marked scratch)."""
        if scratch:
            self._scratch[out] = True
            return {**NO_OUTPUT, "out_shape": list(out.shape), "full_shape": list(out.shape),
                    "out_dtype": dtype_name(out.dtype), "out_digest": scratch_digest(out), "scratch": True}
        share = self._share(out)
        if self._uninit.tracked and self._uninit.holds_no_data(out):  # garbage: no bits, samples, norm, terms
            shape = list(out.shape)
            if share is not None:
                shape[0] = share
            return {**NO_OUTPUT, "out_shape": shape, "full_shape": list(out.shape), "out_dtype": dtype_name(out.dtype),
                    "out_digest": UNINITIALISED}
        # one row-major view (or copy) of the followed rows for the digest, the samples and the L1 norm
        shape, values, flat = self._values(out, share)
        pos = positions(values.size, SAMPLE)
        idx = list(pos)
        if flat is None:
            l1, sampled = l1_of(values, out.dtype), sample_text(values, out.dtype, pos, self._samples)
        else:
            l1, sampled = l1_norm(flat, values), sample_hex(flat, idx, flat, values)
        # a cut output's sampled positions are its leading rows, the same flat indices in the whole output;
        # the total over all elements would be the whole output's, not the cut's: not made (no L1 check)
        t = reductions.terms(f.func, args, kwargs, out, pos, which, total=share is None, name=f.name) \
            if f.may_have_terms else None
        d = digest_of(shape, out.dtype, values, quant_params(out) if flat is not None and out.is_quantized else b"")
        self._remember(out, d, after=True)
        if t is None and which == 0 and f.name in reductions.FORMULA_OPS:
            t = reductions.input_scales(tensors_in, self._followed(out, share), idx, self._followed)
        return {"out_shape": list(shape), "full_shape": list(out.shape), "out_dtype": dtype_name(out.dtype),
                "out_digest": d, "l1": l1, "sample_index": idx, "sample_hex": sampled,
                "k": t.k if t and t.kind != reductions.TermsKind.INPUTS else None,
                "terms_kind": t.kind.value if t else None,
                "sum_abs": t.sum_abs if t else None, "scale": t.scale if t else None,
                "total_abs": t.total_abs if t else None}

    def _record(self, f: OpFacts, args, kwargs, tensors_in, head: dict, outs, places, taint: str | None = None,
                across: bool | str = False, derived: bool = False) -> OpRecord:
        """The op's record. ``head``: its input fields (``in_shapes``, ``in_dtypes``, ``in_digests``), which
        this completes with the op's place in the run (one dict per op, as the record's keywords)."""
        head["index"] = self._counter
        head["op"] = f.text
        head["module"] = self._paths.current()
        head["backward"] = self._bw
        head["args"] = arg_text(args, kwargs, self._opaque)
        if not outs:
            return OpRecord._of({**head, **NO_OUTPUT, "outputs": [], "mixes_rows": False, "not_batch_first": False})
        scratch = f.scratch | oprules.workspaces(outs, places, tensors_in) if len(outs) > 1 else f.scratch
        each = [self._output(f, args, kwargs, tensors_in, outs[0], places[0], places[0] in scratch)] \
            if len(outs) == 1 else [self._output(f, args, kwargs, tensors_in, o, i, i in scratch)
                                    for o, i in zip(outs[:MAX_OUTPUTS], places[:MAX_OUTPUTS], strict=True)]
        first = each[0] if len(outs) == 1 and "scratch" not in each[0] else \
            {k: v for k, v in each[0].items() if k != "scratch"}
        mixes = across is True or (across == "if integer" and not outs[0].is_floating_point()) or (
            self.follow > 1 and first["out_shape"] == first["full_shape"] and any(
                s != list(a.shape) for s, a in zip(head["in_shapes"], tensors_in, strict=False)))
        sideways = self.follow > 1 and not mixes and (taint == "layout" or (first["out_shape"] == first["full_shape"]
                                                      and (derived or not tensors_in)
                                                      and oprules.sideways(outs[:MAX_OUTPUTS], self.follow)))
        if len(outs) > 1:  # every output counts (indices of a sort, a norm's mean and rstd, ...)
            rest = "".join(e["out_digest"] for e in each[1:]) \
                + "".join(self._digest(o, after=True) for o in outs[MAX_OUTPUTS:])
            first["out_digest"] = _combined([first["out_digest"], rest])
        head.update(first)
        head["outputs"], head["mixes_rows"], head["not_batch_first"] = each if len(outs) > 1 else [], mixes, sideways
        rec = OpRecord._of(head)
        if sideways:
            self.not_batch_first.append(rec)
        return rec


def run_traced(fn: Callable[[], object], root: torch.nn.Module | None, inputs=(), follow_batch: int = 1,
               perturb: tuple[int, float] | None = None, max_ops: int = MAX_OPS,
               follow_row: int = 0, notes: list[str] | None = None) -> list[OpRecord]:
    """Run ``fn()`` under a ``TraceMode`` and return its op records. ``root``: the model whose
    submodules name the module paths (None: every op is in ``model``); ``inputs``: the tensors that
    stand for the run's data (what ``follow_batch`` follows). A perturbation that finds no op to
    perturb (past the last op, or an op with no floating output) is refused: a ValueError that says why.
    ``notes``: where given, a sentence is added to it when, following a row, some outputs keep the batch in
    another dimension than the first (they cannot be cut to the row), and one naming the ops of a namespace that
    is not recorded (``oprules.SKIPPED_NAMESPACES``). An error the run raises (but a ValueError, which says
    what is wrong already) comes out as ``OpFailed``, naming its module and the op that raised it, from the
    error."""
    root_name = type(root).__name__ if root is not None else "model"
    with TRACE_LOCK:
        tracker = oprules.OrderedTracker()
        with tracker:
            mode = TraceMode(tracker, root_name, follow_batch, perturb, max_ops, follow_row)
            mode.mark_inputs(inputs)
            try:
                with mode:
                    fn()
            except (ValueError, TooManyOps):
                raise
            except Exception as e:
                if mode.failure is not None and mode.failure[0] is e:
                    raise OpFailed(e, mode.failure[1], mode.failure[2]) from e
                raise OpFailed(e, None, mode._paths.deepest()) from e
    if perturb is not None and mode.perturbed is None:
        if mode.perturb_seen is None:
            raise ValueError(f"cannot perturb op {perturb[0]}: the run has only {len(mode.ops)} ops")
        raise ValueError(f"cannot perturb op {perturb[0]} ({mode.perturb_seen}): it has no floating output "
                         "to multiply (pick a matrix product, a norm or another floating op)")
    if notes is not None and mode.not_batch_first:
        notes.append(oprules.not_batch_first_note(mode.not_batch_first, mode.follow))
    if notes is not None and mode.skipped:
        notes.append(oprules.skipped_note(mode.skipped))
    return mode.ops
