"""The health figures, defined once: what people read, which results make each one, and how a verdict holds it.

Both sides read this table. The collector turns each row into its SQL figure definition (``collector.figures``,
the ``figure_definitions`` table joined against new results), and the agent picks a run's values with the same rows
in Python (``figure_values``), so ``check`` judging a machine alone reads the numbers the fleet's verdicts read.
A figure is the best trusted value of a run's results that match its benchmark and params, per GPU. Adding or
changing a health figure is one row here (and, for a new one, a benchmark in the agent's ``health`` suite).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

from .gpu_specs import GpuSpec
from .results import Flag

#: Flags that keep a result out of every figure, health or not (the collector's ``figures.TRUSTED`` is built from
#: them): a measurement error, wrong numerics, a window the host starved (a busy host's figure, not the device's).
UNTRUSTED_FLAGS = frozenset({"above_peak", "wrong_result", "starved"})
#: The flags a trusted result may carry: every flag this version knows but those. A flag it does not know (a newer
#: agent's, stored as sent: docs/contract.md) keeps a result out too, since nothing here says it may be trusted.
TRUSTABLE_FLAGS = frozenset(get_args(Flag)) - UNTRUSTED_FLAGS
#: Flags that keep a GPU's whole run out of every baseline (``collector/store/fleet_reads.py``): any result
#: untrusted, measured beside another process on the GPU (busy) or while the GPU slowed (throttled). A baseline is
#: built from healthy conditions only.
UNHEALTHY_FLAGS = UNTRUSTED_FLAGS | {"busy", "throttled"}
#: A GPU's run whose windows waited for a CPU a median of this share of their time (each result's
#: ``timing.host_wait``) was measured on a loaded host, and stays out of every baseline too, flagged or not: every run
#: the project measured beside 24 busy processes read 0.49-0.50 and every quiet one under 0.05, and a loaded host can
#: move a figure no flag names (the H100's short BERT layer cells read up to 13.5 % slow, unflagged, before graphs were
#: sized on the device: docs/results/h100.md, calls 25-27). A baseline is what a quiet host measures.
LOADED_HOST_WAIT = 0.25

#: Where a floor comes from: a dtype's dense peak (``GpuSpec.peak_tflops``), memory bandwidth, or the PCIe link's
#: peak at the card's maximum generation and width.
FloorSource = Literal["bf16", "fp16", "fp32", "bandwidth", "pcie"]


@dataclass(frozen=True)
class HealthFigure:
    """One figure verdicts read: its name and words, which results make it, its floor and how ``check`` measures
    it again."""

    key: str
    #: How pages, the report, reasons and ``check`` spell it.
    label: str
    unit: Literal["TFLOPS", "GB/s"]
    #: A measurement fails when it is below its references (``schemas.verdicts``): every health figure is one where
    #: more is better. A figure where less is better would need that rule to change first.
    better: Literal["higher"]
    #: The results' ``benchmark``, and the params they must have, equal (each one of ``collector.figures.MATCHED``).
    benchmark: str
    match: Mapping[str, str | bool | int]
    #: The metric whose best over the matching results of a run and GPU is the figure.
    metric: Literal["tflops", "gbps"]
    #: The floor for its model: a fraction of a datasheet figure (``verdicts.floor_of``).
    floor: tuple[FloorSource, float]
    #: The health profile's benchmark that measures it (``agent.harness.suites.HEALTH``): what ``check`` runs again.
    measured_by: str
    #: Digits people see.
    digits: int = 1
    #: Its own least threshold, where its healthy runs dip further than their spread says (else the rule's): the
    #: spreads are medians of absolute deviations, which do not see a tail of readings.
    min_threshold: float | None = None

    def selects(self, result: object) -> bool:
        """Whether ``result`` is of this figure (trusted or not): its benchmark and every matched param, equal."""
        if getattr(result, "benchmark", None) != self.benchmark:
            return False
        params = getattr(result, "params", None)
        return all(getattr(params, name, None) == value for name, value in self.match.items())


#: The health figures, in the order pages show them. Their floors sit well under every healthy card measured: bf16
#: matmul 68-71 % of its dense peak on the H200 (docs/results/h200.md), fp16 51-76 % in the transformers-benchmarks
#: table; memory 79-93 % there, 88-91 % on the H200; BERT-large fwd+bwd 39-51 % of the fp16 peak there, 48 % on the
#: H200; pinned transfers 87-88 % of the link on the H200. A GPU under its floor has lost about half of what its
#: model delivers.
HEALTH_FIGURES: dict[str, HealthFigure] = {
    f.key: f
    for f in (
        # The best product of any size: on the H200 the health profile's 8192^3, held at the 700 W limit, where
        # healthy GPUs differ by how much work a watt buys them (0.91 % between 13 of them, docs/baselines.md). At
        # that limit one GPU's readings move too, where each GPU's median spread says 0.14 %: healthy H100 checks
        # read it 5.3-6.4 % below the other GPUs' baseline in 3 of 56, two in a row on one GPU (a confirmed `slow`
        # at the spreads' 4.8 %), 4 of 18 more than 3 % below the GPU's own other runs (docs/baselines.md, "Every
        # healthy run"), hence 8 %. A GPU-wide slowdown is caught by the figures at full clock, at 3 %.
        HealthFigure("matmul_bf16", "BF16 matmul", "TFLOPS", "higher", "matmul", {"dtype": "bf16"}, "tflops",
                     ("bf16", 0.35), "matmul", min_threshold=0.08),
        # A product that runs at full clock, under the power limit (4096^3 in fp32 on the H200: a median SM clock of
        # 1965-1980 MHz of 1980 in every healthy check; bf16 at 2048^3, replayed back to back, met the limit and fell to
        # 345 MHz, docs/results/h200.md): the GPU's work rate apart from its power efficiency, 51.2-51.4 TFLOPS on 15
        # H200s, so a GPU that does less work is told apart from one whose watts buy less.
        HealthFigure("matmul_fp32_4096", "FP32 matmul n=4096", "TFLOPS", "higher", "matmul",
                     {"dtype": "fp32", "n": 4096}, "tflops", ("fp32", 0.35), "matmul"),
        # Any kernel (a*1.2, copy, triad): the best of them.
        HealthFigure("memory", "memory", "GB/s", "higher", "bandwidth", {}, "gbps", ("bandwidth", 0.55), "bandwidth",
                     digits=0),
        # Pinned transfers on the H200 ended 2.6-5.8 % below their median in 4 of 23 healthy checks and dipped once
        # in 2 more, which a 3 % threshold confirmed once as "slow" (docs/results/h200.md), hence 10 %. A link that
        # degrades halves the figure and is a fault of its own (``faults.counter_faults``).
        HealthFigure("h2d", "Host to device (pinned)", "GB/s", "higher", "transfer",
                     {"direction": "h2d", "pinned": True}, "gbps", ("pcie", 0.45), "transfer", min_threshold=0.10),
        # SDPA attention, as the agent runs it by default; transformers' layer or the plain-torch one (the health
        # profile's: the same computation, benchmarks/bert_torch.py).
        HealthFigure("bert_fwdbwd", "BERT layer fwd+bwd", "TFLOPS", "higher", "layer",
                     {"block": "bert_layer", "mode": "fwd+bwd", "dtype": "fp16", "attn_implementation": "sdpa"},
                     "tflops", ("fp16", 0.20), "layer_bert_torch"),
    )
}  # fmt: skip


def label(key: str) -> str:
    """How people read a health figure's name (its key, for a figure that is not one)."""
    figure = HEALTH_FIGURES.get(key)
    return figure.label if figure else key


