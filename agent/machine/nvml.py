"""GPU facts and live state from NVML (nvidia-ml-py), with ``nvidia-smi`` as the fallback for facts.

Every reading is optional: a field NVML will not give (a MIG slice, a virtualised GPU, an old driver) is None,
never an error, because a missing clock reading must not stop a benchmark run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from schemas import Gpu, GpuCounters, StateSummary
from schemas.environment import FAULT_REASONS

from .counters import Counters, XidWatch

T = TypeVar("T")

#: NVML clock-event (throttle) reason bits and the names the wire contract uses.
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def slowed_down(reasons: Iterable[str], gpu: Any | None) -> bool:
    """Throttling that explains a slow result: thermal or hardware slowdown, or a power cap below the default."""
    seen = set(reasons)
    if seen & FAULT_REASONS:
        return True
    lowered = (
        gpu is not None
        and gpu.power_limit_w is not None
        and gpu.power_limit_default_w is not None
        and gpu.power_limit_w < gpu.power_limit_default_w
    )
    return "sw_power_cap" in seen and bool(lowered)


#: Below this share of its maximum SM clock, a GPU that reported its power cap ran at a clock the power limit chose.
#: On the H200 the cells the 700 W limit sets (tf32, fp16 and bf16 matmul at 8192 and 16384, fp8 at 16384, the
#: largest prefill batches) ran at a median 1,150-1,665 MHz of 1,980, every other cell at 1,700 or more; at 0.85 four
#: committed pairs of runs flag the same 9 cells in both, at most one in one run only (docs/methodology.md, "Cells
#: the power limit sets"; benchmarks/run_to_run.py --power-cap-rule).
POWER_CAPPED_CLOCK = 0.85


def power_capped(state: StateSummary, gpu: Gpu | None) -> bool:
    """Whether the board's power limit set the clock a case ran at: it reported its power cap and the median SM clock
    was below ``POWER_CAPPED_CLOCK`` of its maximum. Such a figure is the GPU's at its power limit, and it moves a
    few % between runs with the board's power and heat history (the clock hunts while the limit's slow loop settles:
    tf32 matmul at 16384 moved 5-7 % between two runs of one sitting on the H200). A limit set below the default is
    ``slowed_down`` instead: a fault, not the card's normal state."""
    if gpu is None or gpu.sm_clock_max_mhz is None or state.sm_clock_mhz_median is None:
        return False
    slow = state.sm_clock_mhz_median < POWER_CAPPED_CLOCK * gpu.sm_clock_max_mhz
    return slow and "sw_power_cap" in state.throttle_reasons


def decode_throttle(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_BITS.items() if mask & bit)


def normalize_uuid(uuid: str) -> str:
    """NVML says 'GPU-1a2b…', torch says '1a2b…': compare them without the prefix."""
    text = str(uuid).strip()
    return text[4:] if text.upper().startswith("GPU-") else text


@dataclass
class GpuFacts:
    """What NVML or nvidia-smi said about one GPU; None where it would not say."""

    uuid: str | None = None
    name: str | None = None
    pci_bus_id: str | None = None
    driver: str | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    power_limit_default_w: float | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    ecc_enabled: bool | None = None
    mig_enabled: bool | None = None
    persistence_mode: bool | None = None
    temperature_c: int | None = None
    other_pids: list[int] = field(default_factory=list)
    nvlink_active: int | None = None


@dataclass(frozen=True)
class Reading:
    """One sample of live state."""

    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    power_w: float | None
    temperature_c: int | None
    utilization_pct: int | None
    throttle_reasons: tuple[str, ...]
    pcie_gen: int | None
    pcie_width: int | None


