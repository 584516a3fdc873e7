"""The schema of the results database: migrations, and recognising our own files.

`op_db.store` is the only user. Kept apart so the store's API stays short and
the rules for refusing corrupt or foreign files (never modifying them) sit in
one place.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from op_db.connect import BUSY_TIMEOUT_MS, PASS_DB, connect_readonly, is_write_denied
from op_db.errors import InputError

APP_ID = "neuron-check"

# Each entry upgrades the schema by one version; never edit a shipped entry.
# An entry is an SQL script or a callable taking the connection (for data
# migrations). The code reads `len(MIGRATIONS)` at run time, so a test can
# append a migration and watch an old file being upgraded.
MIGRATIONS: tuple[Any, ...] = (
    """
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        started TEXT NOT NULL,
        finished TEXT,
        backend TEXT NOT NULL,
        device TEXT NOT NULL,
        simulated INTEGER NOT NULL DEFAULT 0,
        torch_version TEXT,
        backend_version TEXT,
        transformers_version TEXT,
        host TEXT,
        git_revision TEXT,
        command TEXT,
        status TEXT NOT NULL DEFAULT 'running',
        versions TEXT NOT NULL DEFAULT '{}',
        options TEXT NOT NULL DEFAULT '{}'
    );
    CREATE TABLE results (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        suite TEXT NOT NULL,
        subject TEXT NOT NULL,
        variant TEXT NOT NULL,
        dtype TEXT NOT NULL,
        mode TEXT NOT NULL,
        status TEXT NOT NULL,
        samples INTEGER NOT NULL DEFAULT 0,
        samples_passed INTEGER NOT NULL DEFAULT 0,
        max_abs_err REAL,
        max_rel_err REAL,
        err_ratio REAL,
        first_failure TEXT,
        message TEXT,
        failing_op TEXT,
        aten_ops TEXT NOT NULL DEFAULT '{}',
        fallback_ops TEXT NOT NULL DEFAULT '[]',
        duration_s REAL NOT NULL DEFAULT 0,
        claimed INTEGER,
        "check" TEXT,
        divergence TEXT,
        extra TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (run_id, suite, subject, variant, dtype, mode)
    );
    CREATE INDEX results_status ON results(run_id, status);
    CREATE TABLE coverage (
        run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        op TEXT NOT NULL,
        kind TEXT NOT NULL,
        PRIMARY KEY (run_id, op)
    );
    """,
    # 2: a run's owner (host, pid, process start) and heartbeat, so a run whose
    # process is gone reads as abandoned and a live run cannot be resumed twice.
    # Older runs get their last known activity as heartbeat and no owner.
    """
    ALTER TABLE runs ADD COLUMN owner_host TEXT;
    ALTER TABLE runs ADD COLUMN owner_pid INTEGER;
    ALTER TABLE runs ADD COLUMN owner_started REAL;
    ALTER TABLE runs ADD COLUMN heartbeat TEXT;
    UPDATE runs SET heartbeat = coalesce(finished, started);
    """,
    # 3: ulp statistics of each result (DESIGN.md, Result.numerics)
    "ALTER TABLE results ADD COLUMN numerics TEXT NOT NULL DEFAULT '{}'",
    # 4: a compile-mode result's compile facts (graph breaks, recompiles, compile time, graph ops)
    """ALTER TABLE results ADD COLUMN "compile" TEXT NOT NULL DEFAULT '{}'""",
    # 5: the cluster node that ran each result (Ray executor); NULL: the run's own host
    "ALTER TABLE results ADD COLUMN node TEXT",
)
SCHEMA_VERSION = len(MIGRATIONS)


def schema_version() -> int:
    """The schema this code writes: one past the last migration."""
    return len(MIGRATIONS)


_SQLITE_MAGIC = b"SQLite format 3\x00"


def _check_is_ours(path: Path, other: str = PASS_DB) -> None:
    """Refuse, unmodified, files that are not SQLite, SQLite files of someone else, and
    neuron-check files that fail SQLite's own integrity check."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(_SQLITE_MAGIC))
    except OSError as exc:
        raise InputError(f"cannot read database {path}: {exc.strerror}.") from None
    if head == b"":
        return  # an empty file is a new database
    if head != _SQLITE_MAGIC:
        raise InputError(f"{path} is not an SQLite database (corrupt or another kind of file).")
    problems = _integrity_problems(path, snapshot=True)
    if problems and path.with_name(path.name + "-wal").exists():
        problems = _integrity_problems(path, snapshot=False)  # a writer started: check under its locks
    if problems:
        raise InputError(
            f"{path} is a corrupt database (SQLite's integrity check: {_first_problem(problems)}); "
            f"restore it or {other}."
        )


