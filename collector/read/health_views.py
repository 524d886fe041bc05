"""Fleet health as pages show it at any size: a fleet (or a card's GPUs) that fits one page is listed whole, as it
always was; a larger one is summarised first (``analysis.fleet``: counts by level per card, each figure's
spread, the GPUs that need action) and then listed a page at a time, filtered by host, card and level on the
server, so a 10,000-GPU page stays small.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from schemas.judgement import GpuJudgement

from ..analysis.fleet import PAGE, Filter, Listing, Summary, listing, needing_action, summarise


@dataclass(frozen=True)
class Glance:
    """What a fleet's summary holds besides its list: the same for every page and filter of the same verdicts."""

    summary: Summary
    action: list[GpuJudgement]  # the GPUs that need action, worst first, at most a page
    cards: list[str]


#: Glances by what their verdicts were judged from (the store's generation, the scope, the baselines): every page
#: of a large fleet shows the same summary, which changes only when the verdicts do (about 50 ms at 10,000 GPUs).
_GLANCES: OrderedDict[object, Glance] = OrderedDict()
_GLANCES_KEPT = 16
_LOCK = threading.Lock()


def glance(verdicts: list[GpuJudgement], key: object = None, size: int = PAGE) -> Glance:
    """``verdicts`` summarised; ``key``: what they were judged from (None: not kept)."""
    if key is not None:
        with _LOCK:
            if key in _GLANCES:
                _GLANCES.move_to_end(key)
                return _GLANCES[key]
    made = Glance(summarise(verdicts), needing_action(verdicts)[:size], sorted({v.card for v in verdicts}))
    if key is not None:
        with _LOCK:
            _GLANCES[key] = made
            while len(_GLANCES) > _GLANCES_KEPT:
                _GLANCES.popitem(last=False)
    return made


@dataclass(frozen=True)
class HealthView:
    """What a health page shows: ``summary`` is None where every GPU fits one page (listed as before)."""

    summary: Summary | None
    action: list[GpuJudgement]  # the GPUs that need action, worst first, at most a page (shown with the summary)
    listing: Listing
    chosen: Filter
    cards: list[str] = field(default_factory=list)  # the card filter's choices

    @property
    def paged(self) -> bool:
        return self.summary is not None

    @property
    def filtered(self) -> bool:
        """Whether the page shows the filter's form (a fleet larger than a page, or a filter given in the URL)."""
        return self.paged or self.chosen.active


def health_view(
    verdicts: list[GpuJudgement], chosen: Filter, page: int = 1, size: int = PAGE, key: object = None
) -> HealthView:
    """``verdicts`` (worst first) as a page shows them: whole where they fit one page and nothing is filtered,
    else summarised (``key``: see ``glance``), with the page of those the filter keeps."""
    found = listing(verdicts, chosen, page, size)
    if len(verdicts) <= size:
        return HealthView(None, [], found, chosen, sorted({v.card for v in verdicts}))
    seen = glance(verdicts, key, size)
    action = seen.action if not chosen.active and found.page == 1 else []
    return HealthView(seen.summary, action, found, chosen, seen.cards)


def report_health(
    verdicts: list[GpuJudgement], key: object = None, size: int = PAGE
) -> tuple[Summary | None, list[GpuJudgement]]:
    """A report's fleet health: (None, every verdict) where they fit one page, else (the summary, the GPUs that
    need action, at most ``size`` of them): a report is not paged."""
    if len(verdicts) <= size:
        return None, verdicts
    seen = glance(verdicts, key, size)
    return seen.summary, seen.action
