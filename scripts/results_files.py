"""The measured files under docs/results/ as they are committed, and the one way to read them.

A device call carries the repository's tracked files and the wheels, 64 MiB at most (docs/development.md). The runs
are committed as compact JSON, one line each, and a file of ``GZIP_FROM_BYTES`` or more gzipped beside its name
(``standard1.json`` is stored as ``standard1.json.gz``: about a fifth of the size). Commands, scripts and tests name
a file by its ``.json`` name and read it through ``read``, whichever way it is stored, so the docs' commands stay as
they were measured. ``scripts/compact_results.py`` writes the stored form; a test holds every file to it.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
#: From this size a measured file is committed gzipped (a standard run is 0.28-0.36 MB compact, 0.05-0.07 gzipped;
#: checks and small tables stay plain JSON, readable in a browser and in a diff).
GZIP_FROM_BYTES = 100_000
GZ = ".gz"


def compact(text: str) -> str:
    """``text``'s JSON in one line (non-ASCII kept as written), ending with a newline."""
    return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False) + "\n"


def stored(path: Path) -> Path:
    """Where the file named ``path`` (its ``.json`` name) is: itself, or gzipped beside it."""
    path = Path(path)
    gzipped = path.with_name(path.name + GZ)
    return gzipped if not path.exists() and gzipped.exists() else path


def read_text(path: Path) -> str:
    """The JSON text of the file named ``path``, plain or gzipped."""
    where = stored(path)
    if where.name.endswith(GZ):
        return gzip.decompress(where.read_bytes()).decode("utf-8")
    return where.read_text(encoding="utf-8")


def read(path: Path) -> Any:
    """The file named ``path`` (``NAME.json``, stored plain or as ``NAME.json.gz``), parsed."""
    return json.loads(read_text(path))


def named(path: Path) -> Path:
    """The ``.json`` name of a stored file (``standard1.json.gz`` -> ``standard1.json``)."""
    return path.with_name(path.name[: -len(GZ)]) if path.name.endswith(GZ) else path


def json_files(paths: Iterable[Path], pattern: str = "*.json") -> list[Path]:
    """Each measured file under ``paths`` (JSON files, or folders searched recursively for ``pattern``; other files
    are passed over), by its ``.json`` name, plain or gzipped, sorted."""
    found: set[Path] = set()
    for p in map(Path, paths):
        if p.is_file():
            found.update([named(p)] if named(p).suffix == ".json" else [])
        else:
            found.update(named(f) for glob in (pattern, pattern + GZ) for f in p.rglob(glob))
    return sorted(found)


def store(path: Path, text: str) -> bool:
    """Write ``text`` (JSON) as the file named ``path`` is committed: compact, and gzipped from ``GZIP_FROM_BYTES``
    (reproducibly: no name or time in the gzip header), the other form removed. Whether anything changed."""
    path = named(Path(path))
    body = compact(text).encode("utf-8")
    gzipped = path.with_name(path.name + GZ)
    keep, drop = (gzipped, path) if len(body) >= GZIP_FROM_BYTES else (path, gzipped)
    data = gzip.compress(body, compresslevel=9, mtime=0) if keep is gzipped else body
    changed = drop.exists() or not keep.exists() or keep.read_bytes() != data
    if changed:
        keep.write_bytes(data)
        drop.unlink(missing_ok=True)
    return changed


def is_stored(path: Path) -> bool:
    """Whether the file named ``path`` is stored as ``store`` would write it."""
    where = stored(path)
    body = compact(text := read_text(path)).encode("utf-8")
    return text.encode("utf-8") == body and where.name.endswith(GZ) == (len(body) >= GZIP_FROM_BYTES)
