#!/bin/bash
# `make test` beside one busy process (a core kept busy, as on a loaded CI machine), on a snapshot of a commit, so that
# the checkout can change meanwhile. Appends "rc=... took ... s at <commit>" to the log.
#
#     scripts/loaded_test.sh LOG [COMMIT] [RUNS]   # RUNS in a row (default 1), stopping at the first failure
#
# Needs the checkout's .venv (make test once). Each run takes 20-27 min on a 2-core machine (2026-12-03).
set -u
log=$1
commit=$(git rev-parse --short "${2:-HEAD}")
runs=${3:-1}
root=$(git rev-parse --show-toplevel)
snapshot=$(mktemp -d /tmp/flopfleet-loaded-XXXXXX)
trap 'git -C "$root" worktree remove --force "$snapshot" 2>/dev/null; rm -rf "$snapshot"' EXIT
git -C "$root" worktree add -q --detach "$snapshot" "$commit"
for run in $(seq "$runs"); do
  python3 -c 'while True: pass' & hog=$!
  start=$(date +%s)
  (cd "$snapshot" && PYTHONPATH="$snapshot" "$root/.venv/bin/python" -m pytest -m "not gpu" -n 2 --dist loadfile -q \
    -p no:cacheprovider --durations=20 >> "$log" 2>&1)
  rc=$?
  kill $hog
  echo "run $run: rc=$rc took $(( $(date +%s) - start )) s at $commit, load average $(cut -d' ' -f1-3 /proc/loadavg)" >> "$log"
  [ $rc -eq 0 ] || exit $rc
done
