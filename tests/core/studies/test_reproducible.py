"""Make my runs reproducible: the settings registry answers every setup, the suggested tolerances pass real
reorderings and fail planted errors, the live costs are cached and restore global state, and the modelled GPU
generations agree where their launches agree."""

from __future__ import annotations

import itertools
import re
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
import torch

from core.arith.exact import exact_sum_fraction
from core.arith.formats import FORMATS, bits_of
from core.arith.ulps import ulp_array
from core.diagnose.envelopes import ENVELOPE_FACTOR, envelope_of, output_rounding, reordering_sizes
from core.diagnose.rounding import accumulation_format, round_to
from core.kernels.cuda_model import cuda_config_for, cuda_sum_model
from core.kernels.torch_cpu_model import cascade_depth, torch_cpu_sum_model
from core.machines.globalstate import torch_threads
from core.studies import reproducible as R
from core.studies.reproducible_rules import CITED, HARDWARE, SETTINGS, TARGETS, WORKLOADS, Choice, answer

ALL = [Choice(w, h, t) for w, h, t in itertools.product(WORKLOADS, HARDWARE, TARGETS)]


# ------------------------------------------------------------------------------ the registry


def test_settings_are_one_entry_each_with_a_source():
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))
    for s in SETTINGS:
        assert s.source.startswith("https://"), s.key
        assert s.lines.strip(), s.key
        if s.key != "imports":
            assert s.guarantees and s.not_guaranteed, s.key


@pytest.mark.parametrize("choice", ALL, ids=lambda c: f"{c.workload}-{c.hardware}-{c.target}")
def test_every_combination_gets_a_coherent_answer(choice):
    a = answer(choice)
    assert a.settings, "no setting"
    snippet = a.snippet("1e-2", "2e-3")
    assert snippet.strip()
    compile(snippet, "<snippet>", "exec")  # copyable: valid Python as it stands
    lines = [line for line in snippet.splitlines() if not line.startswith("# You supply:")]
    env = [i for i, line in enumerate(lines) if line.startswith("os.environ")]
    imports = [i for i, line in enumerate(lines) if re.match(r"import (torch|jax)\b", line)]
    if env:  # environment variables before the library that reads them is imported
        assert lines[0] == "import os"
        assert not imports or max(env) < min(imports)
    assert [s.order for s in a.settings] == sorted(s.order for s in a.settings)
    if a.route:
        assert a.cannot
    for s in a.settings:  # every cost resolves to a figure or says why there is none
        line = R.cost_line(s.cost, _fake_costs(), _fake_cost("batch_invariant"))
        assert line.text
        assert line.origin in {"measured here", "cited", "none"}
        if line.origin == "cited":
            assert line.source.startswith("https://")


def _fake_cost(key):
    return R.LiveCost(key=key, label=key, what="x", ratio=1.5, iqr=(1.4, 1.6), repeats=5)


def _fake_costs():
    return R.LiveCosts(where="here", measured_at=0.0,
                       rows={k: _fake_cost(k) for k in ("float64", "wider", "reprosum", "deterministic_cpu")})


def test_pytorch_training_on_one_gpu_run_to_run_has_the_key_settings():
    a = answer(Choice("eager", "gpu", "run_to_run"))
    assert {"cublas_workspace", "deterministic", "seeds", "dataloader", "cudnn"} <= set(a.keys)
    text = a.snippet()
    for needle in ("CUBLAS_WORKSPACE_CONFIG", "torch.use_deterministic_algorithms(True)", "torch.manual_seed(0)",
                   "worker_init_fn=seed_worker", "generator=g", "cudnn.benchmark = False"):
        assert needle in text
    assert text.index("CUBLAS_WORKSPACE_CONFIG") < text.index("import torch")
    assert not a.cannot


