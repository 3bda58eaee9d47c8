"""What two machines' recordings share and where they part.

compare_recordings lines two recordings up result by result (sums, matrix products, single
operations, training); real_machines tells machines apart by CPU model, vendor,
family/model/stepping and torch's capability (captures of one machine under other settings are
configurations, not machines); most_different_pair, machine_partings, configuration_effects and
same_dispatch_differences are what the CPU vs GPU and Training divergence pages say about them.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.recordings.fingerprint import OTHER_BITS, OpComparison, compare_ops, first_differing_group
from core.recordings.store import WIDER, Recording

# --------------------------------------------------------------------------- comparison


@dataclass(frozen=True, kw_only=True)
class TrainingComparison:
    preset: str
    steps: int  # compared (the shorter of the two)
    left_1pct: int | None  # each machine's own A/B pair: first step more than 1% apart
    right_1pct: int | None
    first_step_machines_differ: int | None  # first step where run A's loss has other bits on the two machines


@dataclass(frozen=True, kw_only=True)
class MachineComparison:
    """Two recordings result by result: what agrees bit for bit, what does not, and where."""

    left: Recording
    right: Recording
    sums_compared: int
    sums_identical: int
    sums_differing: tuple[tuple[str, int, str], ...]  # (generator, n, dtype)
    wider_compared: int
    wider_identical: int
    matmuls_compared: int
    matmuls_identical: int
    training: tuple[TrainingComparison, ...]
    ops: tuple[OpComparison, ...]

    @property
    def first_differing_group(self) -> str | None:
        return first_differing_group(list(self.ops))

    @property
    def ops_compared(self) -> int:
        return sum(c.verdict != "not recorded on both" for c in self.ops)

    @property
    def ops_differing(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.ops if c.verdict == OTHER_BITS)


def compare_recordings(left: Recording, right: Recording) -> MachineComparison:
    """Every result the two recordings share, compared bit for bit."""
    rs = {e.key: e for e in right.sums}
    pairs = [(e, rs[e.key]) for e in left.sums if e.key in rs and e.vector_sha256 == rs[e.key].vector_sha256]
    same = [a.sum_hex == b.sum_hex for a, b in pairs]
    wide = [(a.wider_hex, b.wider_hex) for a, b in pairs if a.wider_hex and b.wider_hex]
    rm = {(m.shape, m.seed): m for m in right.matmuls}
    mpairs = [(m, rm[(m.shape, m.seed)]) for m in left.matmuls if (m.shape, m.seed) in rm]
    rt = {t.preset: t for t in right.training}
    training = []
    for t in left.training:
        u = rt.get(t.preset)
        if u is None:
            continue
        k = min(t.steps, u.steps)
        differ = next((i + 1 for i in range(k) if t.loss_a_hex[i] != u.loss_a_hex[i]), None)
        training.append(
            TrainingComparison(
                preset=t.preset,
                steps=k,
                left_1pct=t.first_rel_1pct,
                right_1pct=u.first_rel_1pct,
                first_step_machines_differ=differ,
            )
        )
    return MachineComparison(
        left=left, right=right, sums_compared=len(pairs), sums_identical=sum(same),
        sums_differing=tuple(a.key[0:1] + a.key[2:] for (a, _), s in zip(pairs, same, strict=True) if not s),
        wider_compared=len(wide), wider_identical=sum(a == b for a, b in wide), matmuls_compared=len(mpairs),
        matmuls_identical=sum(a.result_sha256 == b.result_sha256 for a, b in mpairs), training=tuple(training),
        ops=tuple(compare_ops(left.op_fingerprint, right.op_fingerprint)),
    )


# ------------------------------------------------------------ machines and what sets them apart
# Which recordings come from one machine, which two machines differ most, in what, and which
# library's choice of code path the recordings show. Everything here is computed from the files.

RESULT_GROUPS = ("sums", "matrix products", "fingerprint operations", "training")
# Which library an environment variable of NUMERIC_ENVIRONMENT steers.
LIBRARY_OF = {
    "ATEN_CPU_CAPABILITY": "torch's own vectorized kernels (ATen)", "MKL_CBWR": "oneMKL",
    "MKL_ENABLE_INSTRUCTIONS": "oneMKL", "MKL_DEBUG_CPU_TYPE": "oneMKL", "ONEDNN_MAX_CPU_ISA": "oneDNN",
    "DNNL_MAX_CPU_ISA": "oneDNN", "OMP_NUM_THREADS": "the thread count", "MKL_NUM_THREADS": "oneMKL's thread count",
    "OPENBLAS_CORETYPE": "OpenBLAS", "OPENBLAS_NUM_THREADS": "OpenBLAS's thread count",
    "CUBLAS_WORKSPACE_CONFIG": "cuBLAS", "NVIDIA_TF32_OVERRIDE": "cuBLAS and cuDNN",
}


def machine_key(rec: Recording) -> tuple:
    """What names a recording's machine: for a CPU its model, vendor, family/model/stepping and the SIMD
    capability torch dispatches for; for a GPU its name, compute capability and SM count."""
    p = rec.provenance
    if p.is_gpu:
        return p.device_kind, p.device_name, p.compute_capability, p.sm_count
    return "cpu", p.cpu_model, p.cpu_vendor, p.cpu_family_model_stepping, p.cpu_capability


def _same_hardware(plain: Recording, tuned: Recording) -> bool:
    """Whether a capture with numeric environment variables set ran on the machine of a plain one.
    torch's capability is compared unless ATEN_CPU_CAPABILITY itself forced it."""
    a, b = plain.provenance, tuned.provenance
    if a.is_gpu or b.is_gpu:
        return machine_key(plain) == machine_key(tuned) and a.host == b.host
    forced = "ATEN_CPU_CAPABILITY" in (b.environment or {})
    keys = ("cpu_model", "cpu_vendor", "cpu_family_model_stepping", "cpu_simd_flags", "host", "logical_cores")
    return all(a.get(k) == b.get(k) for k in keys) and (forced or a.cpu_capability == b.cpu_capability)


