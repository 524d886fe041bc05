"""A fleet's verdicts, kept between refreshes: a refresh judges again the GPUs whose own observations changed, and
the others only when their model's inputs moved by more than a bound.

A GPU's verdict depends on its own observations and on its model's: the median of its peers' newest values and the
threshold from their spread (``schemas.observations.ModelInputs``). A new run of one GPU moves its model's median a
little almost every time (one of thousands of values crossing the middle), so judging again every GPU whose inputs
moved at all would judge the fleet again at every refresh. Instead each model keeps what its GPUs were last all
judged with (``Snapshot``). While its peers' medians and its thresholds stay within ``DRIFT`` of that, and its peer
counts, GPUs, software and ECC mix are the same, a GPU whose own observation did not change keeps its verdict,
unless it is not ``ok`` or one of its measurements lies within ``NEAR`` × ``DRIFT`` of a line that moves with the
model (its peers' or its own history's): those are judged again at every change. So no level and no count of
failing measurements differs from judging the fleet anew, and the numbers of a kept verdict (its peers' median, its
threshold, the lines they give, the line it is healthy down to) are within ``NEAR`` × ``DRIFT`` of today's; where
two lines are that close, the reference it names as held to may be either. A model whose inputs moved further is
judged again whole.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from schemas.baselines import BaselineIndex
from schemas.judgement import GpuJudgement, Measured, judge_gpu
from schemas.observations import ModelInputs, Observed, medians_without
from schemas.verdicts import WINDOW, Level

from .health import Peers, causes, observe, worst_first

#: How far (relative) a model's peers' medians and (1 - threshold) may move before all its GPUs are judged again.
DRIFT = 0.0005
#: A verdict with a measurement this many ``DRIFT`` (relative) from a moving line is judged again at every change: a
#: kept verdict's lines are within about 4 × ``DRIFT`` of today's (the median and 1 - threshold, each 2 × ``DRIFT``).
NEAR = 5
#: The references whose lines move with the model.
MOVING = ("peers", "history")


@dataclass(frozen=True)
class Snapshot:
    """A model's inputs as its GPUs were judged: per (figure, suite) its peer count and the lowest and highest median
    a GPU of it gets, per figure 1 - threshold, and its GPUs' count, software and ECC mix (the likely causes weigh
    them)."""

    peers: dict[tuple[str, str], tuple[int, float, float] | None]
    factors: dict[str, float]
    mix: tuple[int, dict[Any, int], dict[Any, int]]

    @classmethod
    def of(cls, inputs: ModelInputs, peers: Peers) -> Snapshot:
        medians = {key: (len(v) - 1, *m) if (m := medians_without(v)) else None for key, v in inputs.latest.items()}
        factors = {key: 1 - t for key, t in inputs.thresholds.items()}
        return cls(medians, factors, (peers.count, dict(peers.versions), dict(peers.ecc)))

    def within(self, then: Snapshot, drift: float) -> bool:
        """Whether a model now (``self``) is within ``drift`` of ``then``: its verdicts judged then can be kept."""
        if self.mix != then.mix or self.peers.keys() != then.peers.keys() or self.factors.keys() != then.factors.keys():
            return False
        for key, now in self.peers.items():
            was = then.peers[key]
            if now is None or was is None:
                if now != was:
                    return False
            elif now[0] != was[0] or not _close(min(now[1], was[1]), max(now[2], was[2]), drift):
                return False
        return all(_close(min(f, then.factors[k]), max(f, then.factors[k]), drift) for k, f in self.factors.items())


def _close(low: float, high: float, by: float) -> bool:
    return low == high or (low > 0 and high / low - 1 <= by)


def near_a_moving_line(judged: GpuJudgement, measured: dict[str, Measured], near: float) -> bool:
    """Whether a verdict must be judged again whenever its model's inputs move: it is not ok, or a measurement of
    its window lies within ``near`` (relative) of its peers' or its history's line (where the line passes it, the
    level and the count of failing measurements change)."""
    if judged.level is not Level.ok:
        return True
    for key, f in judged.figures.items():
        window = measured[key].values[:WINDOW]
        for r in f.references:
            if r.name in MOVING and r.line > 0 and any(abs(v / r.line - 1) <= near for v in window):
                return True
    return False


@dataclass(slots=True)
class _Kept:
    """One GPU as the fleet's judge keeps it: its latest run's row and counters, its observation, its matmul's clock,
    the inputs it was last judged from, its verdict and that verdict's place in the list."""

    row: dict[str, Any]
    counters: dict[str, Any] | None
    observed: Observed
    clock: int | None
    measured: dict[str, Measured] | None = None
    judged: GpuJudgement | None = None
    place: tuple[int, float, str, str] = (0, 0.0, "", "")


