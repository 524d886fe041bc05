#!/usr/bin/env bash
# LLM inference on the H200 (issue 16; docs/results/h200.md, "LLM inference"), in calls of under 10 minutes:
#   PART=1: the inference gpu tests; the inference family at the standard grid, then at the full grid, through the
#           real agent (each run's table: tokens/s, TFLOPS, TTFT, time per output token, GB/s per decode step and
#           its fraction of the datasheet bandwidth, how it was timed).
#   PART=2: the whole standard suite (its wall time from start to written run file, and its inference part).
#   PART=3: where a Llama-3-8B decode step's time goes (benchmarks/inference_profile.py: the step as the benchmark
#           replays it, its kernels as matmuls, attention and the rest), at batch 1 and 32.
#   PART=4: the same step at batch 1 fused by torch.compile first: how much of the gap to the bandwidth limit is the
#           small kernels (not what the benchmark measures).
# Installs the carried wheels (make gpu-wheels) first. Everything lands in $OUT.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
run() {  # run NAME ARGS...: one agent run into $OUT/NAME.json, timed from process start to the written file
  local name=$1; shift
  /usr/bin/time -f "$name: %e s wall" python3 -m agent run --device cuda --output "$OUT/$name.json" \
    --spool-dir "$OUT/spool" -q "$@" 2>&1 | tail -n 12
  python3 benchmarks/inference_report.py "$OUT/$name.json"
}
{
  log versions
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total --format=csv
  python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__)'
  if [ "${PART:-1}" = 1 ]; then
    log "inference gpu tests"
    timeout 300 python3 -m pytest -m gpu tests/gpu/test_inference_gpu.py -q -p no:cacheprovider 2>&1 | tail -n 15
    log "inference, standard grid"
    run inference-standard --suite standard --only inference
    log "inference, full grid"
    run inference-full --suite full --only inference
  elif [ "${PART}" = 2 ]; then
    log "standard suite"
    run standard --suite standard
  elif [ "${PART}" = 3 ]; then
    for b in 1 32; do
      log "decode step profile, batch $b"
      timeout 270 python3 benchmarks/inference_profile.py --model llama-3-8b --batch "$b" --context 1024 2>&1 | tail -n 20
    done
  else
    log "decode step profile, batch 1, torch.compile"
    timeout 540 python3 benchmarks/inference_profile.py --model llama-3-8b --batch 1 --context 1024 --compile 2>&1 \
      | tail -n 20
  fi
  log done
} 2>&1 | tee "$OUT/log-inference-part${PART:-1}.txt"
