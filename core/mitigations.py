"""Mitigations and what they cost, measured on the machine that runs this code.

* float64 versus float32 throughput (matrix product and a large sum), timed side by side;
* wider accumulation (``torch.sum(x, dtype=...)``): errors and cost;
* determinism is not reproducibility: run-to-run, thread count, batch size;
* an order-independent sum in torch (exact per-exponent accumulation, one rounding)
  that gives the same bits for every order, thread count and device.

Timings use ``time.perf_counter`` medians after a warm-up; on a GPU they synchronize.
Only core.globalstate.torch_threads changes a global setting (locked and restored).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import torch

from core.devices import Device, available_devices
from core.exact import exact_sum_fraction
from core.formats import FORMATS, Exact, format_of, round_to_format
from core.globalstate import PROCESS_THREADS, torch_threads
from core.metrics import bits_of_scalar

# Vendor peak FP64:FP32 ratios as cited in the project's reference notes (not measured here).
VENDOR_RATIOS: tuple[tuple[str, str, str], ...] = (
    ("NVIDIA H100 / H200 (SXM)", "1 : 2", "NVIDIA data sheets, as cited in the reference notes"),
    ("NVIDIA A100", "1 : 2", "NVIDIA data sheet, as cited in the reference notes"),
    ("NVIDIA RTX 4090", "1 : 64", "NVIDIA Ada architecture specifications, as cited in the reference notes"),
    ("NVIDIA T4", "1 : 32", "NVIDIA Turing specifications, as cited in the reference notes"),
    ("x86 CPU (SIMD)", "about 1 : 2", "vector width: 8 float32 vs 4 float64 per AVX2 register"),
    ("Apple GPU (MPS)", "no float64", "PyTorch MPS backend: float64 is not supported"),
)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_seconds(fn, repeats: int = 5, warmup: int = 1, device: str = "cpu") -> float:
    for _ in range(warmup):
        fn()
    _sync(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@dataclass(frozen=True)
class Throughput:
    device: str
    op: str  # "matmul" or "sum"
    size: int  # matrix side, or number of elements
    seconds32: float
    seconds64: float
    rate32: float  # GFLOP/s for matmul, GB/s for sum
    rate64: float
    unit: str

    @property
    def ratio(self) -> float:
        """float64 throughput as a fraction of float32's (0.5 means half speed)."""
        return self.rate64 / self.rate32


def measure_throughput(
    device: Device, matmul_n: int = 512, sum_n: int = 4_000_000, repeats: int = 5
) -> list[Throughput]:
    """float32 and float64 matrix product and sum on one device, timed side by side."""
    out = []
    g = torch.Generator().manual_seed(0)
    dev = device.torch_device
    a64 = torch.randn(matmul_n, matmul_n, generator=g, dtype=torch.float64)
    b64 = torch.randn(matmul_n, matmul_n, generator=g, dtype=torch.float64)
    x64 = torch.randn(sum_n, generator=g, dtype=torch.float64)
    secs = {}
    for dt in (torch.float32, torch.float64):
        if not device.supports(dt):
            continue
        a, b, x = a64.to(dt).to(dev), b64.to(dt).to(dev), x64.to(dt).to(dev)
        secs[("matmul", dt)] = median_seconds(lambda a=a, b=b: a @ b, repeats, device=dev)
        secs[("sum", dt)] = median_seconds(lambda x=x: x.sum(), repeats, device=dev)
    if (("matmul", torch.float64)) not in secs:
        return out
    flops = 2 * matmul_n**3
    s32, s64 = secs[("matmul", torch.float32)], secs[("matmul", torch.float64)]
    out.append(Throughput(device.name, "matmul", matmul_n, s32, s64, flops / s32 / 1e9, flops / s64 / 1e9, "GFLOP/s"))
    s32, s64 = secs[("sum", torch.float32)], secs[("sum", torch.float64)]
    out.append(Throughput(device.name, "sum", sum_n, s32, s64, 4 * sum_n / s32 / 1e9, 8 * sum_n / s64 / 1e9, "GB/s"))
    return out


# ---------------------------------------------------------------- wider accumulation


@dataclass(frozen=True)
class AccumulationRow:
    storage: str
    accumulate: str
    threads: int
    value: Exact
    abs_error: Exact
    seconds: float


def wider_accumulation(x: torch.Tensor, wider: torch.dtype, repeats: int = 5) -> list[AccumulationRow]:
    """torch.sum(x) and torch.sum(x, dtype=wider), each with 1 and all threads, against the exact sum."""
    exact = exact_sum_fraction(x)
    threads_all = PROCESS_THREADS
    rows = []
    for dt in (x.dtype, wider):
        for threads in sorted({1, threads_all}):
            with torch_threads(threads):
                r = x.sum() if dt == x.dtype else x.sum(dtype=dt)
                secs = median_seconds(lambda dt=dt: x.sum() if dt == x.dtype else x.sum(dtype=dt), repeats)
            fmt = format_of(r.dtype)
            value = _exact(r)
            err = abs(value - exact) if not isinstance(value, float) else float("inf")
            rows.append(AccumulationRow(format_of(x.dtype).name, fmt.name, threads, value, err, secs))
    return rows


def _exact(t: torch.Tensor) -> Exact:
    from core.formats import bits_of, value_of_bits

    return value_of_bits(bits_of(t), format_of(t.dtype))


# --------------------------------------------------------------------------- determinism


