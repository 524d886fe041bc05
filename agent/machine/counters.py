"""A GPU's error counters (NVML), read before and after a run, and the XID events seen while it ran.

What fleet-health tools read, read the same way: ECC errors (volatile and aggregate, corrected and uncorrected),
retired pages and remapped rows, the PCIe replay counter, each NVLink's state and error counters, power-violation
time and energy. Each counter NVML does not support on this GPU (retired pages on Hopper, which remaps rows
instead; NVLink on a PCIe card or in a VM) is None, never 0: an unknown is not a clean bill of health.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import Any

from schemas import Gpu, GpuCounters, XidEvent

#: XID events kept per run and GPU (a storm of the same error says no more after the first few).
MAX_XIDS = 64


#: Calls one NVML function, None where NVML refuses it (``Nvml._get``): every counter may fail alone.
Getter = Callable[[Callable[[], Any]], Any]


class Counters:
    """Reads counters through an NVML module (``pynvml``) and its session's ``get``."""

    def __init__(self, module: Any, get: Getter) -> None:
        self._m = module
        self._get = get

    def read(self, handle: Any) -> GpuCounters:
        m, g = self._m, self._get

        def ecc(kind: int, counter: int) -> int | None:
            found = g(lambda: m.nvmlDeviceGetTotalEccErrors(handle, kind, counter))
            return int(found) if found is not None else None

        corrected = getattr(m, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        uncorrected = getattr(m, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile, aggregate = getattr(m, "NVML_VOLATILE_ECC", 0), getattr(m, "NVML_AGGREGATE_ECC", 1)
        single = getattr(m, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
        double = getattr(m, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
        remap = g(lambda: m.nvmlDeviceGetRemappedRows(handle))
        pending = g(lambda: m.nvmlDeviceGetRetiredPagesPendingStatus(handle))
        violation = g(lambda: m.nvmlDeviceGetViolationStatus(handle, getattr(m, "NVML_PERF_POLICY_POWER", 0)))
        energy = g(lambda: m.nvmlDeviceGetTotalEnergyConsumption(handle))
        links = self._nvlinks(handle)
        return GpuCounters(
            ecc_corrected_volatile=ecc(corrected, volatile),
            ecc_uncorrected_volatile=ecc(uncorrected, volatile),
            ecc_corrected_aggregate=ecc(corrected, aggregate),
            ecc_uncorrected_aggregate=ecc(uncorrected, aggregate),
            retired_pages_single_bit=_count(g(lambda: m.nvmlDeviceGetRetiredPages(handle, single))),
            retired_pages_double_bit=_count(g(lambda: m.nvmlDeviceGetRetiredPages(handle, double))),
            retired_pages_pending=bool(pending) if pending is not None else None,
            remapped_rows_correctable=int(remap[0]) if remap is not None else None,
            remapped_rows_uncorrectable=int(remap[1]) if remap is not None else None,
            remapped_rows_pending=bool(remap[2]) if remap is not None else None,
            remapped_rows_failed=bool(remap[3]) if remap is not None else None,
            pcie_replays=g(lambda: int(m.nvmlDeviceGetPcieReplayCounter(handle))),
            nvlink_links=links[0],
            nvlink_links_down=links[1],
            nvlink_crc_errors=links[2],
            nvlink_replay_errors=links[3],
            nvlink_recovery_errors=links[4],
            power_violation_s=int(violation.violationTime) / 1e9 if violation is not None else None,
            energy_j=int(energy) / 1000.0 if energy is not None else None,
        )

    def _nvlinks(self, handle: Any) -> tuple[int | None, int | None, int | None, int | None, int | None]:
        """(links NVML reports, of them not up, CRC errors, replays, recoveries); all None without NVLink."""
        m, g = self._m, self._get
        enabled = getattr(m, "NVML_FEATURE_ENABLED", 1)
        counters = {
            "crc": (getattr(m, "NVML_NVLINK_ERROR_DL_CRC_FLIT", 2), getattr(m, "NVML_NVLINK_ERROR_DL_CRC_DATA", 3)),
            "replay": (getattr(m, "NVML_NVLINK_ERROR_DL_REPLAY", 0),),
            "recovery": (getattr(m, "NVML_NVLINK_ERROR_DL_RECOVERY", 1),),
        }
        links = down = 0
        totals: dict[str, int | None] = dict.fromkeys(counters, 0)
        for link in range(getattr(m, "NVML_NVLINK_MAX_LINKS", 18)):
            state = g(partial(m.nvmlDeviceGetNvLinkState, handle, link))
            if state is None:
                break
            links += 1
            down += int(state != enabled)
            for name, kinds in counters.items():
                for kind in kinds:
                    raw = g(partial(m.nvmlDeviceGetNvLinkErrorCounter, handle, link, kind))
                    value = int(raw) if raw is not None else None
                    current = totals[name]
                    totals[name] = None if value is None or current is None else current + value
        if not links:
            return None, None, None, None, None
        return links, down, totals["crc"], totals["replay"], totals["recovery"]


def _count(pages: Any) -> int | None:
    return len(pages) if pages is not None else None


class XidWatch:
    """XID events of some GPUs while a run goes on: NVML's event set, waited on in a thread of its own."""

    def __init__(self, module: Any, handles: dict[int, Any], started: float) -> None:
        self._m = module
        self._started = started
        self._indices: dict[str, int] = {}
        self.events: dict[int, list[XidEvent]] = {index: [] for index in handles}
        self.watching: dict[int, bool] = dict.fromkeys(handles, False)
        self._stop = threading.Event()
        self._set: Any = None
        self._thread: threading.Thread | None = None
        with suppress(Exception):
            self._set = module.nvmlEventSetCreate()
        if self._set is None:
            return
        kind = getattr(module, "nvmlEventTypeXidCriticalError", 0x8)
        for index, handle in handles.items():
            try:
                module.nvmlDeviceRegisterEvents(handle, kind, self._set)
            except Exception:  # NotSupported (a VM, an old driver): the GPU's events are unknown
                continue
            self.watching[index] = True
            with suppress(Exception):
                self._indices[str(module.nvmlDeviceGetUUID(handle))] = index

    def __enter__(self) -> XidWatch:
        if self._set is not None and any(self.watching.values()):
            self._thread = threading.Thread(target=self._wait, name="flopfleet-xid", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2.0)
        if self._set is not None:
            with suppress(Exception):
                self._m.nvmlEventSetFree(self._set)

    def _wait(self) -> None:
        m = self._m
        wait = getattr(m, "nvmlEventSetWait_v2", None) or m.nvmlEventSetWait
        while not self._stop.is_set():
            try:
                data = wait(self._set, 500)
            except m.NVMLError:  # a timeout, mostly: nothing happened in the last half second
                continue
            except Exception:
                return
            with suppress(Exception):
                uuid = str(m.nvmlDeviceGetUUID(data.device))
                index = self._indices.get(uuid)
                if index is not None and len(self.events[index]) < MAX_XIDS:
                    self.events[index].append(XidEvent(xid=int(data.eventData), t_s=time.monotonic() - self._started))


#: Counters whose rise during a run is worth a line in the agent's summary (the collector judges them too).
RISING = (
    ("ecc_uncorrected_volatile", "uncorrectable ECC errors"),
    ("ecc_corrected_volatile", "corrected ECC errors"),
    ("remapped_rows_uncorrectable", "rows remapped for uncorrectable errors"),
    ("pcie_replays", "PCIe replays"),
    ("nvlink_crc_errors", "NVLink CRC errors"),
    ("nvlink_replay_errors", "NVLink replays"),
    ("nvlink_recovery_errors", "NVLink recoveries"),
)


def alarms(gpu: Gpu) -> list[str]:
    """What the GPU's counters say went wrong around the run, one line each (empty when nothing did)."""
    before, after = gpu.counters_before, gpu.counters_after
    lines = []
    if before is not None and after is not None:
        for name, label in RISING:
            was, now = getattr(before, name), getattr(after, name)
            if was is not None and now is not None and now > was:
                lines.append(f"{label} +{now - was} during the run ({was} → {now})")
    if after is not None:
        if after.remapped_rows_failed:
            lines.append("a row remap failed (the GPU could not replace a faulty memory row)")
        if after.remapped_rows_pending:
            lines.append("a row remap is pending (takes effect at the next GPU reset)")
        if after.retired_pages_pending:
            lines.append("a page retirement is pending (takes effect at the next GPU reset)")
        if after.nvlink_links_down:
            lines.append(f"{after.nvlink_links_down} of {after.nvlink_links} NVLink links down")
    if gpu.xid_events:
        codes = ", ".join(str(x) for x in dict.fromkeys(e.xid for e in gpu.xid_events))
        lines.append(f"{len(gpu.xid_events)} XID event(s) during the run: XID {codes}")
    return lines
