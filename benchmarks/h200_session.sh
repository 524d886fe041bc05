#!/usr/bin/env bash
# Runs on the lent GPU machine (see docs/results/h200.md): installs carried wheels, starts a collector,
# runs the standard suite twice (timed from start to posted run), the notebook method side by side,
# and the full suite's shape search. Everything lands in $OUT.
set -u
OUT=${OUT:-/tmp/flopfleet-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD NCCL_NVLS_ENABLE=0
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
log() { echo "== $(date -u +%H:%M:%S) $*"; }
{
  log versions
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,pcie.link.gen.max --format=csv
  python3 -c 'import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)'
  python3 -m agent info --json > "$OUT/info.json"
  python3 -m collector serve --db /tmp/flopfleet.duckdb --port 0 --port-file /tmp/port --log-level warning &
  for _ in $(seq 50); do [ -s /tmp/port ] && break; sleep 0.2; done
  URL=http://127.0.0.1:$(cat /tmp/port)
  for i in ${RUNS:-1 2}; do
    log "standard run $i"
    /usr/bin/time -f "standard run $i wall %e s" python3 -m agent run --suite standard --device cuda \
      --collector "$URL" --output "$OUT/standard$i.json" --tag lease=h200 -q 2>&1 | tail -n 40
  done
  if [ -n "${NOTEBOOK:-1}" ]; then
    log "notebook method"
    python3 benchmarks/notebook_method.py --cells large --attn eager,sdpa --min-run-time 1 --out "$OUT/notebook.json"
  fi
  if [ -n "${MAMF:-1}" ]; then
    log "full suite: mamf"
    /usr/bin/time -f "mamf wall %e s" python3 -m agent run --suite full --device cuda --only mamf \
      --collector "$URL" --output "$OUT/mamf.json" -q 2>&1 | tail -n 20
  fi
  log "report"
  curl -s "$URL/report.md" > "$OUT/report.md"
  kill %1
} 2>&1 | tee "$OUT/log.txt"
