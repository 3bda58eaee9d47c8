"""The CPU vs GPU page's computations: one sum on every device, recorded and modelled, and how
each device orders the reduction.

``sums_everywhere`` turns the page's settings into one result: a row per source (live on this
server's CPU with one thread and with all of them, live on each GPU, replayed from each recording
whose vector regenerates bit for bit, the CUDA model for each recorded GPU and for an H100-like
device, and the exact sum rounded once), every row with its bits, a value printed with just
enough digits to tell it apart from the others, and its distance in ULPs from the correctly
rounded sum; plus the notices the page shows for what could not be computed or compared. A row's
origin is core.kernels.orders' word for it (live, recorded, model, exact), taken from the ORDERS
entry where the row is one of its orders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch

from core.arith.exact import correctly_rounded_sum, shortest_repr
from core.arith.formats import FORMATS, FloatFormat, bits_of, bits_of_value, value_of_bits
from core.arith.hexbits import bits_of_hex
from core.arith.ulps import ulp_distance
from core.arith.vectors import GENERATORS, VectorSpec
from core.crowd.bytecache import RESULTS, vector_for
from core.kernels.cuda_model import CudaLaunch, cuda_config_for, cuda_launch, cuda_sum_model
from core.kernels.orders import ORDERS, ORIGIN_EXACT, ORIGIN_LIVE, ORIGIN_MODEL, ORIGIN_RECORDED
from core.kernels.torch_cpu_model import GRAIN_SIZE, default_lanes, thread_chunks
from core.machines.devices import Device
from core.machines.globalstate import cuda_tf32
from core.recordings.capture import live_sum_bits
from core.recordings.store import (
    SUITE_DTYPES,
    SUITE_GENERATORS,
    SUITE_SIZES,
    Recording,
    SumEntry,
    vector_sha256,
)

H100_SMS = 132  # the SM count of an H100 SXM (and of an H200): the model's device when none is recorded
SEED = 0  # the seed every recording uses


@dataclass(frozen=True, kw_only=True)
class Replay:
    recording: Recording
    entry: SumEntry
    vector_matches: bool
    recorded_bits: int
    recorded_wider_bits: int | None
    model_bits: int | None  # the CUDA model's prediction for this device's SM count (GPU recordings)


def replay(rec: Recording, generator: str, seed: int, n: int, dtype: str) -> Replay | None:
    """The recorded result for a setting, after checking the vector regenerates bit-identically."""
    entry = rec.find_sum(generator, seed, n, dtype)
    if entry is None:
        return None
    spec = VectorSpec(kind=generator, n=n, seed=seed, storage=dtype)
    values = vector_for(spec).values  # one vector and one hash for every recording (core.crowd.bytecache)
    matches = RESULTS.get_or_compute(("sha256", spec), lambda: vector_sha256(values)) == entry.vector_sha256
    model = None
    if matches and rec.provenance.device_kind == "cuda" and rec.provenance.sm_count:
        cfg = cuda_config_for(n, values.dtype, sm_count=int(rec.provenance.sm_count))
        model = bits_of(cuda_sum_model(values, cfg))
    return Replay(recording=rec, entry=entry, vector_matches=matches, recorded_bits=bits_of_hex(entry.sum_hex),
                  recorded_wider_bits=bits_of_hex(entry.wider_hex) if entry.wider_hex else None, model_bits=model)


@dataclass(frozen=True)
class CpuVsGpuSettings:
    """The vector the page sums everywhere (seed 0, as every recording)."""

    generator: str = "normal"
    n: int = 1_000_000
    dtype: str = "float32"

    def __post_init__(self) -> None:
        if self.generator not in SUITE_GENERATORS or self.n not in SUITE_SIZES or self.dtype not in SUITE_DTYPES:
            raise ValueError(f"not one of the recorded suite's vectors: {self.generator}, n = {self.n}, {self.dtype}")

    @property
    def spec(self) -> VectorSpec:
        return VectorSpec(kind=self.generator, n=self.n, seed=SEED, storage=self.dtype)

    @property
    def fmt(self) -> FloatFormat:
        return FORMATS[self.dtype]


@dataclass(frozen=True, kw_only=True)
class SumRow:
    where: str
    origin: str  # where the result comes from: core.kernels.orders' ORIGIN_LIVE, _RECORDED, _MODEL or _EXACT
    bits: int
    note: str
    value: str  # the fewest digits, the same count for every row, that tell apart the rows that differ
    ulps_from_exact: int  # from the correctly rounded sum
    gpu: bool = False  # a GPU's result: live on this server, recorded on one, or a model of one's order
    order: str | None = None  # the core.kernels.orders.ORDERS entry this row's order is, where it is one


RowMaker = Callable[..., SumRow]  # _row with the format and the correctly rounded sum's bits given


@dataclass(frozen=True, kw_only=True)
class Headline:
    """The page's first screen: this CPU's sum beside a GPU's (the best evidence there is: live, then recorded,
    then the model), the correctly rounded sum, and the sentence that compares them."""

    cpu: SumRow
    gpu: SumRow
    exact: SumRow
    labels: tuple[str, str, str]
    apart: int  # ULPs between the CPU's and the GPU's result
    insight: str  # the page's one sentence, true of these results
    sentence: str


@dataclass(frozen=True)
class Notice:
    """Something the page says about a source it could not use. ``subject`` is text read from a
    recording file (its label), which the page shows inert before ``text``."""

    kind: str  # "warning", "error" or "info"
    text: str
    subject: str | None = None


@dataclass(frozen=True)
class Stage:
    what: str
    values_left: int  # partial sums that exist after this stage


@dataclass(frozen=True, kw_only=True)
class ReductionStages:
    """How this CPU's torch.sum and the modelled GPU kernel group ``n`` values, stage by stage."""

    n: int
    threads: int  # CPU threads that take a chunk each (1 below the grain size)
    below_grain: bool  # n below torch's grain size: one thread sums everything
    lanes: int  # SIMD lanes of the CPU's working type
    launch: CudaLaunch  # the modelled GPU launch
    sm_count: int
    cpu: tuple[Stage, ...]
    gpu: tuple[Stage, ...]


