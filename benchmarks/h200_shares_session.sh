#!/usr/bin/env bash
# The smallest slowdown a first check catches against the bundled per-GPU baseline (issue 31, item 3), in one GPU
# call of about 4 minutes: benchmarks/baseline_first_checks.py with HEALTHY healthy first checks (a fresh collector
# each) and LONE without a collector, then, for each of SHARES (unset: 0.02,0.05,0.08; empty: none), a competing
# process taking that share of the GPU's time (benchmarks/gpu_hog.py --share, one HOG_KERNEL kernel of KERNEL_US µs per period, its calibration printed)
# during one first check against a fresh collector and one without. The GPU's settings are never touched.
# Files under $OUT: shares.json (every check, the hog's calibration), shares-runs.json (every run posted: commit it
# under docs/results/h200/ and the healthy ones join the bundled baseline as one more GPU), shares-log.txt.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
date -u
nvidia-smi --query-gpu=uuid,name,power.limit,clocks.max.sm,driver_version --format=csv,noheader
timeout "${SHARES_S:-540}" python3 benchmarks/baseline_first_checks.py --healthy "${HEALTHY:-3}" --lone "${LONE:-1}" \
  --duties "${DUTIES-}" --shares "${SHARES-0.02,0.05,0.08}" --kernel-us "${KERNEL_US:-50}" \
  --hog-kernel "${HOG_KERNEL:-spin}" --out "$OUT/shares.json" --runs "$OUT/shares-runs.json" 2>&1 \
  | tee "$OUT/shares-log.txt" | tail -n 24
date -u
