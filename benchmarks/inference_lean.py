"""The lean Llama decode path (agent/models/llama_torch.py) against transformers' on one GPU, in one process: correct
first, then fast, against ceilings measured in the same process.

    python3 benchmarks/inference_lean.py --out DIR                 # on the GPU: everything below, JSON in DIR
    python3 benchmarks/inference_lean.py --out DIR --model llama-tiny --layers 2     # a smoke run (CPU too)

What it does, each section written to DIR/inference-lean.json as soon as it is done:
1. ceilings: a device-to-device copy of 1 GiB (GB/s, reads plus writes, as the bandwidth family counts) and the
   best bf16 matmul of 8192 and 16384 cubed on random data (TFLOPS);
2. correctness: transformers' model and the lean one on the same random weights (bf16): prefill logits, then a
   greedy decode of ``--steps`` tokens, the lean one through its KV cache, transformers' over the whole sequence;
3. decode at 1,024 positions, each variant timed by the agent's own timer (CUDA events; graph replays unless
   said): the lean path with Triton kernels or torch ops, with and without a CUDA graph, compiled by
   torch.compile (if ``--compile``), and transformers' step; tokens/s, GB/s, % of the datasheet, % of the copy;
4. the decode matmuls alone (the step's GEMMs replayed as one graph): what cuBLAS allows at each batch;
5. prefill 8 x 2048 (and 1 x 512) through both paths: TFLOPS and % of the matmul ceiling;
6. kernels per step (torch.profiler over graph replays; its durations inside a graph are indicative only).
Prints one table last.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.benchmarks.flops import decode_step_bytes, kv_cache_bytes, prefill_flops
from agent.models import llama, llama_torch
from benchmarks.inference_profile import capture, category
from schemas import match_spec

CONTEXT = 1024


def bench(fn: Callable[[], object], device: Any, *, graph: bool = True, budget_s: float = 0.3) -> tuple[float, str]:
    """Median seconds per call: CUDA events around each call (a CUDA graph of one call replayed, unless ``graph`` is
    off), after warm-up; perf_counter on the CPU. Its own loop, so that this script stands apart from the agent's
    timing code (whatever state that is in when the GPU runs it)."""
    import torch

    if device.type != "cuda":
        fn()
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples), "perf_counter"
    body, method = fn, "cuda_event"
    if graph:
        body, method = capture(fn, device)[0].replay, "cuda_graph"
    else:
        for _ in range(3):
            fn()

    def once() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        body()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

    pilot = min(once() for _ in range(2))
    samples = [once() for _ in range(max(5, min(200, int(budget_s / pilot))))]
    return statistics.median(samples), method


class Session:
    """The device, its timer, the ceilings and every figure so far (written out after each section)."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        self.args = args
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        self.name = torch.cuda.get_device_name(self.device) if self.cuda else "CPU"
        shape = llama.SHAPES[args.model]
        self.shape = dataclasses.replace(shape, layers=args.layers) if args.layers else shape
        self.dtype = torch.bfloat16
        spec = match_spec(self.name) if self.cuda else None
        self.datasheet_gbps = spec.bandwidth_gbps if spec else None
        self.copy_gbps: float | None = None
        self.matmul_tflops: float | None = None
        self.out = args.out / "inference-lean.json"
        self.began = time.perf_counter()
        self.report: dict[str, Any] = {"environment": environment(self), "decode": [], "prefill": []}

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def save(self) -> None:
        self.out.write_text(json.dumps(self.report, indent=1, default=str))

    def time_call(self, fn: Callable[[], object], *, graphable: bool = True, long: bool = False) -> tuple[float, str]:
        """Median seconds per call and how it was timed (a long call is never a graph: one is enough)."""
        return bench(fn, self.device, graph=graphable and not long, budget_s=2.0 if long else 0.3)

    def free(self) -> None:
        import torch

        gc.collect()
        if self.cuda:
            torch.cuda.empty_cache()


