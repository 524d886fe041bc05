"""What ``info`` shows: the machine's facts, without running anything."""

from __future__ import annotations

from schemas import Machine

from ..devices.target import find_targets
from ..machine.nvml import open_nvml
from . import probe


def describe_machine(device: str) -> Machine:
    targets = find_targets(device)
    with open_nvml() as nvml:
        return Machine(host=probe.host(), software=probe.software(nvml), gpus=tuple(probe.gpus(targets, nvml)))