@dataclass(frozen=True)
class Machine:
    """One real machine among the recordings: its plain capture (no numeric environment variable set)
    and captures of the same hardware in other numeric configurations."""

    key: tuple
    plain: Recording
    configurations: tuple[Recording, ...]

    @property
    def name(self) -> str:
        return self.plain.machine


def real_machines(recs: list[Recording]) -> tuple[Machine, ...]:
    """The distinct machines (by ``machine_key``) that have a plain capture, in the order they first
    appear; a capture with numeric environment variables joins the machine whose hardware it ran on,
    and one that matches no plain capture is no machine of its own."""
    plain: dict[tuple, Recording] = {}
    for r in recs:
        if not r.provenance.environment:
            plain.setdefault(machine_key(r), r)
    tuned = [r for r in recs if r.provenance.environment]
    return tuple(Machine(k, p, tuple(t for t in tuned if _same_hardware(p, t))) for k, p in plain.items())


@dataclass(frozen=True)
class DifferingResult:
    group: str  # one of RESULT_GROUPS
    name: str  # the result: a vector, a matrix shape, an operation, a training preset
    detail: str  # more about it: the fingerprint's group of an operation, the step training parts at


@dataclass(frozen=True)
class PairDifferences:
    """Every result two recordings share that has other bits on the two, named with its group."""

    comparison: MachineComparison
    differing: tuple[DifferingResult, ...]
    compared: int  # sums, wider sums, matrix products and single operations compared

    @property
    def count(self) -> int:
        """Differing sums, wider sums, matrix products and single operations (training steps follow from them)."""
        return sum(d.group != "training" for d in self.differing)

    def in_group(self, group: str) -> tuple[DifferingResult, ...]:
        return tuple(d for d in self.differing if d.group == group)


def pair_differences(cmp: MachineComparison) -> PairDifferences:
    """The comparison's differing results by name: sums (and wider sums), matrix products, fingerprint
    operations (with their fingerprint group), and training presets whose run A parts (with the step)."""
    left, right = cmp.left, cmp.right
    rs = {e.key: e for e in right.sums}
    out: list[DifferingResult] = []
    for e in left.sums:
        u = rs.get(e.key)
        if u is None or u.vector_sha256 != e.vector_sha256:
            continue
        vector = f"{e.generator}, n = {e.n:,}, {e.dtype}"
        if e.sum_hex != u.sum_hex:
            out.append(DifferingResult("sums", f"torch.sum: {vector}", "sum in the storage format"))
        if e.wider_hex and u.wider_hex and e.wider_hex != u.wider_hex:
            out.append(DifferingResult("sums", f"torch.sum(dtype={WIDER[e.dtype]}): {vector}", "wider sum"))
    rm = {(m.shape, m.seed): m for m in right.matmuls}
    for m in left.matmuls:
        u = rm.get((m.shape, m.seed))
        if u is not None and u.result_sha256 != m.result_sha256:
            a, k, b = m.shape
            out.append(DifferingResult("matrix products", f"{a}x{k} @ {k}x{b}",
                                       "SHA-256 of every result bit (inputs drawn by torch.randn on the machine)"))
    out += [DifferingResult("fingerprint operations", c.name, c.group) for c in cmp.ops if c.verdict == OTHER_BITS]
    out += [DifferingResult("training", t.preset, f"run A has other bits from step {t.first_step_machines_differ}")
            for t in cmp.training if t.first_step_machines_differ]
    return PairDifferences(cmp, tuple(out), cmp.sums_compared + cmp.wider_compared + cmp.matmuls_compared
                           + cmp.ops_compared)


@dataclass(frozen=True, kw_only=True)
class MostDifferent:
    """The two real machines whose recordings differ in the most results."""

    left: int  # indices into the recordings given
    right: int
    machines: int  # real machines among them
    differences: PairDifferences


