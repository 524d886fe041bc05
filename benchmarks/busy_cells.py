"""A loaded run against a quiet one, cell by cell: does the `starved` flag follow the figure (docs/methodology.md,
"A busy host")? Counts the cells 10 % or more slower than their quiet value and how many of them are flagged
`starved` (a host away can only slow a cell: one 10 % faster was slow in the quiet run, and is counted apart with
whether it carries a flag saying why), and the `starved` flags on cells within 3 % of quiet; lists every cell 3 % off
or flagged with its window's host readings and its milliseconds and calls a repeat quiet and loaded (a busy host can
change how many calls a CUDA graph holds: docs/results/h100.md, "Why the short layer cells moved").

    python benchmarks/busy_cells.py quiet.json loaded.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read

#: The target's two bounds (issue 41): a cell this much slower loaded must be flagged; a flag on a cell within this is
#: a good figure kept out of every verdict.
SLOWER, WITHIN = 0.10, 0.03


def _key(r: dict[str, Any]) -> tuple[str, int, str]:
    return r["name"], r["gpu_index"], json.dumps(r["params"], sort_keys=True)


def cells(quiet: dict[str, Any], loaded: dict[str, Any]) -> list[tuple[float, dict[str, Any], dict[str, Any]]]:
    """Each cell ok in both runs: its loaded median over its quiet one, less 1, the quiet result and the loaded one."""
    before = {_key(r): r for r in quiet["results"]}
    out = []
    for r in loaded["results"]:
        q = before.get(_key(r))
        if q and q.get("timing") and r.get("timing") and r["status"] == q["status"] == "ok":
            out.append((r["timing"]["median_s"] / q["timing"]["median_s"] - 1, q, r))
    return out


def main() -> int:
    quiet, loaded = (read(Path(path)) for path in sys.argv[1:3])
    rows = cells(quiet, loaded)
    starved = [(d, r) for d, _, r in rows if "starved" in r.get("flags", [])]
    slower = [r for d, _, r in rows if d >= SLOWER]
    faster = [r for d, _, r in rows if d <= -SLOWER]
    flagged = sum("starved" in r["flags"] for r in slower)
    close = sum(abs(d) <= WITHIN for d, _ in starved)
    off, near = f"{SLOWER * 100:.0f} %", f"{WITHIN * 100:.0f} %"
    print(f"cells {len(rows)}; >= {off} slower than quiet: {len(slower)}, flagged starved {flagged}; "
          f">= {off} faster: {len(faster)}, with a flag: {sum(bool(r['flags']) for r in faster)}; "
          f"starved flags {len(starved)}, on cells within {near}: {close}")  # fmt: skip
    for d, q, r in sorted(rows, key=lambda x: -abs(x[0])):
        if abs(d) >= WITHIN or "starved" in r.get("flags", []):
            t, p = r["timing"], r["params"]
            what = " ".join(str(p[k]) for k in ("dtype", "n", "batch", "seq_len", "mode", "op", "direction") if k in p)
            print(
                f"{d:+7.1%} {r['benchmark']:17} {what:28} {t['method']:10} host_wait {t.get('host_wait')} "
                f"launch_share {t.get('launch_share')} device_idle {t.get('device_idle')} {r.get('flags')} "
                f"ms {q['timing']['median_s'] * 1e3:.4f} -> {t['median_s'] * 1e3:.4f} "
                f"calls {q['timing']['calls_per_repeat']} -> {t['calls_per_repeat']}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
