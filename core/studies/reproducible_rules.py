"""The rules of "Make my runs reproducible": one ``Setting`` per knob, and the answer for one setup.

A visitor's ``Choice`` is what runs (``WORKLOADS``), on what (``HARDWARE``) and what must match
(``TARGETS``). Each ``Setting`` says when it applies (``applies``, a predicate of the choice), its lines of
the snippet (``lines``, at ``order`` in it: environment variables before any import, seeds before the
flags, then the code), what it guarantees and what it does not, where its cost comes from (``cost``: a
key of the live measurements of core.studies.reproducible, or of ``CITED``, or ``"free"``) and the address
of its source. ``answer`` puts together the settings that apply, the snippet in their order, and what
cannot be had for that choice, said plainly, with the only route there is.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

WORKLOADS = {
    "eager": "PyTorch training (eager)",
    "compile": "PyTorch with torch.compile",
    "ddp": "Data-parallel or sharded training",
    "hf": "Hugging Face generate",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "jax": "JAX",
}
HARDWARE = {"cpu": "a CPU", "gpu": "one NVIDIA GPU", "gpus": "several NVIDIA GPUs", "mps": "Apple MPS"}
TARGETS = {
    "run_to_run": "the same bits run to run, on one machine",
    "batch": "the same bits across batch sizes",
    "threads": "the same bits across thread or GPU counts",
    "machines": "the same bits on another machine of the same model",
    "gpu_models": "the same bits across GPU models",
    "cpu_gpu": "the same bits on a CPU and a GPU",
    "close": "close enough, within a tolerance",
}
TORCH = frozenset({"eager", "compile", "ddp", "hf"})
TRAINING = frozenset({"eager", "compile", "ddp"})
SERVING = frozenset({"vllm", "sglang"})
NVIDIA = frozenset({"gpu", "gpus"})
EXACT = frozenset(TARGETS) - {"close"}

# Sources, by address (each read for the sentence that cites it).
PT_RANDOMNESS = "https://pytorch.org/docs/stable/notes/randomness.html"
PT_DETERMINISTIC = "https://pytorch.org/docs/stable/generated/torch.use_deterministic_algorithms.html"
CUBLAS = "https://docs.nvidia.com/cuda/cublas/index.html#results-reproducibility"
PT_WORKSPACE_PR = "https://github.com/pytorch/pytorch/pull/161749"
VLLM_BI = "https://docs.vllm.ai/en/latest/features/batch_invariance/"
SGLANG_BLOG = "https://lmsys.org/blog/2025-09-22-sglang-deterministic/"
TM_BLOG = "https://thinkingmachines.ai/blog/defeating-nondeterminism-in-llm-inference/"
TM_OPS = "https://github.com/thinking-machines-lab/batch_invariant_ops"
CCCL_BLOG = "https://developer.nvidia.com/blog/controlling-floating-point-determinism-in-nvidia-cccl/"
ONEMKL_CNR = "https://www.intel.com/content/www/us/en/docs/onemkl/developer-reference-c/2026-0/reproducibility-conditions.html"
MEGATRON = "https://docs.nvidia.com/megatron-core/developer-guide/nightly/user-guide/deterministic-training.html"
XLA_FLAGS = "https://github.com/openxla/xla/pull/12520"
SEED_ISSUE = "https://github.com/pytorch/pytorch/issues/2976"
HF_DETERMINISM = "https://github.com/huggingface/transformers/blob/main/src/transformers/trainer_utils.py"
INDUCTOR_CASTS = "https://github.com/pytorch/pytorch/issues/149472"
REPROBLAS = "https://www2.eecs.berkeley.edu/Pubs/TechRpts/2015/EECS-2015-229.html"


@dataclass(frozen=True)
class Choice:
    """What the visitor runs, on what, and what must match."""

    workload: str = "eager"
    hardware: str = "gpu"
    target: str = "run_to_run"

    def __post_init__(self) -> None:
        for value, known, what in ((self.workload, WORKLOADS, "workload"), (self.hardware, HARDWARE, "hardware"),
                                   (self.target, TARGETS, "target")):
            if value not in known:
                raise ValueError(f"unknown {what} {value!r}; choose one of {', '.join(known)}")


@dataclass(frozen=True, kw_only=True)
class CitedCost:
    """A published cost, in × the default's time, with what it measured and where."""

    key: str
    label: str
    low: float
    high: float
    what: str
    source: str

    @property
    def text(self) -> str:
        return f"{self.low:.2f}×" if self.low == self.high else f"{self.low:.2f}× to {self.high:.2f}×"


