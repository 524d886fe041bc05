"""What the writer and the recovery use of the store that holds them, as protocols: the store builds both and hands
itself over, and neither needs to import it (no import circle between the three)."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any, Protocol

import duckdb

from .archive import ArchiveFolder
from .commits import GroupCommit
from .failure import StorageFailure
from .refresher import Refresher
from .schedule import WriterSchedule


class WakesWriter(Protocol):
    """The writer, as the recovery sees it."""

    def wake(self) -> None: ...


class Recovers(Protocol):
    """The recovery, as the writer sees it."""

    def fail(self, exc: BaseException) -> StorageFailure: ...

    def recover(self, waiting: queue.Queue[Any]) -> duckdb.DuckDBPyConnection | None: ...


class StoreParts(Protocol):
    """The store's parts its writer and recovery share (``core.Store`` is the one implementation)."""

    @property
    def path(self) -> Path: ...

    @property
    def folder(self) -> ArchiveFolder: ...

    @property
    def retention_days(self) -> int: ...

    @property
    def refresher(self) -> Refresher: ...

    @property
    def commits(self) -> GroupCommit: ...

    @property
    def schedule(self) -> WriterSchedule: ...

    @property
    def recovery(self) -> Recovers: ...

    @property
    def writer(self) -> WakesWriter: ...

    @property
    def failure(self) -> StorageFailure | None: ...

    def connection(self) -> duckdb.DuckDBPyConnection: ...

    def reopen(self) -> None: ...
