"""Server paths kept out of what clients read: DuckDB names files in its errors, and they say where the server
keeps its data."""

from __future__ import annotations

import re
from pathlib import Path

#: An absolute path of two or more parts, as DuckDB quotes them; its last part is kept.
_PATH = re.compile(r"(?<![\w.~/-])/(?:[^\s\"'/]+/)+([^\s\"'/]*)")
#: DuckDB's echo of the query's line and the carets under the part it means (``LINE 1: SELECT host …``).
_CARET = re.compile(r"^ *\^+$")
#: Lines of DuckDB's message kept (a binder error can list hundreds of candidate functions).
MAX_LINES = 40


def scrub(text: str, *known: Path) -> str:
    """``text`` with every absolute path cut to its file name (``…/flopfleet.duckdb.wal``)."""
    for path in known:
        for folder in {str(path.absolute().parent), str(path.resolve().parent)}:
            text = text.replace(folder + "/", "…/")
    return _PATH.sub(lambda m: "…/" + m.group(1), text)


def scrub_message(text: str, *known: Path) -> str:
    """A library's whole message, its hints kept (DuckDB's candidate bindings, "did you mean", the query's line and
    the caret under what it means), with every path cut as ``scrub`` cuts it and each caret moved to stay under the
    part it marks. A caret whose line cannot be cut in parts as it is whole is left out rather than misplaced."""
    lines = text.strip().splitlines()
    cut = lines[:MAX_LINES] + ([f"… ({len(lines) - MAX_LINES} more lines)"] if len(lines) > MAX_LINES else [])
    out: list[str] = []
    for i, line in enumerate(cut):
        if i and _CARET.match(line) and not _CARET.match(cut[i - 1]):
            above = cut[i - 1]
            start, end = line.index("^"), len(line)
            parts = [scrub(above[:start], *known), scrub(above[start:end], *known), scrub(above[end:], *known)]
            if "".join(parts) == out[-1]:
                out.append(" " * len(parts[0]) + "^" * max(1, len(parts[1])))
            continue
        out.append(scrub(line, *known))
    return "\n".join(out)
