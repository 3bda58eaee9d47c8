"""Which devices torch can compute on here, described for provenance labels."""

from __future__ import annotations

import platform
from dataclasses import dataclass

import torch


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
    from core.globalstate import PROCESS_THREADS

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
    """Provenance of a device: name, SM count, torch/CUDA/driver versions, TF32 setting."""
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
    }
    if device.kind == "cuda":
        props = torch.cuda.get_device_properties(device.index or 0)
        info["sm_count"] = props.multi_processor_count
        info["tf32_matmul"] = bool(torch.backends.cuda.matmul.allow_tf32)
        getter = getattr(torch._C, "_cuda_getDriverVersion", None)
        info["driver"] = str(getter()) if getter else "unknown"
    return info


def _process_threads() -> int:
    from core.globalstate import PROCESS_THREADS

    return PROCESS_THREADS