@dataclass(frozen=True, kw_only=True)
class SumsEverywhere:
    settings: CpuVsGpuSettings
    threads: int  # this server's configured torch threads
    rows: tuple[SumRow, ...]
    notices: tuple[Notice, ...]  # in the order they arose
    exact_bits: int
    stages: ReductionStages

    @property
    def live_cpu(self) -> tuple[SumRow, ...]:
        """The rows summed live on this CPU: one thread, then all of them (one row when that is one)."""
        return tuple(r for r in self.rows if r.origin == ORIGIN_LIVE and not r.gpu)

    @property
    def cpu_threads_apart(self) -> int | None:
        """ULPs between the one-thread and the all-threads CPU sums; None with a single thread."""
        cpu = self.live_cpu
        return ulp_distance(cpu[0].bits, cpu[-1].bits, self.settings.fmt) if len(cpu) == 2 else None

    def headline(self) -> Headline:
        """This server's CPU (all its threads) against a GPU's order: a live GPU where torch sees one, else a
        recorded GPU for this vector, else the modelled order of a 132-SM GPU, each labelled for what it is."""
        fmt = self.settings.fmt
        cpu = self.live_cpu[-1]
        exact = next(r for r in self.rows if r.origin == ORIGIN_EXACT)
        gpus = [r for r in self.rows if r.gpu]
        gpu = next((r for origin in (ORIGIN_LIVE, ORIGIN_RECORDED) for r in gpus if r.origin == origin), None)
        if gpu is None:
            gpu = next(r for r in reversed(gpus) if r.origin == ORIGIN_MODEL)
            gpu_label, gpu_words = f"GPU order, modelled ({self.stages.sm_count} SMs)", "a model of a GPU's order"
        elif gpu.origin == ORIGIN_LIVE:
            gpu_label, gpu_words = f"GPU, live: {gpu.where}", f"this server's GPU ({gpu.where})"
        else:
            gpu_label, gpu_words = "GPU, recorded", f"a GPU recording ({gpu.where})"
        threads = self.threads if len(self.live_cpu) > 1 else 1
        apart = ulp_distance(cpu.bits, gpu.bits, fmt)
        first = (f"This server's CPU and {gpu_words} are {apart:,} ULP apart" if apart else
                 f"Here this server's CPU and {gpu_words} happen to give the same bits (another size or vector "
                 "can differ)")
        s = self.settings
        how = "summed by a GPU" if gpu.origin != ORIGIN_MODEL else "summed in a GPU's order"
        insight = (f"The same {s.n:,} {s.dtype} values, summed by this CPU and {how}, give different bits: each "
                   "device groups the additions its own way." if apart else
                   f"The same {s.n:,} {s.dtype} values, summed by this CPU and {how}, happen to give the same bits "
                   "here, although each device groups the additions its own way.")
        sentence = (f"{first}; the CPU's sum is {cpu.ulps_from_exact:,} ULP from the exact sum, the GPU's "
                    f"{gpu.ulps_from_exact:,}. Neither device is the reference: the exact sum, rounded once, is.")
        return Headline(cpu=cpu, gpu=gpu, exact=exact, apart=apart, insight=insight, sentence=sentence,
                        labels=(f"CPU, live ({threads} thread{'s' if threads > 1 else ''})", gpu_label,
                                "Exact sum, rounded once"))

    def ulp_matrix(self) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
        """Row names, and the ULP distance between every pair of rows."""
        fmt = self.settings.fmt
        return (tuple(r.where for r in self.rows),
                tuple(tuple(ulp_distance(a.bits, b.bits, fmt) for b in self.rows) for a in self.rows))