@pytest.mark.parametrize(("choice", "keys"), [
    (Choice("vllm", "gpu", "batch"), {"vllm_bi", "serving_seed"}),
    (Choice("sglang", "gpus", "run_to_run"), {"sglang_det", "serving_seed"}),
    (Choice("jax", "gpu", "run_to_run"), {"xla_flags", "jax_key"}),
    (Choice("ddp", "gpus", "threads"), {"nccl_ring", "deterministic", "reprosum"}),
    (Choice("hf", "gpu", "batch"), {"hf_determinism", "greedy", "batch_invariant_ops"}),
    (Choice("compile", "gpu", "run_to_run"), {"compile_casts", "deterministic"}),
    (Choice("eager", "cpu", "threads"), {"mkl_cbwr", "threads_pin", "reprosum"}),
    (Choice("eager", "gpu", "cpu_gpu"), {"versions", "draw_on_cpu", "reprosum", "tf32"}),
    (Choice("eager", "gpu", "gpu_models"), {"cccl", "reprosum", "versions"}),
    (Choice("eager", "gpu", "close"), {"tolerance", "float64", "wider", "aggregates", "tf32"}),
])
def test_key_settings(choice, keys):
    assert keys <= set(answer(choice).keys)


@pytest.mark.parametrize("target", ["cpu_gpu", "gpu_models", "threads"])
def test_what_cannot_be_had_is_said_with_its_route(target):
    a = answer(Choice("eager", "gpu", target))
    assert a.cannot
    assert a.route and "order-independent" in a.route


def test_close_enough_never_asks_for_bits():
    for c in (c for c in ALL if c.target == "close"):
        keys = set(answer(c).keys)
        assert "tolerance" in keys
        assert not keys & {"cublas_workspace", "deterministic", "vllm_bi", "sglang_det"}
    assert "float64" not in answer(Choice("eager", "mps", "close")).keys  # MPS has no float64


def test_choice_rejects_unknown_values():
    with pytest.raises(ValueError, match="unknown hardware"):
        Choice("eager", "tpu", "run_to_run")


def test_cited_costs_are_in_times_the_default():
    tm = CITED["thinking_machines"]
    assert (round(tm.low, 2), round(tm.high, 2)) == (1.62, 2.12)  # 42 s and 55 s against 26 s
    assert CITED["sglang"].text == "1.34×"


# ----------------------------------------------------------------------------- the tolerance

DTYPES = ("float16", "bfloat16", "float32", "float64")
LENGTHS = (16, 1000, 4096, 40_000)


def _in(x: np.ndarray, fmt: str) -> np.ndarray:
    """float64 values rounded to ``fmt`` (as float64)."""
    return round_to(x, fmt) if fmt != "float64" else x


def _np_dtype(name):
    return {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32, "float64": np.float64}[name]


def _sum_orders(x: np.ndarray, dtype: str) -> list[np.ndarray]:
    """Row sums of x (values of ``dtype``) as libraries compute them, each rounded to ``dtype``: NumPy's pairwise
    sum (accumulating as torch does), torch's on this CPU at 1 and 2 threads, the modelled CUDA reduction."""
    acc = accumulation_format(dtype)
    xa = x.astype(_np_dtype(acc))
    t = torch.from_numpy(x.astype(np.float32 if dtype != "float64" else np.float64)).to(FORMATS[dtype].torch_dtype)
    out = [np.sum(xa, axis=1)]
    for threads in (1, 2):
        with torch_threads(threads):
            out.append(np.array([float(row.sum()) for row in t]))
    out.append(np.array([float(cuda_sum_model(row.astype(_np_dtype(dtype)))) for row in x]))
    return [_in(np.asarray(o, dtype=np.float64), dtype) for o in out]


def _loop_orders(x: np.ndarray, dtype: str) -> list[np.ndarray]:
    """Row sums added one term at a time, forwards and backwards, accumulating as torch does."""
    xa = x.astype(_np_dtype(accumulation_format(dtype)))
    return [_in(np.cumsum(v, axis=1)[:, -1].astype(np.float64), dtype) for v in (xa, xa[:, ::-1])] + _sum_orders(
        x, dtype)[:1]


