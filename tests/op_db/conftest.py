"""Fixtures: database files in the states users leave them in (page-corrupt, old schema,
read-only), and the CLI run as a subprocess, as a user runs it.

Shared by the store's tests and the CLI tests that check every command refuses
or reads such files properly.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from op_db import schema as schema_mod
from op_db.sample import result
from op_db.store import Store

REPO = Path(__file__).resolve().parents[2]
PAGE_SIZE = 4096


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_db(path: Path, results: int = 300) -> Path:
    """A valid, checkpointed database holding one finished run with `results` results."""
    with Store.open(path) as store:
        run_id = store.create_run(backend="sim", device="sim", simulated=True,
                                  options={"suite": "opinfo", "ops": ["add"], "dtypes": ["float32"]})
        store.add_results(run_id, [result(f"op{i}", "float32", "PASS") for i in range(results)])
        store.finish_run(run_id)
    return path


def corrupt_page(path: Path, table: str) -> Path:
    """Overwrite the root page of `table` (a table or index) with garbage; the header stays intact.

    A garbage index page is what `PRAGMA quick_check` reports as rows without
    raising; a garbage table page makes reads raise.
    """
    conn = sqlite3.connect(path)
    (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    assert root > 1, "page 1 holds the header; corrupting it is another test"
    with open(path, "r+b") as fh:
        fh.seek((root - 1) * size)
        fh.write(bytes((i * 151 + 7) % 256 for i in range(size)))
    return path


def make_v1_db(path: Path, runs: list[dict]) -> Path:
    """A database as neuron-check wrote it before run owners existed (schema 1)."""
    saved = schema_mod.MIGRATIONS
    schema_mod.MIGRATIONS = saved[:1]
    try:
        with Store.open(path) as store:
            run_ids = [store.import_run({"backend": "sim", "device": "sim", "options": {}, **run}, []) for run in runs]
    finally:
        schema_mod.MIGRATIONS = saved
    # Result rows as schema 1 held them: today's Result has columns that file lacks.
    with sqlite3.connect(path) as conn:
        conn.executemany("INSERT INTO results (run_id, suite, subject, variant, dtype, mode, status) "
                         "VALUES (?, 'opinfo', 'add', 'forward', 'float32', 'eager', 'PASS')", [(i,) for i in run_ids])
    conn.close()
    return path


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("NEURON_CHECK_DB", None)
    env.update(extra)
    return env


def run_cli(*args: str, cwd: Path, prefix: tuple[str, ...] = (), env: dict | None = None,
            timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, sys.executable, "-m", "porting_cli", *map(str, args)], cwd=cwd,
                          env=env or cli_env(), capture_output=True, text=True, timeout=timeout)


def one_sentence(proc: subprocess.CompletedProcess) -> str:
    """The single stderr line of a refused command (asserting there is exactly one, and no traceback)."""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@dataclass
class Sandbox:
    """A folder where files can be made read-only for the CLI under test.

    Root may write anything, so as root the CLI runs as `nobody` (setpriv) and
    the folder is one `nobody` can reach; otherwise it runs as the current user.
    The same modes then deny the write: 0o444 files and 0o555 folders.
    """

    root: Path
    prefix: tuple[str, ...]

    def lock(self, path: Path) -> None:
        path.chmod(0o555 if path.is_dir() else 0o444)

    def unlock(self, path: Path) -> None:
        path.chmod(0o777 if path.is_dir() else 0o666)

    def cli(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return run_cli(*args, cwd=cwd or self.root, prefix=self.prefix, env=cli_env(HOME=str(self.root)))


@pytest.fixture
def sandbox(tmp_path: Path):
    if os.geteuid() != 0:
        yield Sandbox(tmp_path, ())
        for path in tmp_path.rglob("*"):
            path.chmod(0o777 if path.is_dir() else 0o666)
        return
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: cannot make a file read-only for the CLI")
    prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
    root = Path(tempfile.mkdtemp(prefix="nc-readonly-", dir="/tmp"))
    root.chmod(0o777)
    try:
        probe = run_cli("--help", cwd=root, prefix=prefix, env=cli_env(HOME=str(root)))
        if probe.returncode != 0:
                pytest.skip(f"the CLI does not start as user nobody here: {probe.stderr.strip()[-200:]}")
        yield Sandbox(root, prefix)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def db_files():
    """The builders above, for tests: `db_files.make_db(path)` and so on."""
    import types

    return types.SimpleNamespace(make_db=make_db, corrupt_page=corrupt_page, make_v1_db=make_v1_db,
                                 digest=digest, run_cli=run_cli, one_sentence=one_sentence, cli_env=cli_env)


def overwrite_run(path: Path, run_id: int, **columns) -> None:
    """Overwrite columns of a run row directly, as another process or an older version left it."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(f"UPDATE runs SET {', '.join(f'{c} = ?' for c in columns)} WHERE id = ?",
                     (*columns.values(), run_id))
    conn.close()


@pytest.fixture
def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def set_run():
    """`set_run(path, run_id, column=value, ...)`: see `overwrite_run`."""
    return overwrite_run