@dataclass(frozen=True, kw_only=True)
class ThreadSum:
    """torch.sum live on this CPU with ``threads`` threads: its bits, and the digits that identify them in the
    format (the shortest that round-trip: a claim of "N ULP apart" is then true of the numbers shown beside it,
    which fewer digits would not be)."""

    threads: int
    bits: int
    value: str

    @property
    def where(self) -> str:
        return f"CPU, {self.threads} thread{'s' if self.threads > 1 else ''}"

    @property
    def order(self) -> str:
        """Its entry in core.kernels.orders.ORDERS."""
        return "torch_1" if self.threads == 1 else "torch_all"


@dataclass(frozen=True, kw_only=True)
class ThreadSums:
    """torch.sum of the settings' vector on this CPU with one thread and with all of them: the page's
    punchline, computed before anything slow."""
    settings: CpuVsGpuSettings
    threads: int
    rows: tuple[ThreadSum, ...]  # one thread, then all of them (one row when that is one)

    @property
    def apart(self) -> int | None:
        """ULPs between the one-thread and the all-threads sums; None with a single thread."""
        fmt = self.settings.fmt
        return ulp_distance(self.rows[0].bits, self.rows[-1].bits, fmt) if len(self.rows) == 2 else None

    @property
    def chunks(self) -> int:
        """How many contiguous chunks torch gives its threads for this n (torch_cpu_model.thread_chunks)."""
        return len(thread_chunks(self.settings.n, self.threads))

    def why_same(self) -> str | None:
        """Why one thread and all threads gave the same bits here (None when they differ or there is one thread)."""
        if self.apart != 0:
            return None
        if self.chunks == 1:
            return (f"with n = {self.settings.n:,} at or below torch's grain size ({GRAIN_SIZE:,} values) torch.sum "
                    "runs on one thread whatever the thread count, so the grouping is the same")
        return (f"torch split the values into {self.chunks} chunks, a different grouping from one thread, but for "
                "this vector both groupings happened to round to the same bits; another vector or size can differ")


def _live_cpu_sums(values: np.ndarray, cpu: Device, threads: int, fmt: FloatFormat) -> tuple[ThreadSum, ...]:
    """torch.sum on this CPU with one thread and with ``threads`` (one row when that is 1)."""
    sums = ((t, live_sum_bits(values, cpu, t)) for t in sorted({1, threads}))
    return tuple(ThreadSum(threads=t, bits=b, value=shortest_repr(value_of_bits(b, fmt), fmt)) for t, b in sums)


