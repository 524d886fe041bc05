#!/usr/bin/env bash
# The multi-GPU lease's work in one call (docs/results/h200-x2.md): the agent's collectives and DDP step,
# the nccl-tests-style reference in the same lease, the agent again (order check), the standard suite on every
# GPU with --parallel and one after another, then the gpu tests (SKIP_COLLECTIVES=1: only the last two).
# Everything lands in $OUT as it is made.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
# The lent machines ask for NVLink multicast off (lease.sh: NCCL, torch); the agent's workers inherit these.
export NVSHMEM_DISABLE_NVLS=1
GPUS=$(nvidia-smi -L | wc -l)
{
  log "versions ($GPUS GPUs)"
  nvidia-smi --query-gpu=index,name,driver_version,power.limit,pcie.link.gen.max --format=csv
  nvidia-smi topo -m
  python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.nccl.version(), transformers.__version__)'
  TOKEN=$(python3 -m collector token create --db /tmp/ff.duckdb --name lease 2>/dev/null)
  python3 -m collector serve --db /tmp/ff.duckdb --port 0 --port-file /tmp/port --log-level warning &
  for _ in $(seq 100); do [ -s /tmp/port ] && break; sleep 0.2; done
  URL=http://127.0.0.1:$(cat /tmp/port)
  post=(--collector "$URL" --token "$TOKEN" -q --tag "lease=h200x$GPUS")
  if [ -z "${SKIP_COLLECTIVES:-}" ]; then  # SKIP_COLLECTIVES=1: only the standard suite and the gpu tests
  log "agent: collectives and DDP"
  /usr/bin/time -f "collective+ddp: %e s wall" python3 -m agent run --suite standard --device cuda \
    --only collective,training_ddp --output "$OUT/multi1.json" "${post[@]}" 2>&1 | tail -n 8
  log "nccl-tests-style reference"
  python3 -m torch.distributed.run --nproc-per-node "$GPUS" benchmarks/allreduce_reference.py \
    --out "$OUT/reference.json" 2>&1 | grep -v Warning | tail -n 12
  log "agent: collectives again"
  python3 -m agent run --suite standard --device cuda --only collective --output "$OUT/multi2.json" \
    "${post[@]}" 2>&1 | tail -n 4
  fi
  for mode in parallel sequential; do
    log "standard suite on every GPU, $mode"
    flag=$([ $mode = parallel ] && echo --parallel || echo --no-parallel)
    /usr/bin/time -f "$mode: %e s wall" python3 -m agent run --suite standard --device cuda $flag \
      --skip collective,training_ddp --output "$OUT/$mode.json" "${post[@]}" 2>&1 | tail -n 30
  done
  curl -s "$URL/report.md" > "$OUT/report.md"
  curl -s "$URL/report" > "$OUT/report.html"
  log "gpu tests"
  timeout 200 python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider 2>&1 | tail -n 15
  log done
  kill %1
} 2>&1 | tee "$OUT/log.txt"
