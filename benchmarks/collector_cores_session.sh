#!/usr/bin/env bash
# The collector's ingest against raw DuckDB bulk on 2, 4, 8 and 16 of a machine's cores (taskset), with 16 and 64
# agents posting at once, and the writer alone beside raw bulk: how the share of raw that HTTP ingest reaches
# changes with the cores it is given and the runs each commit gathers. Run from the repository's root on a
# many-core machine, e.g. the lent H200 host (its GPU is not used):
#
#   bash benchmarks/collector_cores_session.sh                  # via the device tool: carry .whl (make gpu-wheels)
#   CORES="2" CLIENTS=16 ROUNDS=1 RUNS=80 WHEELS= OUT=/tmp/x PY=$PWD/.venv/bin/python bash benchmarks/collector_cores_session.sh
set -u
if [ -n "${WHEELS-1}" ]; then . benchmarks/lease.sh; else OUT=${OUT:-/tmp/flopfleet-out}; mkdir -p "$OUT"; log() { echo "== $(date -u +%H:%M:%S) $*"; }; fi
PY=${PY:-python3}
CORES=${CORES:-2 4 8 16}
CLIENTS=${CLIENTS:-16 64}
WRITER_CORES=${WRITER_CORES-2 16}
ROUNDS=${ROUNDS:-3}
RUNS=${RUNS:-400}
{ date -u; nproc; lscpu | grep -E "Model name|^CPU\(s\)|Thread|Socket"; $PY -c "import sys, duckdb, pydantic, fastapi, uvicorn, pyarrow; print(sys.version.split()[0], 'duckdb', duckdb.__version__, 'pydantic', pydantic.__version__, 'fastapi', fastapi.__version__, 'uvicorn', uvicorn.__version__, 'pyarrow', pyarrow.__version__)"; git log -1 --format=%H 2>/dev/null; } > "$OUT/machine.txt" 2>&1 || { cat "$OUT/machine.txt"; exit 1; }
cat "$OUT/machine.txt"
for n in $CORES; do
  for c in $CLIENTS; do
    log "ingest on $n cores, $c clients"
    taskset -c 0-$((n - 1)) $PY benchmarks/collector_ingest.py --report-runs 0 --rounds "$ROUNDS" --runs "$RUNS" \
      --clients "$c" 2>&1 | tee "$OUT/ingest-$n-cores-$c-clients.txt"
  done
done
for n in $WRITER_CORES; do
  log "the writer alone on $n cores"
  taskset -c 0-$((n - 1)) $PY benchmarks/collector_writer.py --groups 8 16 32 --threads 1 --runs "$RUNS" 2>&1 | tee "$OUT/writer-$n-cores.txt"
done
log done
