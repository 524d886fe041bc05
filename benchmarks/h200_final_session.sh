#!/usr/bin/env bash
# The session's last GPU call, everything that must be measured on the final code in one go (2026-12-02):
# 1. the first checks against the bundled baseline only, a competing process at several duty cycles, and the
#    exported baseline handed to a second collector (benchmarks/baseline_first_checks.py, docs/baselines.md);
# 2. the standard suite twice back to back with its breakdown and run-to-run table (benchmarks/h200_speed_session.sh,
#    without the matmul harness, measured earlier in the session);
# 3. the gpu tests named in GPU_TESTS.
# Files under $OUT: baseline.json, baseline-runs.json, baseline-log.txt, final1.json, final2.json, final-log.txt.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
date -u
timeout "${BASELINE_S:-250}" python3 benchmarks/baseline_first_checks.py --healthy "${HEALTHY:-5}" --lone "${LONE:-1}" \
  --duties "${DUTIES:-0.3,0.6,0.9}" --out "$OUT/baseline.json" --runs "$OUT/baseline-runs.json" 2>&1 \
  | tee "$OUT/baseline-log.txt" | tail -n 12
GPU_TESTS="${GPU_TESTS-}" HARNESS= WHEELS= NAME=final timeout "${SPEED_S:-230}" bash benchmarks/h200_speed_session.sh \
  | tail -n 40
date -u
