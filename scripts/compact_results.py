"""Rewrite the measured files under docs/results/ as they are committed: compact JSON (one line each), gzipped from
``results_files.GZIP_FROM_BYTES`` (scripts/results_files.py says why, and how every reader reads either form).

With the runs pretty-printed (33 MB of 205 files on 2026-12-06) the repository and the wheels (28 MB) outgrew the
64 MiB a device call carries; compact, the runs took 25 MB, and 32.7 MB after the H100's call 29, a megabyte short of
the limit; gzipped from 100 kB, 10.0 MB. The values are unchanged (parsed and written again), so every table and bundle
read from them is the same.

    python scripts/compact_results.py                 # every measured file under docs/results/
    python scripts/compact_results.py PATH...         # those files, or the measured files under those folders
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scripts.results_files import RESULTS, json_files, read_text, store


def main(argv: list[str]) -> int:
    changed = sum(store(path, read_text(path)) for path in json_files([Path(a) for a in argv] or [RESULTS]))
    print(f"{changed} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
