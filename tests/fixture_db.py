"""A collector database built by code: the fixture behind report, page and browser tests.

Four H100 SXM at 700 W (one slowed by a 500 W power limit, one on a narrowed PCIe link), an H100 PCIe, and A100s
before and after a software upgrade, plus the bundled published table and one price. Two of the H100s and one A100
measured LLM inference (Llama-3-8B prefill and decode).
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from collector.analysis.reference import load
from collector.store import Store
from tests.factories import T0, bandwidth, gpu, inference, layer, make_run, matmul

SXM, PCIE, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB"


def _run(store: Store, name: str, host: str, bf16: float, *, hours: int, torch: str = "2.11.0",
         extra: list[dict[str, Any]] | None = None, **gpu_fields: Any) -> None:  # fmt: skip
    fields = {"memory_gib": 80, "host": host, "power_limit_default_w": 350.0 if "PCIe" in name else 700.0}
    fields.setdefault("power_limit_w", fields["power_limit_default_w"])
    fields.update(gpu_fields)
    results = [matmul(2048, "bf16", bf16 * 0.9), matmul(8192, "bf16", bf16, peak_fraction=round(bf16 / 989, 4)),
               matmul(8192, "fp16", bf16 * 0.95),
               bandwidth(1 << 26, 3000.0 * bf16 / 700), layer("bert_layer", "fwd+bwd", 64, 512, bf16 * 0.65),
               *(extra or [])]  # fmt: skip
    store.add_run(
        make_run(
            results,
            gpus=[gpu(name, **fields)],
            hostname=host,
            run_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-{hours}")),
            torch=torch,
            started=T0 + timedelta(hours=hours),
        ),
        received_at=T0 + timedelta(hours=hours, minutes=2),
    )


def _llm(decode_s: float, prefill_s: float, bandwidth_gbps: float, bf16_tflops: float) -> list[dict[str, Any]]:
    """Llama-3-8B prefill (batch 1 x 512, 8 x 2048: ``prefill_s``) and decode (batch 1: ``decode_s``, and 32, at 1024
    positions), against the card's datasheet bandwidth and bf16 TFLOPS."""
    return [
        inference("prefill", 1, 512, prefill_s / 35, datasheet=bf16_tflops),
        inference("prefill", 8, 2048, prefill_s, datasheet=bf16_tflops),
        inference("decode", 1, 1024, decode_s, datasheet=bandwidth_gbps),
        inference("decode", 32, 1024, decode_s * 1.45, datasheet=bandwidth_gbps),
    ]


def build_fixture_db(path: Path) -> Store:
    store = Store(path)
    for i, bf16 in enumerate((700.0, 720.0, 710.0)):
        # Two of the H100s and one A100 measured LLM inference too.
        llm = _llm((5.6e-3, 5.7e-3)[i], (0.45, 0.46)[i], 3350, 989) if i < 2 else None
        _run(store, SXM, f"h{i}", bf16, hours=i, extra=llm)
    # Same model, lowered power limit: slow, and says why.
    _run(store, SXM, "h9", 560.0, hours=3, power_limit_w=500.0)
    # Same model on a narrowed PCIe link: a note, not slow.
    _run(store, SXM, "h8", 705.0, hours=4, pcie_gen=4, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)
    _run(store, PCIE, "p0", 480.0, hours=5)
    _run(store, A100, "a0", 280.0, hours=0, extra=[matmul(8192, "bf16", 2000.0, flags=["above_peak"])])
    # A software upgrade on the A100s: clearly faster than their spread.
    for i, bf16 in enumerate((281.0, 279.0)):
        _run(store, A100, f"a{i + 1}", bf16, hours=6 + i)
    for i, bf16 in enumerate((300.0, 302.0, 301.0)):
        llm = _llm(9.0e-3, 1.1, 2039, 312) if i == 0 else None
        _run(store, A100, f"a{i + 1}", bf16, hours=10 + i, torch="2.12.0", extra=llm)
    store.add_reference(load(None))
    store.set_price("H100.*HBM3", 30000.0)
    return store
