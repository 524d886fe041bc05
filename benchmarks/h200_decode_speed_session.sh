#!/usr/bin/env bash
# Issues 23 and 24 on the H200 in one call (docs/results/h200.md, "The lean decode path" and "The standard suite at
# the hardware's pace"), everything under $OUT:
#   1. benchmarks/gemv_sweep.py (GEMV_CONFIGS narrows it): the batch-1 projections over tile configurations against cuBLAS, then the decode
#      step with the best of them (gemv-sweep.json);  SWEEP= leaves it out
#   2. LEAN=1: benchmarks/inference_lean.py (correctness against transformers at batch 2 and 1, both paths' decode
#      and prefill, kernels per step: inference-lean.json)
#   3. the gpu tests named in GPU_TESTS (decode-log.txt holds 1-3)
#   4. benchmarks/h200_speed_session.sh: the standard suite twice back to back, each timed from start to posted run,
#      its breakdown, the run-to-run table, the matmul harness (HARNESS= leaves it out): NAME1.json, NAME2.json,
#      NAME-matmul.json, NAME-log.txt
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv
  python3 -c 'import torch, transformers, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__, triton.__version__)'
  if [ -n "${SWEEP-1}" ]; then
    echo "== $(date -u +%H:%M:%S) gemv sweep"
    timeout "${SWEEP_S:-150}" python3 benchmarks/gemv_sweep.py --out "$OUT" ${GEMV_CONFIGS:+--configs "$GEMV_CONFIGS"} 2>&1 | grep -v Warning
  fi
  if [ -n "${LEAN-}" ]; then
    echo "== $(date -u +%H:%M:%S) inference_lean"
    timeout "${LEAN_S:-150}" python3 benchmarks/inference_lean.py --out "$OUT" --batches 1 32 --prefill 8x2048 1x512 \
      2>&1 | tail -n 30
  fi
  if [ -n "${GPU_TESTS-}" ]; then
    echo "== $(date -u +%H:%M:%S) gpu tests: $GPU_TESTS"
    timeout "${TESTS_S:-120}" python3 -m pytest -m gpu $GPU_TESTS -q -p no:cacheprovider 2>&1 | tail -n 12
  fi
} 2>&1 | tee "$OUT/decode-log.txt"
if [ -n "${SPEED-1}" ]; then
  GPU_TESTS= WHEELS= NAME=${NAME:-after} timeout "${SPEED_S:-280}" bash benchmarks/h200_speed_session.sh | tail -n 70
fi
