#!/usr/bin/env bash
# Issue 29 on the H200: what a busy host does to the agent's figures and whether the flags say so (2026-12-03).
# 1. the standard suite quiet, then beside 16 busy CPU processes (the machine's 16 cores) at the default priority
#    (normal), then at --priority low (a host found busy is skipped before measuring);
# 2. check (the health profile, judged against the bundled baseline, no collector) quiet and beside the load;
# 3. a standard run told to stop (SIGTERM) 25 s in: how long it takes to end, and what it kept.
# Files under $OUT: quiet.json, loaded.json, low.json, stopped.json, check-quiet.json, check-loaded.json, log.txt.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log, hogs, calm
exec > >(tee "$OUT/log.txt") 2>&1
HOGS=${HOGS:-16}
agent() { python3 -m agent "$@"; }
ms() { echo $(( $(date +%s%N) / 1000000 )); }
timed() { local name=$1; shift; local t0; t0=$(ms); "$@"; echo "rc=$? $name took $(( $(ms) - t0 )) ms" >&2; }
STAGES=" ${STAGES:-standard low check stop} "  # a later call can run the stages an earlier one did not reach
date -u
nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,clocks.max.sm --format=csv,noheader
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
if [[ $STAGES == *" standard "* ]]; then
  log "quiet standard"; timed quiet agent run --suite standard -q --output "$OUT/quiet.json" >/dev/null
  log "standard beside $HOGS busy processes, priority normal"; hogs
  timed loaded timeout 300 python3 -m agent run --suite standard -q --output "$OUT/loaded.json" >/dev/null; calm
fi
if [[ $STAGES == *" low "* ]]; then
  log "standard beside $HOGS busy processes, priority low"; hogs
  timed low timeout 120 python3 -m agent run --suite standard -q --priority low --output "$OUT/low.json" >/dev/null
  calm
fi
if [[ $STAGES == *" check "* ]]; then
  log "check quiet"; timed check-quiet agent check --json > "$OUT/check-quiet.json"
  log "check beside $HOGS busy processes"; hogs; timed check-loaded agent check --json > "$OUT/check-loaded.json"; calm
fi
if [[ $STAGES == *" stop "* ]]; then
  log "standard told to stop 25 s in"
  python3 -m agent run --suite standard -q --output "$OUT/stopped.json" >/dev/null & pid=$!
  sleep 25; t0=$(ms); kill -TERM $pid; wait $pid; echo "rc=$? stopped $(( $(ms) - t0 )) ms after SIGTERM"
fi
log "summary"
python3 benchmarks/host_shares.py "$OUT"/*.json
[ -f "$OUT/loaded.json" ] && python3 benchmarks/run_to_run.py "$OUT/quiet.json" "$OUT/loaded.json" --min-ms 0 --limit 5 --top 25
python3 - "$OUT" <<'PY'
import json, os, sys
for name in ("check-quiet", "check-loaded"):
    if not os.path.exists(f"{sys.argv[1]}/{name}.json"):
        continue
    body = json.load(open(f"{sys.argv[1]}/{name}.json"))
    print(name, body["level"], body["exit_code"], [(f["figure"], f["level"], f.get("value")) for v in body["verdicts"] for f in v.get("figures", [])], body["notes"])
PY
date -u
