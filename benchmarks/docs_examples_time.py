"""How long does each docs example marked `slow` or `skip` take on sim? The figure behind each marker.

    python benchmarks/docs_examples_time.py                      every `slow` block of every page
    python benchmarks/docs_examples_time.py --page docs/fp8.md   one page
    python benchmarks/docs_examples_time.py --also docs/ops.md:10 --also docs/models.md:25
                                         also these `skip` blocks (sweeps that run on sim)
    python benchmarks/docs_examples_time.py --all                every block, marked or not

The issue's rule: an example that runs in under 30 s on sim is run by the tests. This prints each
selected block's wall time, run exactly as tests/docs/test_docs_examples.py runs it (the same
runner, tests/docs/doc_examples.py, the same fresh folder with a copy of `examples/` and a seeded
database). A block may use files an earlier block of its page wrote, so every block of the page
before the last selected one runs too, in document order (`skip` blocks excepted, unless
selected); unmarked blocks are timed and shown as well. A block still running after --timeout
seconds is stopped and shown as `>TIMEOUT`. Blocks marked `skip` for hardware, a cluster, the
network or `ray start`/`ray stop` (which stop every Ray instance of the user) are never run by
default: select one with --also only when it runs on sim alone.

Printed: one line per block (page:line, wall seconds, the CPU seconds its processes used, ok/FAILED,
its marker), the load average before and after, and which selected blocks took under 30 s. On a
shared machine the wall time grows with the load; the CPU time hardly does, and on 2 idle cores
a block's wall time is about its CPU time (its processes mostly run one at a time) or less. Exits 1 when a selected block failed.
Run it alone on the machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "docs"))

from doc_examples import (  # noqa: E402  (the tests' own runner: the same folder, the same rules)
    Example,
    doc_pages,
    example_env,
    examples_in,
    page_folder,
    run_example,
    seed_database,
)

LIMIT_S = 30.0  # the issue: an example under 30 s on sim is run by the tests


def _selected(example: Example, args: argparse.Namespace) -> bool:
    if example.where in args.also:
        return True
    if example.skip:
        return False
    return args.all or bool(example.slow)


def _marker(example: Example) -> str:
    if example.skip:
        return f"skip: {example.skip}"
    if example.slow:
        return f"slow: {example.slow}"
    return "runs in the suite"


def _children_cpu_s() -> float:
    """CPU seconds (user + system) of every finished child process, their own children included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time_page(page: Path, seed: Path, env: dict[str, str], args: argparse.Namespace) -> list[tuple[Example, float, str]]:
    examples = examples_in(page, REPO)
    chosen = [index for index, example in enumerate(examples) if _selected(example, args)]
    if not chosen:
        return []
    timed = []
    with tempfile.TemporaryDirectory(prefix="docs-time-") as scratch:
        folder = page_folder(Path(scratch) / "page", REPO, seed)
        for example in examples[: chosen[-1] + 1]:
            if example.skip and example.where not in args.also:
                continue
            cpu_before = _children_cpu_s()
            outcome = run_example(example, folder, env, args.timeout)
            cpu_s = _children_cpu_s() - cpu_before
            verdict = "ok" if outcome.ok else (">TIMEOUT" if "still running" in outcome.detail else "FAILED")
            selected = _selected(example, args)
            print(f"{'*' if selected else ' '} {example.where:32} {outcome.seconds:6.1f} s  cpu {cpu_s:6.1f} s  {verdict:8}  "
                  f"{_marker(example)[:90]}", flush=True)
            if verdict == "FAILED" and args.verbose:
                print(outcome.detail, flush=True)
            if selected:
                timed.append((example, outcome.seconds, verdict))
    return timed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--page", action="append", default=[], help="only this page (repeatable)")
    parser.add_argument("--also", action="append", default=[], metavar="PAGE:LINE",
                        help="also time this `skip` block (line of its opening fence; repeatable)")
    parser.add_argument("--all", action="store_true", help="time every block, not only `slow` ones")
    parser.add_argument("--timeout", type=float, default=120.0, help="stop a block after this many seconds")
    parser.add_argument("--verbose", action="store_true", help="print what a failed block printed")
    args = parser.parse_args()

    pages = [p for p in doc_pages(REPO) if not args.page or p.relative_to(REPO).as_posix() in args.page]
    env = example_env(dict(os.environ), str(Path(sys.executable).parent))
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    print("* = selected (slow, or chosen with --also); other lines are blocks the selected ones may need")
    start = time.monotonic()
    timed = []
    with tempfile.TemporaryDirectory(prefix="docs-seed-") as seed:
        seed_database(Path(seed), env)
        for page in pages:
            timed += _time_page(page, Path(seed), env, args)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{time.monotonic() - start:.0f} s in all")
    under = [e.where for e, seconds, verdict in timed if verdict == "ok" and seconds < LIMIT_S]
    over = [f"{e.where} ({seconds:.0f} s{'+' if verdict == '>TIMEOUT' else ''})"
            for e, seconds, verdict in timed if verdict != "FAILED" and seconds >= LIMIT_S]
    failed = [e.where for e, _, verdict in timed if verdict == "FAILED"]
    print(f"under {LIMIT_S:.0f} s ({len(under)}): {', '.join(under) or '-'}")
    print(f"{LIMIT_S:.0f} s or more ({len(over)}): {', '.join(over) or '-'}")
    if failed:
        print(f"FAILED ({len(failed)}): {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
