"""Opening the SQLite file: read-only connections that never write, and the write checks.

Kept apart from the store so that every opener (the store, the corruption
check, the merge) reaches the file the same way, and so that a valid database
we merely cannot write is reported as read-only, never as corrupt.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from op_db.errors import InputError

BUSY_TIMEOUT_MS = 30_000
# How a command's user names another database, for the advice in errors: `merge` has no --db.
PASS_DB = "pass --db (or set NEURON_CHECK_DB) with another file"

# SQLite primary result codes that mean "no write access", as opposed to "bad file".
_SQLITE_READONLY = 8
_SQLITE_CANTOPEN = 14
_NO_WRITE_ACCESS = (_SQLITE_READONLY, _SQLITE_CANTOPEN)


def uri(path: Path, **params: str) -> str:
    """A `file:` URI for `path`, quoted so names holding '?' or '#' still open the right file."""
    query = "&".join(f"{key}={value}" for key, value in params.items())
    return f"file:{quote(str(path.resolve()))}" + (f"?{query}" if query else "")


def connect_readonly(path: Path, *, snapshot: bool = False) -> sqlite3.Connection:
    """A connection that cannot write `path`.

    A WAL database is normally read with `mode=ro`, which still creates the
    `-wal` and `-shm` files next to it (harmless for a valid database: they are
    SQLite's own). Where the folder (or the file) is read-only that fails, and
    the file is opened `immutable` instead: nobody without write access can be
    changing it. Committed pages still sitting in a `-wal` file would be
    invisible that way, so such a file is refused rather than read stale.

    `snapshot` asks for the `immutable` reading whenever no `-wal` file exists
    (no writer has the file open), so that a check which may refuse the file
    leaves nothing beside it; a writer starting meanwhile could make such a
    reading see a torn page, so the caller must recheck anything it finds.
    """
    wal = path.with_name(path.name + "-wal")
    if snapshot and not wal.exists():
        return sqlite3.connect(uri(path, mode="ro", immutable="1"), uri=True)
    conn = sqlite3.connect(uri(path, mode="ro"), uri=True, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError as exc:
        conn.close()
        if _error_code(exc) not in _NO_WRITE_ACCESS:
            raise
    if wal.exists() and wal.stat().st_size > 0:
        raise InputError(
            f"database {path} has committed results in {wal.name} that cannot be read without write access "
            f"to the folder {path.resolve().parent}; make it writable and rerun."
        )
    return sqlite3.connect(uri(path, mode="ro", immutable="1"), uri=True)


def release(path: Path) -> None:
    """Leave no `-wal`/`-shm` files beside `path` once every connection to it has closed.

    SQLite removes them when the last connection closes, but only a connection that may write:
    a report, a dashboard or a merge reads with `mode=ro`, and the files it made stayed for good.
    So after a read-only close, a brief read-write connection (where we may write) closes last
    instead: it folds committed pages into the file, changing no content, and removes both. While
    any other process still has the database open, SQLite keeps them, as it must.
    """
    if not any(path.with_name(path.name + suffix).exists() for suffix in ("-wal", "-shm")):
        return
    if not (os.access(path, os.R_OK | os.W_OK) and os.access(path.resolve().parent, os.W_OK | os.X_OK)):
        return
    try:
        conn = sqlite3.connect(uri(path, mode="rw"), uri=True, timeout=1.0)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # busy or locked: a writer is still at work and will remove them itself
        pass


def check_writable(path: Path, other: str = PASS_DB) -> None:
    """InputError naming the real problem when `path` (or its folder) cannot be written.

    SQLite in WAL mode keeps `-wal` and `-shm` files next to the database, so
    the folder must be writable as well as the file.
    """
    folder = path.resolve().parent
    if not folder.exists():
        raise InputError(f"cannot create database {path}: folder {path.parent} does not exist.")
    if path.exists() and not os.access(path, os.W_OK):
        raise InputError(f"database {path} is read-only; make it writable or {other}.")
    if not os.access(folder, os.W_OK | os.X_OK):
        verb = "write" if path.exists() else "create"
        raise InputError(
            f"cannot {verb} database {path}: the folder {folder} is read-only; "
            f"{other}."
        )


def is_write_denied(exc: sqlite3.Error) -> bool:
    """Whether an SQLite error means the file or its folder cannot be written."""
    return _error_code(exc) in _NO_WRITE_ACCESS


def _error_code(exc: sqlite3.Error) -> int:
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
