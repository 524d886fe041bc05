"""One GPU's verdict from its inputs: the one judge, fed by the collector and by the agent alone.

Both sides hand their observations of a fleet or a machine to ``schemas.observations.judge_fleet``, which gathers each
GPU's inputs (``Measured``: its measurements of one suite, its peers' median, its threshold) the same way for both;
``judge_gpu`` turns them into a ``GpuJudgement`` by the rule of ``schemas.verdicts``, so both say the same of the same
runs. A ``GpuJudgement`` is the verdict as the collector's pages, report and metrics read it; ``wire`` gives the
contract's ``GpuVerdict`` (``/api/v1/verdicts``, ``check --json``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Literal, NamedTuple

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
    Reference,
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
Software = tuple[tuple[str, str | None], ...]


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
    started_at: datetime | None = None  # when its latest run started

    @property
    def default_card(self) -> str | None:
        """Its card at the default power limit, whose baseline it is held against when its own card has none."""
        if self.power_limit_default_w is None:
            return None
        return card_of_model(self.model, self.power_limit_default_w)


class Measured(NamedTuple):
    """One health figure of one GPU as gathered: its measurements of the suite that took the latest, newest first,
    the median of its model's other GPUs' latest values of that suite with their count, and its threshold. (A
    tuple: a fleet gathers tens of thousands, and compares them with the ones it judged before.)"""

    values: Sequence[float]
    suite: str
    peers: tuple[float, int] | None = None
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True, slots=True)
class GpuJudgement:
    """A GPU judged: its level, each figure's judgement (in ``HEALTH_FIGURES``' order), the faults its counters
    show, what it was held against beyond peers and history, and (the collector's, which sees its peers' recorded
    state) the likely causes of a shortfall."""

    gpu: GpuFacts
    level: Level
    figures: dict[str, FigureJudgement]
    faults: tuple[str, ...]
    baseline: str
    causes: tuple[str, ...] = ()

    @property
    def device(self) -> str:
        return str(self.gpu.uuid)

    @property
    def card(self) -> str:
        return self.gpu.card

    @property
    def gpu_model(self) -> str:
        return self.gpu.model

    @property
    def hostname(self) -> str:
        return self.gpu.host

    @property
    def run_id(self) -> str:
        return self.gpu.run_id

    @property
    def gpu_index(self) -> int | None:
        return self.gpu.index

    @property
    def started_at(self) -> datetime | None:
        return self.gpu.started_at

    @property
    def verdict(self) -> str:
        """Its level, as pages, CSV and metrics label it."""
        return str(self.level.value)

    @property
    def slow_by(self) -> float | None:
        """The largest shortfall of a failing figure (0.2: 20 % below its reference)."""
        falls = [s[1] for j in self.figures.values() if j.level in (Level.slow, Level.suspect) and (s := j.shortfall)]
        return max(falls) if falls else None

    @property
    def text(self) -> str:
        """Its level in a few words, as the pages' verdict column shows it."""
        slow_by = self.slow_by
        if self.level in (Level.slow, Level.suspect) and slow_by is not None:
            return f"{self.level.value}: {slow_by:.0%} below"
        if self.level is Level.unknown:
            return "unknown: nothing to compare"
        return self.verdict

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

    def wire(self, judged_by: Literal["collector", "agent"]) -> GpuVerdict:
        """The contract's form (``/api/v1/verdicts``, ``check --json``): the reasons, then the likely causes."""
        g = self.gpu
        return GpuVerdict(
            uuid=g.uuid,
            gpu_index=g.index,
            gpu_model=g.model,
            card=g.card,
            host=g.host,
            level=self.level,
            reasons=tuple(r[:REASON_CHARS] for r in (*self.reasons, *self.causes)),
            run_id=g.run_id,
            judged_by=judged_by,
            figures=tuple(figure_verdict(j) for j in self.figures.values()),
            baseline=self.baseline,
        )


#: Beyond peers and history, for each figure: its card's baseline (with its note) or its sibling cards', and its
#: model's floor; and the words for what the GPU was held against (``baseline_summary``).
Held = tuple[dict[str, tuple[Reference | None, str | None, float | None]], str]


@lru_cache(maxsize=4096)
def _held(
    baselines: BaselineIndex,
    measured: tuple[tuple[str, str], ...],
    gpu: tuple[str, str, str | None, float | None, Software],
    link: tuple[int | None, int | None],
) -> Held:
    """What a GPU of (name, card, default card, default power limit, software) with its link's (generation, width)
    maximum, having measured these (figure, suite), is held against beyond peers and history. The same for every
    GPU of a card: a fleet asks once per card, not per GPU (an index is never changed once built, so it keys the
    cache)."""
    name, card, default_card, default_w, software = gpu
    out = {}
    for figure, suite in measured:
        baseline, note = baseline_reference(baselines, figure, card, default_card, suite, dict(software))
        if baseline is None:
            power = default_w or card_power_w(card)
            baseline = sibling_reference(baselines, figure, suite, name, (card, default_card), power,
                                         pcie_peak_gbps(*link))  # fmt: skip
        out[figure] = (baseline, note, floor_of(figure, name, *link))
    suites = [s for _, s in measured]
    suite = max(dict.fromkeys(suites), key=suites.count)  # the most common, the first of equals
    held = [r for b, _, floor in out.values() for r in (b, None if floor is None else Reference("floor", floor, 0.0))
            if r is not None and r.name in ("sibling", "floor")]  # fmt: skip
    return out, baseline_summary(baselines, card, default_card, suite, held, True)


def judge_gpu(gpu: GpuFacts, measured: Mapping[str, Measured], baselines: BaselineIndex) -> GpuJudgement:
    """Judge one GPU: each health figure it measured against its peers, its own history, its card's baseline (of
    the suite that measured it; a sibling card's where it has none) and its model's floor; its readings for
    faults."""
    latest = gpu.readings[0].link if gpu.readings else (None, None, None, None)
    figures = tuple((key, m.suite) for key in HEALTH_FIGURES if (m := measured.get(key)) is not None and m.values)
    facts = (gpu.name, gpu.card, gpu.default_card, gpu.power_limit_default_w, tuple(sorted(gpu.software.items())))
    if figures:
        refs, summary = _held(baselines, figures, facts, (latest[1], latest[3]))
    else:
        refs, summary = {}, baseline_summary(baselines, gpu.card, gpu.default_card, gpu.suite)
    judged: dict[str, FigureJudgement] = {}
    for key, _ in figures:
        m = measured[key]
        baseline, note, floor = refs[key]
        judged[key] = judge(key, m.values, peers=m.peers, floor=floor, threshold=m.threshold, baseline=baseline,
                            note=note)  # fmt: skip
    faults: list[str] = []
    for reading in gpu.readings:
        found = counter_faults(reading.counters, reading.xids, pcie=reading.link)
        faults += [f for f in found if f not in faults]
    return GpuJudgement(gpu, gpu_level(faults, list(judged.values())), judged, tuple(faults), summary)
