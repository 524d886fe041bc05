"""Health verdicts, shared by the collector's ``health`` and the agent's ``check``: one rule for both.

A GPU's figure is judged against up to four references: the same model's other GPUs (their median), the GPU's
own history (the median of its measurements before the latest ``WINDOW``), its card's baseline (``schemas.baselines``:
what the model's healthy GPUs delivered elsewhere, so that a GPU is judged right from its first run), and an
absolute floor per GPU model (``floor_of``: a fraction of the datasheet, for models without a baseline). A measurement
fails a reference when it is more than that reference's threshold below it (below the floor itself for the floor):
peers and history use the figure's measured run-to-run spread (``threshold_from_spread``), never less than
``MIN_THRESHOLD``; a baseline its own spread between GPUs (``baseline_reference``).

Levels: ``ok``; ``suspect`` when the latest measurement fails but is not confirmed; ``slow`` when at least
``CONFIRM`` of the latest ``WINDOW`` measurements fail (several runs, or the agent measuring a failing figure
again before it reports); ``faulty`` when an error counter says the hardware is broken (``schemas.faults``);
``unknown`` when nothing could be compared. Exit codes follow Nagios and NHC (``EXIT_CODES``). The figures and
their floors are ``schemas.health_figures``; a whole GPU is judged by ``schemas.judgement.judge_gpu``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field

from .base import Answer, Label, Text
from .baselines import BaselineFigure, BaselineIndex, baseline_threshold, software_note
from .gpu_specs import match_spec, pcie_peak_gbps
from .health_figures import HEALTH_FIGURES, datasheet_figure, label, unit


class Level(str, Enum):
    ok = "ok"
    suspect = "suspect"
    slow = "slow"
    faulty = "faulty"
    unknown = "unknown"


#: What a job prolog, Slurm's HealthCheckProgram or node-problem-detector reads: 0 OK, 1 WARNING, 2 CRITICAL,
#: 3 UNKNOWN. A confirmed shortfall is critical: one slow GPU holds back every rank of a synchronous job.
EXIT_CODES = {Level.ok: 0, Level.suspect: 1, Level.slow: 2, Level.faulty: 2, Level.unknown: 3}
#: Worst first: a machine's level is the worst of its GPUs' (a critical one outranks an unknown one).
SEVERITY = (Level.faulty, Level.slow, Level.suspect, Level.unknown, Level.ok)

#: Measurements of a figure a verdict looks at, newest first, and how many of them must fail to confirm.
WINDOW = 3
CONFIRM = 2
#: Own-history measurements (before the window) needed for a history reference.
MIN_HISTORY = 3
#: Thresholds: spread-derived, within these bounds; the default where no spread has been measured yet.
MIN_THRESHOLD = 0.03
MAX_THRESHOLD = 0.30
DEFAULT_THRESHOLD = 0.05


def minimum_threshold(figure: str) -> float:
    """A figure's least threshold: its own (``HealthFigure.min_threshold``: h2d's dips, bf16's readings at the power
    limit), else ``MIN_THRESHOLD``."""
    own = HEALTH_FIGURES[figure].min_threshold if figure in HEALTH_FIGURES else None
    return MIN_THRESHOLD if own is None else own


#: A threshold is this many robust standard deviations (1.4826 MAD) of the run-to-run spread: with two of three
#: measurements required, a healthy GPU fails by chance about once in 10^5 verdicts.
SPREAD_SIGMAS = 3.0
#: Per-GPU histories needed before a pooled spread replaces the default, and measurements each.
SPREAD_MIN_GPUS = 1
SPREAD_MIN_RUNS = 4


def baseline_margin(figure: BaselineFigure) -> float:
    """How far below a baseline figure (a card's, or its siblings' as one) a GPU may measure: ``baseline_threshold``
    of its spreads, within the figure's least threshold and ``MAX_THRESHOLD``."""
    minimum = minimum_threshold(figure.figure)
    return baseline_threshold(figure, minimum=minimum, maximum=MAX_THRESHOLD, sigmas=SPREAD_SIGMAS)


def floor_of(
    figure: str, gpu_name: str, pcie_gen_max: int | None = None, pcie_width_max: int | None = None
) -> float | None:
    """The absolute floor of ``figure`` for a GPU the driver calls ``gpu_name`` (``HealthFigure.floor``); None for a
    model not bundled."""
    if figure not in HEALTH_FIGURES:
        return None
    datasheet = datasheet_figure(figure, match_spec(gpu_name), pcie_peak_gbps(pcie_gen_max, pcie_width_max))
    return datasheet * HEALTH_FIGURES[figure].floor[1] if datasheet else None


