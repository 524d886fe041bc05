"""Server paths kept out of what clients read: DuckDB names files in its errors, and they say where the server
keeps its data."""

from __future__ import annotations

import re
from pathlib import Path

#: An absolute path of two or more parts, as DuckDB quotes them; its last part is kept.
_PATH = re.compile(r"(?<![\w.~/-])/(?:[^\s\"'/]+/)+([^\s\"'/]*)")


def scrub(text: str, *known: Path) -> str:
    """``text`` with every absolute path cut to its file name (``…/flopfleet.duckdb.wal``)."""
    for path in known:
        for folder in {str(path.absolute().parent), str(path.resolve().parent)}:
            text = text.replace(folder + "/", "…/")
    return _PATH.sub(lambda m: "…/" + m.group(1), text)
