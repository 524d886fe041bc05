"""Benchmarks from outside the agent: each module named in ``FLOPFLEET_PLUGINS`` (comma-separated) is imported at
start and registers its families and suites, so ``flopfleet-agent run --suite NAME`` can run them (the test
suite's crashing families come this way; a lab's own benchmarks could too)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from ..benchmarks import REGISTRY, AnyBenchmark
from ..errors import ConfigError
from .suites import SUITES, Suite

ENV = "FLOPFLEET_PLUGINS"


def register(*benchmarks: type[AnyBenchmark], suites: tuple[Suite, ...] = ()) -> None:
    """Make benchmark families and suites known by name, as the built-in ones are."""
    for cls in benchmarks:
        REGISTRY[cls.NAME] = cls
    for chosen in suites:
        SUITES[chosen.name] = chosen


def load_plugins(environ: Mapping[str, str]) -> list[str]:
    """Import the modules ``FLOPFLEET_PLUGINS`` names; ConfigError naming one that cannot be imported."""
    names = [n.strip() for n in environ.get(ENV, "").split(",") if n.strip()]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ConfigError(f"{ENV} names {name!r}, which cannot be imported: {exc}") from None
    return names