def median(values: Sequence[float]) -> float:
    """``statistics.median``, at a third of its cost: a fleet's verdicts take thousands of them."""
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2


def relative_spread(values: Sequence[float]) -> float | None:
    """One GPU's run-to-run spread of one figure (MAD over median), from its measurements; None with fewer than
    ``SPREAD_MIN_RUNS`` (or a median not above 0)."""
    if len(values) < SPREAD_MIN_RUNS:
        return None
    mid = median(values)
    return median([abs(v - mid) for v in values]) / mid if mid > 0 else None


def threshold_from_spreads(
    spreads: Sequence[float | None], default: float = DEFAULT_THRESHOLD, minimum: float = MIN_THRESHOLD
) -> float:
    """The threshold of one figure of one GPU model from its GPUs' spreads (``relative_spread``): ``SPREAD_SIGMAS``
    times their median, within ``minimum`` and ``MAX_THRESHOLD``; ``default`` (never under ``minimum``) without
    ``SPREAD_MIN_GPUS`` of them."""
    known = [s for s in spreads if s is not None]
    if len(known) < SPREAD_MIN_GPUS:
        return max(default, minimum)
    return min(MAX_THRESHOLD, max(minimum, SPREAD_SIGMAS * 1.4826 * median(known)))


def threshold_from_spread(
    histories: Sequence[Sequence[float]], default: float = DEFAULT_THRESHOLD, minimum: float = MIN_THRESHOLD
) -> float:
    """The threshold of one figure of one GPU model from its GPUs' histories (``threshold_from_spreads`` of each
    one's ``relative_spread``)."""
    return threshold_from_spreads([relative_spread(values) for values in histories], default, minimum)


ReferenceName = Literal["peers", "history", "baseline", "sibling", "floor"]
#: What each reference is called wherever people read which one judged a figure (``check``, the pages, the report).
REFERENCE_WORDS: dict[ReferenceName, str] = {
    "peers": "its peers",
    "history": "its own history",
    "baseline": "its card's baseline",
    "sibling": "its sibling cards",
    "floor": "its model's floor",
}


@dataclass(frozen=True, slots=True)
class Reference:
    name: ReferenceName
    value: float
    margin: float  # a measurement fails below value * (1 - margin)
    count: int = 0  # peers or history measurements the value is the median of; a baseline's GPUs; sibling cards
    detail: str = ""  # a baseline's description (its card, value, GPUs, runs, period); the siblings' shares
    cards: tuple[str, ...] = ()  # the sibling cards it stands on

    def fails(self, measured: float) -> bool:
        return measured < self.line

    @property
    def line(self) -> float:
        """Healthy down to this: a measurement below it fails the reference."""
        return self.value * (1 - self.margin)

    @property
    def text(self) -> str:
        if self.name == "peers":
            return f"its {self.count} peer{'s' if self.count != 1 else ''}' median"
        if self.name == "history":
            return f"its own median over {self.count} earlier runs"
        if self.name == "baseline":
            return f"the {self.detail}"
        if self.name == "sibling":
            return f"its sibling cards' {self.value:,.0f} ({self.detail})"
        return "its model's floor"


def baseline_summary(
    baselines: BaselineIndex,
    card: str,
    default_card: str | None,
    suite: str,
    held: Sequence[Reference] = (),
    judged: bool = False,
) -> str:
    """What a GPU of ``card`` is held against besides peers and history, for its verdict: its card's baseline (the
    bundle it comes from, on how many GPUs), or that there is none and whether its sibling cards or its model's floor
    (among ``held``, the references its figures were held against; ``judged``: any figure was) remain."""
    entries = [baselines.lookup(card, default_card, f, suite)[0] for f in HEALTH_FIGURES]
    found = [e for e in entries if e is not None]
    if not found:
        none = f"no baseline of the {suite} suite for {card}"
        names = {r.name for r in held}
        if "sibling" in names:
            cards = sorted({c for r in held if r.name == "sibling" for c in r.cards})
            return f"{none}: held against its sibling cards ({', '.join(cards)}), scaled by the datasheet"
        if "floor" in names:
            return (
                f"{none}, nor a measured sibling card of its architecture at its power limit: held against its "
                "model's floor"
            )
        return f"{none}, and no floor for its model" if judged else none
    e = max(found, key=lambda x: x.figure.gpus)
    gpus = f"{e.figure.gpus} GPU{'s' if e.figure.gpus != 1 else ''}"
    runs = f"{e.figure.runs} runs"
    return f"held against the {e.card} baseline {e.bundle!r} ({e.origin}, {e.bundle_id}): {gpus}, {runs}, {e.period}"


