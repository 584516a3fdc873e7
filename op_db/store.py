"""The SQLite store: the only code that reads or writes the results database.

One file holds `runs` (one row per invocation) and `results` (one row per
WorkItem of a run). Every result is committed in its own transaction as it is
produced, so a killed run loses nothing; the file runs in WAL mode with a busy
timeout so several processes can write different runs at once.

A run row records its owner (host, pid, process start) and a heartbeat
(`op_db.ownership`); a run marked running whose owner is gone reads as
`abandoned`, and `claim_run` hands a run to a resuming process only then.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from op_db.connect import BUSY_TIMEOUT_MS, PASS_DB, check_writable, release
from op_db.errors import InputError
from op_db.ownership import LIVENESS, RUNNING, Heartbeat, current_owner, effective_status
from op_db.schema import (  # noqa: F401  (MIGRATIONS, SCHEMA_VERSION, APP_ID: re-exported)
    APP_ID,
    MIGRATIONS,
    SCHEMA_VERSION,
    _check_is_ours,
    reader_connection,
    writer_connection,
)
from op_db.records import RESULT_FIELDS, Result, Status, WorkItem

DEFAULT_DB = "neuron-check.db"
# SQLite's INTEGER range: a larger run id cannot exist (and would overflow the driver).
_MAX_RUN_ID = 2**63 - 1

# Run columns besides the id; `versions` and `options` are JSON objects.
RUN_FIELDS = (
    "started", "finished", "backend", "device", "simulated", "torch_version",
    "backend_version", "transformers_version", "host", "git_revision", "command",
    "status", "versions", "options", "owner_host", "owner_pid", "owner_started", "heartbeat",
)
OWNER_FIELDS = ("owner_host", "owner_pid", "owner_started")

_JSON_RESULT_FIELDS = {"aten_ops": dict, "fallback_ops": list, "extra": dict, "numerics": dict, "compile": dict}


def default_path() -> Path:
    return Path(os.environ.get("NEURON_CHECK_DB") or DEFAULT_DB)


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


class Store:
    """A handle on one results database. Use `Store.open`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, readonly: bool):
        self._conn = conn
        self.path = path
        self.readonly = readonly

    # -- opening ---------------------------------------------------------

    @classmethod
    def open(cls, path: str | os.PathLike | None = None, *, readonly: bool = False, other: str = PASS_DB) -> "Store":
        """Open a store: `readonly` never writes the file; otherwise create or migrate it.

        A file that is not SQLite, an SQLite file of another application, or a
        neuron-check file failing SQLite's integrity check raises InputError
        and is left untouched; so does a file or folder we may not write. `other` says how the
        command's user names another database (its errors advise it).
        """
        path = Path(path) if path is not None else default_path()
        if path.is_dir():
            raise InputError(f"{path} is a directory, not a neuron-check database.")
        exists = path.exists()
        if not exists and readonly:
            raise InputError(f"database {path} does not exist; run `neuron-check ops` first or {other}.")
        if exists:
            _check_is_ours(path, other)
        if readonly:
            return cls(reader_connection(path, migrate_file=False), path, readonly=True)
        check_writable(path, other)
        return cls(writer_connection(path, other), path, readonly=False)

    def close(self) -> None:
        self._conn.close()
        if self.readonly:
            release(self.path)

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs ------------------------------------------------------------

    def create_run(self, *, backend: str, device: str, **meta: Any) -> int:
        """Insert a run row owned by this process and return its id. Unknown keys go into `versions`."""
        row = {"started": meta.pop("started", None) or now(), "backend": backend, "device": device}
        owner = current_owner()
        row.update(owner_host=owner.host, owner_pid=owner.pid, owner_started=owner.started, heartbeat=row["started"])
        versions = dict(meta.pop("versions", {}) or {})
        for key in list(meta):
            if key in RUN_FIELDS:
                row[key] = meta.pop(key)
        versions.update(meta)
        row["versions"] = versions
        row["options"] = row.get("options") or {}
        row["simulated"] = int(bool(row.get("simulated")))
        for key in ("versions", "options"):
            row[key] = json.dumps(row[key], sort_keys=True)
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._conn:
            cur = self._conn.execute(f"INSERT INTO runs ({cols}) VALUES ({marks})", _storable(row.values()))
        return int(cur.lastrowid)

    def finish_run(self, run_id: int, status: str = "finished") -> None:
        with self._conn:
            self._conn.execute(
                "UPDATE runs SET finished = ?, status = ? WHERE id = ?", (now(), status, run_id)
            )

    def claim_run(self, run_id: int) -> None:
        """Make this process the owner of run `run_id`, live again (for `--resume`).

        Refused with InputError while the run's owner is alive, so a run is
        never resumed twice at once; the check and the claim are one
        transaction, so of two resumes racing, one wins.
        """
        owner = current_owner()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            run = self.run(run_id)
            if run["status"] == RUNNING:
                raise InputError(
                    f"run {run_id} is still running (process {run['owner_pid']} on {run['owner_host']}, "
                    f"last heartbeat {run['heartbeat']}); wait for it to end or stop it before resuming it."
                )
            self._conn.execute(
                "UPDATE runs SET status = ?, finished = NULL, owner_host = ?, owner_pid = ?, owner_started = ?, "
                "heartbeat = ? WHERE id = ?", (RUNNING, owner.host, owner.pid, owner.started, now(), run_id),
            )
        except BaseException:
            self._conn.rollback()
            raise
        self._conn.commit()

    def beat(self, run_id: int) -> None:
        """Refresh the heartbeat of run `run_id`."""
        with self._conn:
            self._conn.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (now(), run_id))

    def keep_alive(self, run_id: int, interval_s: float = LIVENESS.heartbeat_interval_s) -> Heartbeat:
        """A context manager beating for run `run_id` every `interval_s` from a thread of its own.

        The thread opens its own short connection per beat (an SQLite
        connection belongs to one thread); a failed beat is skipped, never fatal.
        """
        target = self.path.resolve()

        def beat() -> None:
            try:
                conn = sqlite3.connect(target, timeout=BUSY_TIMEOUT_MS / 1000)
                try:
                    with conn:
                        conn.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (now(), run_id))
                finally:
                    conn.close()
            except sqlite3.Error:
                pass

        return Heartbeat(beat, interval_s)

    def run(self, run_id: int) -> dict[str, Any]:
        row = self._conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise InputError(f"run {run_id} does not exist in {self.path}.")
        return _run_dict(row)

    def runs(self) -> list[dict[str, Any]]:
        rows = self._conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return [_run_dict(r) for r in rows]

    def resolve_run(self, spec: str | int | None = "latest") -> int:
        """Turn 'latest', None or an id (int or text) into an existing run id."""
        if spec is None or str(spec).strip().lower() == "latest":
            row = self._conn.execute("SELECT max(id) FROM runs").fetchone()
            if row[0] is None:
                raise InputError(f"{self.path} holds no runs yet.")
            return int(row[0])
        try:
            run_id = int(str(spec).strip())
        except ValueError:
            raise InputError(f"run must be a number or 'latest', not {spec!r}.") from None
        if not 0 < run_id <= _MAX_RUN_ID:
            raise InputError(f"run {run_id} does not exist in {self.path}.")
        self.run(run_id)
        return run_id

    def run_summaries(self) -> list[dict[str, Any]]:
        """Every run with its `counts` per status (for `neuron-check runs`)."""
        counts: dict[int, dict[str, int]] = {}
        for run_id, status, n in self._conn.execute(
            "SELECT run_id, status, count(*) FROM results GROUP BY run_id, status"
        ):
            counts.setdefault(run_id, {})[status] = n
        summaries = []
        for run in self.runs():
            run["counts"] = {s.value: 0 for s in Status} | counts.get(run["id"], {})
            summaries.append(run)
        return summaries

    def import_run(
        self,
        run: dict[str, Any],
        results: Iterable[Result],
        coverage: Iterable[tuple[str, str]] = (),
    ) -> int:
        """Copy a whole run (row without its id, results, coverage) in one transaction.

        Used by `merge`: all or nothing, so an interrupted merge leaves no half run.
        """
        row = {k: run[k] for k in RUN_FIELDS if k in run}
        row["simulated"] = int(bool(row.get("simulated")))
        for key in ("versions", "options"):
            row[key] = json.dumps(row.get(key) or {}, sort_keys=True)
        with self._conn:
            cur = self._conn.execute(
                f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                _storable(row.values()),
            )
            run_id = int(cur.lastrowid)
            for result in results:
                self._insert_result(run_id, result)
            self._conn.executemany(
                "INSERT OR REPLACE INTO coverage (run_id, op, kind) VALUES (?, ?, ?)",
                ((run_id, op, kind) for op, kind in coverage),
            )
        return run_id

    # -- results ---------------------------------------------------------

    def add_result(self, run_id: int, result: Result) -> None:
        """Commit one result (and refresh the run's heartbeat); a result for the same item replaces the old one."""
        with self._conn:
            self._insert_result(run_id, result)
            self._conn.execute("UPDATE runs SET heartbeat = ? WHERE id = ?", (now(), run_id))

    def _insert_result(self, run_id: int, result: Result) -> None:
        values = _result_row(result)
        cols = ", ".join(f'"{c}"' for c in ("run_id", *values))
        marks = ", ".join("?" for _ in range(len(values) + 1))
        self._conn.execute(
            f"INSERT OR REPLACE INTO results ({cols}) VALUES ({marks})",
            _storable((run_id, *values.values())),
        )

    def add_results(self, run_id: int, results: Iterable[Result]) -> None:
        for result in results:
            self.add_result(run_id, result)

    def results(self, run_id: int, *, suite: str | None = None) -> list[Result]:
        return list(self.iter_results(run_id, suite=suite))

    def iter_results(self, run_id: int, *, suite: str | None = None) -> Iterator[Result]:
        sql = "SELECT * FROM results WHERE run_id = ?"
        args: list[Any] = [run_id]
        if suite:
            sql += " AND suite = ?"
            args.append(suite)
        sql += " ORDER BY suite, subject, variant, dtype, mode"
        for row in self._conn.execute(sql, args):
            yield _row_result(row)

    def stored_items(self, run_id: int) -> set[WorkItem]:
        rows = self._conn.execute(
            "SELECT suite, subject, variant, dtype, mode FROM results WHERE run_id = ?", (run_id,)
        )
        return {WorkItem(*r) for r in rows}

    def item_durations(self, backend: str, suites: Iterable[str]) -> dict[WorkItem, float]:
        """The last measured duration_s of every item of `suites` on `backend`, over all stored runs:
        what a progress estimate starts from before this run has timed anything."""
        marks = ",".join("?" * len(suites := sorted(set(suites))))
        rows = self._conn.execute(
            "SELECT suite, subject, variant, dtype, mode, duration_s FROM results JOIN runs ON runs.id = run_id "
            f"WHERE backend = ? AND suite IN ({marks}) AND duration_s > 0 ORDER BY run_id", (backend, *suites))
        return {WorkItem(*row[:5]): row[5] for row in rows}  # later runs overwrite earlier ones

    def status_counts(self, run_id: int) -> dict[str, int]:
        rows = self._conn.execute(
            "SELECT status, count(*) FROM results WHERE run_id = ? GROUP BY status", (run_id,)
        )
        counts = {s.value: 0 for s in Status}
        counts.update({r[0]: r[1] for r in rows})
        return counts

    # -- dispatcher coverage ---------------------------------------------

    def set_coverage(self, run_id: int, rows: Iterable[tuple[str, str]]) -> None:
        """Store the static (op, registration kind) table measured for a run."""
        with self._conn:
            self._conn.execute("DELETE FROM coverage WHERE run_id = ?", (run_id,))
            self._conn.executemany(
                "INSERT INTO coverage (run_id, op, kind) VALUES (?, ?, ?)",
                ((run_id, op, kind) for op, kind in rows),
            )

    def coverage(self, run_id: int) -> list[tuple[str, str]]:
        rows = self._conn.execute(
            "SELECT op, kind FROM coverage WHERE run_id = ? ORDER BY op", (run_id,)
        )
        return [(r[0], r[1]) for r in rows]


