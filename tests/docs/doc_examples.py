"""The manual's examples: find them in the Markdown, run them, compare what they print.

The convention (docs/writing-docs.md explains it to authors):

- A ```bash block that runs `neuron-check` is an example. It runs as one bash script in the
  page's working folder; every command must exit 0, except the last, which must exit with the
  status an `exit N` marker gives (default 0). Bash blocks show no output, so none is checked.
- A ```console block is an example with output: `$ COMMAND` lines (continued by a trailing `\\`),
  each followed by what it prints (stdout and stderr together, as a terminal shows them). Each
  command runs in its own shell in the page's folder; lines are compared with surrounding
  whitespace stripped and any run of blanks matching any other (tables pad their columns), `...`
  alone on a line stands for any number of lines, and `...` inside a line for any text. An `exit N` marker gives the status of the block's last command; the
  others must exit 0.
- A ```json block marked `shows COMMAND` is COMMAND's output, abridged: every key it shows must be
  in the real output at the same place (`"...": "..."` and list items after the first elided;
  only snake_case keys are compared, others are data such as op names and statuses).
- Markers sit in an HTML comment right before the block (invisible on the page):
  `<!-- example: exit 2 -->`, `<!-- example: skip needs a Trainium host -->`,
  `<!-- example: slow 3 min on 2 cores -->`, several joined by `;`. `skip` blocks are never
  run (hardware, a cluster, the network, files a reader must bring); `slow` blocks run on sim
  but take longer than the test suite can afford, and run when NEURON_CHECK_DOCS_SLOW=1.
  Both need a reason.

Every block of a page runs in document order in one fresh folder holding a copy of `examples/`
and of a results database that already holds one small `ops` run, so later blocks may use files
earlier ones wrote (a profile, a report) and `report`/`runs`/`gate` have a run to read.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

FENCE = re.compile(r"^(`{3,})\s*([\w+-]*)\s*$")
MARKER = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->$")
# `neuron-check` as a command word: at a line's start or after a shell operator or `timeout N`.
COMMAND = re.compile(r"(^|[;&|(]\s*|\btimeout\s+(?:--?[\w-]+\s+)*\S+\s+|\$\s+)neuron-check\b", re.M)
MARKER_KEYS = ("exit", "skip", "slow", "shows")
# The export schemas name their fields in snake_case; other keys are data (`aten.mul.Tensor`, `PASS`).
SCHEMA_KEY = re.compile(r"[a-z][a-z0-9_]*")


class MarkerError(ValueError):
    """A marker the convention does not define (names the page and line)."""


@dataclasses.dataclass(frozen=True)
class Example:
    page: str          # path relative to the repository root
    line: int          # line of the opening fence
    language: str      # bash or console
    text: str          # the block's body
    exit: int = 0      # expected status of the last command
    skip: str | None = None
    slow: str | None = None
    shows: str | None = None  # json blocks: the command whose (abridged) output the block is

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def doc_pages(root: Path) -> list[Path]:
    """README.md and every Markdown page under docs/, in a stable order."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def parse_markers(text: str, where: str) -> dict[str, str]:
    found: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        key, _, value = part.partition(" ")
        if key not in MARKER_KEYS:
            raise MarkerError(f"{where}: unknown example marker {key!r} (known: {', '.join(MARKER_KEYS)})")
        value = value.strip()
        if key == "exit" and not value.isdigit():
            raise MarkerError(f"{where}: 'exit' needs a status number, got {value!r}")
        if key in ("skip", "slow", "shows") and not value:
            raise MarkerError(f"{where}: '{key}' needs a reason")
        found[key] = value
    return found


def examples_in(path: Path, root: Path) -> list[Example]:
    """The example blocks of one Markdown page, with their markers."""
    page = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    markers: dict[str, str] = {}
    index = 0
    while index < len(lines):
        line = lines[index].strip()
        marker = MARKER.match(line)
        fence = FENCE.match(line)
        if marker:
            markers.update(parse_markers(marker.group(1), f"{page}:{index + 1}"))
        elif fence:
            ticks, language = fence.groups()
            end = index + 1
            while end < len(lines) and lines[end].strip() != ticks:
                end += 1
            indent = len(lines[index]) - len(lines[index].lstrip())  # a block inside a list item
            body = "\n".join(text[indent:] if not text[:indent].strip() else text
                             for text in lines[index + 1:end])
            if language in ("bash", "console") and COMMAND.search(_code_only(body)):
                found.append(Example(page, index + 1, language, body, exit=int(markers.get("exit", 0)),
                                     skip=markers.get("skip"), slow=markers.get("slow")))
            elif language == "json" and "shows" in markers:
                found.append(Example(page, index + 1, language, body, shows=markers["shows"],
                                     skip=markers.get("skip"), slow=markers.get("slow")))
            elif markers:
                raise MarkerError(f"{page}:{index + 1}: an example marker before a block that runs no neuron-check")
            markers = {}
            index = end
        elif line and markers:
            raise MarkerError(f"{page}:{index + 1}: an example marker must come right before its block")
        index += 1
    return found


