"""Short human labels for results and the words people read for a machine and its software, shared by the agent's
terminal tables and the collector's pages, report, CSV and SQL views."""

from __future__ import annotations

from dataclasses import dataclass

from .environment import Software
from .results import (
    BandwidthParams,
    CollectiveParams,
    InferenceParams,
    LayerParams,
    MamfMetrics,
    MamfParams,
    MatmulParams,
    Result,
    TrainingParams,
    TransferParams,
)

#: A machine's name, as every page, report, CSV, terminal table and SQL view calls it (the wire contract's
#: ``host.hostname``). Prometheus labels and ``/api/v1/verdicts?host=`` keep ``host``, which dashboards already use.
HOSTNAME = "hostname"

#: Each version of ``Software`` as people write the package's name, in the order pages list them.
SOFTWARE: dict[str, str] = {
    "python": "Python", "torch": "torch", "cuda": "CUDA", "hip": "HIP", "cudnn": "cuDNN", "cublas": "cuBLAS",
    "nccl": "NCCL", "transformers": "transformers", "driver": "driver", "agent": "agent",
}  # fmt: skip


def software_text(software: Software) -> str:
    """The versions a run had, then what it had none of: ``Python 3.12.3, torch 2.11.0, agent 0.1.0; no CUDA,
    cuDNN, NCCL or driver`` (HIP and cuBLAS, rarely reported, only when present)."""
    present = [f"{label} {getattr(software, field)}" for field, label in SOFTWARE.items()
               if getattr(software, field) is not None]  # fmt: skip
    absent = [label for field, label in SOFTWARE.items()
              if getattr(software, field) is None and field not in ("hip", "cublas")]  # fmt: skip
    if not absent:
        return ", ".join(present)
    missing = absent[0] if len(absent) == 1 else f"{', '.join(absent[:-1])} or {absent[-1]}"
    return f"{', '.join(present)}; no {missing}"


#: Whose model code ran a layer or an LLM, as a person reads it: transformers' classes, or the agent's own in plain
#: torch. The SQL column ``implementation`` holds the key; labels, figures and chart series say the word.
IMPLEMENTATIONS = {"transformers": "transformers", "torch": "plain torch"}


def human_bytes(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:g} B"


@dataclass(frozen=True)
class Headline:
    """One kind of headline figure: the metric (a field of the metrics and a column of ``results``), its unit, and
    the unit of that figure per watt of the board's mean power (None: no per-watt figure)."""

    metric: str
    unit: str
    per_watt_unit: str | None
    not_for: tuple[str, ...] = ()  # benchmarks whose field of that name is not what people compare


#: The one figure a person compares for a result: the first of these its metrics have. Pages, the report, terminal
#: tables and the SQL view ``per_watt`` all read this table.
HEADLINES: tuple[Headline, ...] = (
    Headline("tokens_per_s", "tokens/s", "tokens/J"),
    Headline("tflops", "TFLOPS", "TFLOPS/W", not_for=("bandwidth",)),
    Headline("gbps", "GB/s", "GB/s/W"),
    # Several GPUs' collective over one board's power is not a figure of anything.
    Headline("busbw_gbps", "GB/s busbw", None),
)


#: A figure's unit per watt (TFLOPS/W, GB/s/W, tokens/J), and the suffix of the key of a figure's twin per watt
#: (``matmul_bf16_per_w``): what the collector's figures, views and ``/metrics`` call them.
PER_WATT_UNITS = {h.unit: h.per_watt_unit for h in HEADLINES if h.per_watt_unit is not None}
PER_WATT_SUFFIX = "_per_w"


def _headline(result: Result) -> tuple[float, Headline] | None:
    m = result.metrics
    if m is None:
        return None
    for kind in HEADLINES:
        value = getattr(m, kind.metric, None)
        if value is not None and result.benchmark not in kind.not_for:
            return float(value), kind
    return None


def headline(result: Result) -> tuple[float, str] | None:
    """The one figure a person compares for a result, with its unit."""
    found = _headline(result)
    return (found[0], found[1].unit) if found is not None else None


def per_watt(result: Result) -> tuple[float, str] | None:
    """The headline over the board's mean power while it was measured (TFLOPS/W, GB/s/W, tokens/J), with its unit;
    None where the power was not read (no energy counter, a window too short for it) or the figure has none."""
    found = _headline(result)
    power = result.timing.power_w if result.timing is not None else None
    if found is None or found[1].per_watt_unit is None or not power:
        return None
    return found[0] / power, found[1].per_watt_unit


def describe(result: Result) -> str:
    """A short label for a result's params, e.g. 'bf16 n=8192' or 'llama-3-8b decode b=1 s=1024, plain torch': what
    tells one result of a run from another of the same benchmark (pages, the agent's summary)."""
    p = result.params
    if isinstance(p, MatmulParams):
        return f"{p.dtype} n={p.n}" if p.m == p.n == p.k else f"{p.dtype} {p.m}x{p.n}x{p.k}"
    if isinstance(p, LayerParams):
        return f"{p.model} {p.dtype} {p.mode} b={p.batch} s={p.seq_len}, {IMPLEMENTATIONS[p.implementation]}"
    if isinstance(p, TrainingParams):
        return f"{p.model} b={p.batch} s={p.seq_len}"
    if isinstance(p, InferenceParams):  # a run measures both implementations' cells: the label tells them apart
        return f"{p.model} {p.phase} b={p.batch} s={p.seq_len}, {IMPLEMENTATIONS[p.implementation]}"
    if isinstance(p, BandwidthParams):
        return f"{p.op} {human_bytes(4 * p.elements)}"
    if isinstance(p, TransferParams):
        return f"{p.direction} {'pinned' if p.pinned else 'pageable'} {human_bytes(p.bytes)}"
    if isinstance(p, MamfParams) and isinstance(result.metrics, MamfMetrics):
        m = result.metrics
        return f"{p.dtype} best {m.m}x{m.n}x{m.k}"
    if isinstance(p, CollectiveParams):
        return f"{p.op} {human_bytes(p.bytes)} x{p.world_size}"
    return ""