class Nvml:
    """An open NVML session; use ``open_nvml()``, which yields None where NVML is missing."""

    def __init__(self, module: Any) -> None:
        self._m = module

    def _get(self, fn: Callable[[], T]) -> T | None:
        try:
            return fn()
        except self._m.NVMLError:
            return None
        except (AttributeError, TypeError, ValueError):
            return None

    def driver_version(self) -> str | None:
        return self._get(lambda: _text(self._m.nvmlSystemGetDriverVersion()))

    def device_count(self) -> int | None:
        count: int | None = self._get(self._m.nvmlDeviceGetCount)
        return count

    def handle_for_uuid(self, uuid: str) -> Any | None:
        """The NVML handle of the GPU torch calls ``uuid`` (indices differ under CUDA_VISIBLE_DEVICES)."""
        wanted = normalize_uuid(uuid)
        count = self._get(self._m.nvmlDeviceGetCount) or 0
        for i in range(count):
            handle = self.handle_for_index(i)
            if handle is None:
                continue
            got = self._get(partial(self._uuid, handle))
            if got is not None and normalize_uuid(got) == wanted:
                return handle
        return None

    def _uuid(self, handle: Any) -> str:
        return _text(self._m.nvmlDeviceGetUUID(handle))

    def handle_for_index(self, index: int) -> Any | None:
        return self._get(lambda: self._m.nvmlDeviceGetHandleByIndex(index))

    def facts(self, handle: Any) -> GpuFacts:
        m, g = self._m, self._get
        ecc = g(lambda: m.nvmlDeviceGetEccMode(handle))
        mig = g(lambda: m.nvmlDeviceGetMigMode(handle))
        power = g(lambda: m.nvmlDeviceGetEnforcedPowerLimit(handle))
        default_power = g(lambda: m.nvmlDeviceGetPowerManagementDefaultLimit(handle))
        persistence = g(lambda: m.nvmlDeviceGetPersistenceMode(handle))
        return GpuFacts(
            uuid=g(lambda: _text(m.nvmlDeviceGetUUID(handle))),
            name=g(lambda: _text(m.nvmlDeviceGetName(handle))),
            pci_bus_id=g(lambda: _text(m.nvmlDeviceGetPciInfo(handle).busId)),
            driver=self.driver_version(),
            sm_clock_max_mhz=g(lambda: m.nvmlDeviceGetMaxClockInfo(handle, m.NVML_CLOCK_SM)),
            mem_clock_max_mhz=g(lambda: m.nvmlDeviceGetMaxClockInfo(handle, m.NVML_CLOCK_MEM)),
            sm_clock_mhz=g(lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_SM)),
            mem_clock_mhz=g(lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_MEM)),
            power_limit_w=power / 1000.0 if power is not None else None,
            power_limit_default_w=default_power / 1000.0 if default_power is not None else None,
            pcie_gen_max=g(lambda: m.nvmlDeviceGetMaxPcieLinkGeneration(handle)),
            pcie_width_max=g(lambda: m.nvmlDeviceGetMaxPcieLinkWidth(handle)),
            pcie_gen=g(lambda: m.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            pcie_width=g(lambda: m.nvmlDeviceGetCurrPcieLinkWidth(handle)),
            ecc_enabled=bool(ecc[0]) if ecc is not None else None,
            mig_enabled=bool(mig[0]) if mig is not None else None,
            persistence_mode=bool(persistence) if persistence is not None else None,
            temperature_c=g(lambda: m.nvmlDeviceGetTemperature(handle, m.NVML_TEMPERATURE_GPU)),
            other_pids=self.process_ids(handle) or [],
            nvlink_active=self.nvlink_active(handle),
        )

    def process_ids(self, handle: Any) -> list[int] | None:
        """Processes with a context on the GPU (compute and graphics); None where NVML cannot list them."""
        m = self._m
        found: list[int] | None = None
        for name in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
            fn = getattr(m, name, None)
            procs = self._get(partial(fn, handle)) if fn is not None else None
            if procs is not None:
                found = (found or []) + [int(p.pid) for p in procs]
        return found

    def nvlink_active(self, handle: Any) -> int | None:
        """NVLink links up; None where the GPU has none or NVML will not say (0 links reads as None too)."""
        m = self._m
        links = getattr(m, "NVML_NVLINK_MAX_LINKS", 18)
        active = 0
        for link in range(links):
            state = self._get(partial(m.nvmlDeviceGetNvLinkState, handle, link))
            if state is None:
                break
            active += int(state == getattr(m, "NVML_FEATURE_ENABLED", 1))
        return active or None

    def counters(self, handle: Any) -> GpuCounters:
        """The GPU's error counters now (``counters``)."""
        return Counters(self._m, self._get).read(handle)

    def watch_xids(self, handles: dict[int, Any], started: float) -> XidWatch:
        """XID events of these GPUs from now until the block ends (``counters``)."""
        return XidWatch(self._m, handles, started)

    def read(self, handle: Any) -> Reading:
        m, g = self._m, self._get
        reasons_fn = getattr(m, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            m, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask = g(lambda: reasons_fn(handle)) if reasons_fn is not None else None
        power = g(lambda: m.nvmlDeviceGetPowerUsage(handle))
        util = g(lambda: m.nvmlDeviceGetUtilizationRates(handle))
        return Reading(
            sm_clock_mhz=g(lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_SM)),
            mem_clock_mhz=g(lambda: m.nvmlDeviceGetClockInfo(handle, m.NVML_CLOCK_MEM)),
            power_w=power / 1000.0 if power is not None else None,
            temperature_c=g(lambda: m.nvmlDeviceGetTemperature(handle, m.NVML_TEMPERATURE_GPU)),
            utilization_pct=int(util.gpu) if util is not None else None,
            throttle_reasons=decode_throttle(int(mask)) if mask is not None else (),
            pcie_gen=g(lambda: m.nvmlDeviceGetCurrPcieLinkGeneration(handle)),
            pcie_width=g(lambda: m.nvmlDeviceGetCurrPcieLinkWidth(handle)),
        )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@contextmanager
