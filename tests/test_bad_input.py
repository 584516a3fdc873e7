"""Every command meets bad input with one sentence, the right exit code, and no side effects.

One table of what careless users and broken CI jobs pass to neuron-check. Each case runs the
real entry point (``porting_cli.cli.app.main``) in its own copy of a folder of inputs, and must:

* exit with the expected code (2 for anything the user caused);
* print exactly one line on stderr, starting ``neuron-check: error:``, with no traceback;
* name what was wrong (a word from the case);
* leave every file of the folder byte-identical, and create nothing but what the case allows.

The cases run in a module fixture: a few as their own process each, the rest in two batch
processes (tests/cli_batch.py) that call the same entry point once per case, with the case's own
folder, environment and argv; each parametrised test checks its own case's outcome.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    says: str  # a word the error must contain (case-insensitive)
    code: int = 2
    env: tuple[tuple[str, str], ...] = ()


def case(id, *argv, says, code=2, env=()):
    return Case(id, tuple(argv), says, code, tuple(env))


PROFILE = "--sim-profile"
CASES = [
    # The command line itself.
    case("unknown-command", "frobnicate", says="no such command"),
    case("unknown-option", "report", "--bogus", says="no such option"),
    case("bad-format", "report", "--db", "good.db", "--format", "pdf", says="--format"),
    case("jobs-zero", "ops", "--jobs", "0", "--ops", "add", says="--jobs"),
    case("jobs-text", "ops", "--jobs", "many", "--ops", "add", says="--jobs"),
    case("timeout-negative", "ops", "--timeout", "-5", "--ops", "add", says="--timeout"),
    case("max-samples-zero", "ops", "--max-samples", "0", says="--max-samples"),
    case("seed-text", "ops", "--seed", "x", says="--seed"),
    case("mode-unknown", "ops", "--mode", "jit", "--ops", "add", says="mode"),
    case("executor-unknown", "ops", "--executor", "slurm", says="--executor"),
    case("runs-format", "runs", "--db", "good.db", "--format", "xml", says="--format"),
    case("gate-no-baseline", "gate", "--db", "good.db", says="baseline"),
    case("port-fail-on-unknown", "port", "script.py", "--fail-on", "sometimes", says="--fail-on"),
    case("port-max-steps-negative", "port", "script.py", "--max-steps", "-1", says="--max-steps"),
    # Selections.
    case("ops-empty", "ops", "--ops", "", "--db", "new.db", says="--ops"),
    case("ops-unknown", "ops", "--ops", "no_such_op", "--db", "new.db", says="no_such_op"),
    case("dtype-empty", "ops", "--ops", "add", "--dtype", "", "--db", "new.db", says="--dtype"),
    case("dtype-unknown", "ops", "--ops", "add", "--dtype", "fp7", "--db", "new.db", says="fp7"),
    case("shard-malformed", "ops", "--ops", "add", "--shard", "three", "--db", "new.db", says="shard"),
    case("shard-out-of-range", "ops", "--ops", "add", "--shard", "5/4", "--db", "new.db", says="shard"),
    case("shard-zero", "ops", "--ops", "add", "--shard", "0/2", "--db", "new.db", says="shard"),
    case("expect-rounding-unknown", "ops", "--ops", "add", "--expect-rounding", "sideways", "--db", "new.db",
         says="nearest-even, toward-zero, stochastic, double-rounding"),
    case("models-arch-empty", "models", "--arch", "", "--db", "new.db", says="--arch"),
    case("models-arch-unknown", "models", "--arch", "no_such_model", "--db", "new.db", says="no_such_model"),
    case("models-task-unknown", "models", "--task", "telepathy", "--db", "new.db", says="telepathy"),
    case("models-dtype-unknown", "models", "--arch", "llama", "--dtype", "fp5", "--db", "new.db", says="fp5"),
    case("models-mode-empty", "models", "--arch", "llama", "--mode", "", "--db", "new.db", says="--mode"),
    # Devices and profiles.
    case("device-unknown", "ops", "--device", "tpu9", "--ops", "add", "--db", "new.db", says="tpu9"),
    case("device-unavailable", "ops", "--device", "cuda", "--ops", "add", "--db", "new.db", says="cuda"),
    case("device-bad-index", "ops", "--device", "sim:7", "--ops", "add", "--db", "new.db", says="sim"),
    case("profile-missing", "ops", PROFILE, "nope.json", "--ops", "add", "--db", "new.db", says="nope.json"),
    case("profile-not-json", "ops", PROFILE, "bad.json", "--ops", "add", "--db", "new.db", says="json"),
    case("profile-not-object", "ops", PROFILE, "list.json", "--ops", "add", "--db", "new.db", says="list.json"),
    case("profile-unknown-key", "ops", PROFILE, "unknown_key.json", "--ops", "add", "--db", "new.db",
         says="colour"),
    case("profile-unknown-kind", "ops", PROFILE, "bad_kind.json", "--ops", "add", "--db", "new.db",
         says="explode"),
    case("profile-scale-text", "ops", PROFILE, "bad_value.json", "--ops", "add", "--db", "new.db",
         says="value"),
    case("profile-stochastic-seed-text", "ops", PROFILE, "bad_seed.json", "--ops", "add", "--db", "new.db",
         says="non-negative integer seed"),
    case("profile-bad-op-name", "ops", PROFILE, "bad_op.json", "--ops", "add", "--db", "new.db",
         says="mul tensor"),
    case("profile-bad-dtype", "ops", PROFILE, "bad_dtype.json", "--ops", "add", "--db", "new.db",
         says="float3"),
    case("compile-fault-unknown-op", "ops", PROFILE, "compile_unknown_op.json", "--ops", "add", "--db", "new.db",
         says="aten.sinn.default"),
    case("compile-fault-unknown-key", "ops", PROFILE, "compile_unknown_key.json", "--ops", "add", "--db", "new.db",
         says="when"),
    case("compile-unsupported-unknown-op", "ops", PROFILE, "compile_unsupported_unknown.json", "--ops", "add",
         "--db", "new.db", says="aten.mul.Tensr"),
    # Compile mode.
    case("compile-backend-unknown", "ops", "--mode", "compile", "--compile-backend", "warp9", "--ops", "add",
         "--db", "new.db", says="warp9"),
    case("fullgraph-eager-only", "ops", "--fullgraph", "--ops", "add", "--db", "new.db", says="--fullgraph"),
    case("dynamic-eager-only", "models", "--arch", "llama", "--dynamic", "--db", "new.db", says="--dynamic"),
    case("compile-options-not-json", "ops", "--mode", "compile", "--compile-options", "{fast}", "--ops", "add",
         "--db", "new.db", says="--compile-options"),
    case("compile-options-not-object", "ops", "--mode", "compile", "--compile-options", "[1]", "--ops", "add",
         "--db", "new.db", says="--compile-options"),
    case("mode-list-unknown", "ops", "--mode", "eager,jit", "--ops", "add", "--db", "new.db", says="jit"),
    case("profile-env-missing", "ops", "--ops", "add", "--db", "new.db", says="gone.json",
         env=(("NEURON_CHECK_SIM_PROFILE", "gone.json"),)),
    # Databases.
    case("db-missing", "report", "--db", "missing.db", says="missing.db"),
    case("db-not-sqlite", "report", "--db", "junk.db", says="junk.db"),
    case("db-empty-file", "runs", "--db", "empty.db", says="empty.db"),
    case("db-foreign-sqlite", "report", "--db", "foreign.db", says="foreign.db"),
    case("db-page-corrupt-report", "report", "--db", "corrupt.db", says="corrupt.db"),
    case("db-page-corrupt-ops", "ops", "--ops", "add", "--db", "corrupt.db", says="corrupt.db"),
    case("db-page-corrupt-runs", "runs", "--db", "corrupt.db", says="corrupt.db"),
    case("db-is-directory", "report", "--db", "somedir", says="somedir"),
    case("run-missing", "report", "--db", "good.db", "--run", "42", says="42"),
    case("run-huge", "report", "--db", "good.db", "--run", "9" * 40, says="9999"),
    case("run-negative", "report", "--db", "good.db", "--run", "-3", says="-3"),
    case("run-text", "report", "--db", "good.db", "--run", "yesterday", says="yesterday"),
    case("resume-missing", "ops", "--db", "good.db", "--resume", "77", says="77"),
    case("resume-huge", "ops", "--db", "good.db", "--resume", "9" * 30, says="9999"),
    case("merge-junk-input", "merge", "-o", "merged.db", "junk.db", says="junk.db"),
    case("merge-missing-input", "merge", "-o", "merged.db", "missing.db", says="missing.db"),
    case("merge-output-junk", "merge", "-o", "junk.db", "good.db", says="junk.db"),
    case("dashboard-junk-db", "dashboard", "--db", "junk.db", "-o", "site", says="junk.db"),
    case("profile-export-junk-db", "profile", "export", "--db", "junk.db", "-o", "p.json", says="junk.db"),
    # Outputs that cannot be written.
    case("report-output-in-missing-dir", "report", "--db", "good.db", "--format", "html", "-o",
         "no/such/dir/r.html", says="no/such/dir"),
    case("report-output-is-directory", "report", "--db", "good.db", "--format", "json", "-o", "somedir",
         says="somedir"),
    case("junit-in-missing-dir", "ops", "--ops", "add", "--junit", "no/such/dir/j.xml", "--db", "new.db",
         says="no/such/dir"),
    case("junit-under-proc", "ops", "--ops", "add", "--junit", "/proc/nc-junit.xml", "--db", "new.db",
         says="/proc"),
    case("dashboard-output-is-file", "dashboard", "--db", "good.db", "-o", "script.py", says="script.py"),
    case("claims-export-missing-dir", "claims", "export", "--db", "good.db", "-o", "no/such/dir/t.md",
         says="no/such/dir"),
    # Gate inputs.
    case("gate-baseline-missing", "gate", "--db", "good.db", "--baseline", "gone.json", says="gone.json"),
    case("gate-baseline-not-json", "gate", "--db", "good.db", "--baseline", "bad.json", says="bad.json"),
    case("gate-baseline-wrong-shape", "gate", "--db", "good.db", "--baseline", "list.json", says="list.json"),
    case("gate-baseline-no-results", "gate", "--db", "good.db", "--baseline", "no_results.json",
         says="no_results.json"),
    case("gate-manifest-not-yaml", "gate", "--db", "good.db", "--baseline", "latest",
         "--expected-failures", "bad.yaml", says="bad.yaml"),
    case("gate-manifest-wrong-types", "gate", "--db", "good.db", "--baseline", "latest",
         "--expected-failures", "wrong_types.yaml", says="wrong_types.yaml"),
    case("gate-baseline-run-missing", "gate", "--db", "good.db", "--baseline", "31337", says="31337"),
    # Claims tables.
    case("claims-missing", "report", "--db", "good.db", "--claims", "gone.csv", says="gone.csv"),
    case("claims-no-api-column", "report", "--db", "good.db", "--claims", "no_api.csv", says="no_api.csv"),
    case("claims-unknown-status", "report", "--db", "good.db", "--claims", "bad_status.csv",
         says="bad_status.csv"),
    # The porting check.
    case("port-missing-file", "port", "nofile.py", says="nofile.py"),
    case("port-syntax-error", "port", "broken.py", "--static-only", says="broken.py"),
    case("port-not-python", "port", "notes.txt", "--static-only", says="notes.txt"),
    case("port-not-utf8", "port", "latin1.py", "--static-only", says="latin1.py"),
    case("port-empty-folder", "port", "empty", says="empty"),
    case("port-entry-missing", "port", "project", "--entry", "nope.py", says="nope.py"),
    case("port-against-missing-run", "port", "script.py", "--static-only", "--against", "999", "--db",
         "good.db", says="--static-only"),
    case("port-against-bad-profile", "port", "script.py", "--against", "bad.json", "--max-steps", "0",
         says="bad.json"),
]

SCRIPT = "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"


def _build_inputs(root: Path) -> None:
    from op_db.sample import sample_results, write_sample_run
    from op_db.store import Store

    with Store.open(root / "good.db") as store:
        write_sample_run(store, sample_results())
    for suffix in ("-wal", "-shm"):
        (root / f"good.db{suffix}").unlink(missing_ok=True)
    (root / "junk.db").write_text("not a database\n")
    (root / "empty.db").write_bytes(b"")
    foreign = sqlite3.connect(root / "foreign.db")
    foreign.execute("CREATE TABLE recipes (name TEXT)")
    foreign.commit()
    foreign.close()
    _corrupt_copy(root / "good.db", root / "corrupt.db")
    (root / "somedir").mkdir()
    (root / "empty").mkdir()
    (root / "project").mkdir()
    (root / "project" / "train.py").write_text(SCRIPT)
    (root / "script.py").write_text(SCRIPT)
    (root / "broken.py").write_text("x = (\n")
    (root / "notes.txt").write_text("shopping list\n")
    (root / "latin1.py").write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))
    files = {
        "bad.json": "{not json",
        "list.json": "[1, 2, 3]",
        "no_results.json": json.dumps({"schema": 1, "run": {"id": 1}}),
        "unknown_key.json": json.dumps({"colour": "blue"}),
        "bad_kind.json": json.dumps({"faults": [{"op": "aten.mul.Tensor", "kind": "explode"}]}),
        "bad_value.json": json.dumps({"faults": [{"op": "aten.mul.Tensor", "kind": "scale", "value": "big"}]}),
        "bad_seed.json": json.dumps({"faults": [{"op": "aten.mul.Tensor", "kind": "stochastic", "value": "seed"}]}),
        "bad_op.json": json.dumps({"unsupported_ops": ["mul tensor"]}),
        "bad_dtype.json": json.dumps({"unsupported_dtypes": ["float3"]}),
        "compile_unknown_op.json": json.dumps({"compile_faults": [{"op": "aten.sinn.default", "kind": "nan"}]}),
        "compile_unknown_key.json": json.dumps({"compile_faults": [{"op": "aten.sin.default", "kind": "nan",
                                                                     "when": "always"}]}),
        "compile_unsupported_unknown.json": json.dumps({"compile_unsupported_ops": ["aten.mul.Tensr"]}),
        "bad.yaml": "expected: [unclosed\n",
        "wrong_types.yaml": "expected:\n  - subject: 12\n    dtype: [float32]\n    status: 3\n",
        "no_api.csv": "colour,mood\nred,happy\n",
        "bad_status.csv": "api,status\ntorch.add,perhaps\n",
    }
    for name, text in files.items():
        (root / name).write_text(text)


def _corrupt_copy(source: Path, target: Path) -> None:
    """A copy whose header is intact but whose last page is garbage."""
    data = bytearray(source.read_bytes())
    page_size = int.from_bytes(data[16:18], "big") or 65536
    assert len(data) >= 2 * page_size, "the sample database has one page only"
    start = len(data) - page_size
    data[start:] = bytes((i * 97 + 13) % 256 for i in range(page_size))
    target.write_bytes(bytes(data))


def _snapshot(root: Path) -> dict[str, str]:
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@dataclass
class Outcome:
    code: int
    stderr: str
    before: dict[str, str]
    after: dict[str, str]


# These run as their own `python -m porting_cli` process, one per command family, so the real
# entry point is covered; the rest run in batches (tests/cli_batch.py), each batch one process
# that imports torch once and runs its command lines one after another through the same main().
OWN_PROCESS = {"unknown-command", "device-bad-index", "profile-not-json", "port-syntax-error",
               "models-task-unknown", "gate-no-baseline"}
BATCHES = 2


def _env(case_: Case, root: Path) -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "NEURON_CHECK_DB": str(root / "default.db"), **dict(case_.env)}


def _outside_env() -> dict[str, str]:
    """The worker's environment, less a sim profile an earlier test may have exported: each case
    names its own."""
    return {k: v for k, v in os.environ.items() if k != "NEURON_CHECK_SIM_PROFILE"}


def _own_process(case_: Case, root: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "porting_cli", *case_.argv], cwd=root,
                          env={**_outside_env(), **_env(case_, root)}, capture_output=True, text=True,
                          timeout=240, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stderr


def _batch(cases: list[Case], roots: dict[str, Path], workdir: Path, number: int) -> dict[str, tuple[int, str]]:
    spec, outcomes = workdir / f"batch-{number}.json", workdir / f"batch-{number}-out.json"
    spec.write_text(json.dumps([{"id": c.id, "argv": list(c.argv), "cwd": str(roots[c.id]),
                                 "env": _env(c, roots[c.id])} for c in cases]))
    env = {**_outside_env(), "PYTHONPATH": _env(cases[0], workdir)["PYTHONPATH"]}
    subprocess.run([sys.executable, str(REPO / "tests" / "cli_batch.py"), str(spec), str(outcomes)],
                   cwd=workdir, env=env, capture_output=True, timeout=900, stdin=subprocess.DEVNULL, check=True)
    return {name: (got["code"], got["stderr"]) for name, got in json.loads(outcomes.read_text()).items()}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, Outcome]:
    template = tmp_path_factory.mktemp("inputs")
    _build_inputs(template)
    workdir = tmp_path_factory.mktemp("cases")
    roots, before = {}, {}
    for c in CASES:
        roots[c.id] = workdir / c.id
        shutil.copytree(template, roots[c.id])
        before[c.id] = _snapshot(roots[c.id])
    batched = [c for c in CASES if c.id not in OWN_PROCESS]
    with ThreadPoolExecutor(max_workers=BATCHES + 1) as pool:
        batches = [pool.submit(_batch, batched[k::BATCHES], roots, workdir, k) for k in range(BATCHES)]
        alone = {c.id: pool.submit(_own_process, c, roots[c.id]) for c in CASES if c.id in OWN_PROCESS}
        results = {name: future.result() for name, future in alone.items()}
        for future in batches:
            results.update(future.result())
    return {c.id: Outcome(*results[c.id], before[c.id], _snapshot(roots[c.id])) for c in CASES}


def test_the_table_is_big_and_ids_are_unique():
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_bad_input(case_: Case, outcomes):
    got = outcomes[case_.id]
    lines = [line for line in got.stderr.splitlines() if line.strip()]
    assert got.code == case_.code, got.stderr
    assert "Traceback" not in got.stderr
    assert len(lines) == 1 and lines[0].startswith("neuron-check: error: "), got.stderr
    assert case_.says.lower() in lines[0].lower(), lines[0]
    changed = {name for name in got.before if got.after.get(name) != got.before[name]}
    created = {name for name in got.after if name not in got.before}
    # SQLite may leave its own -wal/-shm companions beside a database it only read.
    created = {name for name in created if not name.endswith(("-wal", "-shm"))}
    assert not changed, f"changed: {sorted(changed)}"
    assert not created, f"created: {sorted(created)}"
