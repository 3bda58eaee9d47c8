"""A serving engine with dynamic batching, and how identical requests fork in it.

A seeded arrival schedule puts ``requests`` identical requests (one prompt) among ``others``
with other prompts and lengths. At each engine step the scheduler admits waiting requests up to
``max_batch`` running at once, prefills the admitted ones together (their prompts, padded to
the longest, through the KV cache), and decodes one token for every running request in one
batch. Decoding is greedy (temperature 0). Every identical request is compared with the same
request served alone (a batch of one, a plain loop over the model): the first token where its
completion departs, and the gap between the two largest logits there, in ULPs of the larger
logit and as a ratio. While a request still agrees with the lone run, each of its logit rows
is compared bit for bit with the lone run's row at the same position: the share whose bits
differ and the share whose best token flips are measured, not assumed, as are the smallest
top-2 gap seen and the largest move of one logit (in ULPs of its row's largest logit).

Nothing here changes process-global state: the engine runs with the calling thread's torch
settings, and every random choice comes from its own seeded generator.
"""

from __future__ import annotations

import random
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace

import torch

from core.arith.formats import format_of, same_bits
from core.arith.ulps import in_ulps
from core.crowd.budget import MB, Cost
from core.machines.globalstate import torch_threads
from core.machines.progress import OnProgress, Progress, report
from core.serving import corpus
from core.serving.kernels import KERNELS, Kernels
from core.serving.model import KVCache, ModelConfig, TinyLM, decode, encode, load_params

DEFAULT_PROMPT = "the baker painted"
DEFAULT_DTYPE = "bfloat16"
DEFAULT_KERNELS = "gpu_model"
SERVE_THREADS = 1  # one torch thread per forward (under core.machines.globalstate's lock, restored after each)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
MAX_REQUESTS = 2000
MAX_BATCH = 64
MAX_PROMPT = 48
MIN_NEW, MAX_NEW = 8, 110
DEFAULT_NEW = 32  # the default fork (token 16 of "the baker painted") lies well inside; 48 took three times as long


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """One serving run. ``others`` defaults to half as many requests as the identical ones."""

    requests: int = 40
    max_batch: int = 16
    prompt: str = DEFAULT_PROMPT
    new_tokens: int = DEFAULT_NEW
    dtype: str = DEFAULT_DTYPE
    kernels: str = DEFAULT_KERNELS
    others: int | None = None
    arrivals_per_step: float = 1.0
    seed: int = 0

    def problems(self) -> dict[str, str]:
        """Field name → what is wrong with it (empty when the settings can run)."""
        out: dict[str, str] = {}
        if not 1 <= self.requests <= MAX_REQUESTS:
            out["requests"] = f"between 1 and {MAX_REQUESTS:,} identical requests"
        if not 1 <= self.max_batch <= MAX_BATCH:
            out["max_batch"] = f"a maximum batch between 1 and {MAX_BATCH}"
        if not self.prompt:
            out["prompt"] = "the prompt needs at least one character"
        elif len(self.prompt) > MAX_PROMPT:
            out["prompt"] = f"at most {MAX_PROMPT} characters (this one has {len(self.prompt)})"
        else:
            try:
                encode(self.prompt)
            except ValueError as e:
                out["prompt"] = str(e)
        if not MIN_NEW <= self.new_tokens <= MAX_NEW:
            out["new_tokens"] = f"between {MIN_NEW} and {MAX_NEW} new tokens"
        if self.dtype not in DTYPES:
            out["dtype"] = f"one of {', '.join(DTYPES)}"
        if self.kernels not in KERNELS:
            out["kernels"] = f"one of {', '.join(KERNELS)}"
        if self.others is not None and not 0 <= self.others <= MAX_REQUESTS:
            out["others"] = f"between 0 and {MAX_REQUESTS:,} other requests"
        if not 0.05 <= self.arrivals_per_step <= 64:
            out["arrivals_per_step"] = "between 0.05 and 64 arrivals per step"
        return out

    def check(self) -> None:
        if bad := self.problems():
            raise ValueError("; ".join(f"{k}: {v}" for k, v in bad.items()))

    @property
    def other_requests(self) -> int:
        return self.requests // 2 if self.others is None else self.others


