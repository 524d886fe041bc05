"""What the cycle collector costs a measuring process: its imports with the collector on, as Python leaves it, beside
``agent.imports.import_frozen`` (off while importing, then everything frozen), each in a fresh interpreter,
alternating; then one full ``gc.collect()`` (what ``free_memory`` calls before each model a case builds).

    python benchmarks/import_gc.py [--rounds 3] [--modules torch,transformers,...]

The default modules are the standard suite's model child's: torch, transformers and the four families' modeling
modules. Prints each round's seconds and the medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL_CHILD = ("torch", "transformers", "transformers.models.bert.modeling_bert",
               "transformers.models.gpt2.modeling_gpt2", "transformers.models.t5.modeling_t5",
               "transformers.models.llama.modeling_llama")  # fmt: skip

#: Run in a fresh interpreter: the imports one way, then one full collection, as JSON on stdout.
PROBE = """
import gc, importlib, json, sys, time
sys.path.insert(0, {root!r})
from agent.launchers.child import refuse_unused_imports
refuse_unused_imports()
names = {names!r}
t0 = time.perf_counter()
if {frozen!r}:
    from agent.imports import import_frozen
    import_frozen(names)
else:
    for name in names:
        importlib.import_module(name)
t1 = time.perf_counter()
gc.collect()
t2 = time.perf_counter()
print(json.dumps({{"import_s": t1 - t0, "collect_s": t2 - t1, "objects": len(gc.get_objects())}}))
"""


def probe(names: tuple[str, ...], frozen: bool) -> dict[str, float]:
    code = PROBE.format(root=str(ROOT), names=list(names), frozen=frozen)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modules", default=",".join(MODEL_CHILD))
    args = parser.parse_args()
    names = tuple(n for n in args.modules.split(",") if n)
    rows: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for n in range(args.rounds):
        for frozen in (False, True):
            got = probe(names, frozen)
            rows[frozen].append(got)
            print(f"round {n + 1} {'frozen' if frozen else 'plain '}: import {got['import_s']:.3f} s, "
                  f"gc.collect() {got['collect_s'] * 1e3:.1f} ms, {int(got['objects']):,} objects tracked")  # fmt: skip
    plain, frozen_ = rows[False], rows[True]

    def med(rs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rs)

    print(f"median import: {med(plain, 'import_s'):.3f} s plain, {med(frozen_, 'import_s'):.3f} s frozen "
          f"({med(frozen_, 'import_s') / med(plain, 'import_s'):.2f}x); one full collection: "
          f"{med(plain, 'collect_s') * 1e3:.1f} ms against {med(frozen_, 'collect_s') * 1e3:.2f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
