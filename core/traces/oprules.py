"""What kind of op the recorder (core.traces.record) meets, where a rule depends on it: the name the rules know it
by, which namespaces are not recorded, which ops read across the batch's rows while one row is followed, which
views move the batch out of the first dimension, which ops put rows back in the batch's order, and which outputs
are scratch rather than results.

Names (``op_name``): an aten op by its packet's name (``mm``), any other by its namespace and packet
(``quantized.linear_dynamic``, a library's ``mylib.fused``), so that no rule for an aten op applies to another
namespace's op of the same name. Every namespace is recorded but those of ``SKIPPED_NAMESPACES`` (the profiler's
range markers), whose calls a trace counts and names in a note (``skipped_note``).

Following one row cuts every tensor derived from the run's inputs to the row's share of its first
dimension. That is right only while the first dimension is the batch's rows:

- an op that reads along the first dimension of a cut tensor (a sort or topk of a mixture of experts'
  flattened token-expert pairs, a sum over the batch), or a whole tensor (``nonzero``, ``unique``,
  ``histc``; a dynamic quantizer, ``reads_whole``, which takes its grid from the range of the whole batch),
  mixes the rows: its outputs are "rows"-mixed, recorded whole, and every op that computes
  from them too, until a gather by an index whose rows are the batch's (``x[inv_perm]``, the experts'
  results put back in token order) or a scatter into a tensor with the batch's rows (``index_add_``)
  brings the rows back. A gather along the first dimension by an index cut to the row, all of whose values
  point into the row's own share (a batch of graphs: an edge list gathering its own graph's nodes), reads
  the row alone (``gathers_own_rows``);
- a view that moves the first dimension elsewhere (a transpose to [T, B, d]), and a factory whose later
  dimension is the batch (an RNN's [layers, B, hidden] state), hold the batch in another dimension:
  "layout", recorded whole and named as not batch-first.

Scratch outputs: the returns an op's schema names as random state or unused (``SCRATCH_NAMES``), and
bytes (uint8) beside floating results from an op that reads no bytes (oneDNN's LSTM workspace, which
exists because autograd is on; cuDNN's reserve). They are recorded by shape only and never judged.

And the module an op ran in (``OrderedTracker``): in the backward pass several modules run at once, and
siblings of one depth are told apart by the order they were entered in, never by a set's hash order.
"""

from __future__ import annotations

import torch
from torch.utils.module_tracker import ModuleTracker

# namespaces whose ops compute nothing a trace keeps, each with why (named in a note, not recorded)
SKIPPED_NAMESPACES = {"profiler": "they mark a profiler's ranges (record_function) and compute nothing"}
# ops that quantize an input on a grid taken from its whole range (the min and max of every element): dynamic
# quantization's layers and RNNs, and what chooses such a grid (the other namespaces' "dynamic" ops too, by name)
DYNAMIC_QUANTIZERS = frozenset({"quantize_per_tensor_dynamic", "_choose_qparams_per_tensor", "choose_qparams_optimized",
                                "quantized_lstm", "quantized_gru", "quantized_lstm_cell", "quantized_gru_cell",
                                "fbgemm_linear_int8_weight", "fbgemm_linear_int8_weight_fp32_activation",
                                "fused_moving_avg_obs_fake_quant", "_fused_moving_avg_obs_fq_helper"})
_QUANTIZED_NAMESPACES = ("quantized.", "_quantized.", "sparse.", "onednn.")


def op_name(func) -> str:
    """The name the rules know an op by: aten's packet name (``mm``), else ``namespace.packet``."""
    packet = func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)
    namespace = getattr(func, "namespace", "aten")
    return packet if namespace == "aten" else f"{namespace}.{packet}"


def reads_whole(name: str) -> bool:
    """Whether the op reads every element of an input together, whatever its arguments: ``WHOLE_TENSOR_OPS``, and
    a dynamic quantizer, whose grid comes from the whole input's range (a batch's rows quantize on a grid their
    neighbours chose)."""
    return name in WHOLE_TENSOR_OPS or name in DYNAMIC_QUANTIZERS or (
        name.startswith(_QUANTIZED_NAMESPACES) and "dynamic" in name and "fp16" not in name)


