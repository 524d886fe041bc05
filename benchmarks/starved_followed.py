"""The starved rule's three readings of the same repeats: does each tell a device that ran dry from one whose launch
queue kept it busy?

The first rule (docs/methodology.md, "A busy host") counted, for each repeat the device reached before the host had
launched all of it (``held``), the launching thread's time off a CPU as time the device may have waited. Beside busy
processes it flagged cells that did not move: training steps and long prefills, thousands of kernels a repeat, whose
launch queue holds less than one repeat, so the device reaches each repeat's start while the host is still launching
it, and the host, blocked on a full queue, is preempted like any thread while the queue keeps the device busy. The
second (``followed``) counted that time only where the device followed the host to the end: the repeat's end event
completes within ``--follow-ms`` of its last launch. It missed a host away long enough for the queue to drain midway
(the T5 decoder at batch 128, 35 % slow on the H100, 2026-12-06). The agent's rule now (``agent``,
``agent.timing.loop.Idle``) counts the time in full where the device followed, and elsewhere at most what the repeat
took beyond the window's fastest.

Six workloads built here, each timed quiet and beside ``--hogs`` busy CPU processes, as the agent times a repeat
(events around it, the launching thread's wall and CPU time, then whether the start event was reached, then, where
that thread was off a CPU, how soon the end event completes):

- ``queue_full``: 3,000 elementwise kernels on 64 MiB a repeat (about 40 us each on an H100, longer than their launch):
  the queue fills, the host blocks; a busy host should not move it, and no rule should flag it;
- ``host_paced``: 2,000 kernels on 1,024 elements (shorter than their launch): the device follows the host, so a busy
  host slows it, and every rule should see it;
- ``drained``: 1,000 such small kernels, then 100 on 64 MiB (about 4 ms queued when the launch ends): where the host
  is away during the small ones the device runs dry midway, and its end still comes long after the last launch;
- ``graph``: ``drained`` captured as one CUDA graph and replayed, as the agent times layers: whether a busy host
  slows a replay of 1,100 kernels whose launch returns at once (the T5 decoder's replay at batch 128 read 35 % slow
  beside busy processes on an H100, with the host's time away during its launch);
- ``matmul``: one bf16 product of 8192^3 a repeat: nothing to see;
- ``layer``: the standard suite's BERT-large layer, fp16 forward at batch 2 and sequence 128, as one graph of 54 calls
  (about 4 ms, one replay a repeat; the standard suite's warm-up gave it 3): beside 24 busy processes the agent read
  it 12-15 % slower on two H100s of three with ``launch_share`` 0.001, unflagged (docs/results/h100.md, calls 21-24).

On a GPU (one call, about a minute; the GPU's settings are only read), or again from the repeats a call kept:

    python benchmarks/starved_followed.py --out starved.json
    python benchmarks/starved_followed.py --again docs/results/h100/call15-tests-busy-starved/starved.json

Prints, per workload and condition: the median repeat, how much slower loaded is than quiet, the share of repeats
held (start reached before the launch ended) and followed, and each rule's share of the median repeat (the agent flags
at 0.05 with its process waiting 0.10 for a CPU).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.timing.cuda import launched
from agent.timing.loop import Idle
from scripts.results_files import read

#: The agent's flag: a median repeat that may owe this share to waiting on its host (agent/timing/starvation.py).
FLAGGED_AT = 0.05


@dataclass(frozen=True)
class Repeat:
    """One timed repeat: its device time, the launching thread's time off a CPU during the launch, whether the
    device had reached its start event when the launch ended (asked only where that thread was off a CPU: calls 12
    and 15 asked always), and (only where it had and the thread was off a CPU) whether its end event completed
    within the follow window after the launch."""

    seconds: float
    off_cpu_s: float
    reached: bool
    followed: bool | None
    launch_s: float | None = None  # the launch's wall time (calls before 2026-12-06's call 25 kept none)


def share(repeats: Sequence[Repeat], *, followed_only: bool) -> float:
    """1 - median(repeat - waited) / median(repeat), as the earlier rules read it; the waited time of a repeat is its
    thread's time off a CPU where the device reached its start first (and, for the second rule, followed it to its
    end), at most the repeat."""

    def waited(r: Repeat) -> float:
        held = r.off_cpu_s > 0 and r.reached and (r.followed is True or not followed_only)
        return min(r.off_cpu_s, r.seconds) if held else 0.0

    timed = statistics.median(r.seconds for r in repeats)
    unheld = statistics.median(r.seconds - waited(r) for r in repeats)
    return min(max(1 - unheld / timed, 0.0), 1.0) if timed > 0 else 0.0


def agent_share(repeats: Sequence[Repeat]) -> float:
    """The agent's reading of the same repeats (``agent.timing.loop.Idle.launch_share``)."""
    idle = Idle(flush_s=0.0)
    held = [r.off_cpu_s > 0 and r.reached for r in repeats]
    idle.add(0.0, [r.seconds for r in repeats], flushes=0, waited_s=[r.off_cpu_s if h else 0.0 for r, h in
             zip(repeats, held, strict=True)], followed=[r.followed is True for r in repeats])  # fmt: skip
    return idle.launch_share() or 0.0


