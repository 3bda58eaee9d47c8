"""What a trace keeps of one op: its ``OpRecord``, and the fields each of its outputs has.

Per op: the op's name, the module path (the deepest module it ran in, the root named ``model``;
``backward`` marks the backward pass), input and output shapes and dtypes, digests of every input
tensor's bits taken before the op runs (in-place ops change their input) and, for each output, a digest
of its bits, its L1 norm in float64, ``SAMPLE`` values (core.traces.bits) as the hex of their bits at
fixed flat positions and, for reductions, K and the terms of the sampled elements
(core.traces.reductions); the non-tensor arguments are kept as bounded text, an opaque one (a quantized
layer's packed weights) by its content, never its address (core.traces.arguments). An op with several
outputs (a layer norm's backward: the input's, the weight's and the bias's gradients) keeps each
one's fields in ``outputs``, so each is judged against its own envelope. core.traces.record makes the
records; core.traces.files writes and reads them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


@dataclass(frozen=True, kw_only=True)
class OpRecord:
    index: int  # 1-based position in the trace
    op: str  # e.g. aten.mm.default
    module: str  # e.g. model.layers.0.attn; "model" outside any submodule
    backward: bool
    in_shapes: list[list[int]]
    in_dtypes: list[str]
    in_digests: list[str]
    args: str  # the non-tensor arguments, as bounded text
    out_shape: list[int]
    full_shape: list[int]  # before following one request (equal to out_shape otherwise)
    out_dtype: str
    out_digest: str
    l1: float | None
    sample_index: list[int]
    sample_hex: list[str]
    k: int | None
    terms_kind: str | None
    sum_abs: list[float] | None
    scale: list[float] | None
    total_abs: float | None
    # an op with several outputs: each one's OUTPUT_FIELDS, the first included (the fields above are the
    # first output's, with out_digest over all of them); empty for one output, and in version 1 files
    outputs: list[dict] = field(default_factory=list)
    # following one row: the op reads across the batch's rows (a sum over it, a sort of all its tokens)
    mixes_rows: bool = False
    # following one row: an output keeps the batch in a dimension other than the first (a transposed [T, B, d])
    not_batch_first: bool = False

    def to_dict(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_dict(d: dict) -> OpRecord:
        return OpRecord(**{k: d[k] for k in OpRecord.__dataclass_fields__ if k not in OPTIONAL_FIELDS},
                        outputs=list(d.get("outputs") or []), mixes_rows=bool(d.get("mixes_rows", False)),
                        not_batch_first=bool(d.get("not_batch_first", False)))

    @classmethod
    def _of(cls, fields: dict) -> OpRecord:
        """The record of every field in ``fields`` (all of them, by name), made without the frozen ``__init__``'s
        one ``object.__setattr__`` per field: a trace makes one per op (10 microseconds against 1 here)."""
        rec = object.__new__(cls)
        rec.__dict__.update(fields)
        return rec

    def output_records(self) -> list[OpRecord]:
        """One record per output, each with that output's fields (just ``self`` for a one-output op)."""
        if not self.outputs:
            return [self]
        return [replace(self, outputs=[], **{k: o[k] for k in OUTPUT_FIELDS}) for o in self.outputs]


OPTIONAL_FIELDS = ("outputs", "mixes_rows", "not_batch_first")  # absent from older files
OUTPUT_FIELDS = ("out_shape", "full_shape", "out_dtype", "out_digest", "l1", "sample_index", "sample_hex", "k",
                 "terms_kind", "sum_abs", "scale", "total_abs")
# the output fields of an op that returns no tensor
NO_OUTPUT = {"out_shape": [], "full_shape": [], "out_dtype": "none", "out_digest": "", "l1": None, "sample_index": [],
             "sample_hex": [], "k": None, "terms_kind": None, "sum_abs": None, "scale": None, "total_abs": None}
