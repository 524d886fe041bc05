"""Per-GPU Prometheus metrics, rendered from the ``fleet_metrics`` view (exposition format, as the collector's own).

One series per GPU and figure, verdict and counter, labelled with the GPU's UUID, model, card and host, so that a
fleet's dashboards and alerts (``deploy/prometheus/``, ``deploy/grafana/``) can select a model, a host or one GPU.
A counter the GPU does not report has no series: absent, never 0.

The text is written here directly, byte for byte as ``prometheus_client.generate_latest`` writes it (labels in name
order, its escaping and number format): building its metric objects first took 3–4 s a scrape at 10,000 GPUs
(about 230,000 series), longer than the verdicts themselves (docs/results/collector.md, "/metrics at 10,000 GPUs").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from operator import itemgetter

from prometheus_client.utils import floatToGoString

from schemas.health_figures import unit
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

    def add(self, values: Sequence[str], value: float) -> None:
        """A sample: ``values`` escaped and in the order of the family's labels."""
        self.lines.append(self._line % (*self._ordered(values), floatToGoString(value)))

    def text(self) -> str:
        return self.head + "".join(self.lines)


def families(data: FleetMetrics) -> list[Family]:
    esc = EscapedLabels()
    figure = Family("flopfleet_gpu_figure", "A GPU's latest value of a figure (unit in the label)",
                    [*GPU_LABELS, "figure", "unit"])  # fmt: skip
    ratio = Family("flopfleet_gpu_peer_ratio", "A GPU's figure over the median of the same model's other GPUs",
                   [*GPU_LABELS, "figure"])  # fmt: skip
    baseline_ratio = Family(
        "flopfleet_gpu_baseline_ratio",
        "A GPU's figure over its card's baseline (the baseline's GPU count in the label)",
        [*GPU_LABELS, "figure", "baseline_gpus"],
    )
    verdict = Family("flopfleet_gpu_verdict", "1 for a GPU's current verdict (ok, suspect, slow, faulty, unknown)",
                     [*GPU_LABELS, "verdict"])  # fmt: skip
    slow_by = Family(
        "flopfleet_gpu_slow_by_ratio",
        "How far a slow or suspect GPU's worst figure is below its reference (0.2: 20 %)",
        GPU_LABELS,
    )
    last = Family("flopfleet_gpu_last_run_timestamp_seconds", "Start of the GPU's latest run (Unix time)", GPU_LABELS)
    per_watt = Family(
        "flopfleet_gpu_figure_per_watt",
        "A GPU's latest health figure over the board's mean power while it was measured (unit in the label)",
        [*GPU_LABELS, "figure", "unit"],
    )
    for device, gpu_model, card, hostname, twin, value in data.per_watt:
        figure_key = str(twin).removesuffix(PER_WATT_SUFFIX)
        per_watt.add([esc[str(device)], esc[str(gpu_model)], esc[str(card)], esc[str(hostname)], esc[figure_key],
                      esc[PER_WATT_UNITS[unit(figure_key)]]], value)  # fmt: skip
    for v in data.verdicts:
        labels = [esc[v.device], esc[v.gpu_model], esc[v.card], esc[v.hostname]]
        for name, f in v.figures.items():
            figure.add([*labels, esc[name], esc[unit(name)]], f.value)
            peer_ratio = f.ratio("peers")
            if peer_ratio is not None:
                ratio.add([*labels, esc[name]], peer_ratio)
            base = next((r for r in f.references if r.name == "baseline"), None)
            if base is not None and base.value:
                baseline_ratio.add([*labels, esc[name], esc[str(base.count)]], f.value / base.value)
        verdict.add([*labels, esc[v.verdict]], 1.0)
        if v.slow_by is not None:
            slow_by.add(labels, v.slow_by)
        if isinstance(v.started_at, datetime):
            last.add(labels, v.started_at.timestamp())
    counter = Family(
        "flopfleet_gpu_error_counter",
        "A GPU's error counter as its latest run ended (booleans as 0/1); absent where the GPU does not report it",
        [*GPU_LABELS, "counter"],
    )
    xids = Family("flopfleet_gpu_xid_events", "XID errors the driver reported during the GPU's latest run", GPU_LABELS)
    for row in data.counters:
        labels = [esc[str(row["device_id"])], esc[str(row["gpu_model"])], esc[str(row["card"])],
                  esc[str(row["hostname"])]]  # fmt: skip
        for name in data.counter_names:
            value = row[name]
            if value is not None:
                counter.add([*labels, esc[name]], float(value))
        if row["xid_count"] is not None:
            xids.add(labels, float(row["xid_count"]))
    return [figure, per_watt, ratio, baseline_ratio, verdict, slow_by, last, counter, xids]


def exposition(data: FleetMetrics) -> bytes:
    """The per-GPU metrics in Prometheus' text format."""
    return "".join(f.text() for f in families(data)).encode("utf-8")
