"""Baselines in the formats of the tools fleets already run, for the figures that honestly map onto theirs
(docs/baselines.md has the mapping and its sources).

- **SuperBench** (``sb result diagnosis --baseline-file B --rule-file R``): per card, a flat JSON of metric ->
  value (keys without ``:rank``, sorted, indented by 2, as ``sb result generate-baseline`` writes it) and a
  diagnosis rule file with one ``variance`` rule per metric, ``lambda x:x<-t``: t is the threshold flopfleet's own
  verdicts use against the same baseline, so both tools fail the same GPUs. Mapped: the health suite's bf16 matmul
  at 8192³ (cuBLAS) onto ``cublaslt-gemm/bf16_0_8192_8192_8192_flops`` (TFLOPS; its FLOP count m·n·(2k−1) differs
  from our 2mnk by 0.006 %), pinned host-to-device and device-to-host onto ``mem-bw/h2d_bw`` and ``d2h_bw`` (GB/s,
  pinned, 10^9). Not mapped: memory bandwidth (``mem-bw/d2d_bw`` is a 32 MB memcpy, not an HBM stream, and
  ``gpu-stream`` names embed a GPU id and buffer size), the BERT layer (SuperBench's BERT figures are samples/s of
  a whole model), ``gemm-flops`` (CUTLASS with an SM80 kernel at 16384³: another library and size).
- **Azure HPC node health checks** (``run-health-checks.sh -e FILE``): ``check_gpu_bw FLOOR``, one floor in GB/s
  for both host-to-device and device-to-host (it fails below it, warns under 1.05x): the lower of the two
  directions' value less its flopfleet threshold. Nothing else maps: AzNHC has no GEMM or HBM bandwidth check
  (its second argument is GPU-to-GPU NVLink bandwidth, which this baseline does not hold).
"""

from __future__ import annotations

import json
import re

from schemas.baselines import BaselineBundle, BaselineFigure, CardBaseline
from schemas.verdicts import baseline_margin

from ..store.errors import CollectorError

#: flopfleet figure -> (SuperBench metric, the suites whose figure is that measurement).
SUPERBENCH_METRICS = {
    "matmul_bf16": ("cublaslt-gemm/bf16_0_8192_8192_8192_flops", ("health",)),
    "h2d": ("mem-bw/h2d_bw", ("health", "standard")),
    "d2h": ("mem-bw/d2h_bw", ("health", "standard")),
}
RULES_VERSION = "v0.12"


def threshold(figure: BaselineFigure) -> float:
    """The threshold flopfleet's verdicts hold a GPU to against this baseline figure."""
    return baseline_margin(figure)


def _slug(card: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", card).strip("_")


def _mapped(card: CardBaseline, table: dict[str, tuple[str, tuple[str, ...]]]) -> dict[str, BaselineFigure]:
    return {f.figure: f for f in card.figures if f.figure in table and card.suite in table[f.figure][1]}


def superbench(bundle: BaselineBundle) -> dict[str, str]:
    """Per card: ``<card>.baseline.json`` and ``<card>.rules.yaml``; the health suite's figures over the
    standard's where both have one."""
    chosen: dict[str, dict[str, BaselineFigure]] = {}
    for card in sorted(bundle.cards, key=lambda c: c.suite != "health"):
        if card.kind != "measured":
            continue
        for key, f in _mapped(card, SUPERBENCH_METRICS).items():
            chosen.setdefault(card.card, {}).setdefault(key, f)
    if not chosen:
        raise CollectorError("none of this baseline's figures maps onto a SuperBench metric (bf16 matmul of the health "
                             "suite, pinned host-to-device or device-to-host transfers)")  # fmt: skip
    files = {}
    for name, figures in sorted(chosen.items()):
        values = {SUPERBENCH_METRICS[k][0]: round(f.value, 4) for k, f in figures.items()}
        files[f"{_slug(name)}.baseline.json"] = json.dumps(values, indent=2, sort_keys=True) + "\n"
        lines = [
            f"# SuperBench diagnosis rules for {name}, from flopfleet baseline {bundle.name!r} ({bundle.id}).",
            "# A metric fails when it is further below its baseline than flopfleet's threshold for it (the baseline's",
            "# spreads, widened for few GPUs, never under the figure's least threshold; 10 % without them).",
            f"version: {RULES_VERSION}",
            "superbench:",
            "  rules:",
        ]
        for key, f in sorted(figures.items()):
            metric = SUPERBENCH_METRICS[key][0]
            benchmark, metric_name = metric.split("/", 1)
            lines += [
                f"    flopfleet_{key}:",
                "      function: variance",
                f"      criteria: 'lambda x:x<-{threshold(f):.4f}'",
                "      categories: flopfleet",
                "      metrics:",
                f"        - {benchmark}/{re.escape(metric_name)}(:\\d+)?$",
            ]
        for benchmark in sorted({SUPERBENCH_METRICS[k][0].split("/")[0] for k in figures}):
            lines += [f"    {benchmark.replace('-', '_')}_failure:", "      function: value",
                      "      criteria: 'lambda x:x>0'", "      categories: FailedTest", "      metrics:",
                      f"        - {benchmark}/return_code"]  # fmt: skip
        files[f"{_slug(name)}.rules.yaml"] = "\n".join(lines) + "\n"
    return files


def azure_nhc(bundle: BaselineBundle) -> dict[str, str]:
    """Per card with pinned transfer baselines, ``<card>.conf``: a ``check_gpu_bw`` line (the health suite's
    figures over the standard's)."""
    files = {}
    for card in sorted(bundle.cards, key=lambda c: (c.card, c.suite != "health")):
        figures = {f.figure: f for f in card.figures if f.figure in ("h2d", "d2h")}
        name = f"{_slug(card.card)}.conf"
        if card.kind != "measured" or not figures or name in files:
            continue
        floor = min(f.value * (1 - threshold(f)) for f in figures.values())
        shown = ", ".join(f"{k} {f.value:.1f} GB/s ({f.gpus} GPU, {f.runs} runs)" for k, f in sorted(figures.items()))
        files[name] = "\n".join([
            f"# Azure HPC node health checks (AzNHC) for {card.card}, from flopfleet baseline {bundle.name!r} "
            f"({bundle.id}), {card.suite} suite: {shown}.",
            "# check_gpu_bw fails a GPU whose pinned host<->device bandwidth is below its argument (GB/s): the lower",
            "# direction's baseline less flopfleet's threshold for it. Append with run-health-checks.sh -e FILE.",
            f" * || check_gpu_bw {floor:.1f}",
        ]) + "\n"  # fmt: skip
    if not files:
        raise CollectorError("this baseline has no pinned host-to-device or device-to-host figure for check_gpu_bw")
    return files