def thread_sums(settings: CpuVsGpuSettings, cpu: Device, threads: int) -> ThreadSums:
    """Only the two live CPU sums (1 and ``threads`` threads): two torch.sum calls on the shared vector."""
    return ThreadSums(settings=settings, threads=threads,
                      rows=_live_cpu_sums(vector_for(settings.spec).values, cpu, threads, settings.fmt))


def reduction_stages(n: int, dtype, threads: int, sm_count: int = H100_SMS) -> ReductionStages:
    """The stages of both reductions for ``n`` values of NumPy ``dtype`` on ``threads`` CPU threads."""
    launch = cuda_launch(n, cuda_config_for(n, dtype, sm_count=sm_count))
    lanes = default_lanes(dtype)
    chunks = len(thread_chunks(n, threads))
    cpu = (
        Stage("values", n),
        Stage(f"{chunks} contiguous chunk{'s' if chunks > 1 else ''}, one per thread", chunks * lanes * 4),
        Stage("each chunk: 4 accumulators × SIMD lanes, cascade", chunks * lanes),
        Stage("lanes added in order: one slot per thread", chunks),
        Stage("slots added", 1),
    )
    gpu = (
        Stage("values", n),
        Stage(f"{launch.blocks} blocks × {launch.threads_per_block} threads, strided, {launch.accumulators} "
              "accumulators", launch.threads * launch.accumulators),
        Stage("accumulators combined per thread", launch.threads),
        Stage("shared-memory tree per block, down to 32", launch.blocks * min(32, launch.threads_per_block)),
        Stage("warp shuffle (offsets 16, 8, 4, 2, 1)", launch.blocks),
        Stage("last block combines the partials", 1),
    )
    return ReductionStages(
        n=n, threads=chunks, below_grain=n < GRAIN_SIZE, lanes=lanes, launch=launch, sm_count=sm_count, cpu=cpu, gpu=gpu
    )


def _row(fmt: FloatFormat, exact_bits: int, *, where: str, bits: int, note: str, order: str | None = None,
         origin: str | None = None, gpu: bool = False) -> SumRow:
    """One source's row. ``order`` names the core.kernels.orders.ORDERS entry whose order it is, and the row takes
    that entry's origin; ``origin`` is for a result no entry describes (a live GPU's, a recording's)."""
    return SumRow(where=where, origin=ORDERS[order].origin if order is not None else origin, bits=bits, note=note,
                  value=shortest_repr(value_of_bits(bits, fmt), fmt),  # the digits that identify it
                  ulps_from_exact=ulp_distance(bits, exact_bits, fmt), gpu=gpu, order=order)


def _live_rows(row: RowMaker, s: CpuVsGpuSettings, values: np.ndarray, devices: list[Device], threads: int,
               notices: list[Notice]) -> list[SumRow]:
    """torch.sum live on this CPU (one thread, then ``threads``) and on each GPU that has the format."""
    cpu = next(d for d in devices if d.kind == "cpu")
    rows = [row(where=c.where, bits=c.bits, note=f"torch {torch.__version__}", order=c.order)
            for c in _live_cpu_sums(values, cpu, threads, s.fmt)]
    for d in (d for d in devices if d.kind != "cpu"):
        if not d.supports(s.fmt.torch_dtype):
            notices.append(Notice("warning", f"{d.name} has no {s.dtype}: no live GPU result for this format."))
            continue
        try:
            rows.append(row(where=d.name, bits=live_sum_bits(values, d), note="", origin=ORIGIN_LIVE, gpu=True))
        except torch.cuda.OutOfMemoryError:
            notices.append(Notice("error", f"{d.name} ran out of memory for n = {s.n:,}; the CPU results are still "
                                           "shown."))
        except RuntimeError as err:
            notices.append(Notice("error", f"{d.name} failed ({err}); it may have disappeared. The CPU results are "
                                           "still shown."))
    return rows