def _matmul_orders(a: np.ndarray, b: np.ndarray, dtype: str) -> list[np.ndarray]:
    """a @ b (values of ``dtype``) by NumPy, torch at 1 and 2 threads, the modelled GPU sum of the products."""
    acc = accumulation_format(dtype)
    out = [np.matmul(a.astype(_np_dtype(acc)), b.astype(_np_dtype(acc)))]
    ta = torch.from_numpy(a).to(FORMATS[dtype].torch_dtype)
    tb = torch.from_numpy(b).to(FORMATS[dtype].torch_dtype)
    for threads in (1, 2):
        with torch_threads(threads):
            out.append((ta @ tb).double().numpy())
    prods = (a[:4, :, None] * b[None, :, :]).astype(_np_dtype(acc))  # exact for these formats' products
    gpu = out[0].astype(np.float64).copy()
    for i in range(4):
        for j in range(b.shape[1]):
            gpu[i, j] = float(cuda_sum_model(np.ascontiguousarray(prods[i, :, j])))
    out.append(gpu)
    return [_in(np.asarray(o, dtype=np.float64), dtype) for o in out]


def _check_honest_and_planted(results: list[np.ndarray], tol: R.Tolerance, dtype: str) -> None:
    largest = 0.0
    for x, y in itertools.combinations(results, 2):
        torch.testing.assert_close(torch.from_numpy(x), torch.from_numpy(y), rtol=tol.rtol, atol=tol.atol)
        largest = max(largest, float(np.max(np.abs(x - y))))
    ref = results[0]
    i = int(np.argmax(np.abs(ref)))
    floor = float(ulp_array(np.abs(ref.ravel()[i:i + 1]), FORMATS[dtype])[0])  # orders that all agreed
    planted = ref.copy()
    planted.ravel()[i] += 100 * max(largest, floor)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(torch.from_numpy(planted), torch.from_numpy(ref), rtol=tol.rtol, atol=tol.atol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", LENGTHS)
@pytest.mark.parametrize("scale", [1.0, 1e-3])
def test_sums_in_real_orders_pass_and_planted_errors_fail(dtype, k, scale):
    rng = np.random.default_rng(k)
    rows = 24 if k < 40_000 else 8
    x = _in(rng.standard_normal((rows, k)) * scale, dtype)
    rms = float(np.sqrt(np.mean(x * x)))
    tol = R.suggest_tolerance(dtype, k, rms)
    _check_honest_and_planted(_sum_orders(x, dtype), tol, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (16, 1000, 4096))
def test_loops_adding_one_term_at_a_time_pass_as_products(dtype, k):
    rng = np.random.default_rng(k + 2)
    x = _in(rng.standard_normal((24, k)), dtype)
    tol = R.suggest_tolerance(dtype, k, float(np.sqrt(np.mean(x * x))), op="matmul")
    _check_honest_and_planted(_loop_orders(x, dtype), tol, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (64, 1000, 4096))
def test_matrix_products_in_real_orders_pass_and_planted_errors_fail(dtype, k):
    rng = np.random.default_rng(k + 1)
    a, b = _in(rng.standard_normal((16, k)), dtype), _in(rng.standard_normal((k, 8)), dtype)
    rms = float(np.sqrt(np.mean((a[:, :, None] * b[None, :, :]) ** 2)))
    tol = R.suggest_tolerance(dtype, k, rms, op="matmul")
    _check_honest_and_planted(_matmul_orders(a, b, dtype), tol, dtype)


def test_same_sign_sums_pass():
    rng = np.random.default_rng(5)
    x = _in(rng.random((16, 4096)), "float32")
    tol = R.suggest_tolerance("float32", 4096, float(np.sqrt(np.mean(x * x))))
    _check_honest_and_planted(_sum_orders(x, "float32"), tol, "float32")


@pytest.mark.parametrize("k", (64, 4096))
def test_tf32_products_against_float32_pass_and_planted_errors_fail(k):
    rng = np.random.default_rng(k)
    a, b = _in(rng.standard_normal((16, k)), "float32"), _in(rng.standard_normal((k, 8)), "float32")
    exact32 = _in(a @ b, "float32")
    tf = _in(round_to(a, "tf32").astype(np.float32) @ round_to(b, "tf32").astype(np.float32), "float32")
    trunc = lambda v: (v.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)  # noqa: E731
    tt = _in(trunc(a) @ trunc(b), "float32")
    rms = float(np.sqrt(np.mean((a[:, :, None] * b[None, :, :]) ** 2)))
    tol = R.suggest_tolerance("tf32", k, rms)
    _check_honest_and_planted([exact32, tf.astype(np.float64), tt.astype(np.float64)], tol, "float32")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", (1, 100, 4096, 10**6))
@pytest.mark.parametrize("op", R.TOLERANCE_OPS)
def test_the_tolerance_covers_the_envelope_it_comes_from(dtype, k, op):
    """One formula: wherever the diagnosis's reordering envelope (of the roundings on a term's path) admits a
    difference, so does the tolerance."""
    tol = R.suggest_tolerance(dtype, k, 0.5, op=op)
    assert tol.depth == (k if op == "matmul" else R.reduction_depth(k, dtype)) and tol.depth <= k
    s, acc, fmt = np.sqrt(k) * 0.5, FORMATS[accumulation_format(dtype)], FORMATS[dtype]
    ys = np.array([0.0, 1e-30, 1e-5, 0.3, 1.0, s, 10 * s, 1e4, 3e4])
    typical, bound = reordering_sizes(tol.depth, s, ys, k * 0.5, acc)
    env = envelope_of(bound, ENVELOPE_FACTOR * typical, output_rounding(ys, fmt, acc))
    assert np.all(env <= tol.atol + tol.rtol * ys)
    assert tol.rtol >= tol.rtol0 and tol.atol >= tol.atol0
    assert tol.rtol <= 1.1 * tol.rtol0 and tol.atol <= 1.1 * tol.atol0  # two significant digits, rounded up


@pytest.mark.parametrize("n", [1, 7, 100, 5000, 40_000, 300_000])
@pytest.mark.parametrize("threads", [1, 2, 5])
def test_torchs_cascade_depth_bounds_its_error(n, threads):
    """The modelled torch sum's error stays within gamma(depth) * sum|x| (Higham's bound for that many roundings
    on a path), on values whose partial sums grow (one sign), and the depth is at most n - 1."""
    x = np.random.default_rng(n).random(n).astype(np.float32)
    d = cascade_depth(n, np.float32, threads=threads)
    assert 0 <= d <= max(n - 1, 0)
    err = abs(Fraction(float(torch_cpu_sum_model(x, threads=threads))) - exact_sum_fraction(torch.from_numpy(x)))
    u = 2.0**-24
    total = Fraction(float(np.sum(x.astype(np.float64)))) * (1 + Fraction(1, 2**40))  # covers its own rounding
    assert err <= Fraction(d * u / (1 - d * u)) * total


@pytest.mark.parametrize(("args", "message"), [
    (("float8", 10), "dtype"), (("float32", 0), "length"), (("float32", 10, -1.0), "scale"),
    (("float64", 10, 1.0, "float32"), "wider"), (("float32", 10, 1.0, None, "conv"), "op"),
])
def test_bad_tolerance_requests_say_what_is_accepted(args, message):
    with pytest.raises(ValueError, match=message):
        R.suggest_tolerance(*args)


# ----------------------------------------------------------------------- live costs and models


def test_live_costs_are_cached_and_leave_deterministic_mode_as_it_was():
    before = torch.are_deterministic_algorithms_enabled()
    first = R.live_costs()
    assert R.live_costs() is first  # one measurement per period for every viewer
    assert torch.are_deterministic_algorithms_enabled() == before
    assert set(first.rows) == {"float64", "wider", "reprosum", "deterministic_cpu"}
    for row in first.rows.values():
        assert row.ratio > 0 and row.repeats >= 5 and row.iqr[0] <= row.ratio <= row.iqr[1]


def test_headline_rows_quote_the_same_cached_figures():
    rows = {r.key: r for r in R.headline_rows()}
    costs = R.live_costs().rows
    assert set(rows) == {"float64", "wider", "aggregates", "settings"}
    assert rows["float64"].cost.startswith(costs["float64"].text) and "matmuls 1.0× to 64×" in rows["float64"].cost
    assert rows["wider"].cost.startswith(costs["wider"].text)
    assert costs["deterministic_cpu"].text in rows["settings"].cost


def test_batch_invariant_cost_times_the_kernels_it_is_given():
    calls = []

    def linear(x, w):
        calls.append(x.shape[0])
        return x @ w.T

    cost = R.batch_invariant_cost(linear, linear)
    assert cost.ratio > 0 and {1, 8, 24, 40} <= set(calls)


def test_gpu_generations_follow_the_launch():
    g = R.gpu_generations()
    assert g.groups(1_000_000) == (("A100", "H100 SXM", "H200", "RTX 4090"),)  # blocks capped by the size: 123
    by = {(r.gpu, r.n): r for r in g.rows}
    big = 4_000_000
    # A100 and the RTX 4090 at their limits (108 × 2048 ÷ 512, 128 × 1536 ÷ 512), the 132-SM GPUs below theirs
    assert [by[(gpu, big)].blocks for gpu in ("A100", "H100 SXM", "H200", "RTX 4090")] == [432, 489, 489, 384]
    assert g.groups(big) == (("A100",), ("H100 SXM", "H200"), ("RTX 4090",))
    assert by[("H100 SXM", big)].bits == by[("H200", big)].bits  # same SM count, same launch, same bits
    values = R.vector_for(R.VectorSpec(kind="normal", n=big, seed=0, storage="float32")).values
    assert by[("A100", big)].bits == bits_of(cuda_sum_model(values, cuda_config_for(big, values.dtype, sm_count=108)))


ROOT_TOLERANCE_LINE = r"rtol=(\S+) atol=(\S+)"


def test_the_tolerance_line_reads_back_as_numbers():
    tol = R.suggest_tolerance("float32", 4096)
    rtol, atol = re.fullmatch(ROOT_TOLERANCE_LINE, tol.line).groups()
    assert (float(rtol), float(atol)) == (tol.rtol, tol.atol)


def test_the_workspace_variable_is_described_for_the_torch_the_app_runs():
    """PyTorch 2.10 removed the check that deterministic mode refuses CUDA matrix products without
    CUBLAS_WORKSPACE_CONFIG (pytorch/pytorch pull request 161749); the installed torch documents no such need.
    The settings list says so, and no longer says deterministic mode refuses without it."""
    import torch

    from core.studies.reproducible_rules import SETTINGS

    s = next(s for s in SETTINGS if s.key == "cublas_workspace")
    assert "PyTorch 2.9 and older refuse" in s.guarantees and "2.10 and newer no longer need it" in s.guarantees
    assert "24 MiB" in s.guarantees and "refuses CUDA matmuls without it" not in s.guarantees
    assert "CUBLAS_WORKSPACE_CONFIG" not in (torch.use_deterministic_algorithms.__doc__ or "")



@pytest.mark.parametrize("choice", ALL, ids=lambda c: f"{c.workload}-{c.hardware}-{c.target}")
def test_every_name_a_snippet_uses_is_defined_or_named_as_yours(choice):
    """A pasted snippet runs once the visitor supplies what its first line names: no other free name."""
    import ast
    import builtins

    snippet = answer(choice).snippet("1e-2", "2e-3")
    tree = ast.parse(snippet)
    bound = set(dir(builtins))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef):
            bound |= {node.name, *(a.arg for a in node.args.args)}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    first = snippet.splitlines()[0]
    supplied = set(re.findall(r"(\w+) \(", first)) if first.startswith("# You supply:") else set()
    assert used - bound <= supplied, (used - bound - supplied, snippet)
    assert "core.kernels" not in snippet  # a module of this app: a visitor cannot import it