# -- helpers -----------------------------------------------------------------


def _run_dict(row: sqlite3.Row) -> dict[str, Any]:
    data = dict(row)
    data["status"] = effective_status(data, now=time.time())
    data["simulated"] = bool(data["simulated"])
    data["versions"] = json.loads(data["versions"] or "{}")
    data["options"] = json.loads(data["options"] or "{}")
    return data


def _storable(values: Iterable[Any]) -> tuple[Any, ...]:
    """Row values SQLite can hold. Text is kept raw (reports sanitise at output) except lone
    surrogates, which UTF-8 cannot encode (a command line or an exception text may hold them):
    each becomes U+FFFD, while a well-formed surrogate pair is joined into its character."""
    return tuple(_storable_text(v) if isinstance(v, str) else v for v in values)


def _storable_text(text: str) -> str:
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _result_row(result: Result) -> dict[str, Any]:
    data = result.to_dict()
    for key in _JSON_RESULT_FIELDS:
        data[key] = json.dumps(data[key], sort_keys=True)
    if data["claimed"] is not None:
        data["claimed"] = int(bool(data["claimed"]))
    return {k: data[k] for k in RESULT_FIELDS}


def _row_result(row: sqlite3.Row) -> Result:
    data = {k: row[k] for k in RESULT_FIELDS}
    for key, kind in _JSON_RESULT_FIELDS.items():
        data[key] = json.loads(data[key]) if data[key] else kind()
    if data["claimed"] is not None:
        data["claimed"] = bool(data["claimed"])
    return Result.from_dict(data)


def check_writable_store(path: str | os.PathLike, other: str = PASS_DB) -> None:
    """Raise what `Store.open(path)` would refuse, without creating or writing anything."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path} is a directory, not a neuron-check database.")
    if path.exists():
        _check_is_ours(path, other)
    check_writable(path, other)


def open_for_reading(path: str | os.PathLike | None = None, other: str = PASS_DB) -> Store:
    """Open read-only for reports; a writable file of an older schema is migrated first.

    Corrupt and foreign files are refused before anything writes; an older file
    we may not write is migrated in memory instead, so reports still read it.
    """
    path = Path(path) if path is not None else default_path()
    if not path.exists() or path.is_dir() or path.stat().st_size == 0:
        return Store.open(path, readonly=True, other=other)  # says what is wrong
    _check_is_ours(path, other)
    return Store(reader_connection(path, migrate_file=True), path, readonly=True)
