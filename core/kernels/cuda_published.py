"""Published CUDA reduction results that can be regenerated exactly on a CPU, and how the model fares on them.

Each case is a result someone printed in a public thread (the URL is kept with it): the code, the
digits as printed, the GPU (with its SM count) and the torch version. Its input is rebuilt here bit
for bit (constant tensors, explicit values, or ``linspace`` recomputed with the formula of that torch
release), the model is run with the kernel rules of that release and that GPU's SM count, and the
printed digits are compared with what each of several summation orders would have printed. A case
*discriminates* when those orders do not all print the same digits; the orders whose digits differ
from the published ones are ruled out by it.

Nothing here is invented: every printed value below was read in the thread at its URL. Threads that
print results on inputs we cannot rebuild (unseeded ``torch.rand``, a downloaded file, a screenshot)
were read and left out; they are listed in ``UNUSABLE_THREADS`` with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, NUMPY_DTYPES, round_to_format
from core.kernels.cuda_launch import KERNELS, PINNED_KERNEL, cuda_config_for
from core.kernels.cuda_model import cuda_mean_factor, cuda_reduce_accumulated

_DTYPES = NUMPY_DTYPES
_ACC = {"float16": np.dtype(np.float32), "bfloat16": np.dtype(np.float32),
        "float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

# The 72 float16 values of pytorch/pytorch#59489, row by row as posted.
_ISSUE_59489_VALUES = (
    66, 63, 21, 84, 86, 90, 86, 21, 81, 68, 22, 39, 43, 38, 24, 63, 96, 98, 33, 85, 90, 87, 52, 99,
    56, 21, 95, 59, 85, 51, 16, 37, 74, 55, 95, 97, 45, 82, 71, 33, 88, 90, 91, 68, 31, 22, 53, 30,
    68, 22, 73, 82, 36, 56, 96, 20, 71, 66, 82, 17, 97, 35, 20, 43, 31, 81, 87, 90, 60, 49, 96, 91,
)


@dataclass(frozen=True, kw_only=True)
class PublishedCase:
    key: str
    url: str
    code: str  # the code as posted (shortened to the reduction that printed the value)
    printed: str  # the digits as printed in the thread
    op: str  # "sum" or "mean"
    dtype: str
    inputs: tuple  # ("full", n, value) | ("values", tuple) | ("linspace_2019", start, end, steps)
    gpu: str
    sm_count: int | None  # None: not stated in the thread, and the launch for this n does not depend on it
    torch_version: str
    kernel: str | None  # KERNELS key whose rules that torch version used; None: release not stated, and every
    # modelled kernel version launches this n alike (then the pinned rules are used)
    regeneration: str  # how the input is rebuilt, and why that is exact
    expected_failure: str | None = None  # why the model cannot reproduce it, if it cannot
    max_threads_per_sm: int = 2048


_URL_18277 = "https://github.com/pytorch/pytorch/issues/18277"
_CODE_18277 = "tr.ones(1000, 1000).fill_(i).cuda().mean()"
_PRINTED_18277 = {9991: "9991.", 9992: "9991.9990", 9993: "9993.", 9994: "9994.", 9995: "9995.", 9996: "9996.",
                  9997: "9997.0010", 9998: "9998.", 9999: "9999."}

CASES: tuple[PublishedCase, ...] = (
    *(
        PublishedCase(
            key=f"18277-fill-{i}",
            url=_URL_18277,
            code=_CODE_18277.replace("(i)", f"({i})"),
            printed=printed,
            op="mean",
            dtype="float32",
            inputs=("full", 1_000_000, i),
            gpu="GeForce GTX 1080 Ti (sm_61, 28 SMs, 2048 threads/SM)",
            sm_count=28,
            torch_version="1.0.1.post2 (CUDA 9.0)",
            kernel="torch-1.0",
            regeneration="a constant float32 tensor: 10**6 copies of the integer i (exact in float32)",
        )
        for i, printed in _PRINTED_18277.items()
    ),
    PublishedCase(
        key="23392-linspace-mean",
        url="https://github.com/pytorch/pytorch/issues/23392",
        code="a = torch.linspace(10000, 1.7, 10000); a.cuda().mean()",
        printed="5000.8501",
        op="mean",
        dtype="float32",
        inputs=("linspace_2019", 10000.0, 1.7, 10000),
        gpu="NVIDIA Jetson Xavier (Volta, 8 SMs on the AGX module; the torch 1.0/1.1 launch does not use the "
            "SM count)",
        sm_count=8,
        torch_version="1.1.0a0+ceb9702 (CUDA 10.0, aarch64)",
        kernel="torch-1.0",
        regeneration="linspace on the CPU as ATen's linspace_cpu_out computed it in 2019: step = (end - start) / "
                     "(steps - 1) and start + step * i in float32. Whether that expression is contracted into an "
                     "FMA (aarch64 GCC) or done in double (the 2020 form) changes many inputs but none of the "
                     "printed means; the sequential float32 order on these inputs prints 5000.9077, the CPU mean "
                     "published in the same thread",
    ),
    PublishedCase(
        key="59489-half-sum",
        url="https://github.com/pytorch/pytorch/issues/59489",
        code="torch.tensor(<9x8 integers>, dtype=torch.half).cuda().sum(dtype=torch.half)",
        printed="4448.0",
        op="sum",
        dtype="float16",
        inputs=("values", _ISSUE_59489_VALUES),
        gpu="not stated",
        sm_count=None,
        torch_version="not stated (thread of 2021-06-04, master of that time)",
        kernel=None,
        regeneration="the 72 integers as posted (exact in float16); n = 72 < 128, so every kernel version runs "
                     "the same scalar path on one block of 64 threads, whatever the GPU",
    ),
    PublishedCase(
        key="59489-bfloat16-sum",
        url="https://github.com/pytorch/pytorch/issues/59489",
        code="the same 72 integers as torch.bfloat16 (the thread: 'PyTorch BFloat16 has the same output on "
             "both CPU & CUDA (4448.0)')",
        printed="4448.0",
        op="sum",
        dtype="bfloat16",
        inputs=("values", _ISSUE_59489_VALUES),
        gpu="not stated",
        sm_count=None,
        torch_version="not stated (thread of 2021-06-04)",
        kernel=None,
        regeneration="the 72 integers as posted (exact in bfloat16: all below 256)",
    ),
)

# Threads read while collecting cases whose printed CUDA results cannot be rebuilt bit for bit here.
UNUSABLE_THREADS: tuple[tuple[str, str], ...] = (
    ("https://github.com/pytorch/pytorch/issues/60367", "unseeded torch.rand([6,4,224,224]); values not reproducible"),
    ("https://github.com/pytorch/pytorch/issues/75249", "results only in screenshots"),
    ("https://github.com/pytorch/pytorch/issues/19164", "the printed sum is a CPU result, not CUDA"),
    ("https://github.com/pytorch/pytorch/issues/15837", "838,860,800 elements: split into 32-bit sub-iterators, "
                                                        "a path the model does not cover (and a since-fixed bug)"),
    ("https://github.com/pytorch/pytorch/issues/180117", "a per-plane mean (20 outputs): multi-output reductions "
                                                         "are not modelled, and the thread's printed output was "
                                                         "not readable in our copy"),
    ("https://github.com/torch/torch7/issues/721", "Lua torch (cutorch), not PyTorch's Reduce.cuh"),
)


def regenerate(case: PublishedCase) -> np.ndarray:
    """The case's input, bit for bit."""
    dt = _DTYPES[case.dtype]
    kind = case.inputs[0]
    if kind == "full":
        _, n, value = case.inputs
        return np.full(n, value, dtype=dt)
    if kind == "values":
        return np.array(case.inputs[1], dtype=dt)
    if kind == "linspace_2019":
        _, start, end, steps = case.inputs
        s, e = np.float32(start), np.float32(end)
        step = np.float32(e - s) / np.float32(steps - 1)
        i = np.arange(steps, dtype=np.float32)  # `is` is a float counter, exact below 2**24
        return (s + step * i).astype(dt)  # two float32 roundings per element, as in the 2019 loop
    raise ValueError(f"unknown input kind {kind!r}")


