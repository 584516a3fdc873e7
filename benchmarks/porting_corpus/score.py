"""Score the porting check on the hand-labelled corpus: whatever part of it is present locally.

For each labelled script in `.scripts/` (see fetch.py) it runs
`neuron-check FILE --static-only --format json` and compares the findings with labels.json:

  recall       labelled CUDA-code lines with at least one finding on them
  at token     of those, lines where a finding's span covers the labelled token's column
  false alarm  lines with a finding that are not labelled CUDA code (nor `either`: a finding there
               is acceptable, not required)
  prose        false-alarm lines that are labelled prose (comments, docstrings, messages, help)
  verdict      the tool says `blocked` exactly when the label says blocked

    python benchmarks/porting_corpus/score.py --half dev
    python benchmarks/porting_corpus/score.py --half fresh              # batch 4, labelled after both halves were scored
    python benchmarks/porting_corpus/score.py --half dev --details     # every miss and false alarm
    python benchmarks/porting_corpus/score.py --half dev --fix-check   # --fix output parses, no fixable left,
                                                                       # and uses no name before it is bound
    python benchmarks/porting_corpus/score.py --checkout /path/to/worktree-of-a-branch

Exit status 0 when every present script was scored, 1 when the tool failed on one.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from corpus import Tool, add_tool_options, load_corpus, local_script



@dataclasses.dataclass
class ScriptScore:
    entry: dict
    verdict: str | None = None
    error: str | None = None
    hit: list[int] = dataclasses.field(default_factory=list)
    missed: list[int] = dataclasses.field(default_factory=list)
    at_token: int = 0
    off_token: list[int] = dataclasses.field(default_factory=list)  # hit lines whose findings miss the token
    false_alarms: list[int] = dataclasses.field(default_factory=list)
    prose_alarms: list[int] = dataclasses.field(default_factory=list)
    rules_at: dict[int, list[str]] = dataclasses.field(default_factory=dict)
    fix_problem: str | None = None
    name_problem: str | None = None  # the fixed file uses a name unbound (porting_cli.analysis.scan.names)

    @property
    def verdict_ok(self) -> bool:
        return self.verdict is not None and (self.verdict == "blocked") == bool(self.entry["blocked"])


def scan(tool: Tool, script: Path) -> dict:
    done = tool.run(script, "--format", "json", timeout=300)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}")
    return json.loads(done.stdout)


def score_script(tool: Tool, entry: dict, script: Path) -> ScriptScore:
    result = ScriptScore(entry)
    try:
        report = scan(tool, script)
    except (RuntimeError, json.JSONDecodeError, subprocess.TimeoutExpired) as error:
        result.error = str(error)
        return result
    result.verdict = report["verdict"]
    spans: dict[int, list[tuple[int, int]]] = {}
    for finding in report["findings"]:
        line = finding["line"]
        end = finding["end_col"] if finding.get("end_line") == line and finding.get("end_col") else 10**6
        spans.setdefault(line, []).append((finding["col"] - 1, end - 1))  # the tool's columns are 1-based
        result.rules_at.setdefault(line, []).append(finding["rule"])
    labelled = {item["line"]: item.get("col") for item in entry["cuda"]}
    prose = set(entry["prose"])
    either = set(entry.get("either", ()))
    for line, col in sorted(labelled.items()):
        if line not in spans:
            result.missed.append(line)
            continue
        result.hit.append(line)
        if col is not None and any(start <= col < end for start, end in spans[line]):
            result.at_token += 1
        elif col is not None:
            result.off_token.append(line)
    result.false_alarms = sorted(set(spans) - set(labelled) - either)
    result.prose_alarms = [line for line in result.false_alarms if line in prose]
    return result


def fix_check(tool: Tool, script: Path) -> tuple[str | None, str | None]:
    """Apply --fix to a copy: the result must parse under Python 3.10 and leave no fixable finding
    (the first problem), and use no name before it is bound (the second: the name check of
    porting_cli/analysis/scan/bound.py, names unbound in the fixed file and not in the original)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / script.name
        shutil.copyfile(script, copy)
        done = tool.run(copy, "--fix", timeout=300)
        if done.returncode not in (0, 1):
            return f"--fix exit {done.returncode}: {(done.stderr or done.stdout).strip()[-200:]}", None
        fixed = copy.read_text(encoding="utf-8")
        try:
            ast.parse(fixed, feature_version=(3, 10))
        except SyntaxError as error:
            return f"fixed file does not parse (3.10): line {error.lineno}: {error.msg}", None
        names = name_problem(tool, script.read_text(encoding="utf-8"), fixed)
        left = [f for f in scan(tool, copy)["findings"] if f["fixable"]]
        return (f"{len(left)} fixable finding(s) left after --fix" if left else None), names


def name_problem(tool: Tool, original: str, fixed: str) -> str | None:
    """The first name the fixed file uses unbound that the original did not, as the checkout's
    own name check sees it (this repository's when no --checkout is given)."""
    root = tool.checkout or Path(__file__).resolve().parents[2]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from porting_cli.analysis.scan.names import new_unbound

    found = new_unbound(ast.parse(original), ast.parse(fixed))
    return f"`{found[0][0]}` unbound at line {found[0][1]} of the fixed file" if found else None


def pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "   - "