def _integrity_problems(path: Path, *, snapshot: bool) -> list[str]:
    """What `PRAGMA quick_check` finds wrong, or the error that stopped it (empty when the file
    is sound); InputError for a foreign file."""
    try:
        conn = connect_readonly(path, snapshot=snapshot)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if not tables:
                return []
            if "schema_info" not in tables:
                raise InputError(f"{path} is an SQLite database of another application, not neuron-check.")
            app = conn.execute("SELECT value FROM schema_info WHERE key = 'app'").fetchone()
            if not app or app[0] != APP_ID:
                raise InputError(f"{path} is an SQLite database of another application, not neuron-check.")
            problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return [str(exc)]
    return [] if problems == ["ok"] else problems


def _first_problem(problems: list[str]) -> str:
    """The first concrete line of `PRAGMA quick_check`'s report (it may span lines and rows)."""
    lines = [line.strip() for text in problems for line in str(text).splitlines()]
    found = [line for line in lines if line and not line.startswith("***")]
    return found[0] if found else "failed"


def _stored_version(conn: sqlite3.Connection) -> int:
    has_info = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_info'"
    ).fetchone()
    if not has_info:
        return 0
    row = conn.execute("SELECT value FROM schema_info WHERE key = 'version'").fetchone()
    return int(row[0]) if row else 0


def _check_version(conn: sqlite3.Connection, path: Path) -> int:
    version = _stored_version(conn)
    latest = schema_version()
    if version > latest:
        raise InputError(
            f"{path} was written by a newer neuron-check (schema {version}, this one reads up to {latest})."
        )
    if version == 0:
        raise InputError(f"{path} is an empty database with no neuron-check runs.")
    return version


def _migrate(conn: sqlite3.Connection, path: Path) -> None:
    latest = schema_version()
    if _stored_version(conn) == latest:
        return
    # BEGIN IMMEDIATE takes the write lock before reading the version, so two
    # processes opening a new file at once cannot both create the tables.
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = _stored_version(conn)
        if version > latest:
            _check_version(conn, path)
        if version == 0:
            conn.execute("CREATE TABLE schema_info (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("INSERT INTO schema_info VALUES ('app', ?)", (APP_ID,))
            conn.execute("INSERT INTO schema_info VALUES ('version', '0')")
        for number in range(version, latest):
            step = MIGRATIONS[number]
            if callable(step):
                step(conn)
            else:
                for statement in _statements(step):
                    conn.execute(statement)
            conn.execute("UPDATE schema_info SET value = ? WHERE key = 'version'", (str(number + 1),))
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def writer_connection(path: Path, other: str = PASS_DB) -> sqlite3.Connection:
    """A read-write connection in WAL mode, the schema migrated to the latest."""
    existed = path.exists()
    try:
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    except sqlite3.Error as exc:  # a folder that passes access() but refuses files: /proc, a full disk
        verb = "open" if existed else "create"
        raise InputError(f"cannot {verb} database {path} ({exc}); {other}.") from None
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA journal_mode = WAL")
        # In WAL mode NORMAL still survives any process crash (a killed
        # worker or run loses nothing committed); only a power cut may
        # drop the last commits. FULL costs an fsync per result.
        conn.execute("PRAGMA synchronous = NORMAL")
        _migrate(conn, path)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_write_denied(exc):
            raise InputError(f"database {path} cannot be written ({exc}); check the permissions of it and its folder.") from None
        raise InputError(f"{path} is not a usable neuron-check database ({exc}).") from None
    return conn


def reader_connection(path: Path, *, migrate_file: bool) -> sqlite3.Connection:
    """A connection that never writes `path`, on the latest schema.

    A file of an older schema is migrated on disk first when `migrate_file`
    and we may write it; otherwise a copy of it is migrated in memory.
    """
    conn = None
    try:
        conn = connect_readonly(path)
        version = _stored_version(conn)
        if 0 < version < schema_version():
            if migrate_file and os.access(path, os.W_OK) and os.access(path.resolve().parent, os.W_OK):
                conn.close()
                writer_connection(path).close()
                conn = connect_readonly(path)
            else:
                memory = sqlite3.connect(":memory:")
                conn.backup(memory)
                conn.close()
                conn = memory
                _migrate(conn, path)
        _check_version(conn, path)
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, sqlite3.DatabaseError):
            raise InputError(f"{path} is not a usable neuron-check database ({exc}).") from None
        raise
    return conn