def printed_matches(value, printed: str) -> bool:
    """Whether ``value`` prints as ``printed`` (torch prints integers as ``9991.``, others with 4 decimals)."""
    v = float(value)
    if printed.endswith("."):
        return v == float(printed)
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return f"{v:.{decimals}f}" == printed


def _as_printed(value, printed: str) -> str:
    v = float(value)
    if printed.endswith("."):
        return f"{v:.0f}." if v == round(v) else f"{v:.4f}"
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return f"{v:.{decimals}f}"


def _round_exact(x: Fraction, dtype: str) -> np.generic:
    return _DTYPES[dtype].type(float(round_to_format(x, FORMATS[dtype])))


def _finish(case: PublishedCase, total: np.generic, kernel: str, n: int) -> np.generic:
    """The op's result from an accumulated sum: a cast for sum, MeanOps::project for mean."""
    dt, acc = _DTYPES[case.dtype], _ACC[case.dtype]
    total = acc.type(total)
    if case.op == "mean":
        factor = cuda_mean_factor(n, dt, kernel)
        total = acc.type(total * acc.type(factor))
    return dt.type(total)


def model_result(case: PublishedCase, kernel: str | None = None) -> np.generic:
    """The model's result for the case, with ``kernel``'s rules (default: the case's own) and its SM count."""
    kernel = kernel or case.kernel or PINNED_KERNEL
    x = regenerate(case)
    cfg = cuda_config_for(x.size, x.dtype, sm_count=case.sm_count or 132, max_threads_per_sm=case.max_threads_per_sm,
                          kernel=kernel)
    return _finish(case, cuda_reduce_accumulated(x, cfg), kernel, x.size)


