"""Same findings and same fixes from two versions of the static scan, on one corpus.

A rewrite of the scan (issue 13 §6 moved it from libcst to the standard library's ``ast``) must
not change what it reports nor what ``--fix`` writes. This records, for every file of a corpus,
the findings (as JSON), the fixed text and the syntax error if any, with the ``porting_cli`` on
``PYTHONPATH``; then the same with another version, and compares:

    PYTHONPATH=/path/to/old python benchmarks/scan_parity.py --record /tmp/old.json
    PYTHONPATH=$PWD python benchmarks/scan_parity.py --compare /tmp/old.json

The corpus: the layouts of benchmarks/scan_parity_cases.py, the synthetic scripts of
benchmarks/scan_throughput.py at several CUDA shares, examples/, the scripts and fixtures under tests/porting_cli, and every string literal in
tests/porting_cli/test_*.py that parses as Python (the rule and fix tests' snippets). All of
it is this project's own code; ``--whole-repo`` adds every .py file of the project. Exit status 1
when any file differs. (To record an old version on the same corpus, run this file of the new
tree with the old tree on ``PYTHONPATH``.)
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))
from scan_parity_cases import EDGE_CASES  # noqa: E402
from scan_throughput import make_source  # noqa: E402

TESTS = REPO / "tests" / "porting_cli"


def snippets(path: Path) -> dict[str, str]:
    """String literals of a test file that are Python code with at least one line break."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "\n" in node.value:
            for text in {node.value, textwrap.dedent(node.value)}:
                try:
                    ast.parse(text.removeprefix("\ufeff"))
                except (SyntaxError, ValueError):
                    continue
                found[f"{path.name}:{node.lineno}:{len(found)}"] = text
    return found


def corpus(whole_repo: bool = False) -> dict[str, str]:
    files: dict[str, str] = dict(EDGE_CASES)
    if whole_repo:  # every Python file of the project (slow with an old libcst scan: minutes)
        for path in sorted(REPO.rglob("*.py")):
            parts = path.relative_to(REPO).parts
            if not any(p.startswith(".") or p in ("build", "node_modules") for p in parts):
                files[str(path.relative_to(REPO))] = path.read_text(encoding="utf-8", errors="replace")
    for lines, share in ((1500, 0.25), (600, 0.1), (300, 0.6)):
        files[f"generated-{lines}-{share}"] = make_source(lines, share)
    for folder in (REPO / "examples", TESTS / "fixtures", TESTS / "scripts"):
        for path in sorted(folder.rglob("*.py")):
            files[str(path.relative_to(REPO))] = path.read_text(encoding="utf-8")
    for path in sorted(TESTS.glob("test_*.py")):
        files.update(snippets(path))
    return files


def outcome(name: str, text: str) -> dict:
    from porting_cli.analysis.fix import fix_source
    from porting_cli.analysis.scan import ScanError, scan_source

    try:
        findings = [f.to_dict() for f in scan_source(text, name).findings]
        fixed = fix_source(text, name).new_text
    except ScanError as e:
        return {"error": str(e)}
    except Exception as e:  # noqa: BLE001 - a crash is an outcome to compare too
        return {"crash": f"{type(e).__name__}: {e}"}
    return {"findings": findings, "fixed": fixed}


def record(whole_repo: bool = False) -> dict[str, dict]:
    return {name: outcome(name, text) for name, text in corpus(whole_repo).items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write this version's outcomes here")
    mode.add_argument("--compare", type=Path, help="compare this version with the outcomes recorded there")
    parser.add_argument("--whole-repo", action="store_true", help="add every .py file of the project")
    args = parser.parse_args(argv)
    now = record(args.whole_repo)
    if args.record:
        args.record.write_text(json.dumps(now, indent=1, sort_keys=True))
        print(f"recorded {len(now)} files to {args.record}")
        return 0
    before = json.loads(args.compare.read_text())
    differ = sorted(n for n in before.keys() | now.keys() if before.get(n) != now.get(n))
    for name in differ:
        old, new = before.get(name, {}), now.get(name, {})
        print(f"DIFFERS {name}")
        for key in ("error", "crash", "findings", "fixed"):
            if old.get(key) != new.get(key):
                print(f"  {key}:\n    before: {old.get(key)!r}\n    after:  {new.get(key)!r}")
    print(f"{len(now) - len(differ)} of {len(before.keys() | now.keys())} files identical")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
