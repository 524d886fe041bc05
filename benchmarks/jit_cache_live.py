"""Whether the driver's cache of compiled kernels (CUDA_CACHE_PATH) serves a process that was already running when
another process filled it: what a helper that compiles a cold machine's kernels ahead of the measuring processes
would need. Needs a CUDA GPU with cuDNN attention (torch >= 2.5).

    python benchmarks/jit_cache_live.py

Each worker creates its CUDA context, says so, waits for a word, then times its first cuDNN attention forward and
backward (bf16, 2 x 16 heads x 512 x 64), which on a fresh cache include the driver compiling cuDNN's generated
kernels. Three cases, each in a fresh cache folder: a worker alone (cold); a worker already waiting while a second
fills the cache, then the first; a worker started after the cache was filled (warm). Prints seconds per first call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

WORKER = """
import sys, time, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
torch.zeros(1, device="cuda").item()
print("ready", flush=True)
sys.stdin.readline()
q, k, v = (torch.randn(2, 16, 512, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
torch.cuda.synchronize()
t0 = time.perf_counter()
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    torch.nn.functional.scaled_dot_product_attention(q, k, v).sum().backward()
torch.cuda.synchronize()
print(f"{time.perf_counter() - t0:.3f}", flush=True)
"""


class Worker:
    def __init__(self, cache: str) -> None:
        env = {**os.environ, "CUDA_CACHE_PATH": cache}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, env=env)  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdin is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def first_call_s(self) -> float:
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        seconds = float(self.proc.stdout.readline())
        self.proc.wait()
        return seconds


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        cold = Worker(os.path.join(root, "a")).first_call_s()
        cache = os.path.join(root, "b")
        waiting = Worker(cache)
        filler = Worker(cache).first_call_s()
        live = waiting.first_call_s()
        warm = Worker(cache).first_call_s()
    print(f"first cuDNN attention call: alone on a fresh cache {cold:.3f} s; filling the cache {filler:.3f} s; a "
          f"process already running when it was filled {live:.3f} s; a process started after {warm:.3f} s")  # fmt: skip


if __name__ == "__main__":
    main()