def _code_only(body: str) -> str:
    """The block without comments, so `# neuron-check ...` in a comment is no example."""
    return "\n".join(line.split(" #", 1)[0] for line in body.splitlines() if not line.lstrip().startswith("#"))


# -- console blocks --------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ConsoleStep:
    command: str
    expected: tuple[str, ...]


def console_steps(body: str) -> list[ConsoleStep]:
    steps: list[ConsoleStep] = []
    command: list[str] = []
    expected: list[str] = []
    lines = body.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("$ "):
            if command:
                steps.append(ConsoleStep("\n".join(command), tuple(expected)))
            command, expected = [line[2:]], []
            while command[-1].endswith("\\") and index + 1 < len(lines):
                index += 1
                command.append(lines[index])
        elif command:
            expected.append(line)
        index += 1
    if command:
        steps.append(ConsoleStep("\n".join(command), tuple(expected)))
    return steps


def output_matches(expected: tuple[str, ...], actual: str) -> bool:
    """Whether `actual` is what `expected` shows (`...` lines and in-line `...` are wildcards)."""
    pattern = []
    for line in expected:
        stripped = line.strip()
        if stripped == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            # columns of a table are padded to their widest cell: any run of blanks matches any other
            pieces = [r"[ \t]+".join(re.escape(word) for word in piece.split(" ")) if piece.strip(" ") else ""
                      for piece in re.sub(r"[ \t]+", " ", stripped).split("...")]
            pattern.append(r"[ \t]*" + "[^\n]*".join(pieces) + r"[ \t]*\n")
    actual_lines = "".join(line.rstrip() + "\n" for line in actual.rstrip().splitlines())
    return re.fullmatch("".join(pattern), actual_lines) is not None


# -- running ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Outcome:
    example: Example
    ok: bool
    detail: str
    seconds: float


def run_example(example: Example, cwd: Path, env: dict[str, str], timeout_s: float) -> Outcome:
    import time

    start = time.monotonic()
    try:
        if example.language == "bash":
            ok, detail = _run_bash(example, cwd, env, timeout_s)
        elif example.language == "json":
            ok, detail = _run_json(example, cwd, env, timeout_s)
        else:
            ok, detail = _run_console(example, cwd, env, timeout_s)
    except subprocess.TimeoutExpired:
        ok, detail = False, f"still running after {timeout_s:.0f} s (mark it `slow` with a reason)"
    return Outcome(example, ok, detail, time.monotonic() - start)


LAST = "__doc_example_last_command__"


def _shell(script: str, cwd: Path, env: dict[str, str], timeout_s: float,
           stderr: int = subprocess.PIPE) -> subprocess.CompletedProcess:
    """bash -c SCRIPT in a session of its own: at the timeout its whole process group is killed,
    the command's workers with it (subprocess.run would kill bash alone and leave them running)."""
    with subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=stderr,
                          text=True, start_new_session=True) as process:
        try:
            stdout, errors = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, errors)


