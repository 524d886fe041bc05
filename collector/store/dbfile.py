"""Whether ``--db`` may be opened: a typo in its path must not start an empty fleet. A missing folder is refused
unless creating it was asked for (``--create``, ``FLOPFLEET_CREATE=1``); a command that only reads needs the file."""

from __future__ import annotations

from pathlib import Path

from .errors import CollectorError, MissingDatabase


def check_db(db: Path, *, read_only: bool = False, create: bool = False, new_ok: bool = True) -> bool:
    """True when ``db`` is a new database (the caller creates it, and says so); MissingDatabase, naming what is
    missing, when the file is needed (``read_only``, or not ``new_ok``) or its folder is missing and not to be
    created. With ``create``, the missing folders are created here."""
    if db.is_file():
        return False
    if read_only or not new_ok:
        why = "this command only reads" if read_only else "this command needs a database"
        raise MissingDatabase(f"no database at {db}: check --db ({why}, and never creates one)")
    folder = db.parent
    if folder.exists() and not folder.is_dir():
        raise MissingDatabase(f"{folder} is not a folder (from --db {db})")
    if not folder.exists():
        if not create:
            raise MissingDatabase(
                f"folder {folder} does not exist (from --db {db}): check the path, or pass --create "
                "(FLOPFLEET_CREATE=1) to create it with a new database"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CollectorError(f"cannot create folder {folder}: {exc.strerror or exc}") from None
    return not db.exists()
