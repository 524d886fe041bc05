#!/usr/bin/env bash
# The health check's GPU work (docs/results/h200.md, "Health profile and check"), in calls of under 10 minutes:
#   PART=1: where a measuring child's start goes (health_startup.py), the busy-GPU tests, three timelines, the
#           GPU tests;  PART=2: back-to-back healthy checks against a collector (the false alarms);
#   PART=3: the plain-torch BERT layer against transformers' side by side, the busy-GPU tests, two timelines and
#           HEALTHY checks against a collector (the final profile's wall time and false alarms).
# Installs the carried wheels (make gpu-wheels) first. Everything lands in $OUT.
. "$(dirname "$0")/lease.sh"  # OUT, the wheels, PYTHONPATH, log
{
  log versions
  python3 -c 'import torch, transformers, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, transformers.__version__)'
  python3 -c 'import sklearn; print("sklearn", sklearn.__version__)' 2>&1 | tail -n 1
  if [ "${PART:-1}" = 1 ]; then
    log "a measuring child's start"
    python3 benchmarks/health_startup.py --repeats "${REPEATS:-2}" --importtime
    log "busy-GPU tests"
    timeout 300 python3 -m pytest -m gpu tests/gpu/test_busy.py -q -p no:cacheprovider 2>&1 | tail -n 15
    for i in 1 2 3; do log "timeline $i"; python3 benchmarks/health_timeline.py; done
    log "gpu tests"
    timeout 300 python3 -m pytest -m gpu tests/gpu/test_gpu.py -q -p no:cacheprovider 2>&1 | tail -n 15
  elif [ "${PART:-1}" = 3 ]; then
    log "BERT layer: plain torch against transformers"
    python3 benchmarks/bert_torch_vs_transformers.py --rounds 3
    log "busy-GPU tests"
    timeout 300 python3 -m pytest -m gpu tests/gpu/test_busy.py -q -p no:cacheprovider 2>&1 | tail -n 15
    for i in 1 2; do log "timeline $i"; python3 benchmarks/health_timeline.py; done
    log "healthy checks back to back"
    timeout 400 python3 benchmarks/health_sensitivity.py --healthy "${HEALTHY:-6}" --duties "" \
      --out "$OUT/health-final.json" 2>&1 | tail -n 10
  else
    log "healthy checks back to back"
    timeout 540 python3 benchmarks/health_sensitivity.py --healthy "${HEALTHY:-10}" --duties "" \
      --out "$OUT/health-false-alarms.json" 2>&1 | tail -n 14
  fi
  log done
} 2>&1 | tee "$OUT/log-part${PART:-1}.txt"