@dataclass(frozen=True)
class DeterminismResult:
    repeats: int
    distinct_by_threads: dict[int, int]  # thread count -> number of distinct results over repeats
    values_by_threads: dict[int, int]  # thread count -> bit pattern of the result
    mm_shape: tuple[int, int, int]
    mm_differing: int  # elements where mm(a[:1], b) != mm(a, b)[:1]
    mm_max_ulps: int


def determinism(x: torch.Tensor, repeats: int = 5, seed: int = 0) -> DeterminismResult:
    """Run-to-run (same threads), thread count, and batch size (mm of one row vs of all rows)."""
    from core.formats import bits_of, ulp_distance

    counts = sorted({1, PROCESS_THREADS})
    distinct, values = {}, {}
    for t in counts:
        with torch_threads(t):
            bits = {bits_of(x.sum()) for _ in range(repeats)}
        distinct[t] = len(bits)
        values[t] = next(iter(bits))
    g = torch.Generator().manual_seed(seed)
    m, k, n = 64, 2048, 1024
    a = torch.randn(m, k, generator=g)
    b = torch.randn(k, n, generator=g)
    one = torch.mm(a[:1], b)[0]
    batch = torch.mm(a, b)[0]
    diff = one != batch
    fmt = FORMATS["float32"]
    ua = one.view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF
    ub = batch.view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF
    max_ulps = max((ulp_distance(int(p), int(q), fmt) for p, q in zip(ua[diff.numpy()], ub[diff.numpy()],
                                                                      strict=True)), default=0)
    return DeterminismResult(repeats, distinct, values, (m, k, n), int(diff.sum()), max_ulps)


# --------------------------------------------------------------- order-independent sum


_CHUNK = 1 << 16


def reproducible_sum(x: torch.Tensor) -> torch.Tensor:
    """A sum whose bits do not depend on order, thread count or device: the correctly
    rounded sum, computed in torch so that it runs wherever x lives.

    float16/bfloat16/float32 values are grouped by their top 9 bits (sign and exponent).
    Within a group all values are multiples of one power of two with at most 24
    significant bits, so float64 sums of fewer than 2^29 of them are exact, in any order:
    ``index_add_`` may add them in whatever order the hardware likes (atomics on a GPU)
    and still produce the same bits. float64 values are split into two 26-bit integer
    halves of their mantissas, grouped by exponent the same way. The few thousand group
    totals are then combined exactly on the CPU and rounded once.
    """
    limit = 1 << (26 if x.dtype == torch.float64 else 29)  # bucket totals must stay below 2^53
    if x.numel() >= limit:
        raise ValueError(f"reproducible_sum handles fewer than {limit:,} {x.dtype} values per call")
    fmt = format_of(x.dtype)
    flat = x.detach().reshape(-1)
    if x.dtype == torch.float64:
        hi = torch.zeros(4096, dtype=torch.float64, device=x.device)
        lo = torch.zeros(4096, dtype=torch.float64, device=x.device)
        for s in range(0, flat.numel(), _CHUNK):  # cache-sized pieces: same bits, less memory traffic
            u = flat[s : s + _CHUNK].view(torch.int64)
            idx = (u >> 52) & 0xFFF  # sign and exponent
            m = (u & ((1 << 52) - 1)) | (((idx & 0x7FF) != 0).to(torch.int64) << 52)
            hi.index_add_(0, idx, (m >> 26).double())
            lo.index_add_(0, idx, (m & ((1 << 26) - 1)).double())
        hi_l, lo_l = hi.cpu().tolist(), lo.cpu().tolist()
        if hi_l[0x7FF] or hi_l[0xFFF]:  # an infinity or NaN: the IEEE result needs no ordering care
            return flat.sum()
        total = Fraction(0)
        for i in range(4096):
            if hi_l[i] or lo_l[i]:
                mant = (int(hi_l[i]) << 26) + int(lo_l[i])
                total += Fraction(-mant if i >> 11 else mant) * Fraction(2) ** (max(i & 0x7FF, 1) - 1075)
    else:
        acc = torch.zeros(512, dtype=torch.float64, device=x.device)
        for s in range(0, flat.numel(), _CHUNK):
            c = flat[s : s + _CHUNK].float()
            acc.index_add_(0, (c.view(torch.int32) >> 23) & 0x1FF, c.double())
        acc_l = acc.cpu().tolist()
        if acc_l[255] or acc_l[511]:  # an infinity or NaN (nan != 0 is true as well)
            return flat.sum()
        total = sum((Fraction(v) for v in acc_l if v), Fraction(0))
    r = round_to_format(total, fmt)
    return torch.tensor(float(r), dtype=torch.float64).to(x.dtype)


def reproducible_sum_devices(x: torch.Tensor) -> list[tuple[str, int]]:
    """The reproducible sum on every available device (and CPU thread count): (where, bits)."""
    out = []
    for t in sorted({1, PROCESS_THREADS}):
        with torch_threads(t):
            out.append((f"CPU, {t} thread{'s' if t > 1 else ''}", bits_of_scalar(_np(reproducible_sum(x)))))
    for d in available_devices():
        if d.kind != "cpu" and d.supports(x.dtype):
            out.append((d.name, bits_of_scalar(_np(reproducible_sum(x.to(d.torch_device))))))
    return out


def _np(t: torch.Tensor) -> np.generic:
    t = t.cpu()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).reshape(())[()]
    return t.numpy().reshape(())[()]