def most_different_pair(recs: list[Recording]) -> MostDifferent | None:
    """Of every two real machines (their plain captures), the pair with the most differing sums, matrix
    products and single operations; ties go to the pair with more results compared, then to the first
    in the list. None with fewer than two machines."""
    machines = real_machines(recs)
    index = {id(r): i for i, r in enumerate(recs)}
    best: tuple | None = None
    for a in range(len(machines)):
        for b in range(a + 1, len(machines)):
            i, j = sorted((index[id(machines[a].plain)], index[id(machines[b].plain)]))
            d = pair_differences(compare_recordings(recs[i], recs[j]))
            rank = (d.count, d.compared, -i, -j)
            if best is None or rank > best[0]:
                best = (rank, MostDifferent(left=i, right=j, machines=len(machines), differences=d))
    return best[1] if best else None


def default_pair(recs: list[Recording]) -> tuple[int, int]:
    """Indices of two recordings to set side by side first: the two real machines that differ most
    (``most_different_pair``) where there are two, else the first two recordings."""
    most = most_different_pair(recs)
    if most is not None:
        return most.left, most.right
    return (0, 1) if len(recs) > 1 else (0, 0)


@dataclass(frozen=True, kw_only=True)
class Parting:
    """One recorded machine's own A/B pair of a training preset: the first step more than 1% apart."""

    machine: str
    label: str
    step: int | None  # None: never more than 1% apart within the recorded steps
    steps: int
    configuration: str | None  # the numeric environment variables of a configuration capture, else None


def machine_partings(recs: list[Recording], preset: str) -> tuple[Parting, ...]:
    """Each real machine's plain capture first, then the configuration captures of those machines."""
    machines = real_machines(recs)
    out = []
    for r in [m.plain for m in machines] + [c for m in machines for c in m.configurations]:
        env = r.provenance.environment
        for t in r.training:
            if t.preset == preset:
                out.append(
                    Parting(
                        machine=r.machine,
                        label=r.label,
                        step=t.first_rel_1pct,
                        steps=t.steps,
                        configuration=", ".join(f"{k}={v}" for k, v in sorted(env.items())) if env else None,
                    )
                )
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class ConfigurationEffect:
    """What one machine's numeric environment variables changed: its plain capture against the capture
    with them set, and the library those variables steer."""

    machine: Machine
    configuration: Recording
    setting: str  # "MKL_CBWR=COMPATIBLE"
    library: str
    changed: PairDifferences


def configuration_effects(recs: list[Recording]) -> tuple[ConfigurationEffect, ...]:
    out = []
    for m in real_machines(recs):
        for c in m.configurations:
            env = c.provenance.environment or {}
            libraries = sorted({LIBRARY_OF.get(k, k) for k in env})
            out.append(
                ConfigurationEffect(
                    machine=m,
                    configuration=c,
                    setting=", ".join(f"{k}={v}" for k, v in sorted(env.items())),
                    library=" and ".join(libraries),
                    changed=pair_differences(compare_recordings(m.plain, c)),
                )
            )
    return tuple(out)


def same_dispatch_differences(recs: list[Recording]) -> tuple[PairDifferences, ...]:
    """Pairs of real CPU machines with the same torch version, thread count, BLAS and SIMD capability
    (torch dispatched the same kernels on both) that still differ: the code path was chosen below torch."""
    machines = [m for m in real_machines(recs) if not m.plain.provenance.is_gpu]
    same = ("torch_version", "threads", "blas", "cpu_capability")
    out = []
    for a in range(len(machines)):
        for b in range(a + 1, len(machines)):
            p, q = machines[a].plain.provenance, machines[b].plain.provenance
            if all(p.get(k) == q.get(k) for k in same):
                d = pair_differences(compare_recordings(machines[a].plain, machines[b].plain))
                if d.count:
                    out.append(d)
    return tuple(out)


@dataclass(frozen=True)
class RecordedNote:
    """A measurement written down in a machine's notes rather than in a recording file: cited as such."""

    text: str
    source: str
    operations: tuple[str, ...]  # the fingerprint operations it names (core.recordings.fingerprint.OPS)


# From the notes of the Intel capture (shared/recordings/README.md, "A third machine"), where these
# runs of shared/recordings/op_fingerprint.py were recorded as text, not as capture files.
INTEL_MKL_NOTE = RecordedNote(
    text=("On the Intel Xeon machine, MKL_CBWR=COMPATIBLE (oneMKL's generic code path) turned tanh 100000, "
          "exp 100000, mm 128x64 @ 64x3 and mm 1x2048 @ 2048x1024 into exactly the AMD EPYC AVX512 machine's "
          "hashes; forcing torch's kernels to AVX2 (ATEN_CPU_CAPABILITY=avx2) changed none of the operations "
          "that differ; MKL_ENABLE_INSTRUCTIONS=AVX2 gave tanh the AMD value and exp a third one."),
    source=("runs of shared/recordings/op_fingerprint.py on the machine of "
            "v2-cpu-intel-xeon-avx512-20261201T084610.json, 2026-12-01, written down in that capture's notes "
            "(see data/recordings/README.md); no capture file of these configurations is bundled"),
    operations=("tanh 100000", "exp 100000", "mm 128x64 @ 64x3", "mm 1x2048 @ 2048x1024"),
)
