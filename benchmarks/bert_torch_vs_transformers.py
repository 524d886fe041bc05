"""The health profile's plain-torch BERT layer against transformers' BertLayer, side by side on one GPU: the same
cases through the real runner, alternating ``--rounds`` times, TFLOPS each and their ratio. They must agree for
the ``bert_fwdbwd`` health figure to mean one thing whichever suite measured it.

    python benchmarks/bert_torch_vs_transformers.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.benchmarks.bert_torch import TorchBertLayerBenchmark
from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
from agent.devices.target import cuda_targets
from agent.harness.suites import HEALTH, STANDARD
from agent.machine.monitor import Monitor
from agent.run.runner import run_cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    target = cuda_targets((0,))[0]
    # The health case, and the standard suite's fp16 fwd+bwd cells at sequence 512 (where its best figure lies).
    grid = LayerGrid(model="bert-large", seq_lens=(128, 512), batches=(16, 64), dtypes=("fp16", "bf16"),
                     modes=("fwd", "fwd+bwd"))  # fmt: skip
    tflops: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.rounds):
        for bench in (BertLayerBenchmark(grid), TorchBertLayerBenchmark(grid)):
            for r in run_cases([bench], [target], [], STANDARD.policy, Monitor(None, {})):
                assert r.status == "ok", r.reason
                assert r.metrics is not None
                p = r.params
                key = (f"{p.dtype} {p.mode} b={p.batch} s={p.seq_len}", p.implementation)  # type: ignore[union-attr]
                tflops.setdefault(key, []).append(r.metrics.tflops)  # type: ignore[union-attr]
            bench.close()
    cells = sorted({cell for cell, _ in tflops})
    health = HEALTH.grids["layer_bert_torch"]
    print(f"{'case':<26} {'transformers':>13} {'torch':>9} {'torch/transformers':>19}   (median TFLOPS of "
          f"{args.rounds} rounds; health case: {health.dtypes[0]} fwd+bwd b={health.batches[0]} "
          f"s={health.seq_lens[0]})")  # fmt: skip
    for cell in cells:
        theirs = statistics.median(tflops[(cell, "transformers")])
        mine = statistics.median(tflops[(cell, "torch")])
        print(f"{cell:<26} {theirs:13.1f} {mine:9.1f} {mine / theirs:19.3f}")


if __name__ == "__main__":
    main()
