"""The spool: runs waiting on disk for a collector, written atomically and read back only from regular files, and
what ``push`` reads of one before sending it (``read_head``).

Whatever else lands in the spool folder (a FIFO that would block a reader forever, a symbolic link to a file
elsewhere, a directory, a file too large to be a run) is reported with its kind and left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from pydantic import BaseModel, ConfigDict

from schemas import RunSubmission
from schemas.contract import THIS, Version

from ..errors import NotARegularFile, SpoolError

#: Four times what a collector takes by default (64 MiB): anything larger is not a run of ours.
MAX_SPOOL_FILE_BYTES = 256 * 1024 * 1024
_KINDS = {
    stat.S_IFIFO: "FIFO",
    stat.S_IFDIR: "directory",
    stat.S_IFSOCK: "socket",
    stat.S_IFCHR: "character device",
    stat.S_IFBLK: "block device",
}


def spool_path(spool_dir: Path, run: RunSubmission) -> Path:
    stamp = run.started_at.strftime("%Y%m%dT%H%M%SZ")
    return spool_dir / f"{stamp}-{run.run_id}.json"


def write_spool(spool_dir: Path, run: RunSubmission, body: bytes) -> Path:
    """Atomically and durably: a half-written spool file must never be sent, nor a full disk leave one behind."""
    path = spool_path(spool_dir, run)
    tmp = path.with_suffix(".tmp")
    try:
        spool_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as file:
            file.write(body)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise SpoolError(f"the run could not be written to the spool at {path}: {exc.strerror or exc}") from None
    return path


def _kind(mode: int) -> str:
    return _KINDS.get(stat.S_IFMT(mode), f"mode {stat.S_IFMT(mode):o}")


def entries(spool_dir: Path) -> list[tuple[Path, str]]:
    """Every ``*.json`` entry by name, with why it is not a regular file ('' when it is one)."""
    if not spool_dir.is_dir():
        return []
    found = []
    try:
        scan = os.scandir(spool_dir)
    except OSError as exc:
        raise SpoolError(f"the spool {spool_dir} cannot be listed: {exc.strerror or exc}") from None
    with scan:
        for entry in scan:
            if not entry.name.endswith(".json"):
                continue
            if entry.is_symlink():
                problem = "a symbolic link: not followed"
            elif entry.is_file(follow_symlinks=False):
                problem = ""
            else:
                try:
                    problem = f"not a regular file ({_kind(entry.stat(follow_symlinks=False).st_mode)})"
                except OSError:
                    continue  # gone since it was listed
            found.append((Path(entry.path), problem))
    return sorted(found)


def spooled(spool_dir: Path) -> list[Path]:
    """The regular ``*.json`` files in the spool: the runs ``push`` will send."""
    return [path for path, problem in entries(spool_dir) if not problem]


def read_spooled(path: Path, limit: int = MAX_SPOOL_FILE_BYTES) -> bytes:
    """The file's bytes, if it is (still) a regular file of at most ``limit`` bytes; checked on the open file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotARegularFile("a symbolic link: not followed") from None
        raise
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(f"not a regular file ({_kind(info.st_mode)})")
        if info.st_size > limit:
            raise SpoolError(f"{info.st_size:,} bytes is larger than a run can be ({limit:,} bytes at most)")
        body = file.read(limit + 1)
    if len(body) > limit:  # it grew while we read
        raise SpoolError(f"larger than a run can be ({limit:,} bytes at most)")
    return body


@dataclass(frozen=True)
class Head:
    """What ``push`` reads of a spooled run before sending it: its id and contract version."""

    run_id: UUID
    version: Version


class _HeadModel(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    run_id: UUID
    schema_version: int
    schema_minor: int = 0


def read_head(body: bytes) -> Head:
    """A spooled run's id and contract version: the whole run checked where this agent reads its version, a newer
    agent's run (left in the spool by an agent since downgraded) sent as it is, for the collector to judge."""
    try:
        run = RunSubmission.model_validate_json(body)
    except ValueError:
        head = _HeadModel.model_validate_json(body)
        version = Version(head.schema_version, head.schema_minor)
        if version <= THIS:
            raise
        return Head(head.run_id, version)
    return Head(run.run_id, Version(run.schema_version, run.schema_minor))