def _run_bash(example: Example, cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[bool, str]:
    commands = _bash_commands(example.text)
    script = ["set -e -o pipefail", *commands[:-1], "set +e", f"echo {LAST} >&2", commands[-1]]
    done = _shell("\n".join(script), cwd, env, timeout_s)
    reached_last = LAST in done.stderr
    ok = reached_last and done.returncode == example.exit
    if ok:
        return True, ""
    which = "the last command" if reached_last else "a command before the last"
    return False, (f"{which} exited {done.returncode}, expected {example.exit if reached_last else 0}\n"
                   f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}")


def _bash_commands(body: str) -> list[str]:
    """The block's logical command lines (a trailing `\\` continues one), blank lines dropped."""
    commands: list[str] = []
    pending = ""
    for line in body.splitlines():
        pending += line + "\n"
        if not line.rstrip().endswith("\\"):
            if pending.strip():
                commands.append(pending.rstrip("\n"))
            pending = ""
    if pending.strip():
        commands.append(pending.rstrip("\n"))
    return commands


def _run_console(example: Example, cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[bool, str]:
    steps = console_steps(example.text)
    for number, step in enumerate(steps):
        wanted = example.exit if number == len(steps) - 1 else 0
        done = _shell(step.command, cwd, env, timeout_s, stderr=subprocess.STDOUT)
        if done.returncode != wanted:
            return False, f"$ {step.command}\nexited {done.returncode}, expected {wanted}; printed:\n{done.stdout[-3000:]}"
        if not output_matches(step.expected, done.stdout):
            shown = "\n".join(step.expected)
            return False, f"$ {step.command}\nprinted:\n{done.stdout[-3000:]}\nthe page shows:\n{shown}"
    return True, ""


def _run_json(example: Example, cwd: Path, env: dict[str, str], timeout_s: float) -> tuple[bool, str]:
    """A JSON block marked `shows COMMAND` is COMMAND's output abridged: every key it shows must
    be in the real output at the same place (`"...": "..."` and list items after the first elided)."""
    import json

    done = _shell(example.shows, cwd, env, timeout_s)
    if done.returncode != 0:
        return False, f"$ {example.shows}\nexited {done.returncode}:\n{done.stderr[-3000:]}"
    missing = missing_keys(json.loads(example.text), json.loads(done.stdout))
    if missing:
        return False, f"$ {example.shows}\nprints no {', '.join(missing)}, which the page shows"
    return True, ""


def missing_keys(shown, actual, where: str = "") -> list[str]:
    """The keys `shown` has that `actual` lacks, as paths (`results[0].claimed`)."""
    if isinstance(shown, dict) and isinstance(actual, dict):
        missing = []
        for key, value in shown.items():
            if not SCHEMA_KEY.fullmatch(key):  # data, not schema: an op name, a status, "..."
                continue
            if key not in actual:
                missing.append(f"{where}.{key}".lstrip("."))
            else:
                missing += missing_keys(value, actual[key], f"{where}.{key}")
        return missing
    if isinstance(shown, list) and isinstance(actual, list) and shown and actual:
        return missing_keys(shown[0], actual[0], f"{where}[0]")
    return []


def example_env(base: dict[str, str], bin_dir: str) -> dict[str, str]:
    """The environment examples run in: the test's, with this interpreter's scripts first on PATH,
    no terminal colours or widths that would change what a command prints, no Ray memory monitor."""
    env = dict(base)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    env.pop("NEURON_CHECK_DB", None)
    env["COLUMNS"] = "200"
    # Ray's memory monitor kills actors when the whole machine (shared with other jobs) is nearly
    # full; that tests the machine, not the example (as in tests/conformance/test_engine_ray_cluster.py).
    env["RAY_memory_monitor_refresh_ms"] = "0"
    return env


def seed_database(folder: Path, env: dict[str, str]) -> Path:
    """A results database in `folder` holding one small sim run, for examples that read runs."""
    subprocess.run(["neuron-check", "ops", "--device", "sim", "--ops", "add,mul", "--dtype", "fp32"],
                   cwd=folder, env=env, check=True, capture_output=True, timeout=300)
    return folder


def shared_seed_database(folder: Path, env: dict[str, str]) -> Path:
    """seed_database in `folder`, built once for every process that asks: the first builds it
    under a lock, the others wait for it and then only read it (page_folder copies it). The
    xdist workers of one run share one this way instead of each building its own (a `neuron-check
    ops` run, about 7 s of CPU once the sim device is built). A failed build leaves no mark, so
    the next process to ask tries again and fails with its own error."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    built = folder / "seed-built"
    with open(folder / "seed.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also on an exception
        if not built.exists():
            seed_database(folder, env)
            built.touch()
    return folder


def page_folder(folder: Path, root: Path, seed: Path) -> Path:
    """A fresh folder for one page's examples: a copy of `examples/` and of the seeded database."""
    shutil.copytree(root / "examples", folder / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    for db_file in seed.glob("neuron-check.db*"):  # the database and any journal beside it
        shutil.copy2(db_file, folder / db_file.name)
    return folder
