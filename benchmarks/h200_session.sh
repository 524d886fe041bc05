#!/usr/bin/env bash
# The GPU lease's work, in one call (see docs/results/h200.md): install the carried wheels (make gpu-wheels),
# run the gpu tests, start a collector, run the standard suite twice (timed from start to posted run), the full
# suite's shape search, and the notebook method side by side. Everything lands in $OUT.
#   RUNS="1 2"  NOTEBOOK=1  MAMF=1  TESTS=1   (set one to empty to leave that part out)
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  log versions
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,pcie.link.gen.max --format=csv
  python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__)'
  python3 -m agent info --json > "$OUT/info.json"
  COLUMNS=120 python3 -m agent info
  if [ -n "${TESTS-1}" ]; then
    log "gpu tests"
    python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tail -n 15
  fi
  TOKEN=$(python3 -m collector token create --db /tmp/flopfleet.duckdb --name lease 2>/dev/null)
  python3 -m collector serve --db /tmp/flopfleet.duckdb --port 0 --port-file /tmp/port --log-level warning &
  for _ in $(seq 100); do [ -s /tmp/port ] && break; sleep 0.2; done
  URL=http://127.0.0.1:$(cat /tmp/port)
  for i in ${RUNS-1 2}; do
    log "standard run $i"
    /usr/bin/time -f "standard run $i: %e s wall, start to posted run" python3 -m agent run --suite standard \
      --device cuda --collector "$URL" --token "$TOKEN" --output "$OUT/standard$i.json" --tag lease=h200 -q 2>&1 | tail -n 12
  done
  if [ -n "${MAMF-1}" ]; then
    log "full suite: mamf"
    /usr/bin/time -f "mamf: %e s wall" python3 -m agent run --suite full --device cuda --only mamf \
      --collector "$URL" --token "$TOKEN" --output "$OUT/mamf.json" -q 2>&1 | tail -n 8
  fi
  curl -s "$URL/report.md" > "$OUT/report.md"
  if [ -n "${NOTEBOOK-1}" ]; then
    log "notebook method"
    python3 benchmarks/notebook_method.py --cells large --attn eager,sdpa --min-run-time 1 \
      --matmul-sizes 2048,4096,8192,16384 --out "$OUT/notebook.json"
  fi
  log done
  kill %1
} 2>&1 | tee "$OUT/log.txt"