def summary(repeats: Sequence[Repeat]) -> dict[str, float]:
    """What the table prints of one workload in one condition."""
    held = [r for r in repeats if r.off_cpu_s > 0 and r.reached]
    launches = [r.launch_s for r in repeats if r.launch_s is not None]
    return {
        "median_ms": statistics.median(r.seconds for r in repeats) * 1e3,
        "launch_ms": statistics.median(launches) * 1e3 if launches else float("nan"),
        "held_share": len(held) / len(repeats),
        "followed": sum(r.followed is True for r in held) / len(repeats),
        "held": share(repeats, followed_only=False),
        "followed_rule": share(repeats, followed_only=True),
        "agent": agent_share(repeats),
    }


def timed(torch: Any, body: Callable[[], object], repeats: int, batch: int, follow_s: float) -> list[Repeat]:
    """``repeats`` of ``body``, ``batch`` enqueued back to back between synchronisations, each between its events and
    probed as the agent probes a repeat (``agent.timing.cuda.launched``)."""
    out: list[Repeat] = []
    walls: list[float] = []

    def launch() -> None:
        began = time.perf_counter()
        body()
        walls.append(time.perf_counter() - began)

    while len(out) < repeats:
        events, launches = [], []
        walls.clear()
        for _ in range(batch):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            launches.append(launched(launch, start, end, follow_s=follow_s))
            events.append((start, end))
        events[-1][1].synchronize()
        out += [Repeat(s.elapsed_time(e) / 1e3, n.off_cpu_s, n.held, n.followed if n.held else None, w)
                for (s, e), n, w in zip(events, launches, walls, strict=True)]  # fmt: skip
    return out[:repeats]


def workloads(torch: Any) -> dict[str, tuple[Callable[[], object], int, int]]:
    """Each workload: its repeat, how many repeats, how many between synchronisations."""
    big = torch.ones(16 * 2**20, device="cuda")  # 64 MiB of fp32
    small = torch.ones(1024, device="cuda")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)

    def queue_full() -> None:
        for _ in range(3000):
            big.mul_(1.0)

    def host_paced() -> None:
        for _ in range(2000):
            small.mul_(1.0)

    def drained() -> None:
        for _ in range(1000):
            small.mul_(1.0)
        for _ in range(100):
            big.mul_(1.0)

    return {"queue_full": (queue_full, 24, 4), "host_paced": (host_paced, 60, 10), "drained": (drained, 60, 10),
            "graph": (graph_of(torch, drained), 60, 10), "matmul": (lambda: a @ a, 60, 10),
            "layer": (layer_graph(torch), 200, 10)}  # fmt: skip