CITED = {c.key: c for c in (
    CitedCost(key="thinking_machines", label="Batch-invariant kernels in vLLM (Thinking Machines)", low=42 / 26,
              high=55 / 26, what="Qwen3-8B on one GPU, 1,000 sequences: 26 s by default, 42 s with batch-invariant "
              "kernels and their improved attention, 55 s without it", source=TM_BLOG),
    CitedCost(key="sglang", label="SGLang --enable-deterministic-inference", low=1.3435, high=1.3435,
              what="SGLang's reported average overhead of 34.35% with CUDA graphs", source=SGLANG_BLOG),
    CitedCost(key="cccl", label="CCCL reductions, determinism gpu_to_gpu", low=1.2, high=1.3,
              what="NVIDIA's figure: 20-30% more time on large inputs for gpu_to_gpu (the default level is "
              "run_to_run)", source=CCCL_BLOG),
)}


@dataclass(frozen=True, kw_only=True)
class Setting:
    key: str
    title: str
    lines: str  # the snippet's lines for this setting
    order: int  # its place in the snippet: env vars (10s), imports (20s), seeds (30s), flags (40s), code (50+)
    applies: Callable[[Choice], bool]
    guarantees: str
    not_guaranteed: str
    cost: str  # "free", a key of the live costs, a key of CITED, or "unpublished"
    source: str


def _s(**kw) -> Setting:
    return Setting(**kw)


