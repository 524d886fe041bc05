"""The kinds of device the agent measures, one module each, chosen here by name and nowhere else.

A new kind (ROCm through torch's HIP build, Apple's MPS) is one ``Device`` subclass in its own module and one
entry in ``DEVICES`` (and in ``DeviceKind``, which the wire contract shares); ``target.Target`` and everything
that runs on a device reach it only through its ``Device``.
"""

from __future__ import annotations

from ..errors import ConfigError
from .base import Described, Device, DeviceKind, Found
from .cpu import Cpu
from .cuda import Cuda

#: Kind -> its device, GPU kinds first: the default device is the first one present.
DEVICES: dict[str, Device] = {d.kind: d for d in (Cuda(), Cpu())}
KINDS: tuple[str, ...] = tuple(DEVICES)


def device(kind: str) -> Device:
    try:
        return DEVICES[kind]
    except KeyError:
        raise ConfigError(f"--device {kind!r} is not one of: {', '.join(DEVICES)}") from None


def default_kind() -> DeviceKind:
    """The first GPU kind torch can use here, else the CPU."""
    return next((d.kind for d in DEVICES.values() if d.is_gpu and d.available()), "cpu")


__all__ = ["DEVICES", "KINDS", "Described", "Device", "DeviceKind", "Found", "default_kind", "device"]
