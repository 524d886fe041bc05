"""The fleet at a glance: how many GPUs of each card are at each level, each health figure's spread over a card's
GPUs, the GPUs that need action, and one page of the verdicts a person asked for (host, card, level).

Nobody reads a 10,000-row table: a fleet larger than one page (``PAGE``) is shown as these, and a fleet that fits
one page is listed whole, as it always was. Pure functions over verdicts (``analysis.health``), worst first as
they come.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from schemas.health_figures import HEALTH_FIGURES
from schemas.judgement import GpuJudgement
from schemas.verdicts import Level

#: GPUs one page lists; a fleet (or a card) of this many or fewer is listed whole, with no summary before it.
PAGE = 100
#: The levels that ask a person to act, worst first: listed before the rest.
NEEDS_ACTION = (Level.faulty, Level.slow, Level.suspect)
#: The levels in the order a summary counts them (the project's words, ``schemas.verdicts.Level``).
LEVELS = (Level.ok, Level.suspect, Level.slow, Level.faulty, Level.unknown)
#: Bars of a figure's histogram.
BINS = 20


@dataclass(frozen=True)
class Bin:
    """GPUs whose latest value of a figure falls in ``[low, high)`` (the last bin's ``high`` included), by how
    that figure was judged."""

    low: float
    high: float
    ok: int  # ok, or nothing to compare with
    suspect: int
    slow: int

    @property
    def gpus(self) -> int:
        return self.ok + self.suspect + self.slow


@dataclass(frozen=True)
class Spread:
    """One health figure over a card's GPUs (each one's latest value): its range, median and histogram."""

    figure: str
    label: str
    unit: str
    gpus: int
    low: float
    median: float
    high: float
    bins: tuple[Bin, ...]

    @property
    def suspect(self) -> int:
        return sum(b.suspect for b in self.bins)

    @property
    def slow(self) -> int:
        return sum(b.slow for b in self.bins)


@dataclass(frozen=True)
class CardHealth:
    """A card's GPUs: how many, how many at each level, and each health figure's spread."""

    card: str
    gpus: int
    levels: dict[str, int]
    spreads: list[Spread] = field(default_factory=list)


@dataclass(frozen=True)
class Summary:
    """The fleet (or one card) at a glance."""

    gpus: int
    levels: dict[str, int]
    cards: list[CardHealth]

    @property
    def need_action(self) -> int:
        return sum(self.levels[level.value] for level in NEEDS_ACTION)


def counts(verdicts: Iterable[GpuJudgement]) -> dict[str, int]:
    """GPUs at each level, every level named (0 where none is)."""
    found = {level.value: 0 for level in LEVELS}
    for v in verdicts:
        found[v.verdict] += 1
    return found


def spread(figure: str, judged: list[tuple[float, Level]], bins: int = BINS) -> Spread:
    """The histogram of ``judged`` (each GPU's value of ``figure`` and how that figure was judged): ``bins`` bars of
    equal width from the lowest value to the highest, so a GPU far below its peers stands apart at the left."""
    values = sorted(value for value, _ in judged)
    low, high = values[0], values[-1]
    width = (high - low) / bins
    tally = [[0, 0, 0] for _ in range(bins)]
    for value, level in judged:
        i = min(bins - 1, int((value - low) / width)) if width > 0 else 0
        tally[i][2 if level is Level.slow else 1 if level is Level.suspect else 0] += 1
    edges = [low + i * width for i in range(bins)] + [high]
    shown = tuple(Bin(edges[i], edges[i + 1], *tally[i]) for i in range(bins if width > 0 else 1))
    f = HEALTH_FIGURES[figure]
    return Spread(figure, f.label, f.unit, len(values), low, statistics.median(values), high, shown)


def card_health(card: str, verdicts: list[GpuJudgement], *, spreads: bool = True) -> CardHealth:
    """A card's GPUs by level; ``spreads``: with each health figure's histogram."""
    figures = []
    for key in HEALTH_FIGURES if spreads else ():
        judged = [(j.value, j.level) for v in verdicts if (j := v.figures.get(key)) is not None]
        if judged:
            figures.append(spread(key, judged))
    return CardHealth(card, len(verdicts), counts(verdicts), figures)


def summarise(verdicts: list[GpuJudgement], *, spreads: bool = True) -> Summary:
    """Counts by level for the fleet and for each card (cards by name); ``spreads``: each card's histograms."""
    by_card: dict[str, list[GpuJudgement]] = {}
    for v in verdicts:
        by_card.setdefault(v.card, []).append(v)
    cards = [card_health(card, members, spreads=spreads) for card, members in sorted(by_card.items())]
    return Summary(len(verdicts), counts(verdicts), cards)


def needing_action(verdicts: list[GpuJudgement]) -> list[GpuJudgement]:
    """The GPUs at a level that asks for action, worst first (as the verdicts come)."""
    return [v for v in verdicts if v.level in NEEDS_ACTION]


@dataclass(frozen=True)
class Filter:
    """Which GPUs a person asked to see: ``host`` found in the hostname or the GPU's UUID (any case), one card,
    one level; empty: any."""

    host: str = ""
    card: str = ""
    level: str = ""

    @property
    def active(self) -> bool:
        return bool(self.host or self.card or self.level)

    def matches(self, v: GpuJudgement) -> bool:
        wanted = self.host.casefold()
        return (
            (not wanted or wanted in v.hostname.casefold() or wanted in v.device.casefold())
            and (not self.card or v.card == self.card)
            and (not self.level or v.verdict == self.level)
        )


@dataclass(frozen=True)
class Listing:
    """One page of the verdicts a filter keeps, worst first."""

    verdicts: list[GpuJudgement]
    matched: int  # verdicts the filter keeps, on every page
    page: int  # 1-based; a page past the last is the last
    pages: int
    size: int

    @property
    def first(self) -> int:
        """The place of this page's first verdict among those matched (1-based; 0 when none is)."""
        return (self.page - 1) * self.size + 1 if self.verdicts else 0

    @property
    def last(self) -> int:
        return self.first + len(self.verdicts) - 1 if self.verdicts else 0


def listing(verdicts: list[GpuJudgement], chosen: Filter, page: int = 1, size: int = PAGE) -> Listing:
    kept = [v for v in verdicts if chosen.matches(v)] if chosen.active else verdicts
    pages = max(1, math.ceil(len(kept) / size))
    page = min(max(1, page), pages)
    return Listing(kept[(page - 1) * size : page * size], len(kept), page, pages, size)
