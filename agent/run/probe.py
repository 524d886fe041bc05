"""Machine facts: host, software versions and GPUs, read once before a suite runs."""

from __future__ import annotations

import os
import platform
import socket
import sys
from collections.abc import Mapping
from importlib import metadata

from schemas import Gpu, Host, Software

from .. import __version__
from ..devices import device
from ..devices.cpu import cpu_model, memory_bytes
from ..devices.cuda import nccl_version
from ..devices.target import Target
from ..machine.nvml import GpuFacts, Nvml, normalize_uuid, smi_facts


def host() -> Host:
    return Host(
        hostname=socket.gethostname() or "unknown",
        os=platform.platform(terse=True) or sys.platform,
        kernel=platform.release() or None,
        cpu_model=cpu_model(),
        cpu_count=os.cpu_count() or 1,
        memory_bytes=memory_bytes(),
    )


def _dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def software(nvml: Nvml | None) -> Software:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return Software(
        python=platform.python_version(),
        agent=__version__,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        hip=getattr(torch.version, "hip", None),
        cudnn=_cudnn_text(cudnn) if cudnn else None,
        cublas=_dist_version("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"),
        nccl=nccl_version(),
        transformers=_dist_version("transformers"),
        driver=nvml.driver_version() if nvml is not None else None,
    )


def _cudnn_text(version: int) -> str:
    # cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 major*1000 + minor*100 + patch.
    if version >= 90000:
        return f"{version // 10000}.{version // 100 % 100}.{version % 100}"
    return f"{version // 1000}.{version // 100 % 10}.{version % 100}"


def gpu(target: Target, nvml: Nvml | None, fallback: dict[str, GpuFacts] | None = None) -> Gpu:
    """One GPU: what torch found (``Target``) always; NVML facts (or nvidia-smi's) matched by UUID."""
    assert target.index is not None
    uuid, cc = target.uuid, target.capability
    facts = GpuFacts()
    if nvml is not None:
        handle = nvml.handle_for_uuid(uuid) if uuid else None
        if handle is None and "CUDA_VISIBLE_DEVICES" not in os.environ:
            handle = nvml.handle_for_index(target.index)
        if handle is not None:
            facts = nvml.facts(handle)
    elif fallback and uuid:
        facts = fallback.get(normalize_uuid(uuid), facts)
    others = [pid for pid in facts.other_pids if pid != os.getpid()]
    return Gpu(
        index=target.index,
        name=target.name,
        uuid=facts.uuid or (f"GPU-{uuid}" if uuid else None),
        pci_bus_id=facts.pci_bus_id,
        memory_bytes=target.total_memory,
        compute_capability=f"{cc[0]}.{cc[1]}" if cc is not None else None,
        sm_count=target.sm_count,
        l2_cache_bytes=target.l2_bytes or None,
        driver=facts.driver,
        sm_clock_max_mhz=facts.sm_clock_max_mhz,
        mem_clock_max_mhz=facts.mem_clock_max_mhz,
        sm_clock_mhz=facts.sm_clock_mhz,
        mem_clock_mhz=facts.mem_clock_mhz,
        power_limit_w=facts.power_limit_w,
        power_limit_default_w=facts.power_limit_default_w,
        pcie_gen_max=facts.pcie_gen_max,
        pcie_width_max=facts.pcie_width_max,
        pcie_gen=facts.pcie_gen,
        pcie_width=facts.pcie_width,
        ecc_enabled=facts.ecc_enabled,
        mig_enabled=facts.mig_enabled,
        persistence_mode=facts.persistence_mode,
        other_processes=len(others) if nvml is not None else None,
        temperature_start_c=facts.temperature_c,
        nvlink_active=facts.nvlink_active,
    )


def gpus(targets: list[Target], nvml: Nvml | None) -> list[Gpu]:
    fallback = smi_facts() if nvml is None and targets else None
    return [gpu(t, nvml, fallback) for t in targets if t.is_gpu]


def topology(kind: str, environ: Mapping[str, str] | None = None) -> str | None:
    """How the machine's devices of ``kind`` are linked and the settings in force; None on the CPU."""
    return device(kind).topology(os.environ if environ is None else environ)
