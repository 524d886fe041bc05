"""Vendor datasheet peaks (dense, not sparse), shared by the agent's physics check and the collector's reports.

Sources, as in ``shared/reference/gpu_specs.csv``:
  (a) Lightning ``fabric/utilities/throughput.py`` table of peak FLOPS;
  (b) mli/transformers-benchmarks README;
  (c) NVIDIA/AMD datasheets as reprinted in stas00/ml-engineering ``compute/accelerator/README.md``.
Entries marked ``uncertain`` come from third-party pages. A measured result above these peaks is a
measurement error, not a fast card.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuSpec:
    model: str
    pattern: str  # regex matched, case-insensitively, against the name the driver reports
    fp32: float | None
    tf32: float | None
    fp16: float | None
    bf16: float | None
    fp8: float | None
    memory_gb: float | None
    bandwidth_gbps: float | None
    source: str
    note: str = ""

    @property
    def architecture(self) -> str:
        """The chip's generation: cards of one architecture at one power limit are siblings (``schemas.siblings``)."""
        return FAMILY[self.model][0]

    @property
    def pcie_gen(self) -> int | None:
        """The host interface's PCIe generation by the datasheet (x16 lanes); None where it is not stated."""
        return FAMILY[self.model][1]

    def peak_tflops(self, dtype: str) -> float | None:
        """The dense peak for a result's dtype; fp8 variants share one rate."""
        if dtype.startswith("fp8"):
            return self.fp8
        peak: float | None = getattr(self, dtype, None)
        return peak


# Order matters: the first pattern that matches wins, so specific names come before general ones.
GPU_SPECS: tuple[GpuSpec, ...] = (
    GpuSpec("Tesla V100 SXM2", r"V100.*SXM", 15.7, None, 125, None, None, 32, 900, "a b", "fp16 tensor only"),
    GpuSpec("Tesla V100 PCIe", r"V100", 14, None, 112, None, None, 32, 900, "a"),
    GpuSpec("Tesla T4", r"\bT4\b", 8.1, None, 65, None, None, 16, 320, "a", "bandwidth uncertain"),
    GpuSpec("A10", r"\bA10\b(?!0)", 31.2, 62.5, 125, 125, None, 24, 600, "a"),
    GpuSpec("A100 SXM4 40GB", r"A100.*SXM4?.*40", 19.5, 156, 312, 312, None, 40, 1555, "c"),
    GpuSpec("A100 PCIe 80GB", r"A100.*(PCIE|PCIe).*80|A100 80GB PCIe", 19.5, 156, 312, 312, None, 80, 1935, "c"),
    GpuSpec("A100 SXM4 80GB", r"A100", 19.5, 156, 312, 312, None, 80, 2039, "c"),
    GpuSpec("RTX A6000", r"RTX A6000", 38.7, 77.4, 155, 155, None, 48, 768, "b", "tf32/fp16 uncertain"),
    GpuSpec("L40S", r"\bL40S\b", 91.6, 183, 362, 362, 733, 48, 864, "c"),
    GpuSpec("L4", r"\bL4\b", 30.3, 60, 121, 121, 242, 24, 300, "a", "fp8 uncertain"),
    GpuSpec("H100 PCIe", r"H100.*PCIe", 51, 378, 756, 756, 1513, 80, 2000, "c"),
    GpuSpec("H100 SXM", r"H100", 67, 494.5, 989, 989, 1979, 80, 3350, "c"),
    GpuSpec("H200 SXM", r"H200(?!.*NVL)", 67, 494.5, 989, 989, 1979, 141, 4800, "c"),
    GpuSpec("B200 SXM", r"B200", 80, 1125, 2250, 2250, 4500, 180, 8000, "c"),
    GpuSpec("GeForce RTX 3090 Ti", r"RTX 3090 Ti", 40, 80, 160, 160, None, 24, 1008, "b"),
    GpuSpec("GeForce RTX 3090", r"RTX 3090", 35.6, None, 71, 71, None, 24, 936, "uncertain"),
    GpuSpec("GeForce RTX 4090", r"RTX 4090", 82.6, 82.6, 165.2, 165.2, 330.3, 24, 1008, "uncertain"),
    GpuSpec("GeForce GTX 960M", r"GTX 960M", 1.5, None, None, None, None, 4, 80, "uncertain", "no tensor cores"),
    GpuSpec("Instinct MI250X", r"MI250X", 47.9, None, 383, 383, None, 128, 3280, "c", "two GCDs"),
    GpuSpec("Instinct MI300X", r"MI300X", 163.4, 653.7, 1307.4, 1307.4, 2614.9, 192, 5300, "c"),
)

#: Each model's architecture and host interface (PCIe generation, x16), by its datasheet.
FAMILY: dict[str, tuple[str, int | None]] = {
    "Tesla V100 SXM2": ("Volta", 3), "Tesla V100 PCIe": ("Volta", 3), "Tesla T4": ("Turing", 3),
    "A10": ("Ampere", 4), "A100 SXM4 40GB": ("Ampere", 4), "A100 PCIe 80GB": ("Ampere", 4),
    "A100 SXM4 80GB": ("Ampere", 4), "RTX A6000": ("Ampere", 4), "L40S": ("Ada", 4), "L4": ("Ada", 4),
    "H100 PCIe": ("Hopper", 5), "H100 SXM": ("Hopper", 5), "H200 SXM": ("Hopper", 5), "B200 SXM": ("Blackwell", None),
    "GeForce RTX 3090 Ti": ("Ampere", 4), "GeForce RTX 3090": ("Ampere", 4), "GeForce RTX 4090": ("Ada", 4),
    "GeForce GTX 960M": ("Maxwell", None), "Instinct MI250X": ("CDNA2", None), "Instinct MI300X": ("CDNA3", None),
}  # fmt: skip

#: Usable PCIe bandwidth per lane and direction in GB/s after line encoding (gen1-2 8b/10b, gen3+ 128b/130b).
PCIE_GBPS_PER_LANE: dict[int, float] = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@functools.lru_cache(maxsize=1024)  # a fleet has few distinct names; health asks for each GPU's
def match_spec(gpu_name: str) -> GpuSpec | None:
    """The datasheet entry for a driver-reported name such as 'NVIDIA H100 80GB HBM3', or None."""
    for spec in GPU_SPECS:
        if re.search(spec.pattern, gpu_name, flags=re.IGNORECASE):
            return spec
    return None


def pcie_peak_gbps(gen: int | None, width: int | None) -> float | None:
    """One direction's link peak, the ceiling for host<->device transfers."""
    if gen is None or width is None or gen not in PCIE_GBPS_PER_LANE:
        return None
    return PCIE_GBPS_PER_LANE[gen] * width
