"""How faithful this app's models of a device's sum are to a recording of that device, bit for bit.

Each recorded sum's vector is regenerated (and checked against its SHA-256) and summed by the model of
the recorded device: PyTorch's CUDA block reduction at the recorded SM count (core.kernels.cuda_model),
the WebGPU workgroup tree (core.kernels.webgpu), or torch's CPU cascade at the recorded thread count
(core.kernels.torch_cpu_model); a sum is matched when every bit agrees.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.arith.formats import FORMATS, bits_of
from core.arith.hexbits import bits_of_hex
from core.arith.ulps import ulp_distance
from core.arith.vectors import VectorSpec, generate
from core.kernels import webgpu
from core.kernels.cuda_model import cuda_config_for, cuda_sum_model
from core.kernels.torch_cpu_model import torch_cpu_sum_model
from core.recordings.store import Recording, vector_sha256


@dataclass(frozen=True, kw_only=True)
class Fidelity:
    compared: int
    matched: int
    mismatches: tuple[tuple[str, int, str, int], ...]  # (generator, n, dtype, ulps apart)
    conditions: str
    above_max_n: int = 0  # recorded sums not replayed because n > max_n (said next to the result)
    max_n: int = 10_000_000


def model_fidelity(rec: Recording, max_n: int = 10_000_000) -> Fidelity:
    """Bit-for-bit comparison of the CUDA model (or, for CPU recordings, the CPU model) with the recording."""
    compared = matched = 0
    mismatches = []
    sizes, dtypes = set(), set()
    p = rec.provenance
    cuda = p.device_kind == "cuda"
    above = 0
    for e in rec.sums:
        if e.n > max_n:
            above += 1
            continue
        if cuda and not p.sm_count:
            continue
        values = generate(VectorSpec(kind=e.generator, n=e.n, seed=e.seed, storage=e.dtype)).values
        if vector_sha256(values) != e.vector_sha256:
            continue
        if cuda:
            cfg = cuda_config_for(e.n, values.dtype, sm_count=int(p.sm_count))
            pred = bits_of(cuda_sum_model(values, cfg))
        elif p.device_kind == "webgpu":  # its sum is the workgroup-tree kernel's
            pred = bits_of(webgpu.workgroup_tree(values))
        else:
            pred = bits_of(torch_cpu_sum_model(values, threads=int(p.threads or 1)))
        got = bits_of_hex(e.sum_hex)
        compared += 1
        sizes.add(e.n)
        dtypes.add(e.dtype)
        if pred == got:
            matched += 1
        else:
            mismatches.append((e.generator, e.n, e.dtype, ulp_distance(pred, got, FORMATS[e.dtype])))
    if cuda:
        which = f"CUDA block-reduction model vs {p.device_name} (SM count {p.sm_count})"
    elif p.device_kind == "webgpu":
        which = f"WebGPU workgroup-tree model vs {p.device_name}"
    else:
        which = f"CPU cascade-sum model ({p.threads} threads) vs {rec.machine}"
    cond = (f"{which}; sizes "
            f"{', '.join(f'{s:,}' for s in sorted(sizes))}; {', '.join(sorted(dtypes))}")
    return Fidelity(compared=compared, matched=matched, mismatches=tuple(mismatches), conditions=cond,
                    above_max_n=above, max_n=max_n)
