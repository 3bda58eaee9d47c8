"""Which devices torch can compute on here, described for provenance labels."""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core.machines.globalstate import PROCESS_THREADS

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_fp16",
              "amx_tile", "asimd", "sve", "sve2")


@dataclass(frozen=True)
class Device:
    kind: str  # "cpu", "cuda" or "mps"
    index: int | None
    name: str  # human-readable, e.g. "CPU (x86_64, 2 threads)" or "NVIDIA H200"

    @property
    def torch_device(self) -> str:
        return self.kind if self.index is None else f"{self.kind}:{self.index}"

    def supports(self, dtype: torch.dtype) -> bool:
        """Apple's MPS backend has no float64."""
        return not (self.kind == "mps" and dtype == torch.float64)

    @property
    def label(self) -> str:
        return f"live on {self.name}, torch {torch.__version__}"


def cpu_device() -> Device:
    return Device("cpu", None, f"CPU ({platform.machine() or 'unknown'}, {PROCESS_THREADS} threads)")


def available_devices() -> list[Device]:
    """The CPU, then every CUDA GPU, then Apple MPS, as far as torch can see them."""
    devices = [cpu_device()]
    try:
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                devices.append(Device("cuda", i, torch.cuda.get_device_name(i)))
    except RuntimeError:  # a driver problem must not take the CPU results down
        pass
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append(Device("mps", None, "Apple GPU (MPS)"))
    return devices


def device_info(device: Device) -> dict:
    """Provenance of a device: name, versions, thread count, the host CPU's facts; for a GPU its hardware too."""
    info = {
        "device_name": device.name,
        "device_kind": device.kind,
        "sm_count": None,
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "driver": None,
        "tf32_matmul": None,
        "threads": _process_threads() if device.kind == "cpu" else None,
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "platform": f"{platform.system()} {platform.machine()}",
        **machine_facts(),  # for a GPU: the host CPU (run A of a training pair runs there)
        "compute_capability": None,
        "cublas_version": None,
    }
    if device.kind == "cuda":
        info.update(gpu_facts(device.index or 0))
        info["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
    return info


# ------------------------------------------------------------------------- machine facts


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (Linux), else {}."""
    try:
        text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read(200_000)  # noqa: SIM115
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if out:
                break
            continue
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out


def _build_facts(config: str) -> dict[str, str | None]:
    """BLAS, oneDNN and capability lines of ``torch.__config__.show()``."""
    mkl = re.search(r"Math Kernel Library Version ([0-9.]+)", config)
    dnn = re.search(r"MKL-DNN (v[0-9.]+)", config)
    blas = re.search(r"BLAS_INFO=([^,\s]+)", config)
    cap = re.search(r"CPU capability usage: (\S+)", config)
    blas_name = f"oneMKL {mkl.group(1)}" if mkl else (blas.group(1) if blas else None)
    return {"blas": blas_name, "onednn": f"oneDNN {dnn.group(1)}" if dnn else None,
            "build_capability": cap.group(1) if cap else None}


# No arguments: one entry per process; the machine it describes does not change while the process runs.
@functools.cache
def machine_facts() -> dict:
    """This process's CPU, its SIMD dispatch, the libraries torch was built with, and the OS.

    Read once per process (a few milliseconds); every value is a plain JSON type.
    """
    info = _cpuinfo()
    flags = set((info.get("flags") or info.get("Features") or "").split())
    model = info.get("model name") or info.get("Model") or platform.processor() or "unknown"
    vendor = info.get("vendor_id") or info.get("CPU implementer") or "unknown"
    family = "/".join(info[k] for k in ("cpu family", "model", "stepping") if k in info) or None
    facts = {
        "cpu_model": model,
        "cpu_vendor": vendor,
        "cpu_family_model_stepping": family,
        "cpu_simd_flags": " ".join(f for f in SIMD_FLAGS if f in flags) or None,
        "logical_cores": os.cpu_count(),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        **_build_facts(torch.__config__.show()),
        "numpy_version": np.__version__,
        "python_version": platform.python_version(),
        "os": platform.platform(terse=True),
        "architecture": platform.machine() or "unknown",
    }
    return facts


_SIZE = re.compile(r"\s*(\d+)\s*([KMG]?)\s*$")


def last_level_cache_bytes(root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    """The size of the largest-level data cache the first CPU reaches, as Linux reports it (a
    ``size`` file such as ``491520K`` under ``root``), or None where it reports none."""
    best: tuple[int, int] | None = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            size = _SIZE.match((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size:
            scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[size.group(2)]
            best = max(best or (level, 0), (level, int(size.group(1)) * scale))
    return best[1] if best and best[1] > 0 else None


def gpu_facts(index: int) -> dict:
    """Compute capability, SM count, driver and library versions of one CUDA device."""
    props = torch.cuda.get_device_properties(index)
    getter = getattr(torch._C, "_cuda_getDriverVersion", None)
    return {
        "compute_capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count,
        "driver": str(getter()) if getter else "unknown",
        "cublas_version": _cublaslt_version(),
        "cudnn_version": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None,
    }


def _cublaslt_version() -> str | None:
    """cuBLASLt's version number as the loaded library reports it (None where it cannot be read)."""
    for name in ("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"):
        try:
            return str(ctypes.CDLL(name).cublasLtGetVersion())
        except (OSError, AttributeError):
            continue
    return None


def _process_threads() -> int:
    return PROCESS_THREADS