def baseline_reference(
    baselines: BaselineIndex,
    figure: str,
    card: str,
    default_card: str | None,
    suite: str,
    software: Mapping[str, str | None],
) -> tuple[Reference | None, str | None]:
    """The baseline a GPU of ``card`` is held against for ``figure`` (or, with its power limit lowered, the one of its
    card at the default limit: ``default_card``), and a note where the comparison needs one (that power limit,
    software releases the figure depends on that the baseline was not measured with)."""
    entry, at_default = baselines.lookup(card, default_card, figure, suite)
    if entry is None:
        return None, None
    margin = baseline_margin(entry.figure)
    notes = []
    if at_default:
        notes.append("its power limit is below the default; held against its card at the default limit")
    differ = software_note(figure, entry.software, dict(software))
    if differ:
        notes.append(differ)
    reference = Reference("baseline", entry.figure.value, margin, entry.figure.gpus, entry.description)
    return reference, "; ".join(notes) or None


@dataclass(frozen=True, slots=True)
class FigureJudgement:
    figure: str
    level: Level  # ok, suspect, slow or unknown (no reference)
    value: float
    references: tuple[Reference, ...]
    threshold: float
    failing: int  # of the latest ``window`` measurements, how many failed a reference
    window: int
    note: str | None = None  # what to know about a comparison (a baseline of other software, another power limit)

    @property
    def shortfall(self) -> tuple[Reference, float] | None:
        """The reference the latest measurement falls furthest below, and by how much (0.2: 20 %)."""
        failed = [(r, 1 - self.value / r.value) for r in self.references if r.fails(self.value)]
        return max(failed, key=lambda item: item[1]) if failed else None

    def ratio(self, name: ReferenceName) -> float | None:
        ref = next((r for r in self.references if r.name == name), None)
        return self.value / ref.value if ref and ref.value else None

    @property
    def held_to(self) -> Reference | None:
        """The reference that judged it: the one it falls furthest below, else the tightest (the highest line)."""
        worst = self.shortfall
        if worst is not None:
            return worst[0]
        return max(self.references, key=lambda r: r.line, default=None)

    @property
    def reason(self) -> str | None:
        worst = self.shortfall
        if worst is None:
            return None
        ref, by = worst
        name, units = label(self.figure), unit(self.figure)
        how = (
            f"in {self.failing} of its last {self.window} measurements"
            if self.level is Level.slow
            else "in its latest measurement only"
        )
        note = f"; {self.note}" if self.note else ""
        if ref.name == "sibling":  # what it stands on last: a drain reason keeps the first 200 characters
            line = f"{name} {self.value:,.0f} {units} is {by:.0%} below its sibling cards' {ref.value:,.0f}"
            return f"{line} (threshold {ref.margin:.0%}), {how}{note}; siblings: {ref.detail}"
        if ref.name == "baseline":  # its value is in its text
            within = f"threshold {ref.margin:.0%}"
            return f"{name} {self.value:,.0f} {units} is {by:.0%} below {ref.text} ({within}), {how}{note}"
        margin = "" if ref.name == "floor" else f" (threshold {self.threshold:.0%})"
        return f"{name} {self.value:,.0f} {units} is {by:.0%} below {ref.text} {ref.value:,.0f}{margin}, {how}{note}"