def candidate_results(case: PublishedCase) -> dict[str, np.generic]:
    """What each summation order would have printed for the case (in the op's output dtype)."""
    x = regenerate(case)
    acc = _ACC[case.dtype]
    sms = case.sm_count or 132
    own = case.kernel or PINNED_KERNEL
    out: dict[str, np.generic] = {}
    for key, k in KERNELS.items():
        if case.dtype == "bfloat16" and not k.bfloat16:
            continue
        out[f"CUDA model, {key} rules, {sms} SMs"] = model_result(case, key)
    with np.errstate(over="ignore", invalid="ignore"):
        out[f"left to right in {acc.name}"] = _finish(case, np.add.accumulate(x.astype(acc), dtype=acc)[-1], own,
                                                           x.size)
        out[f"NumPy pairwise (np.sum) in {acc.name}"] = _finish(case, np.sum(x.astype(acc), dtype=acc), own, x.size)
        if acc != x.dtype:
            narrow = x.dtype.type(0)
            for v in x:  # a 16-bit accumulator, every addition rounded to 16 bits
                narrow = x.dtype.type(np.float32(narrow) + np.float32(v))
            out[f"left to right in {case.dtype} (no float32 accumulator)"] = narrow
    exact = exact_sum_fraction(x)
    if case.op == "mean":
        out["exact mean, rounded once"] = _round_exact(exact / x.size, case.dtype)
        model_sum = cuda_reduce_accumulated(x, cuda_config_for(x.size, x.dtype, sm_count=sms, kernel=own))
        out[f"CUDA model sum ({own}) divided by n (sum / n, as torch's CPU mean does)"] = _DTYPES[case.dtype].type(
            acc.type(model_sum) / acc.type(x.size))
    else:
        out["exact sum, rounded once"] = _round_exact(exact, case.dtype)
    return out


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    case: PublishedCase
    model_value: float
    reproduced: bool
    discriminating: bool  # the candidate orders do not all print the same digits
    ruled_out: tuple[str, ...]  # candidate orders whose printed digits differ from the published ones
    distinguishes_kernels: bool  # some other kernel version's model prints different digits


