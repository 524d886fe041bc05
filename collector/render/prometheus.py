"""Per-GPU Prometheus metrics, rendered from the ``fleet_metrics`` view (exposition format, as the collector's own).

One series per GPU and figure, verdict and counter, labelled with the GPU's UUID, model, card and host, so that a
fleet's dashboards and alerts (``deploy/prometheus/``, ``deploy/grafana/``) can select a model, a host or one GPU.
A counter the GPU does not report has no series: absent, never 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from schemas.health_figures import unit
from schemas.labels import PER_WATT_SUFFIX, PER_WATT_UNITS

from ..analysis.health import FleetMetrics

GPU_LABELS = ["uuid", "gpu_model", "card", "host"]


class _Fleet(Collector):
    def __init__(self, data: FleetMetrics) -> None:
        self.data = data

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(families(self.data))


def families(data: FleetMetrics) -> list[GaugeMetricFamily]:
    figure = GaugeMetricFamily(
        "flopfleet_gpu_figure",
        "A GPU's latest value of a figure (unit in the label)",
        labels=[*GPU_LABELS, "figure", "unit"],
    )
    ratio = GaugeMetricFamily(
        "flopfleet_gpu_peer_ratio", "A GPU's figure over the median of the same model's other GPUs",
        labels=[*GPU_LABELS, "figure"],
    )  # fmt: skip
    baseline_ratio = GaugeMetricFamily(
        "flopfleet_gpu_baseline_ratio",
        "A GPU's figure over its card's baseline (the baseline's GPU count in the label)",
        labels=[*GPU_LABELS, "figure", "baseline_gpus"],
    )
    verdict = GaugeMetricFamily(
        "flopfleet_gpu_verdict",
        "1 for a GPU's current verdict (ok, suspect, slow, faulty, unknown)",
        labels=[*GPU_LABELS, "verdict"],
    )
    slow_by = GaugeMetricFamily(
        "flopfleet_gpu_slow_by_ratio",
        "How far a slow or suspect GPU's worst figure is below its reference (0.2: 20 %)",
        labels=GPU_LABELS,
    )
    last = GaugeMetricFamily(
        "flopfleet_gpu_last_run_timestamp_seconds", "Start of the GPU's latest run (Unix time)", labels=GPU_LABELS
    )
    per_watt = GaugeMetricFamily(
        "flopfleet_gpu_figure_per_watt",
        "A GPU's latest health figure over the board's mean power while it was measured (unit in the label)",
        labels=[*GPU_LABELS, "figure", "unit"],
    )
    for device, gpu_model, card, hostname, twin, value in data.per_watt:
        figure_key = str(twin).removesuffix(PER_WATT_SUFFIX)
        per_watt.add_metric([device, gpu_model, card, hostname, figure_key, PER_WATT_UNITS[unit(figure_key)]], value)
    for v in data.verdicts:
        labels = [v.device, v.gpu_model, v.card, v.hostname]
        for name, f in v.figures.items():
            figure.add_metric([*labels, name, unit(name)], f.value)
            peer_ratio = f.ratio("peers")
            if peer_ratio is not None:
                ratio.add_metric([*labels, name], peer_ratio)
            base = next((r for r in f.references if r.name == "baseline"), None)
            if base is not None and base.value:
                baseline_ratio.add_metric([*labels, name, str(base.count)], f.value / base.value)
        verdict.add_metric([*labels, v.verdict], 1.0)
        if v.slow_by is not None:
            slow_by.add_metric(labels, v.slow_by)
        if isinstance(v.started_at, datetime):
            last.add_metric(labels, v.started_at.timestamp())
    counter = GaugeMetricFamily(
        "flopfleet_gpu_error_counter",
        "A GPU's error counter as its latest run ended (booleans as 0/1); absent where the GPU does not report it",
        labels=[*GPU_LABELS, "counter"],
    )
    xids = GaugeMetricFamily("flopfleet_gpu_xid_events", "XID errors the driver reported during the GPU's latest run",
                             labels=GPU_LABELS)  # fmt: skip
    for row in data.counters:
        labels = [str(row["device_id"]), str(row["gpu_model"]), str(row["card"]), str(row["hostname"])]
        for name in data.counter_names:
            value = row[name]
            if value is not None:
                counter.add_metric([*labels, name], float(value))
        if row["xid_count"] is not None:
            xids.add_metric(labels, float(row["xid_count"]))
    return [figure, per_watt, ratio, baseline_ratio, verdict, slow_by, last, counter, xids]


def exposition(data: FleetMetrics) -> bytes:
    """The per-GPU metrics in Prometheus' text format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Fleet(data))
    return generate_latest(registry)