@dataclass(frozen=True, kw_only=True)
class Request:
    rid: int
    prompt: tuple[int, ...]
    new_tokens: int
    arrival: int  # engine step
    identical: bool


@dataclass(frozen=True, kw_only=True)
class Fork:
    """Where one identical request first departs from the lone run."""

    position: int  # index of the first differing generated token
    token: str  # what this request produced there
    alone_token: str  # what the lone run produced there
    gap_ulps: float  # the lone run's top-2 logit gap there, in ULPs of its larger logit
    gap_ratio: float  # the same gap relative to the larger logit
    own_gap_ulps: float  # this request's own top-2 gap there


@dataclass(frozen=True)
class Completion:
    """One distinct completion of the identical requests."""

    text: str
    count: int
    fork: Fork | None  # None: the same as the lone run


@dataclass(frozen=True, kw_only=True)
class ServeResult:
    settings: ServeSettings
    kernels_label: str
    alone: str  # the lone run's completion
    completions: tuple[Completion, ...]  # most common first
    rows_compared: int  # identical requests' logit rows compared with the lone run (while still agreeing)
    rows_bits_differ: int
    rows_argmax_flip: int
    min_gap_ulps: float  # the smallest top-2 gap seen in those rows, in ULPs
    min_gap_ratio: float
    # the largest move of one logit in those rows against the lone run's, in ULPs of that row's largest |logit|
    # (the unit of the top-2 gap, so the two compare directly); 0 when no row's bits moved
    max_move_ulps: float = 0.0
    batch_sizes: dict[int, int]  # decode batch size → how many steps ran at it
    steps: int
    tokens: int  # every generated token, all requests
    seconds: float  # serving wall time (the lone reference run excluded)
    cpu_seconds: float  # the serving thread's CPU time (less disturbed by other processes than wall time)
    torch_threads: int

    @property
    def distinct(self) -> int:
        return len(self.completions)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("inf")

    @property
    def cpu_tokens_per_second(self) -> float:
        return self.tokens / self.cpu_seconds if self.cpu_seconds > 0 else float("inf")

    @property
    def identical_requests(self) -> int:
        return sum(c.count for c in self.completions)


@dataclass(frozen=True)
class ForkStudy:
    """The same workload served with the ordinary kernels and with batch-invariant ones."""

    ordinary: ServeResult  # the settings' ordinary kernels (this CPU's, or the MODEL of a GPU's)
    invariant: ServeResult
    baseline: ServeResult  # this CPU's own torch kernels, the same schedule: what the cost is measured against

    @property
    def cost(self) -> float:
        """Batch-invariant serving time over serving with this CPU's own kernels (the serving thread's CPU
        time, same schedule and format). The MODEL of a GPU's kernels is never timed: it emulates."""
        return self.invariant.cpu_seconds / self.baseline.cpu_seconds


def fork_study(s: ServeSettings, on_progress: OnProgress | None = None) -> ForkStudy:
    """Serve ``s`` (ordinary kernels) and the same schedule with batch-invariant kernels; ``on_progress``
    counts the serving runs (a fraction of one while it serves) and names the kernels and the step."""
    def part(lo: float, what: str, runs: int) -> OnProgress | None:
        return None if on_progress is None else (
            lambda p: on_progress(Progress(done=lo * runs + p.fraction, total=runs, what=f"{what}: {p.what}")))

    runs = 2 if s.kernels == "default" else 3
    ordinary = serve(s, part(0.0, "ordinary kernels", runs))
    invariant = serve(replace(s, kernels="batch_invariant"), part(1 / runs, "batch-invariant kernels", runs))
    baseline = ordinary if s.kernels == "default" else serve(replace(s, kernels="default"),
                                                             part(2 / runs, "this CPU's kernels (for the cost)", runs))
    return ForkStudy(ordinary, invariant, baseline)


# The budget's units (core.crowd.budget): value operations, one float32 value through one cheap pass.
# A generated token of this model, at the batch sizes the page uses, costs the CPU time of roughly
# this many such passes (measured with benchmarks/bench_serving.py; rounded up).
TOKEN_WORK = {"default": 2e5, "gpu_model": 3e5, "batch_invariant": 4.5e5}
BF16_FACTOR = 1.2
CACHE_BYTES = 2 * 2 * 160 * 96 * 4  # one request's KV cache in float32 (layers x keys/values x context x width)


