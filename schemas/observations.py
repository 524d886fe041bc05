"""What both sides observe of their GPUs, gathered into the judge's inputs in one place.

The collector observes a GPU through what it keeps (each health figure's latest measurements, ``health_history``;
its latest run's facts and counters), the agent's ``check`` through the runs it has just measured (the profile and a
re-measurement). Both hand them over as ``Observed`` (a GPU's facts and, per health figure, its measurements with
the suite that took each, newest first) and ``judge_fleet`` judges them all: each figure's measurements of the suite
that took its newest (the suites time alike figures differently), the median of its model's other GPUs' newest values
of that suite, and a threshold from the run-to-run spread of its model's GPUs (``ModelInputs``), then
``judgement.judge_gpu``. So the two cannot gather differently. The collector keeps a fleet's ``ModelInputs`` between
refreshes and judges again only the GPUs whose ``Measured`` changed (``collector.analysis.fleet_verdicts.FleetJudge``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .baselines import BaselineIndex
from .health_figures import HEALTH_FIGURES
from .judgement import GpuFacts, GpuJudgement, Measured, judge_gpu
from .verdicts import minimum_threshold, relative_spread, threshold_from_spreads

#: One measurement of a figure: its value and the suite of the run that took it.
Taken = tuple[float, str]


@dataclass(frozen=True)
class Observed:
    """One GPU as observed: its facts and, per health figure it measured, its measurements (value, suite) newest
    first; and from them, per figure, what the judge keeps (``kept``: the measurements of the suite that took the
    newest, newest first, and that suite) and their run-to-run spread (``spreads``: ``verdicts.relative_spread``)."""

    gpu: GpuFacts
    figures: Mapping[str, Sequence[Taken]] = field(default_factory=dict)
    kept: dict[str, tuple[tuple[float, ...], str]] = field(init=False, repr=False, compare=False)
    spreads: dict[str, float | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = {}
        for key, taken in self.figures.items():
            if taken:
                suite = taken[0][1]
                kept[key] = (tuple(v for v, s in taken if s == suite), suite)
        object.__setattr__(self, "kept", kept)
        object.__setattr__(self, "spreads", {key: relative_spread(values) for key, (values, _) in kept.items()})


def median_without(values: Sequence[float], mine: float) -> float | None:
    """The median of ``values`` (sorted, holding ``mine``) without one ``mine``, in O(log n); None if none is left."""
    n = len(values) - 1
    if n <= 0:
        return None
    i = bisect.bisect_left(values, mine)

    def at(j: int) -> float:
        return values[j if j < i else j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def medians_without(values: Sequence[float]) -> tuple[float, float] | None:
    """The lowest and highest median ``median_without`` gives any member of ``values`` (sorted): it reads only the
    middle two or three of them. None where a member has no other."""
    n = len(values) - 1
    if n <= 0:
        return None
    k = n // 2
    if n % 2:
        return values[k], values[k + 1]
    found = ((values[k] + values[k + 1]) / 2, (values[k - 1] + values[k + 1]) / 2, (values[k - 1] + values[k]) / 2)
    return min(found), max(found)


class ModelInputs:
    """What a model's GPUs give each one of them: per figure and suite their newest values (``latest``, sorted), per
    figure the threshold from their runs' spread (``thresholds``). A GPU is added or taken away in O(log n) (and a
    list move), so a fleet kept between refreshes changes a model by the GPUs that changed, never rebuilding it."""

    def __init__(self) -> None:
        self.latest: dict[tuple[str, str], list[float]] = {}
        self._spreads: dict[str, list[float]] = {key: [] for key in HEALTH_FIGURES}  # the known ones, sorted
        self._thresholds: dict[str, float] | None = None

    @classmethod
    def of(cls, members: Iterable[Observed]) -> ModelInputs:
        """The inputs of one model, from each of its GPUs' observations."""
        inputs = cls()
        for o in members:
            inputs.add(o)
        return inputs

    def add(self, o: Observed) -> None:
        """Count one more GPU of the model."""
        for key, (values, suite) in o.kept.items():
            bisect.insort(self.latest.setdefault((key, suite), []), values[0])
            spread = o.spreads[key]
            if key in self._spreads and spread is not None:
                bisect.insort(self._spreads[key], spread)
        self._thresholds = None

    def remove(self, o: Observed) -> None:
        """Count one GPU of the model no more (as it was added)."""
        for key, (values, suite) in o.kept.items():
            _take(self.latest, (key, suite), values[0])
            spread = o.spreads[key]
            if key in self._spreads and spread is not None:
                _take(self._spreads, key, spread, keep=True)
        self._thresholds = None

    @property
    def thresholds(self) -> dict[str, float]:
        """Per health figure, its threshold from the spreads of the model's GPUs (``threshold_from_spreads``)."""
        if self._thresholds is None:
            self._thresholds = {key: threshold_from_spreads(known, minimum=minimum_threshold(key))
                                for key, known in self._spreads.items()}  # fmt: skip
        return self._thresholds

    def measured(self, o: Observed) -> dict[str, Measured]:
        """One of its GPUs' inputs to the judge: per health figure, its measurements, its peers' median and count
        (the model's other GPUs' newest values of the same suite), and the figure's threshold."""
        thresholds = self.thresholds
        out = {}
        for key, (values, suite) in o.kept.items():
            if key not in thresholds:
                continue
            alike = self.latest[(key, suite)]
            median = median_without(alike, values[0])
            peers = (median, len(alike) - 1) if median is not None else None
            out[key] = Measured(values, suite, peers, thresholds[key])
        return out


def _take(lists: dict[Any, list[float]], key: Any, value: float, keep: bool = False) -> None:
    """Take one ``value`` from the sorted list ``lists[key]`` (the list itself when it empties, unless ``keep``)."""
    values = lists[key]
    del values[bisect.bisect_left(values, value)]
    if not values and not keep:
        del lists[key]


def by_model(observed: Iterable[Observed]) -> dict[str, list[Observed]]:
    """Observations grouped by their GPU's model (whose GPUs are each other's peers)."""
    models: dict[str, list[Observed]] = {}
    for o in observed:
        models.setdefault(o.gpu.model, []).append(o)
    return models


def judge_fleet(observed: Iterable[Observed], baselines: BaselineIndex) -> list[GpuJudgement]:
    """Every GPU observed, judged (in the order given) against its model's other GPUs among them, its own history,
    its card's baseline and its model's floor."""
    observed = list(observed)
    inputs = {model: ModelInputs.of(members) for model, members in by_model(observed).items()}
    return [judge_gpu(o.gpu, inputs[o.gpu.model].measured(o), baselines) for o in observed]