def skipped_note(skipped: dict[str, int]) -> str:
    """The note naming the ops of namespaces that are not recorded, with their calls and why."""
    ops = ", ".join(f"{op} ({n} call{'s' if n > 1 else ''})" for op, n in sorted(skipped.items()))
    why = "; ".join(sorted({SKIPPED_NAMESPACES.get(op.split(".")[0], "") for op in skipped} - {""}))
    return f"not recorded: {ops}: {why}"


# returns that are scratch, not results, by their name in the op's schema (attention kernels' random state)
SCRATCH_NAMES = frozenset({"rng_state", "unused", "philox_seed", "philox_offset", "debug_attn_mask", "workspace",
                           "reserve"})
# ops that read every element of a tensor together, whatever their arguments (a list of the nonzero positions)
WHOLE_TENSOR_OPS = frozenset({"nonzero", "nonzero_static", "argwhere", "unique", "_unique", "_unique2",
                              "unique_consecutive", "unique_dim", "bincount", "histc", "masked_select", "flip", "roll"})
# ops that combine elements along their ``dim`` (or ``dims``) argument: across the batch's rows when it is the first
DIM_OPS = frozenset({"sort", "argsort", "topk", "kthvalue", "cumsum", "cumsum_", "cumprod", "cumprod_", "cummax",
                     "cummin", "logcumsumexp", "_softmax", "softmax", "_log_softmax", "log_softmax", "sum", "nansum",
                     "mean", "nanmean", "prod", "amax", "amin", "aminmax", "max", "min", "argmax", "argmin", "std",
                     "var", "var_mean", "std_mean", "norm", "linalg_vector_norm", "all", "any", "median", "nanmedian",
                     "mode", "logsumexp", "index_select", "gather", "count_nonzero"})
# views that can move the first dimension elsewhere (then the batch is no longer first)
REORDERING_VIEWS = frozenset({"permute", "transpose", "t", "swapaxes", "swapdims", "movedim", "movedim_"})
# ops whose result's rows are picked by an index (its first dimension's): they follow the index's rows
GATHERS = frozenset({"index", "_unsafe_index", "index_select", "gather", "take", "embedding"})
# ops that make a batch of copies of their input (a buffer's [1, T] positions to [B, T])
BROADCASTS = frozenset({"expand", "expand_copy", "repeat", "tile", "repeat_interleave"})
# ops that read only their input's shape, not its values (the rows of what they make mean nothing yet)
SHAPE_ONLY = frozenset({"empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty", "empty_permuted"})
# ops that write a source into ``self``'s rows at given positions: their result has self's rows
SCATTERS = frozenset({"index_add", "index_add_", "index_put", "index_put_", "index_copy", "index_copy_", "scatter",
                      "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_", "masked_scatter",
                      "masked_scatter_", "_index_put_impl_", "index_fill", "index_fill_"})


def scratch_returns(func) -> frozenset[int]:
    """Positions of the op's returns that its schema names as scratch (``SCRATCH_NAMES``)."""
    schema = getattr(func, "_schema", None)
    if schema is None:
        return frozenset()
    return frozenset(i for i, r in enumerate(schema.returns) if r.name in SCRATCH_NAMES)


def dim_argument(func, name: str):
    """(position, default) of the op's ``dim`` (or ``dims``) argument when it reads along one, else None."""
    if name not in DIM_OPS:
        return None
    schema = getattr(func, "_schema", None)
    arguments = list(getattr(schema, "arguments", ()))
    for i, a in enumerate(arguments):
        if a.name in ("dim", "dims"):
            return i, a.name, (a.default_value if a.has_default_value() else None)
    if sum(isinstance(a.type, torch.TensorType) for a in arguments) > 1:
        return None  # an elementwise overload (max.other: the larger of two tensors)
    return -1, "", None  # no dim argument: the op reduces every element