def unit(key: str) -> str:
    figure = HEALTH_FIGURES.get(key)
    return figure.unit if figure else ""


def trusted(result: object) -> bool:
    """Whether a result may make a figure: ok, and every flag one of ``TRUSTABLE_FLAGS``."""
    return getattr(result, "status", None) == "ok" and set(getattr(result, "flags", ()) or ()) <= TRUSTABLE_FLAGS


def health_figure(result: object) -> str | None:
    """Which health figure a result measures, if any."""
    return next((f.key for f in HEALTH_FIGURES.values() if f.selects(result)), None)


def figure_values(results: Sequence[object]) -> dict[tuple[int | None, str], float]:
    """(GPU index, health figure) -> the best trusted value of a run's results: what the collector's definitions of
    the same rows compute in SQL."""
    best: dict[tuple[int | None, str], float] = {}
    for r in results:
        if not trusted(r):
            continue
        for figure in HEALTH_FIGURES.values():
            value = getattr(getattr(r, "metrics", None), figure.metric, None)
            if figure.selects(r) and isinstance(value, (int, float)) and not isinstance(value, bool):
                key = (getattr(r, "gpu_index", None), figure.key)
                best[key] = max(best.get(key, float(value)), float(value))
    return best


def datasheet_figure(key: str, spec: GpuSpec | None, link_gbps: float | None) -> float | None:
    """The datasheet figure a health figure depends on (its floor's source) for a card of ``spec``: a dtype's dense
    peak, the memory bandwidth, or the PCIe link's peak (``link_gbps``); None where it is not known."""
    figure = HEALTH_FIGURES.get(key)
    if figure is None:
        return None
    source = figure.floor[0]
    if source == "pcie":
        return link_gbps or None
    if spec is None:
        return None
    value = spec.bandwidth_gbps if source == "bandwidth" else spec.peak_tflops(source)
    return value or None