def print_table(scores: list[ScriptScore], show_fix: bool) -> None:
    header = f"{'half':4} {'script':58} {'lines':>5} {'hit':>4} {'recall':>6} {'tok':>4} {'FA':>3} {'prose':>5}  verdict (label)"
    print(header)
    print("-" * len(header))
    for s in scores:
        e = s.entry
        label = "blocked" if e["blocked"] else "not-blocked"
        if s.error:
            print(f"{e['half']:4} {e['id'][:58]:58} ERROR {s.error[:80]}")
            continue
        mark = "" if s.verdict_ok else "  WRONG"
        fix = f"  fix: {s.fix_problem}" if show_fix and s.fix_problem else ""
        fix += f"  names: {s.name_problem}" if show_fix and s.name_problem else ""
        total = len(s.hit) + len(s.missed)
        print(f"{e['half']:4} {e['id'][:58]:58} {total:5} {len(s.hit):4} {pct(len(s.hit), total):>6} "
              f"{s.at_token:4} {len(s.false_alarms):3} {len(s.prose_alarms):5}  {s.verdict} ({label}){mark}{fix}")


def print_summary(scores: list[ScriptScore], show_fix: bool) -> None:
    print()
    for half in ("dev", "held", "fresh"):
        part = [s for s in scores if s.entry["half"] == half and not s.error]
        if not part:
            continue
        lines = sum(len(s.hit) + len(s.missed) for s in part)
        hit = sum(len(s.hit) for s in part)
        blocked = [s for s in part if s.entry["blocked"]]
        free = [s for s in part if not s.entry["blocked"]]
        print(f"{half}: {len(part)} scripts | line recall {hit}/{lines} ({pct(hit, lines).strip()}) | "
              f"at the token {sum(s.at_token for s in part)}/{hit} | "
              f"false-alarm lines {sum(len(s.false_alarms) for s in part)} "
              f"(on prose lines {sum(len(s.prose_alarms) for s in part)}) | "
              f"verdicts right {sum(s.verdict_ok for s in part)}/{len(part)} "
              f"(blocked {sum(s.verdict_ok for s in blocked)}/{len(blocked)}, "
              f"not blocked {sum(s.verdict_ok for s in free)}/{len(free)})")
        if show_fix:
            bad = [s for s in part if s.fix_problem]
            print(f"{half}: --fix output parses (3.10) and leaves no fixable finding in "
                  f"{len(part) - len(bad)}/{len(part)} scripts")
            unbound = [s for s in part if s.name_problem]
            print(f"{half}: fixed files failing the name check (a name used before it is bound): "
                  f"{len(unbound)}/{len(part)}")
    errors = [s for s in scores if s.error]
    if errors:
        print(f"tool failed on {len(errors)} script(s)")


def print_details(scores: list[ScriptScore]) -> None:
    for s in scores:
        if s.error or not (s.missed or s.false_alarms or s.off_token or not s.verdict_ok):
            continue
        e = s.entry
        text = (local_script(e) or Path()).read_text(encoding="utf-8").splitlines()
        print(f"\n## {e['id']}  ({e['repo']} {e['path']} @ {e['commit'][:12]})")
        for line in s.missed:
            print(f"  MISS  {line:4}: {text[line - 1].strip()[:110]}")
        for line in s.off_token:
            col = next(item["col"] for item in e["cuda"] if item["line"] == line)
            print(f"  OFF   {line:4}: finding not at column {col + 1} (1-based): {text[line - 1].strip()[:90]}  "
                  f"[{','.join(s.rules_at[line])}]")
        for line in s.false_alarms:
            kind = "PROSE" if line in s.prose_alarms else "FA   "
            print(f"  {kind} {line:4}: {text[line - 1].strip()[:110]}  [{','.join(s.rules_at[line])}]")
        if not s.verdict_ok:
            print(f"  VERDICT tool={s.verdict} label={'blocked' if e['blocked'] else 'not blocked'}"
                  f" ({e.get('why', '')})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=("dev", "held", "fresh", "all"), default="dev")
    add_tool_options(parser)
    parser.add_argument("--only", default=None, help="score one script id")
    parser.add_argument("--details", action="store_true", help="list every miss, false alarm and wrong verdict")
    parser.add_argument("--fix-check", action="store_true", help="also apply --fix to a copy of each script")
    parser.add_argument("--json", type=Path, default=None, help="write the per-script scores here")
    args = parser.parse_args(argv)
    tool = Tool.from_args(args.tool, args.checkout)
    print(f"tool: {tool.describe()}")
    entries = [e for e in load_corpus() if e.get("labelled") and (args.half == "all" or e["half"] == args.half)
               and (args.only is None or e["id"] == args.only)]
    present = [(e, local_script(e)) for e in entries]
    absent = [e["id"] for e, path in present if path is None]
    scores = []
    for entry, path in present:
        if path is None:
            continue
        score = score_script(tool, entry, path)
        if args.fix_check and not score.error:
            score.fix_problem, score.name_problem = fix_check(tool, path)
        scores.append(score)
    print_table(scores, args.fix_check)
    print_summary(scores, args.fix_check)
    if absent:
        print(f"{len(absent)} labelled script(s) not present locally (run fetch.py): {', '.join(absent[:5])}...")
    if args.details:
        print_details(scores)
    if args.json:
        args.json.write_text(json.dumps([{**dataclasses.asdict(s), "entry": s.entry["id"]} for s in scores], indent=1))
    return 1 if any(s.error for s in scores) else 0


if __name__ == "__main__":
    sys.exit(main())