def workload_tokens(s: ServeSettings) -> int:
    """Tokens the schedule generates (identical requests: all of theirs; others: their seeded lengths)."""
    return sum(r.new_tokens for r in schedule(s))


def serving_cost(s: ServeSettings) -> Cost:
    """The fork study's cost (ordinary and batch-invariant serving of the same schedule), in budget units."""
    tokens = workload_tokens(s)
    factor = BF16_FACTOR if s.dtype == "bfloat16" else 1.0
    parts = {f"{tokens:,} tokens, batch-invariant kernels": tokens * TOKEN_WORK["batch_invariant"] * factor,
             f"{tokens:,} tokens, ordinary kernels": tokens * TOKEN_WORK[s.kernels] * factor}
    if s.kernels != "default":
        parts[f"{tokens:,} tokens, this CPU's kernels (the cost's baseline)"] = tokens * TOKEN_WORK["default"] * factor
    peak = 16 * MB + s.max_batch * CACHE_BYTES + s.max_batch * 1.5 * MB
    return Cost(
        work=sum(parts.values()), peak_bytes=peak, parts=tuple(sorted(parts.items(), key=lambda kv: -kv[1])), long=True
    )


def schedule(s: ServeSettings) -> list[Request]:
    """The seeded arrival schedule: identical and other requests, interleaved at random times."""
    rng = random.Random(s.seed)
    total = s.requests + s.other_requests
    kinds = [True] * s.requests + [False] * s.other_requests
    rng.shuffle(kinds)
    prompt = tuple(encode(s.prompt))
    other_prompts = corpus.prompts(rng, s.other_requests)
    t = 0.0
    out: list[Request] = []
    o = 0
    for rid in range(total):
        t += rng.expovariate(s.arrivals_per_step)
        if kinds[rid]:
            out.append(Request(rid=rid, prompt=prompt, new_tokens=s.new_tokens, arrival=int(t), identical=True))
        else:
            p = other_prompts[o]
            o += 1
            out.append(
                Request(
                    rid=rid,
                    prompt=tuple(encode(p)),
                    new_tokens=rng.randint(MIN_NEW, s.new_tokens),
                    arrival=int(t),
                    identical=False,
                )
            )
    return out


def _top2(row: torch.Tensor) -> tuple[float, float]:
    v = torch.topk(row, 2).values
    return float(v[0]), float(v[1])


@dataclass(kw_only=True)
class _Live:
    req: Request
    cache: KVCache | None
    out: list[int] = field(default_factory=list)
    agrees: bool = True
    fork: Fork | None = None


class _Tally:
    def __init__(self, dtype: torch.dtype, ref_tokens: list[int], ref_logits: torch.Tensor) -> None:
        self.dtype, self.ref_tokens, self.ref_logits = dtype, ref_tokens, ref_logits
        self.compared = self.differ = self.flips = 0
        self.min_ulps = float("inf")
        self.min_ratio = float("inf")
        self.max_move_ulps = 0.0

    def gap(self, row: torch.Tensor) -> tuple[float, float]:
        a, b = _top2(row)
        g = a - b
        return float(in_ulps(g, a, format_of(self.dtype))), g / abs(a) if a else float("inf")

    def take(self, live: _Live, row: torch.Tensor) -> None:
        nxt = int(torch.argmax(row))
        i = len(live.out)
        live.out.append(nxt)
        if not (live.req.identical and live.agrees):
            return
        self.compared += 1
        ulps, ratio = self.gap(row)
        self.min_ulps, self.min_ratio = min(self.min_ulps, ulps), min(self.min_ratio, ratio)
        if not same_bits(row, self.ref_logits[i]):
            self.differ += 1
            ref = self.ref_logits[i]
            move = float((row - ref).abs().max())
            self.max_move_ulps = max(self.max_move_ulps,
                                     float(in_ulps(move, float(ref.abs().max()), format_of(self.dtype))))
        if nxt != self.ref_tokens[i]:
            self.flips += 1
            live.agrees = False
            ref_ulps, ref_ratio = self.gap(self.ref_logits[i])
            live.fork = Fork(
                position=i,
                token=decode([nxt]),
                alone_token=decode([self.ref_tokens[i]]),
                gap_ulps=ref_ulps,
                gap_ratio=ref_ratio,
                own_gap_ulps=ulps,
            )


