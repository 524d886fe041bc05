"""One GPU's verdict from what was gathered about it: the one judge, fed by the collector and by the agent alone.

The collector (``collector.health``) gathers a GPU's inputs from its store: its kept history, the medians of its
model's other GPUs across the fleet, the threshold from their spread, its latest counters. The agent (``check``,
with no collector) gathers the same from the runs it has just measured: this machine's other GPUs, its own
measurements in these runs, its counters in each. ``judge_gpu`` turns them into a verdict by the rule of
``schemas.verdicts``, so both say the same of the same runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .baselines import BaselineIndex, card_of_model, card_power_w
from .faults import counter_faults
from .gpu_specs import pcie_peak_gbps
from .health_figures import HEALTH_FIGURES
from .siblings import sibling_reference
from .verdicts import (
    DEFAULT_THRESHOLD,
    FigureJudgement,
    GpuVerdict,
    Level,
    baseline_reference,
    baseline_summary,
    figure_verdict,
    floor_of,
    gpu_level,
    judge,
)

#: The longest reason a verdict carries (a cause quoting a long value is cut, not refused).
REASON_CHARS = 2000
NOTHING_MEASURED = "none of the health figures was measured"

Link = tuple[int | None, int | None, int | None, int | None]


@dataclass(frozen=True, slots=True)
class Reading:
    """What one run recorded of a GPU besides its figures: its error counters as the run ended (``GpuCounters``
    fields), its XIDs, and its PCIe link under load (generation seen, its maximum, width seen, its maximum)."""

    counters: Mapping[str, object] | None = None
    xids: tuple[int, ...] = ()
    link: Link = (None, None, None, None)


@dataclass(frozen=True, slots=True)
class GpuFacts:
    """One GPU as its verdict names and judges it."""

    uuid: str | None
    index: int | None
    name: str  # as the driver calls it: its datasheet, for the floors
    model: str  # as compared (``baselines.gpu_model``: name and memory): whose peers it has
    card: str  # its model at its power limit (``baselines.card_key``): whose baseline it gets
    host: str
    run_id: str  # its latest run
    #: The suite of its latest run: the baseline named when no figure was measured.
    suite: str
    power_limit_default_w: float | None = None
    software: Mapping[str, str | None] = field(default_factory=dict)
    #: Its runs' readings, newest first (the agent's check: the profile and a re-measurement); the first one's link
    #: gives the floor of ``h2d``. Every fault any of them shows counts.
    readings: tuple[Reading, ...] = ()

    @property
    def default_card(self) -> str | None:
        """Its card at the default power limit, whose baseline it is held against when its own card has none."""
        if self.power_limit_default_w is None:
            return None
        return card_of_model(self.model, self.power_limit_default_w)


@dataclass(frozen=True, slots=True)
class Measured:
    """One health figure of one GPU as gathered: its measurements of the suite that took the latest, newest first,
    the median of its model's other GPUs' latest values of that suite with their count, and its threshold."""

    values: Sequence[float]
    suite: str
    peers: tuple[float, int] | None = None
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True, slots=True)
class GpuJudgement:
    """A GPU judged: its level, each figure's judgement (in ``HEALTH_FIGURES``' order), the faults its counters
    show, and what it was held against beyond peers and history."""

    gpu: GpuFacts
    level: Level
    figures: dict[str, FigureJudgement]
    faults: tuple[str, ...]
    baseline: str

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why the level: the faults, then each failing figure; for ``unknown``, why nothing could be compared."""
        failing = [j.reason for j in self.figures.values() if j.level in (Level.slow, Level.suspect) and j.reason]
        out = [*self.faults, *failing]
        if self.level is Level.unknown:
            out.append(
                NOTHING_MEASURED
                if not self.figures
                else f"no baseline or bundled floor for {self.gpu.card}, and no other GPU of its model or history of "
                "its own to compare with"
            )
        return tuple(out)

    def verdict(self, judged_by: Literal["collector", "agent"], causes: Sequence[str] = ()) -> GpuVerdict:
        """The wire form (``/api/v1/verdicts``, ``check --json``); ``causes``: what its recorded state says could
        slow it (the collector's, which sees its peers' state)."""
        g = self.gpu
        return GpuVerdict(
            uuid=g.uuid,
            gpu_index=g.index,
            gpu_model=g.model,
            card=g.card,
            host=g.host,
            level=self.level,
            reasons=tuple(r[:REASON_CHARS] for r in (*self.reasons, *causes)),
            run_id=g.run_id,
            judged_by=judged_by,
            figures=tuple(figure_verdict(j) for j in self.figures.values()),
            baseline=self.baseline,
        )


def judge_gpu(gpu: GpuFacts, measured: Mapping[str, Measured], baselines: BaselineIndex) -> GpuJudgement:
    """Judge one GPU: each health figure it measured against its peers, its own history, its card's baseline (of
    the suite that measured it) and its model's floor; its readings for faults."""
    judged: dict[str, FigureJudgement] = {}
    latest = gpu.readings[0].link if gpu.readings else (None, None, None, None)
    for key in HEALTH_FIGURES:
        m = measured.get(key)
        if m is None or not m.values:
            continue
        baseline, note = baseline_reference(baselines, key, gpu.card, gpu.default_card, m.suite, gpu.software)
        if baseline is None:
            power = gpu.power_limit_default_w or card_power_w(gpu.card)
            link = pcie_peak_gbps(latest[1], latest[3])
            own = (gpu.card, gpu.default_card)
            baseline = sibling_reference(baselines, key, m.suite, gpu.name, own, power, link)
        judged[key] = judge(key, m.values, peers=m.peers, floor=floor_of(key, gpu.name, latest[1], latest[3]),
                            threshold=m.threshold, baseline=baseline, note=note)  # fmt: skip
    faults: list[str] = []
    for reading in gpu.readings:
        found = counter_faults(reading.counters, reading.xids, pcie=reading.link)
        faults += [f for f in found if f not in faults]
    suites = Counter(measured[key].suite for key in judged)
    suite = suites.most_common(1)[0][0] if suites else gpu.suite
    summary = baseline_summary(baselines, gpu.card, gpu.default_card, suite, list(judged.values()))
    return GpuJudgement(gpu, gpu_level(faults, list(judged.values())), judged, tuple(faults), summary)