def test_the_rules_promise_no_more_than_their_sources():
    """Reproducible is not correctly rounded (ReproBLAS and CCCL promise the same bits, not the correctly rounded
    sum); fixed-order code of your own is a route too; pip freeze pins no driver; strict CNR needs a fixed thread
    count; cudnn.deterministic is there because benchmark = False alone may still choose a nondeterministic
    algorithm; enable_full_determinism's CUDA_LAUNCH_BLOCKING costs time; vLLM publishes no cost of its own."""
    from core.studies.reproducible_rules import SETTINGS, Choice, answer

    text = " ".join(f"{s.lines} {s.guarantees} {s.not_guaranteed}" for s in SETTINGS)
    for old in ("The correctly rounded sum: the same bits in any order", "on any device.",
                "Pin every version (torch, CUDA, cuDNN, NCCL, driver)"):
        assert old not in text, old
    by = {s.key: s for s in SETTINGS}
    assert "not always the correctly rounded sum" in by["reprosum"].guarantees
    assert "MKL_DYNAMIC" in by["mkl_cbwr"].lines and "record the GPU driver" in by["versions"].lines
    assert "deterministic = True rules out" in by["cudnn"].guarantees
    assert "which costs time" in by["hf_determinism"].guarantees
    assert by["vllm_bi"].cost == "unpublished" and "vLLM publishes no cost figure" in by["vllm_bi"].not_guaranteed
    route = answer(Choice("eager", "gpu", "cpu_gpu")).route
    assert "The only route" not in route and "same fixed-order kernels" in route and "MPS has no float64" in route


