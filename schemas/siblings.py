"""A card with no baseline of its own, held against what its measured siblings deliver.

A baseline is measured per card, so a lone card of another model (a new fleet's first H100s, an L40S, a B200 box) has
none, and its figures were held only against floors at about half of a healthy card. But each health figure depends
on one datasheet figure (``health_figures.datasheet_figure``: the memory bandwidth for a copy, the fp32 peak for an fp32
product, the fp16 peak for a BERT layer, the PCIe link for a pinned transfer), and cards of one architecture at one
power limit deliver about the same share of it. So such a card is held against its siblings' share of their datasheet
figure times its own, with a threshold from how far the siblings' shares differ from each other (``baseline_threshold``
over the sibling cards as over a baseline's GPUs: with one sibling, the one-GPU default). Not across architectures or
power limits (a PCIe card runs at another limit than its SXM sibling): there the floor stays, and the verdict says why.
How well it holds, each card judged by the others alone: docs/baselines.md, "Siblings" (benchmarks/sibling_cards.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .baselines import BaselineEntry, BaselineFigure, BaselineIndex, card_power_w
from .gpu_specs import GpuSpec, match_spec, pcie_peak_gbps
from .health_figures import datasheet_figure
from .verdicts import Reference, baseline_margin, median


@dataclass(frozen=True)
class Sibling:
    """A sibling card's baseline of one figure, and its share of the datasheet figure it depends on."""

    entry: BaselineEntry
    share: float


def sibling_link_gbps(spec: GpuSpec) -> float | None:
    """A sibling card's host link by its datasheet (x16 lanes), which its pinned transfers are a share of."""
    return pcie_peak_gbps(spec.pcie_gen, 16)


def siblings_of(
    index: BaselineIndex, figure: str, suite: str, spec: GpuSpec, power_w: float, own: tuple[str | None, ...]
) -> list[Sibling]:
    """The baselined cards of ``spec``'s architecture at ``power_w`` (other than ``own``), each with its share of
    its datasheet figure for ``figure`` in ``suite``."""
    found = []
    for card in sorted(index.cards()):
        if card in own or card_power_w(card) != power_w:
            continue
        entry, _ = index.lookup(card, None, figure, suite)
        their = match_spec(entry.gpu_name) if entry is not None and entry.gpu_name else None
        if entry is None or their is None or their.architecture != spec.architecture:
            continue
        datasheet = datasheet_figure(figure, their, sibling_link_gbps(their))
        if datasheet:
            found.append(Sibling(entry, entry.figure.value / datasheet))
    return found


def sibling_reference(
    index: BaselineIndex,
    figure: str,
    suite: str,
    gpu_name: str,
    own: tuple[str | None, ...],
    power_w: float | None,
    link_gbps: float | None,
) -> Reference | None:
    """What a GPU called ``gpu_name``, whose cards ``own`` have no baseline of ``figure``, is held against: its
    siblings' median share times its own datasheet figure (``link_gbps``: its PCIe link's peak), or None (no
    datasheet, no power limit, no sibling)."""
    spec = match_spec(gpu_name)
    datasheet = datasheet_figure(figure, spec, link_gbps)
    if spec is None or not spec.architecture or power_w is None or not datasheet:
        return None
    found = siblings_of(index, figure, suite, spec, power_w, own)
    if not found:
        return None
    shares = sorted(s.share for s in found)
    share = median(shares)
    between = median([abs(s - share) for s in shares]) / share if len(shares) >= 2 else None
    # A GPU of this card differs from its card's value as a sibling's GPUs differ from theirs.
    within = max(math.hypot(s.entry.figure.between_gpus or 0.0, s.entry.figure.within_gpu or 0.0) for s in found)
    spread = BaselineFigure(figure=figure, unit=found[0].entry.figure.unit, value=share * datasheet,
                            between_gpus=between, within_gpu=within, gpus=len(found))  # fmt: skip
    margin = baseline_margin(spread)
    names = " and ".join(f"{s.entry.card} ({s.share:.1%})" if len(found) > 1 else s.entry.card for s in found)
    gpus = sum(s.entry.figure.gpus for s in found)
    detail = f"{share:.1%} of the datasheet's {datasheet:,.0f}, as on {names}, {gpus} GPU{'s' if gpus != 1 else ''}"
    return Reference("sibling", share * datasheet, margin, len(found), detail, tuple(s.entry.card for s in found))
