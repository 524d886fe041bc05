#!/usr/bin/env bash
# Run flopfleet's machine-wide benchmarks (collectives, data-parallel training) across several machines.
# Start ONE copy of this script per machine; each machine's agent launches a worker per local GPU, all
# workers meet at node 0, and every machine posts its own run (its GPUs, the shared collective figures).
#
#   Slurm:     srun --nodes=2 --ntasks-per-node=1 scripts/multinode.sh http://collector:8000 TOKEN
#   torchrun:  torchrun --nnodes=2 --nproc-per-node=1 --node-rank=R --master-addr=HOST0 --master-port=29400 \
#                --no-python scripts/multinode.sh http://collector:8000 TOKEN
#   by hand:   NNODES=2 NODE_RANK=R MASTER_ADDR=HOST0 MASTER_PORT=29511 scripts/multinode.sh URL TOKEN
#
# Extra arguments after URL and TOKEN go to `flopfleet-agent run` (default: --suite standard --only
# collective,training_ddp). NCCL settings in the environment (NCCL_NVLS_ENABLE, NCCL_SOCKET_IFNAME, ...)
# reach the workers unchanged. FLOPFLEET_AGENT names the agent command, FLOPFLEET_DEVICE=cpu runs gloo on CPUs.
set -euo pipefail
URL=${1:?usage: multinode.sh COLLECTOR_URL TOKEN [agent run options]}
TOKEN=${2:?usage: multinode.sh COLLECTOR_URL TOKEN [agent run options]}
shift 2
AGENT=${FLOPFLEET_AGENT:-flopfleet-agent}
if [ $# -eq 0 ]; then set -- --suite standard --only collective,training_ddp; fi
if [ -n "${SLURM_NODEID:-}" ] || [ -n "${GROUP_RANK:-}" ]; then
  layout=(--nodes-from-env)
else
  layout=(--nnodes "${NNODES:?set NNODES}" --node-rank "${NODE_RANK:?set NODE_RANK}"
          --master-addr "${MASTER_ADDR:?set MASTER_ADDR}" --master-port "${MASTER_PORT:-29511}")
fi
exec $AGENT run --device "${FLOPFLEET_DEVICE:-cuda}" --collector "$URL" --token "$TOKEN" --tag "nodes=${NNODES:-${SLURM_NNODES:-${WORLD_SIZE:-}}}" \
  "${layout[@]}" "$@"