def test_costs_are_for_the_hardware_named_against_pytorchs_default():
    """A CPU measurement never stands for a GPU's cost; TF32 off costs float32 matmuls nothing against PyTorch's
    default (already off), only convolutions pay; float64 on a GPU is against that default, and an RTX 4090's
    float64 runs at 1/64 of its float32 rate (the Ada whitepaper)."""
    from core.studies.reproducible_costs import cost_line

    costs = R.LiveCosts(where="here", measured_at=0.0,
                        rows={k: _fake_cost(k) for k in ("float64", "deterministic_cpu")})
    det = cost_line("deterministic_cpu", costs, None, "gpu")
    assert det.origin == "none" and "1.50×" not in det.text and "switches no kernel" in det.detail
    assert cost_line("deterministic_cpu", costs, None, "cpu").text == "1.50×"
    tf32 = cost_line("tf32_off", costs, None, "gpu")
    assert tf32.text.startswith("1.0× for matmuls") and "allow_tf32 is False" in tf32.detail
    f64 = cost_line("float64", costs, None, "gpu")
    assert "64×" in f64.text and "RTX 4090 64.0×" in f64.detail and "PyTorch's default" in f64.detail
    assert cost_line("float64", costs, None, "mps").text == "not available"
    assert "not on your GPU" in cost_line("wider", R.LiveCosts(where="h", measured_at=0.0,
                                                               rows={"wider": _fake_cost("wider")}), None, "gpu").detail


def test_the_home_tables_costs_say_where_and_against_what(monkeypatch):
    costs = R.LiveCosts(where="here", measured_at=0.0,
                        rows={k: _fake_cost(k) for k in ("float64", "wider", "deterministic_cpu", "reprosum")})
    monkeypatch.setattr(R, "live_costs", lambda: costs)
    rows = {r.key: r for r in R.headline_rows()}
    assert "2²⁹" in rows["float64"].effect and "against PyTorch's default float32" in rows["float64"].cost
    assert "tensor cores, at peak (cited)" not in rows["float64"].cost
    settings = rows["settings"].cost
    assert "where it switches no kernel" in settings and "(vLLM) (cited)" not in settings
    assert "Thinking Machines' kernels in vLLM" in settings