SETTINGS: tuple[Setting, ...] = (
    _s(key="versions", title="The same versions", order=5,
       lines="# Pin every version: pip freeze > requirements.lock pins the Python packages (torch and its CUDA\n"
       "# wheels); record the GPU driver and any system CUDA or cuDNN yourself (nvidia-smi shows the driver)",
       applies=lambda c: c.target in {"machines", "gpu_models", "cpu_gpu"},
       guarantees="Every promise below holds only within one release of each library.",
       not_guaranteed="The same bits by itself: PyTorch does not promise them across releases or platforms.",
       cost="free", source=PT_RANDOMNESS),
    _s(key="cublas_workspace", title="CUBLAS_WORKSPACE_CONFIG", order=10,
       lines='os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"  # needed by PyTorch <= 2.9, harmless after',
       applies=lambda c: c.hardware in NVIDIA and c.workload in TORCH and c.target in EXACT,
       guarantees="cuBLAS's fixed workspaces for every stream. PyTorch 2.9 and older refuse CUDA matrix products "
       "in deterministic mode without it; PyTorch 2.10 and newer no longer need it (they give each handle and "
       f"stream its own workspace: {PT_WORKSPACE_PR}), and it is harmless there; some frameworks still set it. "
       "Its cost is GPU memory, not time: about 24 MiB more at :4096:8, by cuBLAS's documentation.",
       not_guaranteed="Bits on another GPU: cuBLAS promises them only for the same architecture, the same SM count "
       "and the same toolkit version.", cost="unpublished", source=CUBLAS),
    _s(key="nccl_ring", title="NCCL_ALGO=Ring", order=11,
       lines='os.environ["NCCL_ALGO"] = "Ring"  # one all-reduce algorithm for every message size',
       applies=lambda c: (c.workload == "ddp" or c.hardware == "gpus") and c.hardware in NVIDIA
       and c.workload in TORCH | {"jax"}
       and c.target in EXACT,
       guarantees="Ring's reduction order is fixed by the topology: the same bits run to run (Megatron-LM's "
       "deterministic mode defaults to it).",
       not_guaranteed="The same bits with another GPU count: the order over the ranks changes (Many devices page).",
       cost="unpublished", source=MEGATRON),
    _s(key="mkl_cbwr", title="oneMKL strict CNR", order=12,
       lines='os.environ["MKL_CBWR"] = "AVX2,STRICT"  # Intel oneMKL: one code branch; STRICT: any thread count\n'
       'os.environ["MKL_DYNAMIC"] = "FALSE"  # the conditions of CNR: oneMKL and OpenMP may not change\n'
       'os.environ["OMP_DYNAMIC"] = "FALSE"  # the thread count on their own',
       applies=lambda c: c.hardware == "cpu" and c.workload in TORCH and c.target in {"threads", "machines"},
       guarantees="oneMKL's gemm, symm, hemm and trsm give the same bits at any thread count, and with a "
       "fixed code branch (AVX2 here; AUTO would pick one per CPU) on other machines that run that branch, with "
       "MKL_DYNAMIC and OMP_DYNAMIC false.",
       not_guaranteed="Torch's own reductions (torch.sum splits by thread count), other routines, PyTorch builds "
       "without MKL (Arm), or CPUs that cannot run the chosen branch.", cost="unpublished", source=ONEMKL_CNR),
    _s(key="xla_flags", title="XLA determinism flag", order=13,
       lines='os.environ["XLA_FLAGS"] = "--xla_gpu_deterministic_ops=true"  # before importing jax',
       applies=lambda c: c.workload == "jax" and c.hardware in NVIDIA and c.target in EXACT,
       guarantees="XLA uses deterministic GPU kernels (no atomics in scatters and reductions), run to run.",
       not_guaranteed="Bits across GPU models or XLA versions.", cost="unpublished", source=XLA_FLAGS),
    _s(key="vllm_bi", title="VLLM_BATCH_INVARIANT=1", order=14,
       lines='os.environ["VLLM_BATCH_INVARIANT"] = "1"  # before vLLM starts',
       applies=lambda c: c.workload == "vllm" and c.target in EXACT,
       guarantees="Outputs independent of the batch size and of the order of requests in a batch (beta).",
       not_guaranteed="Other hardware or vLLM versions; its docs list the supported hardware (NVIDIA GPUs from "
       "compute capability 8.0 or 9.0 by version, and in recent versions AMD Instinct GPUs and Intel XPUs), not "
       "CPUs or Apple GPUs. vLLM publishes no cost figure for it; "
       "Thinking Machines measured their own batch-invariant kernels in vLLM at 1.62× to 2.12× the default's time "
       "(cited below).", cost="unpublished", source=VLLM_BI),
    _s(key="imports", title="Imports", order=20, lines="import random\nimport numpy as np\nimport torch",
       applies=lambda c: c.workload in TORCH,
       guarantees="", not_guaranteed="", cost="free", source=PT_RANDOMNESS),
    _s(key="seeds", title="Seeds for every generator", order=30,
       lines="random.seed(0)\nnp.random.seed(0)\ntorch.manual_seed(0)  # the CPU and every CUDA generator",
       applies=lambda c: c.workload in TORCH,
       guarantees="The same random stream from each generator, run to run.",
       not_guaranteed="The same numbers on a CPU and a GPU: their generators differ (see Random streams below).",
       cost="free", source=PT_RANDOMNESS),
    _s(key="jax_key", title="An explicit PRNG key", order=30,
       lines="import jax\nkey = jax.random.key(0)  # JAX draws only from keys you pass",
       applies=lambda c: c.workload == "jax",
       guarantees="The same random numbers wherever the same key is split the same way.",
       not_guaranteed="Rounding: the arithmetic still follows the device's kernels.", cost="free",
       source="https://docs.jax.dev/en/latest/random-numbers.html"),
    _s(key="serving_seed", title="Temperature 0 and a seed per request", order=31,
       lines='# each request: {"temperature": 0, "seed": 0}',
       applies=lambda c: c.workload in SERVING,
       guarantees="Greedy decoding: the most likely token at every step; a seed fixes sampling when temperature > 0.",
       not_guaranteed="The same logits when the server batches the request with others (dynamic batching).",
       cost="free", source=TM_BLOG),
    _s(key="hf_determinism", title="transformers.enable_full_determinism", order=32,
       lines="from transformers import enable_full_determinism\nenable_full_determinism(0)  # seeds, "
       "deterministic algorithms, CUBLAS_WORKSPACE_CONFIG=:16:8",
       applies=lambda c: c.workload == "hf" and c.target in EXACT,
       guarantees="One call seeds Python, NumPy and torch, sets CUBLAS_WORKSPACE_CONFIG to :16:8 (over any value "
       "set before; cuBLAS says :16:8 may limit performance), FLASH_ATTENTION_DETERMINISTIC=1 and "
       "CUDA_LAUNCH_BLOCKING=1 (every kernel launch waits for the last, which costs time), and turns on "
       "deterministic algorithms and cuDNN's deterministic mode.",
       not_guaranteed="Batch invariance: padded batches of other sizes take other kernels.", cost="unpublished",
       source=HF_DETERMINISM),
    _s(key="deterministic", title="torch.use_deterministic_algorithms(True)", order=40,
       lines="torch.use_deterministic_algorithms(True)",
       applies=lambda c: c.workload in TORCH and c.target in EXACT,
       guarantees="Ops with a non-deterministic kernel (atomics: index_add, scatter_add on CUDA) switch to a "
       "deterministic one, or raise an error where none exists.",
       not_guaranteed="The same bits across batch sizes, thread counts, GPU models or a CPU and a GPU.",
       cost="deterministic_cpu", source=PT_DETERMINISTIC),
    _s(key="cudnn", title="cuDNN: no benchmarking", order=41,
       lines="torch.backends.cudnn.benchmark = False\ntorch.backends.cudnn.deterministic = True",
       applies=lambda c: c.workload in TORCH and c.hardware in NVIDIA and c.target in EXACT,
       guarantees="cuDNN uses one convolution algorithm every run instead of timing several and taking the "
       "fastest; benchmark = False alone can still choose a nondeterministic algorithm, which deterministic = True "
       "rules out.",
       not_guaranteed="The same algorithm, or bits, on another GPU model or cuDNN version.", cost="unpublished",
       source=PT_RANDOMNESS),
    _s(key="tf32", title="TF32 off", order=42,
       lines="torch.backends.cuda.matmul.allow_tf32 = False\ntorch.backends.cudnn.allow_tf32 = False  # on by "
       "default for convolutions",
       applies=lambda c: c.workload in TORCH and c.hardware in NVIDIA
       and c.target in {"gpu_models", "cpu_gpu", "close"},
       guarantees="float32 matmuls and convolutions keep float32's 24-bit inputs instead of TF32's 11.",
       not_guaranteed="Equal bits: the order of the sums still differs.", cost="tf32_off", source=PT_RANDOMNESS),
    _s(key="compile_casts", title="Inductor: round like eager", order=43,
       lines="torch._inductor.config.emulate_precision_casts = True  # round where eager rounds\n"
       "torch._inductor.config.fallback_random = True  # eager's random numbers",
       applies=lambda c: c.workload == "compile",
       guarantees="Compiled code rounds low-precision intermediates where eager does and draws eager's random "
       "numbers, so it can be compared with eager.",
       not_guaranteed="Equal bits: fused kernels still add in their own order.", cost="unpublished",
       source=INDUCTOR_CASTS),
    _s(key="dataloader", title="DataLoader workers seeded", order=50,
       lines="def seed_worker(worker_id):\n    s = torch.initial_seed() % 2**32\n    np.random.seed(s)\n"
       "    random.seed(s)\n\ng = torch.Generator()\ng.manual_seed(0)\nloader = torch.utils.data.DataLoader(\n"
       "    dataset, batch_size=64, shuffle=True, num_workers=4,\n    worker_init_fn=seed_worker, generator=g)",
       applies=lambda c: c.workload in TRAINING,
       guarantees="The same shuffling and the same augmentation draws in every worker, run to run.",
       not_guaranteed="The same batches with another worker count or batch size.", cost="free",
       source=PT_RANDOMNESS),
    _s(key="draw_on_cpu", title="Random tensors drawn on the CPU", order=51,
       lines="x = torch.randn(shape, generator=torch.Generator().manual_seed(0)).to(device)  # same on every device",
       applies=lambda c: c.workload in TORCH and c.target in {"cpu_gpu", "gpu_models", "close"},
       guarantees="The same random numbers on every device: one generator (the CPU's) draws them.",
       not_guaranteed="The same arithmetic afterwards.", cost="free", source=SEED_ISSUE),
    _s(key="greedy", title="Greedy generate", order=52,
       lines="out = model.generate(**inputs, do_sample=False)",
       applies=lambda c: c.workload == "hf",
       guarantees="No sampling: the arg-max token at every step.",
       not_guaranteed="Equal logits at other batch sizes or paddings.", cost="free", source=TM_BLOG),
    _s(key="batch_invariant_ops", title="Batch-invariant kernels", order=53,
       lines="from batch_invariant_ops import set_batch_invariant_mode\nwith set_batch_invariant_mode():\n"
       "    ...  # mm, addmm, log_softmax and mean with one reduction order for every batch size",
       applies=lambda c: c.workload in {"eager", "compile", "hf"} and c.hardware in NVIDIA and c.target == "batch",
       guarantees="A row's result does not depend on how many rows share the batch.",
       not_guaranteed="Other ops, other GPUs; CUDA and XPU only.", cost="batch_invariant", source=TM_OPS),
    _s(key="same_batch", title="The same batch every time", order=54,
       lines="# keep each batch the same: its size, its members, its padding",
       applies=lambda c: c.target == "batch" and not (c.hardware in NVIDIA and c.workload in TORCH | SERVING),
       guarantees="The same kernel and the same reduction order for each row.",
       not_guaranteed="Anything once the batch changes.", cost="free", source=TM_BLOG),
    _s(key="sglang_det", title="SGLang deterministic inference", order=55,
       lines="# python -m sglang.launch_server --model-path ... --enable-deterministic-inference",
       applies=lambda c: c.workload == "sglang" and c.target in EXACT,
       guarantees="The same output however requests are batched, with chunked prefill, CUDA graphs and the radix "
       "cache (attention backends FlashInfer, FA3 or Triton).",
       not_guaranteed="Other hardware or versions.", cost="sglang", source=SGLANG_BLOG),
    _s(key="threads_pin", title="One thread count everywhere", order=56,
       lines="torch.set_num_threads(8)  # the same count on every run and machine",
       applies=lambda c: c.hardware == "cpu" and c.workload in TORCH and c.target in {"threads", "machines",
                                                                                      "run_to_run"},
       guarantees="torch splits each reduction the same way every run.",
       not_guaranteed="The same bits at another thread count: the split follows it.", cost="free",
       source=PT_RANDOMNESS),
    _s(key="reprosum", title="Order-independent reductions", order=60,
       lines="import math\n\nimport numpy as np\n\n\n"
       "def order_independent_sum(a):  # a NumPy array (a tensor: t.detach().cpu().double().numpy()); slow\n"
       "    a = np.asarray(a)  # the exact sum, rounded to float64, then to a's format\n"
       "    return a.dtype.type(math.fsum(a.astype(np.float64).ravel().tolist()))",
       applies=lambda c: c.target in {"threads", "gpu_models", "cpu_gpu"},
       guarantees="The same bits in any order and at any thread count, wherever the same code runs, for finite "
       "values whose sum does not overflow float64: math.fsum sums exactly and rounds to float64, and the cast "
       "rounds again (for float32 or narrower values: within one ULP, not always the correctly rounded sum). "
       "ReproBLAS and CCCL's deterministic reductions are fast and give the same bits in any order too, also not "
       "always the correctly rounded sum.",
       not_guaranteed="Anything the library's other kernels compute (matmuls, attention).", cost="reprosum",
       source=REPROBLAS),
    _s(key="cccl", title="CCCL reductions, gpu_to_gpu", order=61,
       lines="# your own CUDA reductions (CCCL 3.1, C++): cub::DeviceReduce::Sum(in, out, n,\n"
       "#     cuda::execution::require(cuda::execution::determinism::gpu_to_gpu))",
       applies=lambda c: c.hardware in NVIDIA and c.target in {"gpu_models", "machines"},
       guarantees="The same bits from a CCCL reduction on different NVIDIA GPU architectures (a reproducible "
       "accumulator that bins the inputs by exponent).",
       not_guaranteed="Library kernels you do not write yourself.", cost="cccl", source=CCCL_BLOG),
    _s(key="float64", title="float64", order=70, lines="x = x.double()  # roundings 2^29 times finer than float32",
       applies=lambda c: c.target == "close" and c.hardware != "mps",
       guarantees="Differences from reordering about 2^29 times smaller.",
       not_guaranteed="Equal bits: the order still matters.", cost="float64", source=PT_RANDOMNESS),
    _s(key="wider", title="Wider accumulation", order=71, lines="total = torch.sum(x, dtype=torch.float64)",
       applies=lambda c: c.target == "close" and c.workload in TORCH and c.hardware != "mps",
       guarantees="That reduction's own rounding errors shrink sharply.",
       not_guaranteed="Equal bits: a float64 sum still depends on its order.", cost="wider", source=PT_RANDOMNESS),
    _s(key="tolerance", title="A typical tolerance from the rounding envelope", order=72,
       lines="torch.testing.assert_close(actual, expected, rtol={rtol}, atol={atol})",
       applies=lambda c: c.target == "close",
       guarantees="Two results that differ only in the order of their K-term sums, of terms of this size, usually "
       "pass: this is the typical tolerance, which assumes that the rounding errors behave independently; the "
       "guaranteed one below holds for every order.",
       not_guaranteed="That every order passes: sorted or same-sign data, long left-to-right loops and NumPy "
       "reductions along an outer axis can exceed it. Nor that a larger difference is a bug.",
       cost="free", source=PT_RANDOMNESS),
    _s(key="aggregates", title="Compare aggregates over seeds", order=73,
       lines="# judge runs by final loss and accuracy over several seeds, not step by step",
       applies=lambda c: c.target == "close" and c.workload in TRAINING | {"jax"},
       guarantees="A yardstick: a difference no larger than the seed-to-seed spread is not told apart from seed noise.",
       not_guaranteed="Any step-by-step agreement.", cost="aggregates",
       source="https://arxiv.org/abs/2103.04514"),
)


