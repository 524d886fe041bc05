"""The device a suite runs on, and what that device can and cannot compute."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .errors import DeviceError

if TYPE_CHECKING:
    import torch

DeviceKind = Literal["cuda", "cpu"]

_TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Target:
    """One device: the CPU, or one CUDA GPU by torch index."""

    kind: DeviceKind
    index: int | None
    name: str
    capability: tuple[int, int] | None
    total_memory: int
    l2_bytes: int

    @property
    def label(self) -> str:
        return f"cuda:{self.index} ({self.name})" if self.kind == "cuda" else f"cpu ({self.name})"

    def torch_device(self) -> torch.device:
        import torch

        if self.kind == "cuda" and self.index is not None:
            return torch.device("cuda", self.index)
        return torch.device("cpu")

    def unsupported_reason(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None when it can."""
        cc = self.capability
        if dtype == "tf32":
            if self.kind != "cuda":
                return "TF32 is a tensor-core mode of NVIDIA GPUs; this run is on the CPU"
            if cc is not None and cc < (8, 0):
                return f"TF32 needs compute capability >= 8.0; {self.name} has {cc[0]}.{cc[1]}"
        if dtype == "bf16" and self.kind == "cuda" and cc is not None and cc < (8, 0):
            return f"bf16 needs compute capability >= 8.0; {self.name} has {cc[0]}.{cc[1]}"
        if dtype.startswith("fp8"):
            import torch

            if self.kind != "cuda":
                return "fp8 matmul (torch._scaled_mm) needs an NVIDIA GPU; this run is on the CPU"
            if cc is not None and cc < (8, 9):
                return f"fp8 matmul needs compute capability >= 8.9; {self.name} has {cc[0]}.{cc[1]}"
            if not hasattr(torch, "_scaled_mm"):
                return f"this torch ({torch.__version__}) has no torch._scaled_mm"
        return None

    def torch_dtype(self, dtype: str) -> torch.dtype:
        import torch

        if dtype.startswith("fp8"):
            return torch.float8_e4m3fn if dtype == "fp8_e4m3" else torch.float8_e5m2
        result: torch.dtype = getattr(torch, _TORCH_DTYPES[dtype])
        return result


def cpu_target() -> Target:
    from .probe import cpu_model, memory_bytes

    return Target(
        kind="cpu",
        index=None,
        name=cpu_model() or platform.processor() or "cpu",
        capability=None,
        total_memory=memory_bytes() or 0,
        l2_bytes=0,
    )


def cuda_targets(indices: tuple[int, ...] | None) -> list[Target]:
    """The GPUs to measure, by torch index; all of them when ``indices`` is None."""
    import torch

    if not torch.cuda.is_available():
        raise DeviceError("--device cuda was asked for, but torch sees no CUDA GPU (try --device cpu)")
    count = torch.cuda.device_count()
    chosen = tuple(range(count)) if indices is None else indices
    bad = [i for i in chosen if not 0 <= i < count]
    if bad:
        raise DeviceError(f"--gpus names {bad}, but this machine has GPUs 0..{count - 1}")
    targets = []
    for i in chosen:
        props = torch.cuda.get_device_properties(i)
        targets.append(
            Target(
                kind="cuda",
                index=i,
                name=props.name,
                capability=(props.major, props.minor),
                total_memory=int(props.total_memory),
                l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
            )
        )
    return targets


def default_device() -> DeviceKind:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