def _recorded_rows(row: RowMaker, s: CpuVsGpuSettings, recs: list[Recording], notices: list[Notice]) -> list[SumRow]:
    """Each recording's sum of the vector, where the vector regenerates bit for bit (GPU recordings, and CPU
    recordings from other machines, labelled as such), each recorded GPU followed by the CUDA model for its
    SM count."""
    rows, found = [], False
    for rec in recs:
        rp = replay(rec, s.generator, SEED, s.n, s.dtype)
        if rp is None:
            continue
        found = True
        if not rp.vector_matches:
            notices.append(Notice("error", "its vector's SHA-256 differs from the one regenerated here, so the "
                                           "result is not comparable and is not shown.", rec.label))
            continue
        rows.append(row(where=rec.machine, bits=rp.recorded_bits, note=rec.label, origin=ORIGIN_RECORDED,
                        gpu=rec.is_gpu))
        if rp.model_bits is not None:
            rows.append(row(where=f"CUDA model, SM count {rec.provenance.sm_count}"
                                  + (", for your upload" if rec.uploaded else ""), bits=rp.model_bits,
                            note="our model of the GPU's reduction order for that device", order="cuda_model",
                            gpu=True))
    if not found:
        notices.append(Notice("info", f"No recording for {GENERATORS[s.generator].split(':')[0]}, n = {s.n:,}, "
                                      f"{s.dtype}" + (" is bundled." if not recs else " among the bundled recordings.")
                              + " Nothing is shown in its place."))
    return rows


def _h100_model_row(row: RowMaker, s: CpuVsGpuSettings, values: np.ndarray, recs: list[Recording]) -> SumRow:
    """The CUDA model's sum for an H100-like device: a GPU's order even where no GPU is live or recorded."""
    gpu_recorded = any(r.is_gpu and not r.uploaded for r in recs)  # a visitor's upload checks nothing here
    return row(where=f"CUDA model, SM count {H100_SMS} (H100/H200-like)",
               bits=bits_of(cuda_sum_model(values, cuda_config_for(s.n, values.dtype, sm_count=H100_SMS))),
               note="a model of the order, not a measurement" + ("" if gpu_recorded else
                                                                 "; its match rate on a real GPU is unmeasured (no GPU "
                                                                 "recording is bundled)"),
               order="cuda_model", gpu=True)


def sums_everywhere(settings: CpuVsGpuSettings, devices: list[Device], recs: list[Recording],
                    threads: int) -> SumsEverywhere:
    """The settings' vector summed on every source (see the module docstring): ``devices`` holds the CPU
    and any GPUs, ``threads`` is the CPU thread count to compare with one thread."""
    s, fmt = settings, settings.fmt
    values = vector_for(s.spec).values  # shared and bounded in bytes (core.crowd.bytecache)
    exact_bits = bits_of_value(correctly_rounded_sum(values, fmt), fmt)
    row = partial(_row, fmt, exact_bits)
    notices: list[Notice] = []  # in the order they arise: live devices, then recordings
    rows = (*_live_rows(row, s, values, devices, threads, notices), *_recorded_rows(row, s, recs, notices),
            _h100_model_row(row, s, values, recs),
            row(where="Exact sum, rounded once", bits=exact_bits, note="exact rational sum, one rounding",
                order="correct"))
    return SumsEverywhere(settings=s, threads=threads, rows=rows, notices=tuple(notices), exact_bits=exact_bits,
                          stages=reduction_stages(s.n, values.dtype, threads, H100_SMS))


@dataclass(frozen=True)
class Tf32Difference:
    device: str
    differing: int  # entries of the product with other bits when TF32 is allowed
    total: int


def tf32_product_difference(device: str = "cuda", n: int = 256) -> Tf32Difference:
    """An ``n``×``n`` float32 product with ``allow_tf32`` off and on (set and restored under a lock),
    compared entry by entry. The matrix comes from a seeded generator, never the global one."""
    a = torch.randn(n, n, generator=torch.Generator().manual_seed(0)).to(device)
    with cuda_tf32(False):
        exact32 = (a @ a).cpu()
    with cuda_tf32(True):
        tf32 = (a @ a).cpu()
    return Tf32Difference(device, int((exact32 != tf32).sum().item()), exact32.numel())