def evaluate(case: PublishedCase) -> CaseResult:
    cands = candidate_results(case)
    model = model_result(case)
    printed = {name: _as_printed(v, case.printed) for name, v in cands.items()}
    ruled_out = tuple(name for name, v in cands.items() if not printed_matches(v, case.printed))
    kernel_names = [n for n in cands if n.startswith("CUDA model, ")]
    return CaseResult(
        case=case,
        model_value=float(model),
        reproduced=printed_matches(model, case.printed),
        discriminating=len(set(printed.values())) > 1,
        ruled_out=ruled_out,
        distinguishes_kernels=len({printed[n] for n in kernel_names}) > 1,
    )


@lru_cache(maxsize=1)
def evaluate_all() -> tuple[CaseResult, ...]:
    """Every case evaluated (a few seconds: nine of them reduce 10**6 values with every order)."""
    return tuple(evaluate(c) for c in CASES)


def _issue_refs(results) -> str:
    urls = sorted({r.case.url for r in results})
    return ", ".join(u.replace("https://github.com/pytorch/pytorch/issues/", "pytorch/pytorch#") for u in urls)


@dataclass(frozen=True, kw_only=True)
class KernelEvidence:
    kernel: str | None  # None: cases whose release is not stated (every modelled version launches them alike)
    title: str
    reproduced: int  # discriminating cases reproduced
    discriminating: int  # discriminating cases from releases with this kernel
    non_discriminating_reproduced: int
    non_discriminating: int
    sources: str


def published_evidence() -> list[KernelEvidence]:
    """Per kernel version: how many published results of its releases the model reproduces at those rules."""
    out = []
    results = evaluate_all()
    groups = [(key, k.title) for key, k in KERNELS.items()] + [(None, "release not stated")]
    for key, title in groups:
        mine = [r for r in results if r.case.kernel == key]
        disc = [r for r in mine if r.discriminating]
        nondisc = [r for r in mine if not r.discriminating]
        out.append(KernelEvidence(
            kernel=key, title=title,
            reproduced=sum(r.reproduced for r in disc), discriminating=len(disc),
            non_discriminating_reproduced=sum(r.reproduced for r in nondisc), non_discriminating=len(nondisc),
            sources=_issue_refs(mine),
        ))
    return out


def published_evidence_sentence() -> str:
    """How the model was checked, per kernel version, in one paragraph for the CPU vs GPU page."""
    parts = []
    evidence = published_evidence()
    for ev in evidence:
        if not ev.discriminating and not ev.non_discriminating:
            continue
        rules = f"{ev.title} rules" if ev.kernel else "release not stated (small n, launched alike by every version)"
        text = f"{rules}: reproduces {ev.reproduced} of {ev.discriminating} published GPU results that distinguish " \
               "summation orders"
        if ev.non_discriminating:
            text += f", and {ev.non_discriminating_reproduced} of {ev.non_discriminating} that do not"
        parts.append(f"{text} ({ev.sources})")
    sentence = ("Published GPU results the model reproduces, each with the launch rules of the torch release that "
                "printed it: " + "; ".join(parts) + ". They are older releases' runs and small sums: none exercises "
                "the multi-block launch that the SM count decides, so they test the model's parts, not its match "
                "rate on a current GPU, which stays unmeasured.")
    pinned = next(ev for ev in evidence if ev.kernel == PINNED_KERNEL)
    if not pinned.discriminating:
        release = KERNELS[PINNED_KERNEL].torch_versions.split()[0]
        sentence += (f" No published result from a {release} GPU was found, so the pinned rules rest on their "
                     "source (Reduce.cuh of torch 2.13.0) until a recording is bundled.")
    return sentence
