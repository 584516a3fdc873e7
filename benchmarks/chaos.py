"""Does a run survive being killed, again and again? An ops sweep on sim under SIGKILL.

    python benchmarks/chaos.py             40 ops x fp32,bf16 forward+backward; 5 parent, 6 worker kills
    python benchmarks/chaos.py --parent-kills 8 --worker-kills 10 --dtype fp32 --no-grad --seed 3
    python benchmarks/chaos.py --node-loss --dtype fp32 --no-grad   Ray nodes SIGKILLed mid-run
                                                                    (benchmarks/chaos_nodes.py)

First one uninterrupted `neuron-check ops` run (the reference). Then the same sweep in a
fresh database while the harness SIGKILLs a random worker of the run (a worker process, not
the parent) and then the parent itself, at random points, resuming with `--resume RUN` after
each parent kill until the run finishes. Only the parent is killed, never its process group:
the workers must die on their own (conformance/engine/lifeline.py). Printed:

- items lost (planned, not stored) and duplicated (stored before a parent kill, then run again
  after the resume): both must be 0;
- items whose status differs from the uninterrupted run: only CRASH, one at most per worker
  kill (the engine cannot tell a killed worker from a crashed one, and says so);
- processes left behind: processes of the run still alive 5 s after their parent was killed,
  and after the last run ended: must be 0;
- the wall time against the uninterrupted run (restarts pay worker start-up and the items in
  flight at each parent kill again).
Exits 1 when a must-be-0 figure is not 0. Linux only (reads /proc).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from chaos_nodes import add_arguments as add_node_loss_arguments, node_loss  # noqa: E402 - next to this script
from conformance.engine import proctree  # noqa: E402 - after the checkout is importable
from op_db.errors import InputError  # noqa: E402
from op_db.records import Status  # noqa: E402
from op_db.store import Store  # noqa: E402

OPS = ("add,sub,mul,div.no_rounding_mode,abs,neg,exp,log,sin,cos,tan,tanh,sigmoid,sqrt,rsqrt,floor,ceil,round,"
       "atan2,maximum,minimum,clamp,where,pow,lerp,nn.functional.relu,nn.functional.gelu,sum,mean,amax,"
       "expm1,log1p,reciprocal,sign,trunc,frac,hypot,fmod,remainder,erf")
GONE_WITHIN_S = 5.0
POLL_S = 0.01
# A kill lands up to this long after the previous event; short, as a sim item takes ~40 ms.
MAX_KILL_DELAY_S = 0.2


@dataclasses.dataclass
class Chaos:
    parent_kills: int = 0
    worker_kills: int = 0
    left_behind: int = 0
    segments: int = 0
    wall_s: float = 0.0


def ops_command(args: argparse.Namespace, db: Path, resume: int | None = None) -> list[str]:
    base = [sys.executable, "-m", "porting_cli", "ops", "--db", str(db), "--jobs", str(args.jobs)]
    if resume is not None:
        return [*base, "--resume", str(resume)]
    return [*base, "--device", "sim", "--ops", args.ops, "--dtype", args.dtype, "--max-samples", str(args.max_samples),
            *(["--grad"] if args.grad else [])]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NEURON_CHECK_SIM_PROFILE", "NEURON_CHECK_DB")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return env


def stored_count(db: Path) -> int:
    """How many items the only run in `db` has stored (a cheap query, for polling)."""
    try:
        with Store.open(db, readonly=True) as store:
            runs = store.runs()
            return sum(store.status_counts(runs[0]["id"]).values()) if runs else 0
    except InputError:
        return 0


def stored_rows(db: Path) -> dict:
    """item -> (status, duration_s) of the only run in `db`, {} before it exists."""
    try:
        with Store.open(db, readonly=True) as store:
            runs = store.runs()
            return {r.item: (r.status, r.duration_s) for r in store.results(runs[0]["id"])} if runs else {}
    except InputError:
        return {}


def run_id_of(db: Path) -> int:
    with Store.open(db, readonly=True) as store:
        return store.runs()[0]["id"]


def workers_of(parent: subprocess.Popen) -> list[proctree.Proc]:
    """The run's worker processes (multiprocessing's resource tracker is not one)."""
    found = []
    for proc in proctree.descendants(parent.pid):
        try:
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmdline:
            found.append(proc)
    return found


def wait_for_first_result(parent: subprocess.Popen, db: Path) -> tuple[int | None, bool]:
    """Read the parent's stderr up to its "run N: K items" line, then wait until the database
    file changes (its first result is committed): (K, True), or False if the run ended first.
    A file stat, unlike a query, never waits on the writer's lock, so the kills land on time."""
    announced = None
    for line in parent.stderr:
        found = re.match(r"run \d+: (\d+) items", line)
        if found:
            announced = int(found.group(1))
            break
    if announced is None:
        return None, False
    before = _file_state(db)
    while parent.poll() is None and announced:  # a resume with nothing left is not interrupted
        if _file_state(db) != before:
            return announced, True
        time.sleep(POLL_S)
    return announced, False


def _file_state(db: Path) -> tuple:
    """What a commit changes: the database file or, in WAL mode (the store's), its -wal file."""
    found = []
    for path in (db, db.with_name(db.name + "-wal")):
        try:
            stat = path.stat()
            found.append((stat.st_mtime_ns, stat.st_size))
        except FileNotFoundError:
            found.append(None)
    return tuple(found)