def moves_first_dim(t: torch.Tensor) -> bool:
    """Whether a reordered view's first dimension is not its outermost in memory (a [B, T, d] tensor
    transposed to [T, B, d]): its first dimension is then not the batch's."""
    shape = t.shape
    if len(shape) < 2 or shape[0] <= 1:
        return False
    strides = t.stride()
    return any(strides[d] > strides[0] for d in range(1, len(shape)) if shape[d] > 1)


def workspaces(outs: list, places: list, tensors_in: list) -> frozenset[int]:
    """Returns that are a kernel's workspace: bytes (uint8) beside floating results, from an op that reads no
    bytes (oneDNN's LSTM returns one for its backward when autograd is on; cuDNN's batch norm and RNN a
    reserve). Their schemas leave them unnamed, so the rule is the dtype's: no op's result is raw bytes there."""
    if not any(o.is_floating_point() for o in outs) or any(a.dtype == torch.uint8 for a in tensors_in):
        return frozenset()
    return frozenset(p for o, p in zip(outs, places, strict=False) if o.dtype == torch.uint8)


def batch_made(out, tensors_in: list, batch: int) -> bool:
    """A tensor made batch-shaped from no input data: a buffer expanded to the batch ([1, T] to
    [B, T]: token type ids, position ids, a mask), or a factory's [B, ...] (``torch.ones(batch, T)``).
    Its rows belong to the requests as much as the data's do, so it is followed too."""
    if not isinstance(out, torch.Tensor) or out.dim() < 2 or out.shape[0] % batch:
        return False
    if tensors_in:  # expand: the leading dimension is new (1, or no dimension, before)
        return tensors_in[0].dim() < out.dim() or tensors_in[0].shape[0] == 1
    return out.shape[0] == batch


def not_batch_first_note(ops: list, batch: int) -> str:
    """The note a trace carries when some ops' outputs keep the batch in another dimension than the first."""
    o, n = ops[0], len(ops)
    return (f"{n} op{'s' if n > 1 else ''} keep the batch ({batch} rows) in another dimension than the first, the "
            f"first at op {o.index} ({o.op} in {o.module}, shape {o.full_shape}): --follow-row cuts the first "
            "dimension only, so these compare as not comparable (an RNN's [layers, batch, hidden] state, a "
            "sequence-first or transposed tensor)")


def sideways(outs: list, batch: int) -> bool:
    """An output that looks like it keeps the batch in another dimension than the first: its first dimension
    is not a multiple of the batch and a later one is the batch (an RNN's [layers, batch, hidden] state)."""
    return any(o.dim() >= 2 and o.shape[0] % batch and any(o.shape[d] == batch for d in range(1, o.dim()))
               for o in outs)


def taint(mixed, name, dim_arg, args, kwargs, tensors_in, shares: list, row: int = 0,
          whole: bool = False) -> tuple[str | None, bool | str]:
    """Following a row, with ``mixed`` the tensors whose rows are no longer the batch's (TensorMap): (what
the op's outputs are, whether the op itself mixes the batch's rows).

    Outputs are "rows" when their first dimension no longer lines up with the batch's rows (the op reads
    along the first dimension of an input cut to the row, such as a sort of the whole batch's tokens, or
    reads a whole tensor, or computes from a tensor so mixed already), "layout" when an input's batch is
    not its first dimension, else None (cut to the row as usual). Two kinds of op restore the rows:
    a gather by an index whose rows are the batch's (a mixture of experts' tokens put back in order, its
    result row i is entry i's own) follows the index, and a scatter into ``self`` (index_add_, index_put_)
    keeps self's rows; such a scatter's integer result (positions in a list of the whole batch's tokens)
    still depends on the other rows ("if integer"). ``shares``: each input's rows in the followed row (None: not
    cut), ``row`` the followed row; ``whole``: the op reads every element of its inputs together (``reads_whole``)."""
    cuts = [c is not None for c in shares]
    if whole and any(cuts):
        return "rows", True
    got = [mixed.get(a) for a in tensors_in] if len(mixed) else []
    if any(got):
        if name == "copy_" and not got[0] and cuts[:1] == [True] and "rows" not in got and len(tensors_in) > 1 \
                and tensors_in[1].shape == tensors_in[0].shape:
            # a copy into a batch-first tensor of the same shape puts each row in its place: the source's batch
            # is first too (the batch only left it in views this does not follow back, an einsum's permutes)
            return None, False
        if name in SCATTERS and not got[0]:
            return None, "if integer"
        if name in GATHERS and gathers_rows(name, args, kwargs):
            rest = [g for g in got[1:] if g]  # the index (an embedding's ids: its second input too)
            if not rest:  # the index keeps the batch's rows: each row gets its own entries
                return None, False
            return ("rows", True) if "rows" in rest else ("layout", False)
        return ("rows", True) if "rows" in got else ("layout", False)
    if whole:
        return None, False
    if name in GATHERS and cuts[:1] == [True] and gathers_rows(name, args, kwargs):
        own = gathers_own_rows(name, args, kwargs, tensors_in, shares, row)
        if own is not None:
            return (None, False) if own else ("rows", True)
    if dim_arg is None or not tensors_in or not cuts[0]:
        return None, False
    pos, key, default = dim_arg
    if pos < 0:
        return "rows", True
    dim = args[pos] if pos < len(args) else kwargs.get(key, default)
    dims = dim if isinstance(dim, (list, tuple)) else [dim]
    if dim is None or not dims:
        return "rows", True
    nd = max(1, tensors_in[0].dim())
    return ("rows", True) if any(int(d) % nd == 0 for d in dims) else (None, False)


