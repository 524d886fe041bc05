"""The physics check: each result as a fraction of its card's datasheet peak; above 1 is a measurement error."""

from __future__ import annotations

from schemas import Gpu, match_spec, pcie_peak_gbps
from schemas.base import WireModel
from schemas.gpu_specs import GpuSpec

from .target import Target

#: Allowance for rounding in published peaks before a result is called impossible.
ABOVE_PEAK = 1.0


def spec_for(target: Target) -> GpuSpec | None:
    """The datasheet of a GPU target; a CPU has none."""
    return match_spec(target.name) if target.is_gpu else None


def peak_tflops(target: Target, dtype: str) -> float | None:
    spec = spec_for(target)
    return spec.peak_tflops(dtype) if spec else None


def peak_fraction(kind: str, params: WireModel, metrics: WireModel, target: Target, gpu: Gpu | None) -> float | None:
    """Measured over datasheet for what this result measures, or None where no datasheet figure applies."""
    spec = spec_for(target)
    if spec is None:
        return None
    measured: float | None = None
    peak: float | None = None
    if kind in ("matmul", "mamf", "layer"):
        measured, peak = getattr(metrics, "tflops", None), spec.peak_tflops(getattr(params, "dtype", ""))
    elif kind == "training":
        dtype = "bf16" if getattr(params, "precision", "") == "bf16-autocast" else "fp32"
        measured, peak = getattr(metrics, "tflops", None), spec.peak_tflops(dtype)
    elif kind == "inference" and getattr(params, "phase", "") == "decode":
        measured, peak = getattr(metrics, "gbps", None), spec.bandwidth_gbps
    elif kind == "inference":
        measured, peak = getattr(metrics, "tflops", None), spec.peak_tflops(getattr(params, "dtype", ""))
    elif kind == "bandwidth":
        measured, peak = getattr(metrics, "gbps", None), spec.bandwidth_gbps
    elif kind == "transfer" and gpu is not None:
        measured, peak = getattr(metrics, "gbps", None), pcie_peak_gbps(gpu.pcie_gen_max, gpu.pcie_width_max)
    if measured is None or not peak:
        return None
    return float(measured) / float(peak)