def reap_left_behind(procs: set[proctree.Proc]) -> int:
    """How many of `procs` are still alive GONE_WITHIN_S from now; those are killed."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while proctree.alive(procs) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    left = proctree.alive(procs)
    for proc in left:
        os.kill(proc.pid, signal.SIGKILL)
    return len(left)


def uninterrupted(args: argparse.Namespace, workdir: Path) -> tuple[dict, float]:
    db = workdir / "reference.db"
    started = time.perf_counter()
    done = subprocess.run(ops_command(args, db), env=child_env(), cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"the uninterrupted run failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return stored_rows(db), wall


def chaotic(args: argparse.Namespace, workdir: Path, rng: random.Random, planned: int) -> tuple[dict, Chaos, int]:
    """The killed-and-resumed run: (final rows, what happened, how many times an item stored
    before a kill was run again, or a resume planned other than the items left)."""
    db = workdir / "chaos.db"
    chaos = Chaos()
    seen: dict = {}  # rows stored when a parent died: a resume must not run them again
    run_again = misplanned = 0
    resume = None
    while True:
        chaos.segments += 1
        started = time.perf_counter()
        parent = subprocess.Popen(ops_command(args, db, resume), env=child_env(), cwd=workdir,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        have = len(seen)
        remaining = planned - have
        kill_parent = chaos.parent_kills < args.parent_kills
        events = []
        # Kills are timed from the process's first result (its workers are up by then), not
        # counted in items: a query of the store lags tens of items behind while commits stream in.
        announced, flowing = wait_for_first_result(parent, db)
        if flowing and chaos.worker_kills < args.worker_kills:
            time.sleep(rng.uniform(0, MAX_KILL_DELAY_S))
            candidates = workers_of(parent)
            if candidates:
                os.kill(rng.choice(candidates).pid, signal.SIGKILL)
                chaos.worker_kills += 1
                events.append(f"a worker killed after {stored_count(db) - have} new item(s)")
        if kill_parent and flowing and parent.poll() is None:
            time.sleep(rng.uniform(0.05, MAX_KILL_DELAY_S))  # the killed worker's CRASH is usually stored by then
            below = proctree.descendants(parent.pid)
            parent.kill()
            parent.wait()
            chaos.parent_kills += 1
            chaos.left_behind += reap_left_behind(below)  # before reading stderr: a survivor holds it open
            _, stderr = parent.communicate()
            events.append(f"the parent killed after {stored_count(db) - have} new item(s)")
        else:
            below = proctree.descendants(parent.pid)
            parent.wait()
            chaos.left_behind += reap_left_behind(below)
            _, stderr = parent.communicate()
            if parent.returncode not in (0, 1):
                sys.exit(f"a resumed run failed ({parent.returncode}): {stderr.strip()[-500:]}")
        if announced != remaining:
            misplanned += 1  # a resume that plans more (or fewer) items than are left
        chaos.wall_s += time.perf_counter() - started
        rows = stored_rows(db)
        print(f"process {chaos.segments}: {remaining} items to run; {'; '.join(events) or 'no kill'}; "
              f"exit {parent.returncode}; {len(rows)} of {planned} stored", flush=True)
        run_again += sum(1 for item, row in seen.items() if rows.get(item) != row)
        seen = rows
        resume = run_id_of(db)
        if parent.returncode in (0, 1):
            return rows, chaos, run_again + misplanned


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default=OPS)
    parser.add_argument("--dtype", default="fp32,bf16")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--max-samples", type=int, default=4)
    parser.add_argument("--no-grad", dest="grad", action="store_false",
                        help="forward items only (by default the backward variant too: more, slower items)")
    parser.add_argument("--parent-kills", type=int, default=5)
    parser.add_argument("--worker-kills", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    add_node_loss_arguments(parser)
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("chaos.py reads /proc: Linux only.")
    if args.node_loss:
        return node_loss(args)
    from conformance.planning import OpsOptions, parse_dtypes
    from conformance.suite import plan
    from porting_cli.cli.options import split_list

    planned = set(plan("ops", OpsOptions(ops=tuple(split_list(args.ops)), dtypes=tuple(parse_dtypes(split_list(args.dtype))),
                                         grad=args.grad)))
    with tempfile.TemporaryDirectory(prefix="neuron-check-chaos-") as tmp:
        reference, reference_wall = uninterrupted(args, Path(tmp))
        rows, chaos, run_again = chaotic(args, Path(tmp), random.Random(args.seed), len(planned))
    lost = len(planned - set(rows))
    unplanned = len(set(rows) - planned)
    differs = {item: row[0] for item, row in rows.items() if item in reference and reference[item][0] != row[0]}
    crashed = sum(1 for status in differs.values() if status is Status.CRASH)
    print(f"plan: {len(planned)} items ({len(split_list(args.ops))} ops x {args.dtype}), --jobs {args.jobs}, seed {args.seed}")
    print(f"uninterrupted run: {len(reference)} items in {reference_wall:.1f} s")
    print(f"chaos run: {chaos.parent_kills} parent SIGKILLs, {chaos.worker_kills} worker SIGKILLs, "
          f"{chaos.segments} processes (1 + {chaos.segments - 1} resumes), {chaos.wall_s:.1f} s")
    print(f"items lost: {lost}")
    print(f"items duplicated (run again after a resume, or not in the plan): {run_again + unplanned}")
    print(f"items whose status differs from the uninterrupted run: {len(differs)} "
          f"({crashed} CRASH where a killed worker held the item; at most {chaos.worker_kills} expected)")
    print(f"processes left behind: {chaos.left_behind}")
    print(f"wall-time overhead: {chaos.wall_s / reference_wall:.2f}x the uninterrupted run "
          f"(+{chaos.wall_s - reference_wall:.1f} s, {(chaos.wall_s - reference_wall) / max(1, chaos.segments - 1):.1f} s per restart)")
    bad = lost or run_again or unplanned or chaos.left_behind or crashed != len(differs) or crashed > chaos.worker_kills
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
