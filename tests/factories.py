"""Runs built by code: the fixture data for schema, store and report tests (no GPU needed)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from typing import Any

from schemas import RunSubmission

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def timing(median_s: float = 1e-3) -> dict[str, Any]:
    return {
        "method": "cuda_event",
        "median_s": median_s,
        "mean_s": median_s,
        "min_s": median_s * 0.99,
        "max_s": median_s * 1.01,
        "iqr_s": median_s * 0.005,
        "cv": 0.004,
        "repeats": 20,
        "warmup": 3,
        "calls_per_repeat": 1,
        "total_s": 0.1,
    }


def matmul(n: int, dtype: str, tflops: float, gpu_index: int | None = 0, **extra: Any) -> dict[str, Any]:
    return {
        "benchmark": "matmul",
        "name": "matmul",
        "gpu_index": gpu_index,
        "status": "ok",
        "params": {"m": n, "n": n, "k": n, "dtype": dtype},
        "metrics": {"tflops": tflops, "rel_error": 1e-4, "tolerance": 5e-3},
        "timing": timing(2 * n**3 / tflops / 1e12),
        **extra,
    }


def layer(block: str, mode: str, batch: int, seq: int, tflops: float, dtype: str = "fp16") -> dict[str, Any]:
    model = {"bert_layer": "bert-large", "gpt2_block": "gpt2-medium"}.get(block, "t5-large")
    return {
        "benchmark": "layer",
        "name": "layer_" + block.split("_")[0] if block in ("bert_layer", "gpt2_block") else "layer_t5_encoder",
        "gpu_index": 0,
        "status": "ok",
        "params": {
            "model": model,
            "block": block,
            "hidden": 1024,
            "heads": 16,
            "ffn": 4096,
            "batch": batch,
            "seq_len": seq,
            "dtype": dtype,
            "mode": mode,
            "attn_implementation": "sdpa",
            "flops_per_call": 10**12,
        },
        "metrics": {"tflops": tflops},
        "timing": timing(1 / tflops),
    }


def transfer(direction: str, gbps: float, pinned: bool = True, size: int = 256 << 20) -> dict[str, Any]:
    return {
        "benchmark": "transfer",
        "name": "transfer",
        "gpu_index": 0,
        "status": "ok",
        "params": {"direction": direction, "pinned": pinned, "bytes": size},
        "metrics": {"gbps": gbps},
        "timing": timing(size / gbps / 1e9),
    }


def bandwidth(elements: int, gbps: float, op: str = "scale") -> dict[str, Any]:
    return {
        "benchmark": "bandwidth",
        "name": "bandwidth",
        "gpu_index": 0,
        "status": "ok",
        "params": {
            "op": op,
            "dtype": "fp32",
            "elements": elements,
            "bytes_per_call": 8 * elements,
            "flops_per_call": elements,
        },
        "metrics": {"gbps": gbps, "tflops": gbps / 8 / 1000},
        "timing": timing(8 * elements / gbps / 1e9),
    }


def mamf(tflops: float, dtype: str = "bf16", n: int = 4096) -> dict[str, Any]:
    """A shape search whose best shape was ``n``^3."""
    return {
        "benchmark": "mamf",
        "name": "mamf",
        "gpu_index": 0,
        "status": "ok",
        "params": {"dtype": dtype, "m_range": [n, n, 1024], "n_range": [n, n, 1024], "k_range": [n, n, 1024],
                   "shapes_tried": 1},
        "metrics": {"tflops": tflops, "sustained_tflops": tflops * 0.98, "m": n, "n": n, "k": n},
        "timing": timing(2 * n**3 / tflops / 1e12),
    }  # fmt: skip


def training(model: str, tokens_per_s: float, batch: int = 8, seq: int = 512) -> dict[str, Any]:
    """One optimizer step of ``model`` (about 355 M parameters, as GPT-2-medium)."""
    n_params = 355_000_000
    flops_per_token = 6 * n_params
    return {
        "benchmark": "training",
        "name": "training_" + model.split("-")[0],
        "gpu_index": 0,
        "status": "ok",
        "params": {"model": model, "task": "clm", "batch": batch, "seq_len": seq, "precision": "bf16-autocast",
                   "optimizer": "adamw", "n_params": n_params, "flops_per_token": flops_per_token,
                   "batch_search": "fixed", "attn_implementation": "sdpa"},
        "metrics": {"samples_per_s": tokens_per_s / seq, "tokens_per_s": tokens_per_s,
                    "tflops": tokens_per_s * flops_per_token / 1e12},
        "timing": timing(batch * seq / tokens_per_s),
    }  # fmt: skip


def collective(op: str, size: int, busbw_gbps: float, world_size: int = 2) -> dict[str, Any]:
    """One collective over ``world_size`` GPUs of one machine (no GPU index: it spans them)."""
    algbw = busbw_gbps * world_size / (2 * (world_size - 1)) if op == "all_reduce" else busbw_gbps
    return {
        "benchmark": "collective",
        "name": "collective",
        "gpu_index": None,
        "status": "ok",
        "params": {"op": op, "backend": "nccl", "dtype": "bf16", "bytes": size, "world_size": world_size},
        "metrics": {"algbw_gbps": algbw, "busbw_gbps": busbw_gbps, "rel_error": 0.0},
        "timing": timing(size / algbw / 1e9),
    }


#: Llama-3-8B as the agent counts it (agent/models/llama.py): parameters but the embedding table, their bf16 bytes, and
#: the bf16 KV cache per sequence and position (K and V x 32 layers x 8 KV heads x 128).
LLAMA_8B = {"n_params": 7_504_924_672, "weight_bytes": 15_009_849_344, "kv_bytes_per_position": 131_072}


def inference(phase: str, batch: int, seq: int, seconds: float, *, datasheet: float | None = None) -> dict[str, Any]:
    """A Llama-3-8B result; ``datasheet``: the card's memory bandwidth (decode) or bf16 TFLOPS (prefill)."""
    n, weights = LLAMA_8B["n_params"], LLAMA_8B["weight_bytes"]
    if phase == "prefill":
        flops = 2 * n * batch * seq + 4 * 32 * batch * seq * seq * 4096
        cache = step = None
        metrics = {"tokens_per_s": batch * seq / seconds, "tflops": flops / seconds / 1e12, "ttft_s": seconds}
        figure = metrics["tflops"]
    else:
        flops = 2 * n * batch + 4 * 32 * batch * seq * 4096
        cache = LLAMA_8B["kv_bytes_per_position"] * batch * seq
        step = weights + cache
        metrics = {"tokens_per_s": batch / seconds, "tflops": flops / seconds / 1e12, "tpot_s": seconds,
                   "tpot_p90_s": seconds * 1.01, "gbps": step / seconds / 1e9}  # fmt: skip
        figure = metrics["gbps"]
    params = {
        "model": "llama-3-8b", "phase": phase, "batch": batch, "seq_len": seq, "dtype": "bf16", "layers": 32,
        "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336, "vocab": 128256, "n_params": n,
        "weight_bytes": weights, "kv_cache_bytes": cache, "flops_per_call": flops, "bytes_per_call": step,
        "attn_implementation": "sdpa",
    }  # fmt: skip
    return {
        "benchmark": "inference",
        "name": "inference",
        "gpu_index": 0,
        "status": "ok",
        "params": params,
        "metrics": metrics,
        "timing": {**timing(seconds), "method": "cuda_graph" if phase == "decode" else "cuda_event"},
        "peak_fraction": round(figure / datasheet, 4) if datasheet else None,
    }


