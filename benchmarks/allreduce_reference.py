"""An nccl-tests-style all-reduce loop, independent of flopfleet: the yardstick for the agent's busbw.

Like nccl-tests' all_reduce_perf: per size, warm-up calls, then ``--iters`` calls back to back between two CUDA
events on each rank; time per call is the mean over ranks (nccl-tests' default), busbw = algbw * 2(n-1)/n.

    torchrun --nproc-per-node 2 benchmarks/allreduce_reference.py --sizes 1G,2G,4G,8G
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed as dist

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="32M,128M,512M,1G,2G,4G,8G")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out")
    args = parser.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    n = dist.get_world_size()
    rows = []
    for size in (parse_size(s) for s in args.sizes.split(",")):
        x = torch.zeros(size // 4, dtype=torch.float32, device=device)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        dist.barrier()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.iters):
            dist.all_reduce(x)
        end.record()
        end.synchronize()
        per_call = torch.tensor([start.elapsed_time(end) / 1e3 / args.iters], dtype=torch.float64, device=device)
        slowest = per_call.clone()
        dist.all_reduce(per_call)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        mean_s = float(per_call) / n
        algbw = x.numel() * 4 / mean_s / 1e9
        rows.append(
            {
                "bytes": x.numel() * 4,
                "world_size": n,
                "time_s": mean_s,
                "slowest_rank_s": float(slowest),
                "algbw_gbps": algbw,
                "busbw_gbps": algbw * 2 * (n - 1) / n,
            }
        )
        del x
    if dist.get_rank() == 0:
        for row in rows:
            print(json.dumps(row))
        if args.out:
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(
                    {"torch": torch.__version__, "nccl": ".".join(map(str, torch.cuda.nccl.version())), "rows": rows},
                    fh,
                    indent=1,
                )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
