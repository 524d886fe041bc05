"""Per-GPU Prometheus metrics, rendered from the ``fleet_metrics`` view (exposition format, as the collector's own).

One series per GPU and figure, verdict and counter, labelled with the GPU's UUID, model, card and host, so that a
fleet's dashboards and alerts (``deploy/prometheus/``, ``deploy/grafana/``) can select a model, a host or one GPU.
A counter the GPU does not report has no series: absent, never 0.

The text is written here directly, byte for byte as ``prometheus_client.generate_latest`` writes it (labels in name
order, its escaping and number format): building its metric objects first took 3–4 s a scrape at 10,000 GPUs
(about 230,000 series), longer than the verdicts themselves (docs/results/collector.md, "/metrics at 10,000 GPUs").
Each GPU's lines are kept (``GpuExposition``) and written again only when its verdict, counters or per-watt figures
are other objects than at the last scrape: the verdicts are kept the same way (``read.verdicts``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from operator import itemgetter
from typing import Any

from prometheus_client.utils import floatToGoString

from schemas.health_figures import unit
from schemas.judgement import GpuJudgement
from schemas.labels import PER_WATT_SUFFIX, PER_WATT_UNITS

from ..analysis.health import FleetMetrics

GPU_LABELS = ("uuid", "gpu_model", "card", "host")


class EscapedLabels(dict[str, str]):
    """Label values escaped for the text format (backslash, newline, quote), each once per scrape."""

    def __missing__(self, value: str) -> str:
        escaped = self[value] = value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
        return escaped


class Family:
    """One gauge's HELP and TYPE lines and its samples, each a line in the text format."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        help_text = documentation.replace("\\", r"\\").replace("\n", r"\n")
        self.head = f"# HELP {name} {help_text}\n# TYPE {name} gauge\n"
        order = sorted(range(len(labels)), key=lambda i: labels[i])  # the text format writes labels by name
        self._ordered = itemgetter(*order) if len(order) > 1 else lambda values: (values[order[0]],)
        self._line = name + "{" + ",".join(f'{labels[i]}="%s"' for i in order) + "} %s\n"
        self.lines: list[str] = []

    def line(self, values: Sequence[str], value: float) -> str:
        """A sample's line: ``values`` escaped and in the order of the family's labels."""
        return self._line % (*self._ordered(values), floatToGoString(value))

    def add(self, values: Sequence[str], value: float) -> None:
        self.lines.append(self.line(values, value))

    def text(self) -> str:
        return self.head + "".join(self.lines)


#: The per-GPU gauges, in the order they are written: (name, help, labels beyond ``GPU_LABELS``).
FAMILIES = (
    ("flopfleet_gpu_figure", "A GPU's latest value of a figure (unit in the label)", ("figure", "unit")),
    ("flopfleet_gpu_figure_per_watt",
     "A GPU's latest health figure over the board's mean power while it was measured (unit in the label)",
     ("figure", "unit")),
    ("flopfleet_gpu_peer_ratio", "A GPU's figure over the median of the same model's other GPUs", ("figure",)),
    ("flopfleet_gpu_baseline_ratio", "A GPU's figure over its card's baseline (the baseline's GPU count in the label)",
     ("figure", "baseline_gpus")),
    ("flopfleet_gpu_verdict", "1 for a GPU's current verdict (ok, suspect, slow, faulty, unknown)", ("verdict",)),
    ("flopfleet_gpu_slow_by_ratio", "How far a slow or suspect GPU's worst figure is below its reference (0.2: 20 %)",
     ()),
    ("flopfleet_gpu_last_run_timestamp_seconds", "Start of the GPU's latest run (Unix time)", ()),
    ("flopfleet_gpu_error_counter",
     "A GPU's error counter as its latest run ended (booleans as 0/1); absent where the GPU does not report it",
     ("counter",)),
    ("flopfleet_gpu_xid_events", "XID errors the driver reported during the GPU's latest run", ()),
)  # fmt: skip
Row = tuple[Any, ...]


class GpuExposition:
    """The per-GPU metrics of one store's fleet, each GPU's lines kept between scrapes: a GPU whose verdict,
    counters and per-watt figures are the objects of the last scrape is not written again."""

    def __init__(self) -> None:
        self.families = [Family(name, text, [*GPU_LABELS, *more]) for name, text, more in FAMILIES]
        self._kept: dict[str, tuple[GpuJudgement, object, object, tuple[bytes, ...]]] = {}
        self._body: tuple[list[str], bytes] | None = None
        self._lock = threading.Lock()
        #: GPUs whose lines the last ``render`` wrote (the rest were kept).
        self.written = 0

    def render(self, data: FleetMetrics) -> bytes:
        """The per-GPU metrics in Prometheus' text format."""
        with self._lock:
            return self._render(data)

    def _render(self, data: FleetMetrics) -> bytes:
        esc = EscapedLabels()
        kept: dict[str, tuple[GpuJudgement, object, object, tuple[bytes, ...]]] = {}
        self.written = 0
        for v in data.verdicts:
            device = v.device
            counters, per_watt = data.counters.get(device), data.per_watt.get(device)
            old = self._kept.get(device)
            if old is not None and old[0] is v and old[1] is counters and old[2] is per_watt:
                kept[device] = old
            else:
                lines = self._lines(esc, v, counters, per_watt or (), data.counter_names)
                kept[device] = (v, counters, per_watt, lines)
                self.written += 1
        order = list(kept)
        self._kept = kept
        if self._body is not None and not self.written and self._body[0] == order:
            return self._body[1]
        each = [k[3] for k in kept.values()]
        parts = []
        for i, f in enumerate(self.families):
            parts.append(f.head.encode())
            parts += [lines[i] for lines in each]
        body = b"".join(parts)
        self._body = (order, body)
        return body

    def _lines(
        self,
        esc: EscapedLabels,
        v: GpuJudgement,
        counters: dict[str, Any] | None,
        per_watt: Sequence[Row],
        counter_names: Sequence[str],
    ) -> tuple[bytes, ...]:
        """One GPU's lines of each family."""
        figure, watts, ratio, baseline_ratio, verdict, slow_by, last, counter, xids = self.families
        labels = [esc[v.device], esc[v.gpu_model], esc[v.card], esc[v.hostname]]
        out: list[list[str]] = [[] for _ in self.families]
        for name, f in v.figures.items():
            out[0].append(figure.line([*labels, esc[name], esc[unit(name)]], f.value))
            peer_ratio = f.ratio("peers")
            if peer_ratio is not None:
                out[2].append(ratio.line([*labels, esc[name]], peer_ratio))
            base = next((r for r in f.references if r.name == "baseline"), None)
            if base is not None and base.value:
                out[3].append(baseline_ratio.line([*labels, esc[name], esc[str(base.count)]], f.value / base.value))
        for _, _, _, _, twin, value in per_watt:
            key = str(twin).removesuffix(PER_WATT_SUFFIX)
            out[1].append(watts.line([*labels, esc[key], esc[PER_WATT_UNITS[unit(key)]]], value))
        out[4].append(verdict.line([*labels, esc[v.verdict]], 1.0))
        if v.slow_by is not None:
            out[5].append(slow_by.line(labels, v.slow_by))
        if isinstance(v.started_at, datetime):
            out[6].append(last.line(labels, v.started_at.timestamp()))
        if counters is not None:
            for name in counter_names:
                value = counters[name]
                if value is not None:
                    out[7].append(counter.line([*labels, esc[name]], float(value)))
            if counters["xid_count"] is not None:
                out[8].append(xids.line(labels, float(counters["xid_count"])))
        return tuple("".join(lines).encode("utf-8") for lines in out)