def open_nvml() -> Iterator[Nvml | None]:
    """NVML for the duration of the block, or None where nvidia-ml-py or the driver is missing."""
    try:
        import pynvml
    except ImportError:
        yield None
        return
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        yield None
        return
    try:
        yield Nvml(pynvml)
    finally:
        with suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


_SMI_FIELDS = (
    "uuid",
    "name",
    "pci.bus_id",
    "driver_version",
    "clocks.max.sm",
    "clocks.max.mem",
    "clocks.sm",
    "clocks.mem",
    "power.limit",
    "power.default_limit",
    "pcie.link.gen.max",
    "pcie.link.width.max",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "ecc.mode.current",
    "temperature.gpu",
)


def smi_topology() -> str | None:
    """``nvidia-smi topo -m``: which GPU pairs talk over NVLink (NV#), a PCIe switch (PIX/PXB) or the CPU (SYS)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout).strip("\n").rstrip()  # it underlines the header for terminals
    return text or None


def smi_facts() -> dict[str, GpuFacts]:
    """Facts per normalised UUID from ``nvidia-smi``, for machines without nvidia-ml-py."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={','.join(_SMI_FIELDS)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    facts: dict[str, GpuFacts] = {}
    for line in out.strip().splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(_SMI_FIELDS):
            continue
        row = dict(zip(_SMI_FIELDS, cols, strict=True))
        uuid = row["uuid"]
        facts[normalize_uuid(uuid)] = GpuFacts(
            uuid=uuid,
            name=row["name"],
            pci_bus_id=row["pci.bus_id"],
            driver=row["driver_version"],
            sm_clock_max_mhz=_int(row["clocks.max.sm"]),
            mem_clock_max_mhz=_int(row["clocks.max.mem"]),
            sm_clock_mhz=_int(row["clocks.sm"]),
            mem_clock_mhz=_int(row["clocks.mem"]),
            power_limit_w=_float(row["power.limit"]),
            power_limit_default_w=_float(row["power.default_limit"]),
            pcie_gen_max=_int(row["pcie.link.gen.max"]),
            pcie_width_max=_int(row["pcie.link.width.max"]),
            pcie_gen=_int(row["pcie.link.gen.current"]),
            pcie_width=_int(row["pcie.link.width.current"]),
            ecc_enabled={"Enabled": True, "Disabled": False}.get(row["ecc.mode.current"]),
            temperature_c=_int(row["temperature.gpu"]),
        )
    return facts


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
