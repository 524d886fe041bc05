"""Tables for docs/results/h200.md from one GPU lease's files (benchmarks/h200_session.sh writes them).

    python benchmarks/h200_report.py docs/results/h200 --seed ../shared/reference/h200_seed_method.json

Prints Markdown: suite wall time, run-to-run repeatability, matmul and layer TFLOPS beside the notebook method
measured in the same lease (and the seed's reference run), bandwidth, transfers, training and the shape search.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read

Row = dict[str, Any]


def _load(path: Path) -> Any:
    return read(path)


def _key(r: Row) -> tuple[str, str]:
    return r["name"], json.dumps(r["params"], sort_keys=True)


def _table(head: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def _f(value: float | None, digits: int = 1) -> str:
    return "" if value is None else f"{value:,.{digits}f}"


def wall_times(log: str) -> str:
    lines = re.findall(r"^(standard run \d+: [\d.]+ s wall.*|mamf: [\d.]+ s wall)$", log, flags=re.M)
    return "\n".join(f"- {line}" for line in lines)


def repeatability(a: list[Row], b: list[Row]) -> str:
    other = {_key(r): r for r in b}
    rows, diffs = [], []
    for r in a:
        s = other.get(_key(r))
        if s is None or r["status"] != "ok" or s["status"] != "ok":
            continue
        t1, t2 = r["timing"]["median_s"], s["timing"]["median_s"]
        if min(t1, t2) < 1e-3:
            continue
        diff = abs(t1 - t2) / min(t1, t2)
        diffs.append(diff)
        if diff > 0.03:
            clocks = [x["state"]["sm_clock_mhz_median"] if x.get("state") else None for x in (r, s)]
            p = r["params"]
            label = " ".join(str(p[k]) for k in ("dtype", "op", "direction", "mode", "batch", "seq_len", "n") if k in p)
            if "pinned" in r["params"]:
                label += " pinned" if r["params"]["pinned"] else " pageable"
            rows.append([r["name"], label, _f(t1 * 1e3, 2), f"{diff:.1%}", f"{clocks[0]} / {clocks[1]}"])
    diffs.sort()
    summary = (
        f"{len(diffs)} cells took >= 1 ms; median difference {statistics.median(diffs):.2%}, "
        f"90th percentile {diffs[int(0.9 * len(diffs))]:.2%}, {sum(d > 0.03 for d in diffs)} above 3 %."
    )
    return summary + "\n\n" + _table(["benchmark", "cell", "ms", "difference", "median SM clock run 1 / 2"], rows)


def matmul(a: list[Row], b: list[Row], notebook: Row, seed: Row | None) -> str:
    ours = {
        (r["params"]["dtype"], r["params"]["n"]): r for r in a if r["benchmark"] == "matmul" and r["status"] == "ok"
    }
    again = {
        (r["params"]["dtype"], r["params"]["n"]): r for r in b if r["benchmark"] == "matmul" and r["status"] == "ok"
    }
    nb = {(r["dtype"], r["n"]): r["tflops"] for r in notebook["matmul"]}
    seed_table: dict[tuple[str, int], float] = {}
    if seed:
        names = {"torch.float32": "fp32", "torch.float16": "fp16"}
        for n_key, cells in seed["matmul_tflops"].items():
            for dtype, v in cells.items():
                seed_table[(names[dtype], int(n_key[2:]))] = v
        for n_key, cells in seed.get("matmul_extra_tflops_min_run_time_1s", {}).items():
            for dtype, v in cells.items():
                seed_table.setdefault((dtype, int(n_key[2:])), v)
    rows = []
    for (dtype, n), r in sorted(
        ours.items(), key=lambda kv: (["fp32", "tf32", "fp16", "bf16", "fp8_e4m3"].index(kv[0][0]), kv[0][1])
    ):
        notebook_value = nb.get((dtype, n))
        t = r["timing"]
        rows.append([
            dtype, n, _f(r["metrics"]["tflops"]),
            _f(again[(dtype, n)]["metrics"]["tflops"]) if (dtype, n) in again else "",
            _f(notebook_value), f"{r['metrics']['tflops'] / notebook_value:.3f}" if notebook_value else "",
            _f(seed_table.get((dtype, n))), f"{t['method']} x{t['calls_per_repeat']}", f"{r['peak_fraction']:.0%}",
            f"{r['metrics']['rel_error']:.1e}",
        ])  # fmt: skip
    head = ["dtype", "n", "flopfleet run 1", "run 2", "notebook (same lease)", "ratio", "seed reference",
            "timing", "% of datasheet", "rel. error"]  # fmt: skip
    return _table(head, rows)


def layers(a: list[Row], notebook: Row, seed: Row | None) -> str:
    ours = {}
    for r in a:
        if r["benchmark"] == "layer" and r["status"] == "ok" and r["params"]["dtype"] == "fp16":
            p = r["params"]
            ours[(p["block"], p["mode"], p["batch"], p["seq_len"])] = r
    nb: dict[tuple[str, str, str, int, int], float] = {}
    for row in notebook["layers"]:
        nb[(row["attn"], row["block"], row["mode"], row["batch"], row["seq_len"])] = row["tflops"]
    seed_names = {"bert_layer": "bert_layer_tflops", "gpt2_block": "gpt2_block_tflops",
                  "t5_encoder_block": "t5_encoder_tflops", "t5_decoder_block": "t5_decoder_tflops"}  # fmt: skip
    rows = []
    for (attn, block, mode, batch, seq), tflops in sorted(nb.items()):
        if attn != "sdpa":
            continue
        r = ours.get((block, mode, batch, seq))
        seed_value = None
        if seed:
            seed_value = seed[seed_names[block]].get(f"batch={batch}", {}).get(f"{mode} seq_len={seq}")
        rows.append([
            block, mode, batch, seq, _f(r["metrics"]["tflops"]) if r else "", _f(tflops),
            f"{r['metrics']['tflops'] / tflops:.3f}" if r else "", _f(nb.get(("eager", block, mode, batch, seq))),
            _f(seed_value), f"{r['timing']['method']}, {r['timing']['median_s'] * 1e3:.2f} ms" if r else "",
        ])  # fmt: skip
    head = ["block", "mode", "batch", "seq", "flopfleet (sdpa)", "notebook sdpa", "ratio", "notebook eager",
            "seed reference (eager)", "flopfleet timing"]  # fmt: skip
    return _table(head, rows)


def layer_grid(a: list[Row], dtype: str) -> str:
    cells: dict[tuple[str, int, str], dict[int, float]] = {}
    batches: set[int] = set()
    for r in a:
        if r["benchmark"] == "layer" and r["status"] == "ok" and r["params"]["dtype"] == dtype:
            p = r["params"]
            cells.setdefault((p["block"], p["seq_len"], p["mode"]), {})[p["batch"]] = r["metrics"]["tflops"]
            batches.add(p["batch"])
    order = sorted(batches)
    rows = [[block, seq, mode, *(_f(v.get(b), 0) for b in order)] for (block, seq, mode), v in cells.items()]
    return _table(["block", "seq", "mode", *(f"b={b}" for b in order)], rows)


def others(a: list[Row]) -> str:
    rows = []
    for r in a:
        p, m = r["params"], r["metrics"]
        if r["status"] != "ok":
            continue
        if r["benchmark"] == "bandwidth" and (p["op"] != "scale" or p["elements"] >= 1 << 22):
            rows.append(["bandwidth", f"{p['op']} {p['elements'] * 4 >> 20} MiB", f"{_f(m['gbps'], 0)} GB/s",
                         f"{r['peak_fraction']:.0%} of 4,800 GB/s"])  # fmt: skip
        elif r["benchmark"] == "transfer":
            kind = "pinned" if p["pinned"] else "pageable"
            rows.append(["transfer", f"{p['direction']} {kind} {p['bytes'] >> 20} MiB", f"{_f(m['gbps'])} GB/s",
                         f"{r['peak_fraction']:.0%} of PCIe Gen5 x16"])  # fmt: skip
        elif r["benchmark"] == "training":
            rows.append([r["name"], f"{p['model']} batch {p['batch']} (cap {p['batch_cap']}) seq {p['seq_len']}, "
                         f"{p['precision']}, {p['attn_implementation']}",
                         f"{_f(m['tokens_per_s'], 0)} tokens/s, {_f(m['samples_per_s'], 0)} samples/s, "
                         f"{_f(m['tflops'])} TFLOPS, peak memory {m['peak_memory_bytes'] / 2**30:.1f} GiB",
                         f"MFU {m['mfu']:.1%}"])  # fmt: skip
    return _table(["benchmark", "case", "result", "against"], rows)


def mamf(results: list[Row]) -> str:
    rows = []
    for r in results:
        p, m = r["params"], r["metrics"]
        shape = f"{m['m']}x{m['n']}x{m['k']}"
        sustained, median = _f(m["sustained_tflops"]), _f(m["median_tflops_over_shapes"])
        rows.append(
            [p["dtype"], p["shapes_tried"], shape, _f(m["tflops"]), sustained, median, f"{r['peak_fraction']:.0%}"]
        )
    head = ["dtype", "shapes", "best shape (m x n x k)", "achievable TFLOPS (boost bursts)", "sustained TFLOPS",
            "median over shapes (sustained)", "% of datasheet"]  # fmt: skip
    return _table(head, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lease", type=Path, help="folder with standard1.json, standard2.json, notebook.json, ...")
    parser.add_argument("--seed", type=Path, help="the seed's h200_seed_method.json, for its column")
    args = parser.parse_args()
    d = args.lease
    one, two = _load(d / "standard1.json"), _load(d / "standard2.json")
    notebook = _load(d / "notebook.json")
    seed = _load(args.seed) if args.seed else None
    sw = one["software"]
    sections = [
        f"GPU: {one['gpus'][0]['name']}, driver {sw['driver']}, power limit {one['gpus'][0]['power_limit_w']:.0f} W; "
        f"torch {sw['torch']}, CUDA {sw['cuda']}, cuDNN {sw['cudnn']}, transformers {sw['transformers']}, "
        f"Python {sw['python']}; runs started {one['started_at'][:19]}Z and {two['started_at'][:19]}Z.",
        "## Wall time\n\n" + wall_times((d / "log.txt").read_text(encoding="utf-8")),
        "## Repeatability (standard run 1 against run 2)\n\n" + repeatability(one["results"], two["results"]),
        "## Matmul TFLOPS\n\n" + matmul(one["results"], two["results"], notebook, seed),
        "## Transformer layers at large batch, fp16\n\n" + layers(one["results"], notebook, seed),
        "## All layer cells, fp16 (run 1)\n\n" + layer_grid(one["results"], "fp16"),
        "## All layer cells, bf16 (run 1)\n\n" + layer_grid(one["results"], "bf16"),
        "## Bandwidth, transfers, training (run 1)\n\n" + others(one["results"]),
    ]
    if (d / "mamf.json").exists():
        sections.append("## Maximum achievable matmul FLOPS (full suite)\n\n" + mamf(_load(d / "mamf.json")["results"]))
    print("\n\n".join(sections))


if __name__ == "__main__":
    main()