def environment(s: Session) -> dict[str, Any]:
    import torch

    info: dict[str, Any] = {"python": sys.version.split()[0], "torch": torch.__version__, "device": s.name,
                            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    for name in ("transformers", "triton"):
        try:
            info[name] = __import__(name).__version__
        except ImportError:
            info[name] = None
    info["cuda"] = torch.version.cuda
    return info


def copy_gbps(s: Session) -> float:
    """The best device-to-device copy of 64 MiB, 256 MiB and 1 GiB of fp32, reads plus writes: the sizes and the
    best-of of the standard suite's ``bw_copy`` figure (on the H200 the 1 GiB copy ran at 2.7 TB/s, the others at
    4.0-4.2, in the agent's own bandwidth family too: the driver moves that one another way)."""
    import torch

    best = 0.0
    for n in (1 << 24, 1 << 26, 1 << 28) if s.cuda else (1 << 22,):
        dst, src = torch.empty(n, device=s.device), torch.randn(n, device=s.device)
        best = max(best, 2 * 4 * n / s.time_call(_op(torch.Tensor.copy_, dst, src))[0] / 1e9)
        del dst, src
    return best


def ceilings(s: Session) -> None:
    """The copy bandwidth and the sustained bf16 matmul rate this card shows now, on random data: matmuls first for
    a second or so, since an idle card's clocks (345 MHz SM) held the first copy to 2.7 TB/s."""
    import torch

    best = 0.0
    for size in (8192, 16384, 8192) if s.cuda else (512,):
        a, b = (torch.randn(size, size, device=s.device, dtype=s.dtype) for _ in range(2))
        seconds = s.time_call(_op(torch.mm, a, b, out=torch.empty_like(a)), long=size > 8192)[0]
        best = max(best, 2 * size**3 / seconds / 1e12)
        del a, b
    s.matmul_tflops = best
    s.copy_gbps = copy_gbps(s)
    s.free()
    s.report["ceilings"] = {"copy_gbps": s.copy_gbps, "matmul_bf16_tflops": best, "datasheet_gbps": s.datasheet_gbps}
    s.save()


def final_copy(s: Session) -> None:
    """The copy again at the end: the best of both is the ceiling every decode row is a fraction of."""
    again = copy_gbps(s)
    s.report["ceilings"]["copy_gbps_end"] = again
    s.copy_gbps = max(s.copy_gbps or 0.0, again)
    s.report["ceilings"]["copy_gbps"] = s.copy_gbps
    for row in (*s.report["decode"], *s.report.get("gemm_floor", [])):
        row["of_copy"] = row["gbps"] / s.copy_gbps
    s.save()


def guarded(s: Session, section: str, fn: Callable[..., object], *args: Any) -> None:
    """A section that fails is reported, and the others go on."""
    try:
        fn(s, *args)
    except Exception as exc:
        s.report.setdefault("failures", []).append(f"{section}: {type(exc).__name__}: {str(exc)[:300]}")
        s.save()


def _op(fn: Callable[..., object], *args: Any, **kwargs: Any) -> Callable[[], object]:
    return lambda: fn(*args, **kwargs)


def correctness(s: Session, theirs: Any, mine: llama_torch.LeanLlama) -> None:
    """Prefill logits and a greedy decode, the lean path through its cache against transformers' whole sequence: at
    batch 2, and at batch 1, where the lean path's projections are its fused matrix-vector kernels on CUDA."""
    import torch

    prompt, steps = 64, s.args.steps
    for batch in (2, 1):
        ids = torch.randint(0, s.shape.vocab, (batch, prompt), device=s.device)
        rel: list[float] = []
        agree = 0
        with torch.no_grad():
            cache = mine.cache(batch, prompt + steps)
            ours = mine.forward(ids, cache, 0)[:, -1]
            seq = ids
            for step in range(steps):
                ref = theirs(input_ids=seq, use_cache=False).logits[:, -1].float()
                if step:
                    ours = mine.forward(seq[:, -1:], cache, seq.shape[1] - 1)[:, -1]
                rel.append(float((ours.float() - ref).norm() / ref.norm()))
                agree += int((ours.argmax(-1) == ref.argmax(-1)).sum())
                seq = torch.cat([seq, ref.argmax(-1, keepdim=True)], dim=1)  # both go on from transformers' token
        s.report.setdefault("correctness_by_batch", []).append(
            {"ops": mine.ops.name, "batch": batch, "prompt": prompt, "steps": steps, "max_rel_error": max(rel),
             "rel_errors": rel, "greedy_agree": agree, "greedy_total": batch * steps})  # fmt: skip
    s.report["correctness"] = s.report["correctness_by_batch"][0]
    s.save()


def decode_row(s: Session, variant: str, batch: int, seconds: float, method: str, **extra: Any) -> None:
    weights = s.shape.weight_bytes("bf16")
    cache = kv_cache_bytes(s.shape.layers, s.shape.kv_heads, s.shape.head_dim, batch, CONTEXT, 2)
    step_bytes = decode_step_bytes(weights, cache)
    gbps = step_bytes / seconds / 1e9
    row = {"variant": variant, "batch": batch, "ms": seconds * 1e3, "tokens_per_s": batch / seconds, "gbps": gbps,
           "of_datasheet": gbps / s.datasheet_gbps if s.datasheet_gbps else None,
           "of_copy": gbps / s.copy_gbps if s.copy_gbps else None, "method": method, **extra}  # fmt: skip
    s.report["decode"].append(row)
    s.save()


def time_decode(
    s: Session, variant: str, make: Callable[[int], Any], batches: tuple[int, ...], *, graphable: bool = True
) -> None:
    import torch

    for batch in batches:
        try:
            with torch.no_grad():
                decode = make(batch)
                seconds, method = s.time_call(decode.step, graphable=graphable)
            decode_row(s, variant, batch, seconds, method)
        except Exception as exc:  # a variant that fails is reported, the others go on
            s.report.setdefault("failures", []).append(f"{variant} b={batch}: {type(exc).__name__}: {exc}")
            s.save()
        finally:
            decode = None
            s.free()


def gemm_floor(s: Session, model: llama_torch.LeanLlama, batches: tuple[int, ...]) -> None:
    """The step's matmuls alone, replayed as one graph: the most this path could reach with free small kernels."""
    import torch

    for batch in batches:
        x = torch.randn(batch, s.shape.hidden, device=s.device, dtype=s.dtype)
        ffn = torch.randn(batch, s.shape.ffn, device=s.device, dtype=s.dtype)
        att = torch.randn(batch, s.shape.heads * s.shape.head_dim, device=s.device, dtype=s.dtype)

        def matmuls(x: Any = x, att: Any = att, ffn: Any = ffn) -> object:
            for layer in model.layers:
                torch.mm(x, layer["qkv"].t())
                x.addmm_(att, layer["o"].t())
                torch.mm(x, layer["gate_up"].t())
                x.addmm_(ffn, layer["down"].t())
            return torch.mm(x, model.lm_head.t())

        seconds, method = s.time_call(matmuls)
        weights = s.shape.weight_bytes("bf16")
        s.report.setdefault("gemm_floor", []).append(
            {"batch": batch, "ms": seconds * 1e3, "gbps": weights / seconds / 1e9, "method": method,
             "of_copy": weights / seconds / 1e9 / s.copy_gbps if s.copy_gbps else None})  # fmt: skip
        s.save()


def time_prefill(s: Session, variant: str, call_for: Callable[[Any], Callable[[], object]], cells: Any) -> None:
    import torch

    for batch, seq in cells:
        try:
            with torch.no_grad():
                ids = torch.randint(0, s.shape.vocab, (batch, seq), device=s.device)
                seconds, method = s.time_call(call_for(ids), long=True)
            dims = (s.shape.n_params, s.shape.layers, s.shape.heads, s.shape.head_dim, batch, seq)
            tflops = prefill_flops(*dims) / seconds / 1e12
            of_matmul = tflops / s.matmul_tflops if s.matmul_tflops else None
            s.report["prefill"].append({"variant": variant, "batch": batch, "seq": seq, "ms": seconds * 1e3,
                                        "tflops": tflops, "tokens_per_s": batch * seq / seconds, "method": method,
                                        "of_matmul": of_matmul})  # fmt: skip
        except Exception as exc:
            s.report.setdefault("failures", []).append(f"prefill {variant} {batch}x{seq}: {type(exc).__name__}: {exc}")
        s.save()
        s.free()


def kernel_profile(s: Session, variant: str, decode: Any, replays: int = 10) -> None:
    """Kernels per replayed step by category (their profiled durations are indicative only inside graphs)."""
    import torch
    from torch.profiler import ProfilerActivity

    with torch.no_grad():
        graph, _ = capture(decode.step, s.device)
        graph.replay()
        torch.cuda.synchronize(s.device)
        with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                graph.replay()
            torch.cuda.synchronize(s.device)
    count: collections.Counter[str] = collections.Counter()
    time_us: collections.Counter[str] = collections.Counter()
    names: collections.Counter[str] = collections.Counter()
    for e in prof.events():
        if not str(e.device_type).endswith("CUDA"):
            continue
        cat = category(e.name)
        us = getattr(e, "device_time", None) or e.cuda_time
        count[cat] += 1
        time_us[cat] += us
        names[e.name[:90]] += 1
    s.report.setdefault("kernels", {})[variant] = {
        "per_step": {c: count[c] / replays for c in count},
        "ms_per_step_indicative": {c: time_us[c] / replays / 1e3 for c in time_us},
        "names": {n: c / replays for n, c in names.most_common(20)},
    }
    s.save()


def transformers_side(s: Session) -> llama_torch.LeanLlama:
    """transformers' model: the lean one built from its weights and checked against it, then its own figures."""
    theirs = llama.build(s.shape, s.dtype, "sdpa", s.device)
    mine = llama_torch.LeanLlama(s.shape, s.dtype, s.device, ops=llama_torch.default_ops(s.shape, s.dtype, s.device))
    mine.load_transformers(theirs.state_dict())
    guarded(s, "correctness", correctness, theirs, mine)
    time_decode(s, "transformers", lambda b: llama.StaticDecode(theirs, b, CONTEXT), (1, 32))

    def prefill(ids: Any) -> Callable[[], object]:
        return lambda: theirs(input_ids=ids, use_cache=False).logits

    time_prefill(s, "transformers", prefill, s.args.prefill)
    if s.cuda:
        guarded(s, "kernels, transformers", kernel_profile, "transformers", llama.StaticDecode(theirs, 1, CONTEXT))
    return mine


def run(s: Session) -> None:
    import torch

    ceilings(s)
    mine = transformers_side(s)
    s.free()
    batches = tuple(s.args.batches)
    time_decode(s, f"lean {mine.ops.name}", lambda b: llama_torch.LeanDecode(mine, b, CONTEXT), batches)
    if s.cuda and mine.ops.name == "triton":  # the same small kernels with cuBLAS's projections at batch 1 too
        from agent.models.llama_kernels import TritonOps

        fused, mine.ops = mine.ops, TritonOps(gemv=None)
        time_decode(s, "lean triton, cuBLAS projections", lambda b: llama_torch.LeanDecode(mine, b, CONTEXT), (1,))
        mine.ops = fused
    guarded(s, "matmuls alone", gemm_floor, mine, (1, 32))
    time_prefill(s, f"lean {mine.ops.name}", lambda ids: _lean_prefill(mine, ids), s.args.prefill)
    if s.cuda:
        guarded(s, "kernels, lean", kernel_profile, f"lean {mine.ops.name}", llama_torch.LeanDecode(mine, 1, CONTEXT))
        time_decode(s, f"lean {mine.ops.name}, no graph", lambda b: llama_torch.LeanDecode(mine, b, CONTEXT), (1,),
                    graphable=False)  # fmt: skip
    plain = llama_torch.TorchOps()
    if mine.ops.name != plain.name:
        triton_ops, mine.ops = mine.ops, plain
        time_decode(s, "lean torch ops", lambda b: llama_torch.LeanDecode(mine, b, CONTEXT), (1, 32))
        if s.cuda:
            guarded(s, "kernels, torch ops", kernel_profile, "lean torch ops", llama_torch.LeanDecode(mine, 1, CONTEXT))
        if s.args.compile and s.elapsed() < s.args.compile_before_s:
            t0 = time.perf_counter()

            def compiled(b: int) -> Any:
                decode = llama_torch.LeanDecode(mine, b, CONTEXT)
                fused = torch.compile(decode.step)
                with torch.no_grad():
                    fused()
                torch.cuda.synchronize(s.device)
                s.report["compile_s"] = time.perf_counter() - t0
                decode.step = fused  # type: ignore[method-assign]
                return decode

            time_decode(s, "lean torch ops, torch.compile", compiled, (1,))
        mine.ops = triton_ops
    final_copy(s)
    s.report["wall_s"] = s.elapsed()
    s.save()


def _lean_prefill(model: llama_torch.LeanLlama, ids: Any) -> Callable[[], object]:
    cache = model.cache(*ids.shape)
    return lambda: model.forward(ids, cache, 0)


def table(report: dict[str, Any]) -> list[str]:
    def pct(v: float | None) -> str:
        return f"{v:.1%}" if isinstance(v, float) else "-"

    env, ceil = report["environment"], report.get("ceilings", {})
    lines = [f"{env['device']}: torch {env['torch']}, transformers {env['transformers']}, triton {env['triton']}, "
             f"{env['date']}; copy {ceil.get('copy_gbps', 0):,.0f} GB/s, bf16 matmul "
             f"{ceil.get('matmul_bf16_tflops', 0):.0f} TFLOPS"]  # fmt: skip
    for c in report.get("correctness_by_batch", [report["correctness"]] if "correctness" in report else []):
        lines.append(f"correctness ({c['ops']}, batch {c['batch']}): max relative logit error {c['max_rel_error']:.2e},"
                     f" greedy tokens equal {c['greedy_agree']}/{c['greedy_total']}")  # fmt: skip
    lines += ["", "| decode (ctx 1024) | b | ms/step | tokens/s | GB/s | of datasheet | of copy | timed |",
              "|---|---:|---:|---:|---:|---:|---:|---|"]  # fmt: skip
    for r in report["decode"]:
        lines.append(f"| {r['variant']} | {r['batch']} | {r['ms']:.3f} | {r['tokens_per_s']:,.0f} | {r['gbps']:,.0f} | "
                     f"{pct(r['of_datasheet'])} | {pct(r['of_copy'])} | {r['method']} |")  # fmt: skip
    for g in report.get("gemm_floor", []):
        lines.append(f"| matmuls alone | {g['batch']} | {g['ms']:.3f} | | {g['gbps']:,.0f} | | {pct(g['of_copy'])} | "
                     f"{g['method']} |")  # fmt: skip
    lines += ["", "| prefill | b x s | ms | TFLOPS | of matmul |", "|---|---|---:|---:|---:|"]
    for r in report["prefill"]:
        lines.append(f"| {r['variant']} | {r['batch']} x {r['seq']} | {r['ms']:.1f} | {r['tflops']:.1f} | "
                     f"{pct(r['of_matmul'])} |")  # fmt: skip
    for variant, k in report.get("kernels", {}).items():
        per = ", ".join(f"{cat} {n:.0f}" for cat, n in sorted(k["per_step"].items()))
        lines.append(f"kernels per step, {variant}: {per}")
    if "compile_s" in report:
        lines.append(f"torch.compile of the lean step: {report['compile_s']:.1f} s")
    lines += [f"FAILED {f}" for f in report.get("failures", [])]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="llama-3-8b", choices=sorted(llama.SHAPES))
    parser.add_argument("--layers", type=int, default=0, help="override the model's layer count (0: keep it)")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 64])
    parser.add_argument("--prefill", type=lambda v: tuple(map(int, v.split("x"))), nargs="+",
                        default=[(8, 2048), (1, 512)], help="cells as BxS")  # fmt: skip
    parser.add_argument("--steps", type=int, default=8, help="greedy decode steps checked against transformers")
    parser.add_argument("--compile", action="store_true", help="also time the torch-ops step under torch.compile")
    parser.add_argument("--compile-before-s", type=float, default=150.0, help="skip compile once this much has run")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    session = Session(args)
    try:
        run(session)
    finally:
        session.save()
        print("\n".join(table(session.report)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
