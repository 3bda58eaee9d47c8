"""The cited float64 peak rates: what moving float32 work to float64 costs on machines that are not here.

One table (``FLOAT64_PEAKS``, read through ``float64_peaks``) of vendor peak rates, cited from the vendors'
own pages and measured nowhere in this app; the Mitigations page and core.studies.reproducible_costs (the
cited costs of Make my runs reproducible) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

A100_DATASHEET = ("https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
                  "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf")
H100_PAGE = "https://www.nvidia.com/en-us/data-center/h100/"
ADA_WHITEPAPER = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
T4_PAGE = "https://www.nvidia.com/en-us/data-center/tesla-t4/"
CUDA_THROUGHPUT = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#arithmetic-instructions"
# PyTorch closed the report as expected: the Metal framework has no float64 data type
MPS_NO_FLOAT64 = "https://github.com/pytorch/pytorch/issues/122602"


@dataclass(frozen=True, kw_only=True)
class Float64Peak:
    """One machine's vendor peak rates (dense TFLOPS, cited, not measured here) and what moving float32 work
    to float64 costs there, as a multiple of the float32 default's time (peak rate over peak rate).

    Two float32 defaults: plain float32 on the ordinary (non-tensor-core) units, and float32 training as it
    usually runs on these GPUs, its matrix products on tensor cores in TF32 or bfloat16 (autocast); float64
    gets the best rate it has, on FP64 tensor cores where they exist (A100, H100)."""

    hardware: str
    fp64: float | None  # TFLOPS without tensor cores; None: no float64 at all, or no rate cited
    fp32: float | None
    fp64_tensor: float | None = None  # FP64 on tensor cores (A100, H100)
    tf32_tensor: float | None = None
    bf16_tensor: float | None = None  # bfloat16 (T4: float16) inputs, float32 accumulation
    ratio_text: str | None = None  # where no rates are cited: the ratio in words
    source: str  # short name of the source
    url: str | None = None
    note: str = ""

    @property
    def ratio(self) -> str:
        """Peak FP64 : FP32 without tensor cores, as "1 : 2"."""
        if self.ratio_text is not None:
            return self.ratio_text
        return f"1 : {self.fp32 / self.fp64:.0f}"

    @property
    def plain_cost(self) -> float | None:
        """float64 time over plain float32 time (no tensor cores): FP32 rate / FP64 rate."""
        return self.fp32 / self.fp64 if self.fp32 and self.fp64 else None

    @property
    def tensor_cost(self) -> tuple[float, float] | None:
        """float64 time over float32 training's time on tensor cores: (TF32 or its best float32 path,
        bfloat16) rate over the best float64 rate."""
        if not self.fp64 or not self.bf16_tensor:
            return None
        best64 = max(self.fp64, self.fp64_tensor or 0.0)
        f32 = max(self.tf32_tensor or 0.0, self.fp32 or 0.0)
        return f32 / best64, self.bf16_tensor / best64


# Vendor peak rates (dense, no sparsity), cited from the vendors' own pages; none is measured here.
FLOAT64_PEAKS: tuple[Float64Peak, ...] = (
    Float64Peak(hardware="NVIDIA H100 (SXM)", fp64=34, fp32=67, fp64_tensor=67, tf32_tensor=494.7, bf16_tensor=989,
                source="NVIDIA H100 product page", url=H100_PAGE,
                note="TF32 494.7 and BF16 989 dense (the page gives 989 and 1,979 with sparsity)"),
    Float64Peak(hardware="NVIDIA A100", fp64=9.7, fp32=19.5, fp64_tensor=19.5, tf32_tensor=156, bf16_tensor=312,
                source="NVIDIA A100 datasheet", url=A100_DATASHEET),
    Float64Peak(hardware="NVIDIA RTX 4090", fp64=82.6 / 64, fp32=82.6, tf32_tensor=82.6, bf16_tensor=165.2,
                source="NVIDIA Ada architecture whitepaper", url=ADA_WHITEPAPER,
                note="FP64 at 1/64 of the FP32 rate; BF16 with FP32 accumulation"),
    Float64Peak(hardware="NVIDIA T4", fp64=8.1 / 32, fp32=8.1, bf16_tensor=65,
                source="NVIDIA T4 page; CUDA guide (FP64 rate)", url=T4_PAGE,
                note="no TF32 and no bfloat16: 65 is FP16/FP32 mixed precision; FP64 at 1/32 of the FP32 rate "
                     f"(compute capability 7.5, CUDA C++ Programming Guide's throughput table, {CUDA_THROUGHPUT})"),
    Float64Peak(hardware="x86 CPU (SIMD)", fp64=None, fp32=None, ratio_text="about 1 : 2",
                source="vector width: 8 float32 or 4 float64 per AVX2 register (measured here on request)"),
    Float64Peak(hardware="Apple GPU (MPS)", fp64=None, fp32=None, ratio_text="no float64",
                source="PyTorch's MPS backend refuses float64 tensors (Apple's MPSDataType has no float64)",
                url=MPS_NO_FLOAT64),
)
# (hardware, peak FP64 : FP32 without tensor cores, source): the same table, as text
VENDOR_RATIOS: tuple[tuple[str, str, str], ...] = tuple((p.hardware, p.ratio, p.source) for p in FLOAT64_PEAKS)


def float64_peaks() -> tuple[Float64Peak, ...]:
    """The cited float64 peak table (one table: the Mitigations page, the overview and the settings page read it)."""
    return FLOAT64_PEAKS


def float64_peak(hardware: str) -> Float64Peak:
    for p in FLOAT64_PEAKS:
        if p.hardware == hardware:
            return p
    raise KeyError(hardware)


def cited_ratio(hardware: str) -> str:
    """A vendor's peak float64 : float32 ratio (without tensor cores) as cited in FLOAT64_PEAKS."""
    return float64_peak(hardware).ratio
