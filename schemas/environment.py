"""What a run was measured on: host, software and GPUs, and GPU state sampled during the run."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator
from typing_extensions import Self

from .base import Celsius, Count, GpuIndex, Label, Mhz, Positive, Seconds, Watts, WireModel

#: NVML's names for why clocks are held below their maximum (see ``agent.machine.nvml``).
ThrottleReason = Literal[
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
]
#: The reasons that mean heat or the hardware slowed the GPU, not its power limit: never normal, a likely cause of a
#: shortfall, and no healthy run for a baseline.
FAULT_REASONS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})
#: The reasons that mean the GPU ran slower than it could: the faults, and reaching the power cap (how a loaded GPU
#: runs at its default limit; a fault only where the limit was set below the default).
SLOWDOWN_REASONS = FAULT_REASONS | {"sw_power_cap"}
ComputeCapability = Annotated[str, StringConstraints(pattern=r"^\d{1,2}\.\d{1,2}$")]


class Host(WireModel):
    hostname: Label
    os: Label
    kernel: Label | None = None
    cpu_model: Label | None = None
    cpu_count: Positive
    memory_bytes: Count | None = None


class Software(WireModel):
    python: Label
    agent: Label
    torch: Label | None = None
    cuda: Label | None = None
    hip: Label | None = None
    cudnn: Label | None = None
    cublas: Label | None = None
    nccl: Label | None = None
    transformers: Label | None = None
    driver: Label | None = None


class GpuCounters(WireModel):
    """A GPU's error and event counters at one moment (NVML). None: not supported on this GPU or not readable, never
    0 (retired pages on GPUs that remap rows instead, NVLink on a PCIe card)."""

    ecc_corrected_volatile: Count | None = None
    ecc_uncorrected_volatile: Count | None = None
    ecc_corrected_aggregate: Count | None = None
    ecc_uncorrected_aggregate: Count | None = None
    retired_pages_single_bit: Count | None = None
    retired_pages_double_bit: Count | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: Count | None = None
    remapped_rows_uncorrectable: Count | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failed: bool | None = None
    pcie_replays: Count | None = None
    nvlink_links: Count | None = None  # links NVML reports for the GPU
    nvlink_links_down: Count | None = None  # of them, not up
    nvlink_crc_errors: Count | None = None  # summed over the links (flit and data CRC)
    nvlink_replay_errors: Count | None = None
    nvlink_recovery_errors: Count | None = None
    power_violation_s: Seconds | None = None  # time held below the clocks asked for by the power limit
    energy_j: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None  # since the driver loaded


class XidEvent(WireModel):
    """An XID error the driver reported for the GPU during the run (``t_s`` from the run's start)."""

    xid: Annotated[int, Field(ge=0, le=1_000_000)]
    t_s: Seconds


class Gpu(WireModel):
    """One GPU as the agent found it: torch properties always, NVML facts where NVML answers."""

    index: GpuIndex
    name: Label
    uuid: Label | None = None
    pci_bus_id: Label | None = None
    memory_bytes: Count
    compute_capability: ComputeCapability | None = None
    sm_count: Positive | None = None
    l2_cache_bytes: Count | None = None
    driver: Label | None = None
    sm_clock_max_mhz: Mhz | None = None
    mem_clock_max_mhz: Mhz | None = None
    sm_clock_mhz: Mhz | None = None
    mem_clock_mhz: Mhz | None = None
    power_limit_w: Watts | None = None
    power_limit_default_w: Watts | None = None
    pcie_gen_max: Annotated[int, Field(ge=1, le=16)] | None = None
    pcie_width_max: Annotated[int, Field(ge=1, le=64)] | None = None
    pcie_gen: Annotated[int, Field(ge=1, le=16)] | None = None
    pcie_width: Annotated[int, Field(ge=1, le=64)] | None = None
    ecc_enabled: bool | None = None
    mig_enabled: bool | None = None
    persistence_mode: bool | None = None
    other_processes: Count | None = None
    nvlink_active: Count | None = None  # NVLink links up, where NVML reports them
    temperature_start_c: Celsius | None = None
    temperature_end_c: Celsius | None = None
    throttle_reasons_seen: tuple[ThrottleReason, ...] = Field(default=(), max_length=16)
    counters_before: GpuCounters | None = None  # read as the run started
    counters_after: GpuCounters | None = None  # read as it ended
    xid_events: tuple[XidEvent, ...] | None = Field(default=None, max_length=64)  # None: not watched (unsupported)


#: The most NVML readings one run carries.
MAX_SAMPLES = 20_000


class GpuSamples(WireModel):
    """NVML readings taken while the suite ran, as columns: entry i of every field is reading i.

    Columns, not one object per reading: a run carries hundreds of readings, and arrays of numbers validate and
    store several times faster than as many small objects. ``t_s`` counts from the run's start.
    """

    t_s: tuple[Seconds, ...] = Field(default=(), max_length=MAX_SAMPLES)
    gpu_index: tuple[GpuIndex, ...] = Field(default=(), max_length=MAX_SAMPLES)
    sm_clock_mhz: tuple[Mhz | None, ...] = Field(default=(), max_length=MAX_SAMPLES)
    mem_clock_mhz: tuple[Mhz | None, ...] = Field(default=(), max_length=MAX_SAMPLES)
    power_w: tuple[Watts | None, ...] = Field(default=(), max_length=MAX_SAMPLES)
    temperature_c: tuple[Celsius | None, ...] = Field(default=(), max_length=MAX_SAMPLES)
    utilization_pct: tuple[Annotated[int, Field(ge=0, le=100)] | None, ...] = Field(default=(), max_length=MAX_SAMPLES)
    throttle_reasons: tuple[tuple[ThrottleReason, ...], ...] = Field(default=(), max_length=MAX_SAMPLES)

    @model_validator(mode="after")
    def _aligned(self) -> Self:
        lengths = {name: len(getattr(self, name)) for name in type(self).model_fields}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"sample columns differ in length: {lengths}")
        return self

    def __len__(self) -> int:
        return len(self.t_s)


class StateSummary(WireModel):
    """GPU state over one benchmark case, so a slow result carries its own explanation."""

    samples: Positive
    sm_clock_mhz_min: Mhz | None = None
    sm_clock_mhz_median: Mhz | None = None
    power_w_max: Watts | None = None
    temperature_c_max: Celsius | None = None
    throttle_reasons: tuple[ThrottleReason, ...] = Field(default=(), max_length=16)


class Machine(WireModel):
    """What ``flopfleet-agent info --json`` prints: the facts a run's envelope carries about its machine."""

    host: Host
    software: Software
    gpus: tuple[Gpu, ...] = Field(default=(), max_length=64)
