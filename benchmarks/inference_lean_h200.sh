#!/usr/bin/env bash
# The lean Llama decode path on the H200 (issue 23; docs/results/h200.md, "LLM inference"), in one call of under
# five minutes, everything under $OUT:
#   1. benchmarks/inference_lean.py: ceilings, correctness against transformers, decode and prefill of both paths
#      and their variants, kernels per step (inference-lean.json, lean.log);
#   2. the standard suite's bandwidth and inference families through the real agent, both implementations
#      (standard-inference.json: each decode's fraction of the same run's copy; agent.log: the wall time);
#   3. the inference gpu tests (pytest.log).
# COMPILE=1 adds torch.compile of the lean step to part 1 (its compile time is reported).
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
  date -u
} > "$OUT/env.txt" 2>&1
timeout "${LEAN_S:-150}" python3 benchmarks/inference_lean.py --out "$OUT" ${COMPILE:+--compile --compile-before-s 60} \
  > "$OUT/lean.log" 2>&1
/usr/bin/time -f "agent run: %e s wall, start to written run file" timeout "${AGENT_S:-90}" python3 -m agent run \
  --suite standard --only bandwidth,inference --device cuda --when-busy measure --output "$OUT/standard-inference.json" \
  --spool-dir /tmp/spool -q > "$OUT/agent.log" 2>&1
timeout "${TESTS_S:-60}" python3 -m pytest -m gpu tests/gpu/test_inference_lean.py tests/gpu/test_inference_gpu.py -q \
  -p no:cacheprovider > "$OUT/pytest.log" 2>&1
tail -n 4 "$OUT/pytest.log"
tail -n 2 "$OUT/agent.log"
[ -s "$OUT/standard-inference.json" ] && python3 benchmarks/inference_report.py "$OUT/standard-inference.json"
tail -n 45 "$OUT/lean.log"
