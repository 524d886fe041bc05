#!/usr/bin/env bash
# Issue 29 on the H200: what a busy host does to the agent's figures and whether the flags say so (2026-12-03).
# 1. the standard suite quiet, then beside 16 busy CPU processes (the machine's 16 cores) at the default priority
#    (normal), then at --priority low (a host found busy is skipped before measuring);
# 2. check (the health profile, judged against the bundled baseline, no collector) quiet and beside the load;
# 3. a standard run told to stop (SIGTERM) 25 s in: how long it takes to end, and what it kept.
# Files under $OUT: quiet.json, loaded.json, low.json, stopped.json, check-quiet.json, check-loaded.json, log.txt.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
exec > >(tee "$OUT/log.txt") 2>&1
HOGS=${HOGS:-16}
agent() { python3 -m agent "$@"; }
hogs() { for _ in $(seq "$HOGS"); do python3 -c 'while True: pass' & done; sleep 1; }
calm() { kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; }
timed() { local name=$1; shift; local t0; t0=$(date +%s.%N); "$@"; echo "rc=$? $name took $(echo "$(date +%s.%N) - $t0" | bc) s"; }
date -u
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
log "quiet standard"; timed quiet agent run --suite standard -q --output "$OUT/quiet.json" >/dev/null
log "standard beside $HOGS busy processes, priority normal"; hogs
timed loaded timeout 300 python3 -m agent run --suite standard -q --output "$OUT/loaded.json" >/dev/null; calm
log "standard beside $HOGS busy processes, priority low"; hogs
timed low timeout 120 python3 -m agent run --suite standard -q --priority low --output "$OUT/low.json" >/dev/null; calm
log "check quiet"; timed check-quiet agent check --json > "$OUT/check-quiet.json"
log "check beside $HOGS busy processes"; hogs; timed check-loaded agent check --json > "$OUT/check-loaded.json"; calm
log "standard told to stop 25 s in"
python3 -m agent run --suite standard -q --output "$OUT/stopped.json" >/dev/null & pid=$!
sleep 25; t0=$(date +%s.%N); kill -TERM $pid; wait $pid; echo "rc=$? stopped $(echo "$(date +%s.%N) - $t0" | bc) s after SIGTERM"
log "summary"
python3 benchmarks/host_shares.py "$OUT"/quiet.json "$OUT"/loaded.json "$OUT"/low.json "$OUT"/stopped.json
python3 benchmarks/run_to_run.py "$OUT/quiet.json" "$OUT/loaded.json" --min-ms 0 --limit 5 --top 25
python3 - "$OUT" <<'PY'
import json, sys
for name in ("check-quiet", "check-loaded"):
    body = json.load(open(f"{sys.argv[1]}/{name}.json"))
    print(name, body["level"], body["exit_code"], [(f["figure"], f["level"], f.get("value")) for v in body["verdicts"] for f in v.get("figures", [])], body["notes"])
PY
date -u