def graph_of(torch: Any, fn: Callable[[], object], calls: int = 1, warm: int = 1) -> Callable[[], object]:
    """``calls`` of ``fn`` captured as one CUDA graph after ``warm`` calls off the default stream (as a capture
    asks): its replay."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    replay: Callable[[], object] = graph.replay
    return replay


def layer_graph(torch: Any, calls: int = 54) -> Callable[[], object]:
    """The BERT-large layer's fp16 forward at batch 2, sequence 128, in training mode as the standard suite runs it
    (``agent.benchmarks.layers``), ``calls`` of it captured as one graph: its replay."""
    from agent import compat
    from agent.models import families

    shape = families.SHAPES["bert-large"]
    layer = families.block(shape, "bert_layer", "sdpa").to("cuda", torch.float16).train()
    x = torch.randn(2, 128, shape.hidden, device="cuda", dtype=torch.float16)
    kwargs = compat.forward_kwargs(layer, 128, x.device)
    return graph_of(torch, lambda: compat.first_tensor(layer(x, **kwargs)), calls, warm=3)


def table(found: dict[str, dict[str, list[Repeat]]]) -> None:
    """Each workload's row per condition, and each rule's share (``*`` where the agent would flag it)."""
    print(f"{'workload':12} {'condition':9} {'median ms':>10} {'launch ms':>10} {'vs quiet':>9} {'held':>6} "
          f"{'followed':>9} {'rule held':>10} {'rule followed':>14} {'agent':>7}")  # fmt: skip
    for name, by in found.items():
        quiet = summary(by["quiet"])["median_ms"]
        for condition, rows in by.items():
            s = summary(rows)
            flags = [f"{s[k]:.3f}{'*' if s[k] >= FLAGGED_AT else ' '}" for k in ("held", "followed_rule", "agent")]
            shares = f"{s['held_share']:6.0%} {s['followed']:9.0%} {flags[0]:>10} {flags[1]:>14} {flags[2]:>7}"
            print(
                f"{name:12} {condition:9} {s['median_ms']:10.3f} {s['launch_ms']:10.3f} "
                f"{s['median_ms'] / quiet - 1:+9.1%} {shares}"
            )
    print(f"(* at or above {FLAGGED_AT}: the agent would flag it where its process also waited for a CPU)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hogs", type=int, default=24, help="busy CPU processes beside the loaded timings")
    parser.add_argument("--follow-ms", type=float, default=1.0, help="how soon after its last launch a repeat's "
                        "end must complete for the device to have followed the host")  # fmt: skip
    parser.add_argument("--out", type=Path, help="every repeat, as JSON")
    parser.add_argument("--again", type=Path, help="read the repeats a call kept (its --out) instead of measuring")
    args = parser.parse_args(argv)
    if args.again:
        kept = read(args.again)
        table({n: {c: [Repeat(**r) for r in rs] for c, rs in by.items()} for n, by in kept.items()})
        return 0
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this measures a GPU's repeats", file=sys.stderr)
        return 2
    found: dict[str, dict[str, list[Repeat]]] = {}
    work = workloads(torch)
    for condition in ("quiet", "loaded"):
        hogs = []
        if condition == "loaded":
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
            time.sleep(1)
        try:
            for name, (body, repeats, batch) in work.items():
                timed(torch, body, 3, 1, args.follow_ms / 1e3)  # warm up
                found.setdefault(name, {})[condition] = timed(torch, body, repeats, batch, args.follow_ms / 1e3)
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
    print(f"{torch.cuda.get_device_name()}, {args.hogs} busy processes, follow window {args.follow_ms} ms")
    table(found)
    if args.out:
        args.out.write_text(json.dumps({n: {c: [asdict(r) for r in rs] for c, rs in by.items()}
                                        for n, by in found.items()}))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
