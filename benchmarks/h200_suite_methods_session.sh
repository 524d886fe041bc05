#!/usr/bin/env bash
# Issue 24 on the H200, what the standard suite's methods rest on, everything under $OUT (docs/results/h200.md,
# "The standard suite at 4x s"):
#   1. benchmarks/layer_first_calls.py: where a layer cell's first call spends its host time, under torch's default
#      SDPA choice, with TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1, and with cuDNN's attention left out (first-calls-*.json)
#   2. benchmarks/matmul_harness.py twice: the agent beside do_bench (harness1.json, harness2.json: do_bench's own run
#      to run), each heavy cell called back to back for 5 s from idle, then the same cells right after one another
#      (hot.json: does a card already at its power limit reach its steady state sooner)
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv
  python3 -c 'import torch, transformers, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda,
torch.backends.cudnn.version(), transformers.__version__, triton.__version__)'
  if [ -n "${FIRST-1}" ]; then
    echo "== $(date -u +%H:%M:%S) first calls, torch's default SDPA"
    timeout 150 python3 benchmarks/layer_first_calls.py --out "$OUT" --profile 5 2>&1 | grep -v Warning
    echo "== $(date -u +%H:%M:%S) first calls, TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1"
    TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 timeout 150 python3 benchmarks/layer_first_calls.py --out "$OUT" \
      --name avoid-recompile --profile 5 2>&1 | grep -v Warning
    echo "== $(date -u +%H:%M:%S) first calls, flash or efficient attention (no cuDNN)"
    timeout 150 python3 benchmarks/layer_first_calls.py --out "$OUT" --name flash --backend flash,efficient 2>&1 \
      | grep -v Warning | tail -n 4
  fi
  if [ -n "${HARNESS-1}" ]; then
    heavy=fp32:16384,tf32:16384,tf32:2048,bf16:4096,bf16:8192
    echo "== $(date -u +%H:%M:%S) matmul harness 1, with 5 s series from idle"
    timeout 240 python3 benchmarks/matmul_harness.py --out "$OUT/harness1.json" --series "$heavy" --series-s 5
    echo "== $(date -u +%H:%M:%S) series back to back, from a card at its limit"
    timeout 60 python3 benchmarks/matmul_harness.py --out "$OUT/hot.json" --no-cells --idle-series 0 --series-s 3 \
      --series "bf16:16384,$heavy"
    echo "== $(date -u +%H:%M:%S) matmul harness 2"
    timeout 200 python3 benchmarks/matmul_harness.py --out "$OUT/harness2.json"
  fi
  echo "== $(date -u +%H:%M:%S) done"
} 2>&1 | tee "$OUT/methods-log.txt"