@dataclass(frozen=True, kw_only=True)
class Answer:
    choice: Choice
    settings: tuple[Setting, ...]  # in the snippet's order
    cannot: tuple[str, ...]  # what cannot be had for this choice, said plainly
    route: str | None  # the only route there is, when something cannot be had

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.settings)

    def snippet(self, rtol: str = "R", atol: str = "A") -> str:
        """The settings' lines in order: ``import os`` first when an environment variable is set, and first of all
        a line naming what the visitor supplies (the names the lines use but do not define)."""
        body = [s.lines.replace("{rtol}", rtol).replace("{atol}", atol) for s in self.settings]
        env = any(s.lines.startswith("os.environ") for s in self.settings)
        code = "\n".join(body)
        missing = [line for name, line in IMPORTS.items()
                   if re.search(rf"(?<![\w.]){name}\.", code) and not re.search(rf"^{re.escape(line)}$", code, re.M)]
        first = [b for st, b in zip(self.settings, body, strict=True) if st.order < 20]  # environment variables
        rest = body[len(first):]  # ordered: the libraries are imported after the variables they read
        code = "\n".join((["import os"] if env else []) + first + missing + rest)
        needed = [f"{name} ({what})" for name, what in SUPPLIED.items()
                  if re.search(rf"(?<![\w.\"']){name}\b(?!\s*=[^=])", code)
                  and not re.search(rf"^\s*{name}\s*=[^=]", code, re.M)]
        return (f"# You supply: {'; '.join(needed)}.\n" if needed else "") + code