@dataclass
class _Model:
    """A model's GPUs, what they give each other (kept as GPUs change), what they were last all judged with, and the
    ones judged again at every change."""

    gpus: dict[str, _Kept] = field(default_factory=dict)
    inputs: ModelInputs = field(default_factory=ModelInputs)
    peers: Peers = field(default_factory=Peers)
    snapshot: Snapshot | None = None
    near: set[str] = field(default_factory=set)

    def add(self, device: str, k: _Kept) -> None:
        self.gpus[device] = k
        self.inputs.add(k.observed)
        self.peers.add(k.row, k.clock)

    def remove(self, device: str) -> None:
        k = self.gpus.pop(device)
        self.inputs.remove(k.observed)
        self.peers.remove(k.row, k.clock)
        self.near.discard(device)


@dataclass
class FleetJudge:
    """A fleet's verdicts: ``update`` takes the rows of the GPUs that changed and judges again what they moved."""

    baselines: BaselineIndex
    #: How far a model's inputs may move before all its GPUs are judged again (``DRIFT``).
    drift: float = DRIFT
    _gpus: dict[str, _Kept] = field(default_factory=dict)
    _models: dict[str, _Model] = field(default_factory=dict)
    _sorted: list[GpuJudgement] = field(default_factory=list)
    #: GPUs the last ``update`` judged again (the rest kept their verdicts), and models it judged again whole.
    judged: int = 0
    whole: int = 0

    @property
    def verdicts(self) -> list[GpuJudgement]:
        """Every GPU's verdict, worst first."""
        return list(self._sorted)

    def counters(self) -> dict[str, dict[str, Any]]:
        """Each GPU's error counters as its latest run ended (``Reads.latest_counters``' rows), by device."""
        return {device: k.counters for device, k in self._gpus.items() if k.counters is not None}

    def update(
        self,
        devices: list[dict[str, Any]],
        history_rows: Iterable[tuple[Any, ...]],
        counter_rows: Iterable[dict[str, Any]],
        clock_rows: Iterable[tuple[Any, ...]],
        changed: Collection[str] | None = None,
    ) -> list[GpuJudgement]:
        """Bring the verdicts up to date. ``devices``: the latest run of each GPU in ``changed`` that has one
        (``Reads.health_devices``); ``history_rows``: ``Reads.health_history``; ``counter_rows``:
        ``Reads.latest_counters``; ``clock_rows``: ``Reads.health_figures`` of ``health.CLOCK_FIGURE``; all of the
        GPUs in ``changed``, or of the whole fleet where ``changed`` is None (every verdict judged anew)."""
        if changed is None:
            self._gpus.clear()
            self._models.clear()
            changed = {str(d["device_id"]) for d in devices}
        changed = set(changed)
        history: dict[str, dict[str, Any]] = {}
        for device, figure, values, suites in history_rows:
            history.setdefault(str(device), {})[str(figure)] = (values, suites)
        counters = {str(row["device_id"]): row for row in counter_rows}
        clocks = {str(r[0]): int(r[4]) for r in clock_rows if r[4] is not None}
        models: set[str] = set()
        for device in changed:
            old = self._gpus.pop(device, None)
            if old is not None:
                models.add(old.observed.gpu.model)
                self._models[old.observed.gpu.model].remove(device)
        for row in devices:
            device = str(row["device_id"])
            if device in changed:
                found = counters.get(device)
                kept = _Kept(row, found, observe(row, history.get(device, {}), found), clocks.get(device))
                self._gpus[device] = kept
                models.add(kept.observed.gpu.model)
                self._models.setdefault(kept.observed.gpu.model, _Model()).add(device, kept)
        self.judged = self.whole = 0
        for model in models:
            self._judge_model(model, changed)
        self._sorted = [k.judged for k in sorted(self._gpus.values(), key=attrgetter("place")) if k.judged is not None]
        return self.verdicts

    def _judge_model(self, name: str, changed: set[str]) -> None:
        model = self._models[name]
        if not model.gpus:
            del self._models[name]
            return
        snapshot = Snapshot.of(model.inputs, model.peers)
        if model.snapshot is None or not snapshot.within(model.snapshot, self.drift):
            model.snapshot, model.near = snapshot, set()
            todo = sorted(model.gpus)
            self.whole += 1
        else:
            todo = sorted((changed | model.near) & model.gpus.keys())
        for device in todo:
            k = model.gpus[device]
            measured = model.inputs.measured(k.observed)
            judged = k.judged
            if judged is None or device in changed or measured != k.measured:
                judged = judge_gpu(k.observed.gpu, measured, self.baselines)
                self.judged += 1
            why = causes(k.row, model.peers, k.clock, judged.level in (Level.slow, Level.suspect))
            k.measured, k.judged = measured, judged if judged.causes == why else replace(judged, causes=why)
            k.place = worst_first(k.judged)
            if near_a_moving_line(judged, measured, NEAR * self.drift):
                model.near.add(device)
            else:
                model.near.discard(device)
