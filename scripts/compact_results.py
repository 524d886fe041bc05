"""Rewrite the measured files under docs/results/ as compact JSON (one line each), as they are committed.

A device call carries the repository's tracked files and the wheels, 64 MiB at most: with the runs pretty-printed
(33 MB of 205 files on 2026-12-06) the repository and the wheels (28 MB) outgrew it; compact, the runs take 25 MB. The
values are unchanged (parsed and written again), so every table and bundle read from them is the same.

    python scripts/compact_results.py                 # every .json under docs/results/
    python scripts/compact_results.py PATH...         # those files, or the .json files under those folders
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"


def compact(text: str) -> str:
    """``text``'s JSON in one line (non-ASCII kept as written), ending with a newline."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) + "\n"


def files(paths: Iterable[Path]) -> list[Path]:
    return sorted(f for p in paths for f in ([p] if p.is_file() else p.rglob("*.json")))


def main(argv: list[str]) -> int:
    changed = 0
    for path in files([Path(a) for a in argv] or [RESULTS]):
        text = path.read_text(encoding="utf-8")
        if (done := compact(text)) != text:
            path.write_text(done, encoding="utf-8")
            changed += 1
    print(f"{changed} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