def gpu(name: str = "NVIDIA H100 80GB HBM3", index: int = 0, memory_gib: int = 80, **extra: Any) -> dict[str, Any]:
    return {
        "index": index,
        "name": name,
        "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, name + str(index) + str(extra.get('host', '')))}",
        "memory_bytes": memory_gib << 30,
        "compute_capability": "9.0",
        "sm_count": 132,
        "power_limit_w": 700.0,
        "power_limit_default_w": 700.0,
        **{k: v for k, v in extra.items() if k != "host"},
    }


def run_dict(
    results: list[dict[str, Any]],
    gpus: list[dict[str, Any]] | None = None,
    *,
    hostname: str = "node1",
    started: datetime = T0,
    run_id: str | None = None,
    torch: str = "2.11.0",
    **extra: Any,
) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "run_id": run_id or str(uuid.uuid4()),
        "agent_version": "0.1.0",
        "suite": "standard",
        "device": "cuda" if gpus is None or gpus else "cpu",
        "started_at": started.isoformat(),
        "finished_at": (started + timedelta(seconds=80)).isoformat(),
        "host": {"hostname": hostname, "os": "Linux", "cpu_count": 16, "cpu_model": "Xeon"},
        "software": {"python": "3.12.3", "agent": "0.1.0", "torch": torch, "cuda": "13.0", "driver": "580.1"},
        "gpus": [gpu()] if gpus is None else gpus,
        "results": results,
        **extra,
    }


def make_run(results: list[dict[str, Any]], **kw: Any) -> RunSubmission:
    import json

    return RunSubmission.model_validate_json(json.dumps(run_dict(results, **kw)))
