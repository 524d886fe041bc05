"""What a GPU's error counters, XIDs and PCIe link say is broken: the ``faulty`` level's facts (``schemas.verdicts``),
apart from the figures' rule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: XIDs that mean broken hardware (NVIDIA's XID catalogue); others are usually an application's fault.
FATAL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    64: "row remapper failure",
    74: "NVLink error",
    79: "fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
}


def counter_faults(
    counters: Mapping[str, object] | None,
    xids: Sequence[int] = (),
    *,
    pcie: tuple[int | None, int | None, int | None, int | None] = (None, None, None, None),
) -> list[str]:
    """What the counters as a run ended (``GpuCounters`` fields), its XIDs and its PCIe link (generation seen,
    its maximum, width seen, its maximum) say is broken, each naming its counter; empty when nothing is."""
    faults = []
    c = counters or {}
    uncorrected = c.get("ecc_uncorrected_volatile")
    if isinstance(uncorrected, int) and uncorrected > 0:
        faults.append(f"{uncorrected} uncorrectable ECC error(s) since the driver loaded (ecc_uncorrected_volatile)")
    if c.get("remapped_rows_failed") is True:
        faults.append("a row remapping failed (remapped_rows_failed): the memory cannot be repaired")
    if c.get("remapped_rows_pending") is True:
        faults.append("a row remapping is pending (remapped_rows_pending): the GPU needs a reset")
    if c.get("retired_pages_pending") is True:
        faults.append("a page retirement is pending (retired_pages_pending): the GPU needs a reset")
    down = c.get("nvlink_links_down")
    if isinstance(down, int) and down > 0:
        faults.append(f"{down} NVLink link(s) down (nvlink_links_down)")
    for xid in sorted(set(xids)):
        if xid in FATAL_XIDS:
            faults.append(f"XID {xid} during the run: {FATAL_XIDS[xid]}")
    gen, gen_max, width, width_max = pcie
    if gen is not None and gen_max is not None and gen < gen_max:
        faults.append(f"PCIe link at Gen{gen} under load, the card supports Gen{gen_max} (pcie_gen)")
    if width is not None and width_max is not None and width < width_max:
        faults.append(f"PCIe link x{width} under load, the card supports x{width_max} (pcie_width)")
    return faults