def gathers_own_rows(name, args, kwargs, tensors_in, shares: list, row: int) -> bool | None:
    """For a gather along the first dimension of a source cut to the row: whether every value of its index, itself
    cut to the row, points into the row's own share of the source (True: it reads the row alone), or not (False);
    None where the index is not cut to the row, or not an integer tensor."""
    idx = args[1][0] if name in ("index", "_unsafe_index") else (args[2] if len(args) > 2 else kwargs.get("index"))
    if not isinstance(idx, torch.Tensor) or idx.is_floating_point() or idx.dtype == torch.bool:
        return None
    at = next((i for i, t in enumerate(tensors_in) if t is idx), None)
    if at is None or shares[at] is None or not idx.numel():
        return None
    src, own = shares[0], idx.narrow(0, row * shares[at], shares[at])
    return bool(own.numel() == 0 or (int(own.min()) >= row * src and int(own.max()) < (row + 1) * src))


def gathers_rows(name, args, kwargs) -> bool:
    """Whether a gather picks along the first dimension (x[idx], index_select(x, 0, idx)), so its result's
    rows are its index's, not x[:, idx], whose rows are x's."""
    if name in ("index", "_unsafe_index"):
        idx = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return bool(idx) and isinstance(idx[0], torch.Tensor) and len([i for i in idx if i is not None]) == 1
    if name in ("index_select", "gather"):
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        return int(dim) == 0
    return True


class OrderedTracker(ModuleTracker):
    """torch's ModuleTracker, which keeps the running modules as a set, plus the order they were entered in.
    In the backward pass several modules are "running" at once (a module is entered when the gradient of its
    output arrives and left when its inputs' gradients are made; one whose inputs need no gradient is never
    left), and sibling modules of one depth (k_proj and v_proj) tie: picking among a set would follow the hash
    seed. Of siblings, the one entered last is the one whose backward is running now."""

    def __init__(self) -> None:
        self.changes = 0  # counts every change of the running modules: the recorder keeps a module path while equal
        super().__init__()
        self.entered: dict[str, int] = {}
        self._count = 0

    @property
    def parents(self) -> set[str]:
        return self._parents

    @parents.setter
    def parents(self, value: set[str]) -> None:  # set anew at the end of a backward pass
        self._parents = value
        self.changes += 1

    def _get_append_fn(self, name, is_bw):
        add = super()._get_append_fn(name, is_bw)

        def fn(*args) -> None:
            add(*args)
            self._count += 1
            self.entered[name] = self._count
            self.changes += 1

        return fn

    def _get_pop_fn(self, name, is_bw):
        pop = super()._get_pop_fn(name, is_bw)

        def fn(*args) -> None:
            pop(*args)
            self.changes += 1

        return fn
