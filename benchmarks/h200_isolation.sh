#!/usr/bin/env bash
# Process isolation on a lent GPU, in one call: the gpu tests, the crash families on the GPU (a segfault, a hang,
# a device-side assert that poisons the CUDA context...), then the standard suite alternately with --isolation
# inline and process (timed from start to written run). Everything lands in $OUT; benchmarks/isolation_compare.py
# turns the run files into the agreement table.   ROUNDS="1 2"  TESTS=1  CRASH=1
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  log versions
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv
  python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__)'
  if [ -n "${TESTS-1}" ]; then
    log "gpu tests"
    python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -x 2>&1 | tail -n 12
  fi
  if [ -n "${CRASH-1}" ]; then
    log "crash families on the GPU"
    FLOPFLEET_PLUGINS=tests.agent.crashers FLOPFLEET_TEST_PIDFILE=/tmp/killme.pid python3 -m agent run --suite crash \
      --device cuda --skip crash_killed --case-timeout 20 -q --output "$OUT/crash.json" 2>&1 | tail -n 25
    echo "agent exit code: ${PIPESTATUS[0]}"
  fi
  for i in ${ROUNDS-1 2}; do
    for iso in inline process; do
      log "standard $iso $i"
      /usr/bin/time -f "standard $iso $i: %e s wall, start to written run" python3 -m agent run --suite standard \
        --device cuda --isolation $iso --output "$OUT/standard-$iso$i.json" -q 2>&1 | tail -n 3
    done
  done
  python3 benchmarks/isolation_compare.py "$OUT"
  log done
} 2>&1 | tee "$OUT/log.txt"
