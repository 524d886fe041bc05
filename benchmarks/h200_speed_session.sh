#!/usr/bin/env bash
# Issue #24's GPU work in one call (docs/results/h200.md, "The standard suite at the hardware's pace"): the standard
# suite twice back to back, each timed from process start to the run posted to a local collector, the breakdown of
# each run and the run-to-run table of the two, then the matmul harness against triton's do_bench.
#   CODE=.   the agent to measure: the working tree, or a copy of the committed code (.before: git archive HEAD)
#   NAME=after  prefix of the files written to $OUT;  RUNS="1 2";  HARNESS=1 (empty: leave the harness out)
#   HARNESS_FIRST=1  the harness before the runs (default: after them)
#   GPU_TESTS="tests/gpu/..."  gpu tests to run first;  SUITE=standard DEVICE=cuda WHEELS=1
#   (a dry run here: SUITE=quick DEVICE=cpu WHEELS= HARNESS= OUT=/tmp/x PY=$PWD/.venv/bin/python)
set -u
OUT=${OUT:-/tmp/flopfleet-out}
CODE=${CODE:-.}
NAME=${NAME:-after}
HERE=$(pwd)
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
PY=${PY:-python3}
if [ -n "${WHEELS-1}" ]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
fi
# The scripts of this session are the working tree's; the agent and collector measured are CODE's.
cp benchmarks/matmul_harness.py benchmarks/suite_breakdown.py benchmarks/run_to_run.py /tmp/ 2>/dev/null
mkdir -p /tmp/scripts && cp scripts/results_files.py /tmp/scripts/  # how they read a run file, beside them in /tmp
cd "$CODE" || exit 1
export PYTHONPATH=/tmp/site:$PWD
log() { echo "== $(date -u +%H:%M:%S) $*"; }
harness() {
  log "matmul harness ($NAME)"
  timeout 120 $PY /tmp/matmul_harness.py --out "$OUT/$NAME-matmul.json" --idle 0.2 \
    --series bf16:16384,fp16:16384,tf32:16384,bf16:8192 --series-s 1.5 --idle-series 0.8
}
{
  log "versions ($NAME: $CODE)"
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,temperature.gpu --format=csv
  $PY -c 'import torch, transformers, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__, triton.__version__)'
  $PY -c 'import os, transformers; d = os.path.dirname(transformers.__file__); c = os.path.join(d, "__pycache__"); print("transformers byte code:", len(os.listdir(c)) if os.path.isdir(c) else "none", "files; folder writable:", os.access(d, os.W_OK))'
  [ -n "${HARNESS_FIRST-}" ] && [ -n "${HARNESS-1}" ] && harness
  if [ -n "${GPU_TESTS-}" ]; then
    log "gpu tests: $GPU_TESTS"
    $PY -m pytest -m gpu $GPU_TESTS ${GPU_TESTS_K:+-k "$GPU_TESTS_K"} -q -p no:cacheprovider 2>&1 | tee "$OUT/$NAME-gpu-tests.txt" | tail -n 8
  fi
  DB=/tmp/speed-$NAME.duckdb
  rm -f "$DB" "$DB".* /tmp/speed-port
  TOKEN=$($PY -m collector token create --db "$DB" --name lease 2>/dev/null)
  $PY -m collector serve --db "$DB" --port 0 --port-file /tmp/speed-port --log-level warning &
  COLLECTOR=$!
  for _ in $(seq 150); do [ -s /tmp/speed-port ] && break; sleep 0.2; done
  URL=http://127.0.0.1:$(cat /tmp/speed-port)
  for i in ${RUNS-1 2}; do
    log "standard run $i ($NAME)"
    launched=$(date +%s.%N)
    /usr/bin/time -f "$NAME run $i: %e s wall, start to posted run" $PY -m agent run --suite "${SUITE:-standard}" \
      --device "${DEVICE:-cuda}" --collector "$URL" --token "$TOKEN" --output "$OUT/$NAME$i.json" -q 2>&1 | tail -n 4
    exited=$(date +%s.%N)
    $PY /tmp/suite_breakdown.py "$OUT/$NAME$i.json" --launched "$launched" --exited "$exited" --short
  done
  [ -f "$OUT/${NAME}1.json" ] && [ -f "$OUT/${NAME}2.json" ] && $PY /tmp/run_to_run.py "$OUT/${NAME}1.json" "$OUT/${NAME}2.json" --top 15
  kill "$COLLECTOR" 2>/dev/null
  [ -z "${HARNESS_FIRST-}" ] && [ -n "${HARNESS-1}" ] && harness
  log done
} 2>&1 | tee "$OUT/$NAME-log.txt"
cd "$HERE" || exit 0