def judge(
    figure: str,
    measurements: Sequence[float],
    *,
    peers: tuple[float, int] | None = None,
    floor: float | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    baseline: Reference | None = None,
    note: str | None = None,
) -> FigureJudgement:
    """Judge one figure of one GPU from its measurements (newest first; at least one), the median of its peers'
    latest values with their count, its card's baseline (``baseline_reference``) and its model's floor."""
    history = list(measurements[WINDOW:])
    refs: list[Reference] = []
    if peers is not None and peers[1] > 0:
        refs.append(Reference("peers", peers[0], threshold, peers[1]))
    if len(history) >= MIN_HISTORY:
        refs.append(Reference("history", median(history), threshold, len(history)))
    if baseline is not None:
        refs.append(baseline)
    if floor is not None:
        refs.append(Reference("floor", floor, 0.0))
    window = list(measurements[:WINDOW])
    top = max((r.line for r in refs), default=None)  # a measurement fails some reference when it is below this
    failing = 0 if top is None else sum(v < top for v in window)
    if top is None:
        level = Level.unknown
    elif not window[0] < top:
        level = Level.ok
    else:
        level = Level.slow if failing >= CONFIRM else Level.suspect
    return FigureJudgement(figure, level, window[0], tuple(refs), threshold, failing, len(window),
                           note if baseline is not None else None)  # fmt: skip


def worst(levels: Sequence[Level]) -> Level:
    """The most severe of ``levels`` (``unknown`` for none)."""
    return min(levels, key=SEVERITY.index) if levels else Level.unknown


def gpu_level(faults: Sequence[str], judgements: Sequence[FigureJudgement]) -> Level:
    """A GPU's level: faulty on any fault, else the worst of its figures that could be compared (a figure
    with no reference does not hide the others' ``ok``); unknown when none could."""
    if faults:
        return Level.faulty
    return worst([j.level for j in judgements if j.level is not Level.unknown])


class FigureVerdict(Answer):
    """One figure of one GPU as judged: its latest value and the references it was held against."""

    figure: Label
    level: Level
    value: Annotated[float, Field(ge=0)]
    unit: Label
    peers: Annotated[float, Field(ge=0)] | None = None
    peer_count: Annotated[int, Field(ge=0)] = 0
    history: Annotated[float, Field(ge=0)] | None = None
    baseline: Annotated[float, Field(ge=0)] | None = None
    baseline_threshold: Annotated[float, Field(ge=0, le=1)] | None = None
    baseline_of: Text | None = None  # the baseline's card, GPUs, runs and period; the siblings' shares
    #: Whose the baseline above is: the card's own, or its sibling cards' share scaled by its datasheet.
    baseline_kind: Literal["baseline", "sibling"] | None = None
    floor: Annotated[float, Field(ge=0)] | None = None
    threshold: Annotated[float, Field(ge=0, le=1)]
    failing: Annotated[int, Field(ge=0)]
    window: Annotated[int, Field(ge=0)]
    reason: Text | None = None
    note: Text | None = None
    #: The reference that judged it (``FigureJudgement.held_to``) and its line: healthy down to this value.
    held_to: ReferenceName | None = None
    healthy_down_to: Annotated[float, Field(ge=0)] | None = None


class GpuVerdict(Answer):
    """One GPU's verdict, as the collector's ``/api/v1/verdicts`` answers and ``flopfleet-agent check --json``
    prints it."""

    uuid: Label | None = None
    gpu_index: Annotated[int, Field(ge=0)] | None = None
    gpu_model: Label
    card: Label | None = None
    host: Label
    level: Level
    reasons: tuple[Text, ...] = ()
    run_id: Label | None = None
    judged_by: Literal["collector", "agent"]
    figures: tuple[FigureVerdict, ...] = ()
    #: What its figures were held against beyond peers and history: its card's baseline, or why there was none.
    baseline: Text | None = None


def figure_verdict(j: FigureJudgement) -> FigureVerdict:
    """The wire form of a judgement."""
    refs = {r.name: r for r in j.references}
    base = refs.get("baseline") or refs.get("sibling")
    held = j.held_to
    return FigureVerdict(
        figure=j.figure,
        level=j.level,
        value=j.value,
        unit=unit(j.figure) or "?",
        peers=refs["peers"].value if "peers" in refs else None,
        peer_count=refs["peers"].count if "peers" in refs else 0,
        history=refs["history"].value if "history" in refs else None,
        baseline=base.value if base else None,
        baseline_threshold=base.margin if base else None,
        baseline_of=base.detail if base else None,
        baseline_kind=base.name if base and base.name in ("baseline", "sibling") else None,
        floor=refs["floor"].value if "floor" in refs else None,
        threshold=j.threshold,
        failing=j.failing,
        window=j.window,
        reason=j.reason,
        note=j.note,
        held_to=held.name if held else None,
        healthy_down_to=held.line if held else None,
    )
