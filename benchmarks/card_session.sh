#!/usr/bin/env bash
# One lent GPU's share of issue 41 (docs/results/h100.md), any card (nvidia-smi says which), in calls of under
# 10 minutes, by STAGES (run on the machine from the repository's root, wheels from `make gpu-wheels` carried):
#   tests   every gpu test (tests/gpu), then the matmul harness against triton's do_bench (benchmarks/matmul_harness.py)
#   runs    the standard suite RUNS ("1 2") times back to back against a local collector (the first two's run-to-run
#           table; four give a GPU's run-to-run spread for the bundled baseline), then once
#           beside HOGS busy CPU processes (benchmarks/h200_busy_host_session.sh's stage: which cells move, which
#           are flagged `starved`) and the same check quiet and loaded
#   busy    the runs stage's busy host alone
#   shares  health first checks: HEALTHY against fresh collectors, LONE without one, then a competing process taking
#           each of SHARES of the GPU's time during one first check with a collector and one without
#   small   one more GPU for the bundled baseline: HEALTHY health first checks and one standard run
#   starved the starved rule's readings (benchmarks/starved_followed.py: six workloads quiet and beside HOGS busy
#           processes)
#   layers  the standard suite's BERT layers alone, quiet then beside HOGS busy processes, PAIRS times (busy_cells.py
#           on each pair: whether the short forward replays' slowdown beside a busy host comes back, and flagged)
#   refill  the BERT layers by the timer before and after REFILL (a patch: its agent/timing/cuda.py taken back in a
#           copy), quiet then beside HOGS busy processes, PAIRS times, alternately on one GPU (busy_cells.py on each)
#   numa    pinned h2d from each NUMA node's CPUs (benchmarks/h2d_numa.py)
#   h2dwatch pinned h2d and d2h every half second for WATCH_S seconds (benchmarks/h2d_watch.py: how long dips last)
# What every stage writes is packed into $OUT/results.tgz again after each stage, so a call cut short keeps what it
# did; the log is $OUT/log.txt. The GPU's settings are only read (nvidia-smi --query), never changed.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log, hogs, calm
BACK=$OUT
export OUT=/tmp/card-out
mkdir -p "$OUT"
STAGES=" ${STAGES:-small} "
pack() { tar -czf "$BACK/results.tgz" -C "$OUT" . ; }
{
  date -u
  nvidia-smi --query-gpu=name,uuid,driver_version,power.limit,power.default_limit,clocks.max.sm,temperature.gpu \
    --format=csv,noheader | tee "$OUT/card.txt"
  python3 -c 'import torch, transformers, triton, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__, triton.__version__)' | tee -a "$OUT/card.txt"
  if [[ $STAGES == *" tests "* ]]; then
    log "gpu tests"
    # SIGINT at the limit: pytest then prints what failed so far (a plain kill loses the report); --durations says
    # which tests a tighter limit should leave for a call of their own.
    timeout -s INT -k 30 "${TESTS_S:-300}" python3 -m pytest -m gpu ${TESTS:-tests/gpu} -q -p no:cacheprovider \
      --durations=12 2>&1 | tee "$OUT/gpu-tests.txt" | tail -n 30
    pack
    [ -n "${HARNESS-1}" ] && log "matmul harness" && timeout 150 python3 benchmarks/matmul_harness.py --out "$OUT/matmul.json" --idle 0.2 \
      --series bf16:2048,fp16:2048,bf16:8192 --series-s 1.5 --idle-series 0.8 | tail -n 24
    pack
  fi
  if [[ $STAGES == *" runs "* ]]; then
    runs=(${RUNS-1 2})  # 45 s a standard run on a fresh H100, and a collector to start
    GPU_TESTS= HARNESS= WHEELS= NAME=standard timeout $(( 40 + 80 * ${#runs[@]} )) bash benchmarks/h200_speed_session.sh \
      | tail -n 30
    pack
  fi
  if [[ $STAGES == *" runs "* || $STAGES == *" busy "* ]]; then
    log "busy host"
    HOGS=${HOGS:-24} STAGES="standard check" timeout 240 bash benchmarks/h200_busy_host_session.sh | tail -n 40
    pack
  fi
  if [[ $STAGES == *" shares "* ]]; then
    log "first checks and shares"
    timeout "${SHARES_S:-300}" python3 benchmarks/baseline_first_checks.py --healthy "${HEALTHY:-3}" \
      --lone "${LONE:-1}" --duties "" --shares "${SHARES-0.002,0.005,0.01,0.02}" --kernel-us "${KERNEL_US:-50}" \
      --out "$OUT/shares.json" --runs "$OUT/shares-runs.json" 2>&1 | tee "$OUT/shares-log.txt" | tail -n 30
    pack
  fi
  if [[ $STAGES == *" small "* ]]; then
    log "first checks"
    timeout 150 python3 benchmarks/baseline_first_checks.py --healthy "${HEALTHY:-3}" --lone 0 --duties "" \
      --shares "" --out "$OUT/checks.json" --runs "$OUT/checks-runs.json" 2>&1 | tail -n 8
    pack
    GPU_TESTS= HARNESS= WHEELS= NAME=standard RUNS=1 timeout 120 bash benchmarks/h200_speed_session.sh | tail -n 6
    pack
  fi
  if [[ $STAGES == *" starved "* ]]; then
    log "the starved rule's readings"
    timeout 240 python3 benchmarks/starved_followed.py --hogs "${HOGS:-24}" --out "$OUT/starved.json" 2>&1 \
      | tee "$OUT/starved-log.txt"
    pack
  fi
  if [[ $STAGES == *" layers "* ]]; then
    log "BERT layers quiet and beside ${HOGS:-24} busy processes, ${PAIRS:-3} times"
    for i in $(seq "${PAIRS:-3}"); do
      timeout 90 python3 -m agent run --suite standard --only layer_bert -q --output "$OUT/layers-quiet-$i.json" >/dev/null
      hogs
      timeout 120 python3 -m agent run --suite standard --only layer_bert -q --output "$OUT/layers-loaded-$i.json" >/dev/null
      calm
      python3 benchmarks/busy_cells.py "$OUT/layers-quiet-$i.json" "$OUT/layers-loaded-$i.json" | head -n 8
    done
    pack
  fi
  if [[ $STAGES == *" refill "* ]]; then
    log "BERT layers before and after the refill (REFILL), quiet then beside ${HOGS:-24} busy processes, ${PAIRS:-2} times"
    # Before: this tree with REFILL's timer change taken back, in a copy; the two run alternately on one GPU.
    rm -rf /tmp/before && mkdir /tmp/before && cp -r agent schemas /tmp/before/ \
      && (cd /tmp/before && git apply -R --include=agent/timing/cuda.py "$OLDPWD/${REFILL:-}") \
      || { log "REFILL (${REFILL:-unset}) could not be taken back: no before"; PAIRS=0; }
    layers() { (cd "$1" && PYTHONPATH=/tmp/site:$1 timeout 120 python3 -m agent run --suite standard \
      --only layer_bert -q --output "$2" >/dev/null); }
    for i in $(seq "${PAIRS:-2}"); do
      layers /tmp/before "$OUT/before-quiet-$i.json"; layers "$PWD" "$OUT/after-quiet-$i.json"
      hogs
      layers /tmp/before "$OUT/before-loaded-$i.json"; layers "$PWD" "$OUT/after-loaded-$i.json"
      calm
      for when in before after; do
        echo "$when, pair $i:"; python3 benchmarks/busy_cells.py "$OUT/$when-quiet-$i.json" "$OUT/$when-loaded-$i.json" | head -n 8
      done
      echo "quiet, before -> after, pair $i:"
      python3 benchmarks/busy_cells.py "$OUT/before-quiet-$i.json" "$OUT/after-quiet-$i.json" | head -n 12
    done
    pack
  fi
  if [[ $STAGES == *" numa "* ]]; then
    log "h2d by NUMA node"
    timeout 120 python3 benchmarks/h2d_numa.py --out "$OUT/numa.json" 2>&1 | tee "$OUT/numa-log.txt"
    lscpu | grep -i numa | tee -a "$OUT/numa-log.txt"
    pack
  fi
  if [[ $STAGES == *" h2dwatch "* ]]; then
    log "h2d and d2h every half second"
    timeout $(( ${WATCH_S:-90} + 60 )) python3 benchmarks/h2d_watch.py --seconds "${WATCH_S:-90}" --out "$OUT/watch.json" \
      > "$OUT/watch-log.txt" 2>&1; tail -n 3 "$OUT/watch-log.txt"
    pack
  fi
  log done
  date -u
} 2>&1 | tee "$BACK/log.txt"
pack
