"""What the recorder (core.traces.record) knows of one op overload, worked out at its first call and kept for
good (``op_facts``), and the tensors of one call: those it read (``inputs_of``), returned (``OpFacts.outputs``)
and wrote in place (``OpFacts.written``).

Not recorded (``OpFacts.skip``): views and the ops that compute nothing (``detach``; ``clone``, which copies
the same bits), allocations without data (``OpFacts.allocates``, whose bytes core.traces.bits.UninitialisedMemory
tracks instead), and the ops of a namespace not recorded (core.traces.oprules.SKIPPED_NAMESPACES), which are
counted instead, and named in a note.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core.traces import oprules, reductions
from core.traces.arguments import flat_tensors, tensors_of, written_arguments

# clone copies the same bits: torch's batched products clone strided operands at some batch sizes and not
# at others, and a trace should not part two runs over a copy
_SKIP = {"detach", "clone", "lift_fresh", "_local_scalar_dense", "empty", "empty_like", "empty_strided", "new_empty",
         "new_empty_strided", "empty_permuted", "set_", "alias", "record_stream", "_to_dense", "_unsafe_view"}
# ops that allocate without writing: their output's bytes are the allocator's leftovers until an op writes them
_EMPTY = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted"})


@dataclass(frozen=True, kw_only=True, slots=True)
class OpFacts:
    """What the recorder needs to know of one op overload, worked out at its first call and kept for good."""

    func: object  # the overload itself
    name: str  # the name the rules know it by (oprules.op_name)
    text: str  # the op as a trace names it (aten.mm.default)
    skip: bool  # not recorded: a view, an op that computes nothing, or one of a namespace not recorded
    unrecorded: bool  # of a namespace not recorded (oprules.SKIPPED_NAMESPACES): counted instead
    allocates: bool  # allocates without writing: its output holds no data until an op writes it
    writes: tuple[tuple[int, str], ...]  # the arguments it writes in place (position, name)
    scratch: frozenset[int]  # the places of its returns that are scratch (a kernel's workspace)
    dim_arg: object  # how it names the dimension it reads across (oprules.dim_argument), or None
    may_have_terms: bool  # a reduction whose terms core.traces.reductions can make
    reads_whole: bool  # reads its whole input across the batch's rows (oprules.reads_whole)

    def outputs(self, out, args) -> tuple[list[torch.Tensor], list[int]]:
        """A call's output tensors, and each one's place in its result (a gradient the mask left out is None, not
        a tensor); an in-place op that returns nothing (``_foreach_*_``) has what it changed as its outputs."""
        if isinstance(out, torch.Tensor):  # most ops: one output, at place 0
            return [out], [0]
        outs = tensors_of(out, [])
        if not outs and self.name.endswith("_") and args:
            outs = tensors_of(args[0], [])
        places = [i for i, o in enumerate(out) if isinstance(o, torch.Tensor)] \
            if isinstance(out, tuple) and len(outs) == sum(isinstance(o, torch.Tensor) for o in out) \
            else list(range(len(outs)))
        return outs, places

    def written(self, args, kwargs) -> list[torch.Tensor]:
        """The tensors a call wrote in place (its arguments at ``writes``)."""
        if not self.writes:
            return []
        return tensors_of([args[i] if i < len(args) else kwargs.get(n) for i, n in self.writes], [])


def inputs_of(args, kwargs) -> list[torch.Tensor]:
    """A call's input tensors; an out= tensor is written, not read: it is not an input."""
    tensors_in = flat_tensors(args)
    if kwargs:
        tensors_of([v for k, v in kwargs.items() if k != "out"], tensors_in)
    return tensors_in


_FUNCS: dict[int, OpFacts] = {}  # id of an op overload -> its facts


def op_facts(func) -> OpFacts:
    """``func``'s facts, made at its first call (kept by id, as an OpOverload hashes in Python; checked by identity)."""
    known = _FUNCS.get(id(func))
    if known is not None and known.func is func:
        return known
    name = oprules.op_name(func)
    unrecorded = getattr(func, "namespace", "aten") in oprules.SKIPPED_NAMESPACES
    known = _FUNCS[id(func)] = OpFacts(
        func=func, name=name, text=str(func), skip=getattr(func, "is_view", False) or name in _SKIP or unrecorded,
        unrecorded=unrecorded, allocates=name in _EMPTY, writes=written_arguments(func),
        scratch=oprules.scratch_returns(func), dim_arg=oprules.dim_argument(func, name),
        may_have_terms=reductions.may_have_terms(name), reads_whole=oprules.reads_whole(name))
    return known
