"""``serve`` refuses a database file it must not open in one ``error:`` line, with an exit code a supervisor can act
on (``collector/store/errors.py``), and leaves the file as it found it."""

from __future__ import annotations

import functools
import hashlib
import operator
import os
import socket
import struct
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from collector.store import Store
from collector.store.errors import CorruptDatabase, DatabaseBusy, NewerDatabase
from tests.collector.conftest import held_open
from tests.conftest import ROOT
from tests.factories import make_run, matmul


def _serve(db: Path, port: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "60"}  # a narrow terminal: the refusal stays one line all the same
    return subprocess.run([sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", str(port)],
                          capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)  # fmt: skip


def _fingerprint(db: Path) -> tuple[str, list[str]]:
    return hashlib.sha256(db.read_bytes()).hexdigest(), sorted(p.name for p in db.parent.iterdir())


def _assert_refused(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert words in lines[0], lines[0]


def test_a_corrupt_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    db.write_bytes(b"not a database " * 1000)
    before = _fingerprint(db)
    _assert_refused(_serve(db), CorruptDatabase.exit_code, "is not a readable DuckDB database")
    assert _fingerprint(db) == before


def test_a_file_from_a_newer_collector_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    Store(db).close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'db_version'")
    con.close()
    before = _fingerprint(db)
    _assert_refused(_serve(db), NewerDatabase.exit_code, "written by a newer collector (db_version 99")
    assert _fingerprint(db) == before
    with pytest.raises(NewerDatabase):  # read-only commands (report, sql) refuse it the same way
        Store(db, read_only=True)


def _stored(db: Path) -> None:
    """A database with a few runs in it, closed: its tables written into the file's blocks, no log beside it."""
    with Store(db) as store:
        for i in range(5):
            store.add_run(make_run([matmul(64 * (j + 1), "fp32", float(i + j + 1)) for j in range(20)]))


def test_a_damaged_block_found_while_opening_is_corrupt_not_busy_and_the_file_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    """DuckDB finds a bad block only when it reads it ("... in block at location ..."): this one while the collector
    brings the layout up to date, after the file opened. Before, the word "block" read as a lock ("in use", 75),
    and what the migration had written by then stayed."""
    db = tmp_path / "db.duckdb"
    _stored(db)
    con = duckdb.connect(str(db), read_only=True)
    tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
    blocks = {b for t in tables if t != "meta"  # meta is read first, before anything is written: damage the rest
              for (b,) in con.execute(f"SELECT DISTINCT block_id FROM pragma_storage_info('{t}') WHERE block_id >= 0")
              .fetchall()}  # fmt: skip
    (block_size,) = con.execute("SELECT block_size FROM pragma_database_size()").fetchone()  # type: ignore[misc]
    con.close()
    data = bytearray(db.read_bytes())
    for block in blocks:
        start = 3 * 4096 + block * block_size + 8  # after the file's three headers and the block's checksum
        data[start : start + 64] = bytes(b ^ 0xFF for b in data[start : start + 64])
    db.write_bytes(bytes(data))
    before = _fingerprint(db)
    _assert_refused(_serve(db), CorruptDatabase.exit_code, "computed checksum")
    assert _fingerprint(db) == before


def _checksum(block: bytes) -> int:
    """DuckDB 2.0's block checksum: 5381, xor each 8-byte word of the block (after its checksum) times a constant."""
    words = struct.unpack(f"<{(len(block) - 8) // 8}Q", block[8:])
    return functools.reduce(operator.xor, ((w * 0xBF58476D1CE4E5B9) % 2**64 for w in words), 5381)


def test_a_file_from_a_newer_duckdb_is_refused_as_newer_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    _stored(db)
    data = bytearray(db.read_bytes())
    assert data[8:12] == b"DUCK" and _checksum(data[:4096]) == struct.unpack_from("<Q", data)[0], (
        "DuckDB's file header or checksum changed: update _checksum to write a newer storage version"
    )
    struct.pack_into("<Q", data, 12, 10_000)  # the storage version, past any this DuckDB reads
    struct.pack_into("<Q", data, 0, _checksum(data[:4096]))
    db.write_bytes(bytes(data))
    before = _fingerprint(db)
    _assert_refused(_serve(db), NewerDatabase.exit_code, "written by a newer DuckDB")
    assert _fingerprint(db) == before


def test_a_file_in_use_is_refused_as_busy(tmp_path: Path) -> None:
    db = tmp_path / "corrupt-blocks" / "db.duckdb"  # DuckDB quotes the file's name: its words are not read as DuckDB's
    db.parent.mkdir()
    Store(db).close()
    with held_open(db):
        _assert_refused(_serve(db), DatabaseBusy.exit_code, "is in use by another process")


def test_a_port_in_use_is_one_line_too(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        _assert_refused(_serve(db, port), 1, f"cannot listen on 127.0.0.1:{port}: Address already in use")


def test_the_collector_doc_documents_each_refusals_exit_code() -> None:
    doc = (ROOT / "docs" / "collector.md").read_text()
    for error, words in ((DatabaseBusy, "in use"), (CorruptDatabase, "not a readable DuckDB"),
                         (NewerDatabase, "a newer collector")):  # fmt: skip
        assert f"| {error.exit_code} | the file is {words}" in doc or f"| {error.exit_code} | {words}" in doc
    assert len({DatabaseBusy.exit_code, CorruptDatabase.exit_code, NewerDatabase.exit_code, 1}) == 4
