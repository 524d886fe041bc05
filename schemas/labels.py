"""Short human labels for results, shared by the agent's terminal tables and the collector's pages."""

from __future__ import annotations

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


def human_bytes(nbytes: float) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.4g} {unit}"
    return f"{nbytes:g} B"


def headline(result: Result) -> tuple[float, str] | None:
    """The one figure a person compares for a result, with its unit."""
    m = result.metrics
    if m is None:
        return None
    if hasattr(m, "tokens_per_s"):
        return float(m.tokens_per_s), "tokens/s"
    if hasattr(m, "tflops") and result.benchmark != "bandwidth":
        return float(m.tflops), "TFLOPS"
    if hasattr(m, "gbps"):
        return float(m.gbps), "GB/s"
    if hasattr(m, "busbw_gbps"):
        return float(m.busbw_gbps), "GB/s busbw"
    return None


def describe(result: Result) -> str:
    """A short label for a result's params, e.g. 'bf16 n=8192' or 'gpt2-medium fwd+bwd b=64 s=1024'."""
    p = result.params
    if isinstance(p, MatmulParams):
        return f"{p.dtype} n={p.n}" if p.m == p.n == p.k else f"{p.dtype} {p.m}x{p.n}x{p.k}"
    if isinstance(p, LayerParams):
        return f"{p.model} {p.dtype} {p.mode} b={p.batch} s={p.seq_len}"
    if isinstance(p, TrainingParams):
        return f"{p.model} b={p.batch} s={p.seq_len}"
    if isinstance(p, InferenceParams):
        return f"{p.model} {p.phase} b={p.batch} s={p.seq_len}"
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
