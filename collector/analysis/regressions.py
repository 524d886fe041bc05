"""Regressions: the same GPU model across software versions (torch, CUDA, driver).

Each version's sample is its devices' latest values of a figure under it (``Reads.version_figures``). A change is
called faster or slower only when the ratio of medians and the measured noise agree (asv's rule): the
medians differ by more than ``MIN_CHANGE`` and by more than either version's own spread, and the two versions'
ranges do not overlap. Anything else is "no change (within noise)".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from ..store.figures import BY_KEY

MIN_CHANGE = 0.02
#: The figures compared, as the named query ``Reads.version_figures`` takes them.
FIGURE_KEYS = ["matmul_bf16", "matmul_fp16", "matmul_tf32", "memory", "bert_fwdbwd", "gpt2_fwdbwd"]
#: label -> figure, each labelled as its definition spells it.
REGRESSION_METRICS = tuple((BY_KEY[key].label, key) for key in FIGURE_KEYS)


@dataclass(frozen=True)
class Change:
    gpu_model: str
    metric: str
    before: str  # software version label
    after: str
    before_median: float
    after_median: float
    ratio: float
    noise: float
    verdict: str  # faster | slower | no change (within noise)
    samples: tuple[int, int]


def _version(torch: object, cuda: object, driver: object) -> str:
    return f"torch {torch or '?'}, CUDA {cuda or '?'}, driver {driver or '?'}"


def _noise(values: list[float]) -> float:
    med = statistics.median(values)
    return (max(values) - min(values)) / med if med and len(values) > 1 else 0.0


def regressions(rows: list[tuple[Any, ...]]) -> list[Change]:
    """Every consecutive pair of software versions per GPU model and metric, oldest first, from
    (model, figure, torch, cuda, driver, first seen, values) rows."""
    labels = dict((figure, label) for label, figure in REGRESSION_METRICS)
    rows = [(m, labels[f], *rest) for m, f, *rest in rows]
    rows.sort(key=lambda r: (r[0], r[1], r[5]))
    changes = []
    for i in range(1, len(rows)):
        prev, cur = rows[i - 1], rows[i]
        if (prev[0], prev[1]) != (cur[0], cur[1]):
            continue
        a, b = [float(x) for x in prev[6]], [float(x) for x in cur[6]]
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = mb / ma
        noise = max(_noise(a), _noise(b))
        separated = min(b) > max(a) or max(b) < min(a)
        if abs(ratio - 1) > max(MIN_CHANGE, noise) and separated:
            verdict = "faster" if ratio > 1 else "slower"
        else:
            verdict = "no change (within noise)"
        changes.append(
            Change(
                cur[0],
                cur[1],
                _version(*prev[2:5]),
                _version(*cur[2:5]),
                ma,
                mb,
                ratio,
                noise,
                verdict,
                (len(a), len(b)),
            )
        )
    return changes