# The modules a setting's lines may use without importing them (another setting usually does): a snippet that
# uses one and does not import it gets the import at its top
IMPORTS = {"torch": "import torch", "np": "import numpy as np", "random": "import random", "math": "import math"}
# Names a snippet may use that only the visitor can define, with what each stands for
SUPPLIED = {
    "dataset": "your torch.utils.data.Dataset",
    "shape": "a tensor shape, e.g. (64, 128)",
    "device": '"cuda", "cpu" or "mps"',
    "model": "your model",
    "inputs": "the tokenizer's output for your prompt",
    "actual": "one run's result tensor",
    "expected": "the other run's",
}


def _cannot(c: Choice) -> tuple[tuple[str, ...], str | None]:
    out: list[str] = []
    route = None
    if c.target == "cpu_gpu":
        out.append("Bitwise equal results on a CPU and a GPU cannot be had with vendor libraries: they split sums "
                   "and matrix products differently, their math libraries round exp, tanh and the like "
                   "differently, and PyTorch does not promise it.")
    if c.target == "gpu_models":
        out.append("Bitwise equal results across GPU models cannot in general be had from cuBLAS, which promises the "
                   "same bits only for the same architecture, SM count and toolkit (an H100 SXM and an H200 qualify; "
                   "most pairs do not), nor from PyTorch, which promises none across platforms (its reproducibility "
                   "notes). The model below shows how the SM count changes torch.sum's order.")
    if c.target == "threads":
        out.append("Across thread counts torch's reductions split the work by the count, and across GPU counts "
                   "the all-reduce adds the ranks in another order: the bits can differ, whatever the flags.")
    if c.target == "batch" and c.workload in TRAINING and c.hardware not in NVIDIA:
        out.append("No batch-invariant kernels are published for this hardware: torch picks kernels by batch size.")
    if c.hardware == "mps" and c.target in EXACT:
        out.append("PyTorch's reproducibility notes cover the CPU and CUDA, not MPS: check run to run yourself. "
                   "MPS has no float64.")
    if c.workload in SERVING and c.hardware in {"cpu", "mps"} and c.target in EXACT:
        out.append("Batch-invariant serving is documented for GPUs (vLLM's docs list NVIDIA GPUs from compute "
                   "capability 8.0 or 9.0, by version), not for this hardware.")
    if out and c.target in {"cpu_gpu", "gpu_models", "threads"}:
        route = ("What remains is your own code: the same fixed-order kernels on both sides, or order-independent "
                 "reductions, which give the same bits in any order (the exact sum rounded once is one; ReproBLAS "
                 "and CCCL's gpu_to_gpu reductions are others); elementwise functions need the same code, or "
                 "correctly rounded results, on every device. MPS has no float64.")
    return tuple(out), route


def answer(c: Choice) -> Answer:
    """The settings that apply to ``c`` in the snippet's order, and what cannot be had."""
    chosen = tuple(sorted((s for s in SETTINGS if s.applies(c)), key=lambda s: s.order))
    cannot, route = _cannot(c)
    return Answer(choice=c, settings=chosen, cannot=cannot, route=route)
