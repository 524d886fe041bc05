# Sourced by the scripts that run on a lent GPU machine (`. benchmarks/lease.sh`, from the repository's root): the
# folder that comes back ($OUT), the wheels that machine lacks installed from .whl (`make gpu-wheels` here, carried),
# NVLink multicast off (the device tool's KINDS.md says why), a timestamped `log`, and `hogs` / `calm`: HOGS (24) busy
# CPU processes started beside a measurement, and stopped.
set -u
OUT=${OUT:-/tmp/flopfleet-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
log() { echo "== $(date -u +%H:%M:%S) $*"; }
# Only the hogs: a plain `wait` would also wait for a `tee` the caller started, which ends only with its script.
hogs() { for _ in $(seq "${HOGS:-24}"); do python3 -c 'while True: pass' & done; sleep 1; }
calm() { local pids; pids=$(jobs -p); [ -z "$pids" ] || { kill $pids 2>/dev/null; wait $pids 2>/dev/null; }; }