def lone_run(model: TinyLM, kern: Kernels, s: ServeSettings) -> tuple[list[int], torch.Tensor]:
    """The request served alone: a batch of one, prefill then one token at a time."""
    with torch_threads(SERVE_THREADS):
        return model.generate(kern, list(encode(s.prompt)), s.new_tokens)


_models: dict[str, TinyLM] = {}


def model_for(dtype: str) -> TinyLM:
    """The shipped model in ``dtype`` (one per dtype per process: a few hundred kB each)."""
    if dtype not in _models:
        _models[dtype] = TinyLM(load_params(), ModelConfig(), DTYPES[dtype])
    return _models[dtype]


def _forward(model: TinyLM, kern: Kernels, tally: _Tally, batch: list[_Live], tokens: list[list[int]]) -> None:
    """One batched forward of ``batch`` (each request's new ``tokens``) through its KV caches; each request
    takes its next token from its row of logits."""
    with torch_threads(SERVE_THREADS):
        rows = model.forward(kern, tokens, [a.cache for a in batch])
    for a, row in zip(batch, rows, strict=True):
        tally.take(a, row)


def _retire(running: list[_Live], done: list[_Live]) -> list[_Live]:
    """The requests still running; those with all their tokens move to ``done``."""
    still = []
    for a in running:
        if len(a.out) >= a.req.new_tokens:
            a.cache = None  # a finished request's KV cache is freed at once
            done.append(a)
        else:
            still.append(a)
    return still


def _completions(done: list[_Live]) -> tuple[Completion, ...]:
    """The identical requests' distinct completions, most common first."""
    groups: dict[str, list[_Live]] = {}
    for a in done:
        if a.req.identical:
            groups.setdefault(decode(a.out), []).append(a)
    return tuple(sorted((Completion(text, len(members), members[0].fork) for text, members in groups.items()),
                        key=lambda c: (-c.count, c.text)))


def serve(s: ServeSettings, on_progress: OnProgress | None = None,
          model: TinyLM | None = None) -> ServeResult:
    """Serve the schedule with dynamic batching and measure how the identical requests fork."""
    s.check()
    model = model or model_for(s.dtype)
    kern = KERNELS[s.kernels]
    with torch.inference_mode():
        ref_tokens, ref_logits = lone_run(model, kern, s)
        tally = _Tally(model.dtype, ref_tokens, ref_logits)
        reqs = schedule(s)
        total_tokens = sum(r.new_tokens for r in reqs)
        pending = deque(reqs)
        waiting: deque[Request] = deque()
        running: list[_Live] = []
        done: list[_Live] = []
        sizes: Counter[int] = Counter()
        step = produced = 0
        t0, c0 = time.perf_counter(), time.thread_time()
        while pending or waiting or running:
            while pending and pending[0].arrival <= step:
                waiting.append(pending.popleft())
            if not waiting and not running:
                step = pending[0].arrival
                continue
            admitted = []
            while waiting and len(running) + len(admitted) < s.max_batch:
                admitted.append(_Live(req=waiting.popleft(), cache=model.new_cache()))
            if running:  # decode: one token for every running request
                sizes[len(running)] += 1
                _forward(model, kern, tally, running, [[a.out[-1]] for a in running])
            if admitted:  # prefill: the admitted requests' prompts, together
                _forward(model, kern, tally, admitted, [list(a.req.prompt) for a in admitted])
                running.extend(admitted)
            produced += len(running)
            running = _retire(running, done)
            step += 1
            if step % 25 == 0:
                report(on_progress, done=produced, total=total_tokens,
                       what=f"step {step}: {produced:,} of {total_tokens:,} tokens")
        seconds, cpu_seconds = time.perf_counter() - t0, time.thread_time() - c0
    return ServeResult(
        settings=s, kernels_label=kern.label, alone=decode(ref_tokens), completions=_completions(done),
        rows_compared=tally.compared, rows_bits_differ=tally.differ, rows_argmax_flip=tally.flips,
        min_gap_ulps=tally.min_ulps, min_gap_ratio=tally.min_ratio, max_move_ulps=tally.max_move_ulps,
        batch_sizes=dict(sorted(sizes.items())),
        steps=step, tokens=total_tokens, seconds=seconds, cpu_seconds=cpu_seconds, torch_threads=SERVE_THREADS)
