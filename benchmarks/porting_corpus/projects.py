"""Project mode on whole public repositories: every run must end with a report, and --fix must parse.

For each repository (pinned below), the tree at the commit is exported from a git mirror into
ROOT/<owner>+<name> (outside any worktree), then:

  1. `neuron-check TREE --static-only --format json` (scan cache off): exit status, wall time,
     Python lines, files, findings, verdict, files the report lists as failed;
  2. `neuron-check COPY --static-only --fix` on a scratch copy: every file it changed (those with a
     `.orig` beside them) must parse under the Python 3.10 grammar (`ast.parse(...,
     feature_version=(3, 10))`, run on Python >= 3.11 so 3.12-only f-strings are refused too).

    python benchmarks/porting_corpus/projects.py --mirror /work/.mirror --root /work/corpus-repos
    python benchmarks/porting_corpus/projects.py --mirror /work/.mirror --only ultralytics/yolov5
    python benchmarks/porting_corpus/projects.py --mirror /work/.mirror --checkout /path/to/worktree

Exit status 1 when a run ends without a report (exit 3, a traceback, no JSON) or a fixed file
does not parse.
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
import time
from pathlib import Path

from corpus import Tool, add_tool_options

# (repository, commit): vision, detection, training frameworks, LLM training and serving,
# diffusion, speech and audio, RL, kernels
PROJECTS = (
    ("huggingface/pytorch-image-models", "aa4b5850c1543fa488abf260f18390eda46cf85d"),
    ("ultralytics/yolov5", "5081342f04fb287fc2e5f2b5a4e06752b7937b1c"),
    ("huggingface/accelerate", "16cb6eb80dd9aa8b4df1a63ef57863e455d53b83"),
    ("facebookresearch/detectron2", "02b5c4e295e990042a714712c21dc79b731e8833"),
    ("Lightning-AI/litgpt", "26857050fe3ff627cd714fe92f5838f51a3d5efa"),
    ("EleutherAI/gpt-neox", "ea7aefd8f8e183256992d9fede4d7c71a46d67a5"),
    ("lm-sys/FastChat", "0e6d3e4beaab66f4d3f93db72541a4abab8af28d"),
    ("Stability-AI/generative-models", "0ad7de9a5cb53fd63d6d30a4f385485e72e08597"),
    ("coqui-ai/TTS", "dbf1a08a0d4e47fdad6172e433eeb34bc6b13b4e"),
    ("facebookresearch/audiocraft", "896ec7c47f5e5d1e5aa1e4b260c4405328bf009d"),
    ("openai/whisper", "c0d2f624c09dc18e709e37c2ad90c039a4eb72a2"),
    ("vwxyzjn/cleanrl", "fe8d8a03c41a7ef5b523e2e354bd01c363e786bb"),
    ("huggingface/trl", "f2cd57710ae345ea6428ae95363267fcf38a3dc8"),
    ("state-spaces/mamba", "e9594ce1c732d97440f0332fdc43170a2294dbfa"),
)


@dataclasses.dataclass
class ProjectRun:
    repo: str
    exit_code: int | None = None
    seconds: float = 0.0
    py_files: int = 0
    py_lines: int = 0
    findings: int = 0
    verdict: str | None = None
    failed_files: list[str] = dataclasses.field(default_factory=list)
    problem: str | None = None
    missing_blobs: int = 0  # large files the mirror lacks
    fixed_files: int = 0
    unparsable: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.unparsable


def export_tree(mirror: Path, repo: str, commit: str, dest: Path) -> int:
    """Write the tree at `commit` into `dest`; returns how many blobs the mirror lacks (skipped).

    Mirrors may lack large files (snapshots leave out files of 4 MiB and more), which makes
    `git archive` fail, so blobs are read one by one through `git cat-file --batch`.
    """
    owner, name = repo.split("/")
    git_dir = next((d for d in (mirror / f"{owner}+{name}" / "repo", mirror / owner / name) if d.exists()), None)
    if git_dir is None:
        raise FileNotFoundError(f"no mirror of {repo} under {mirror}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    listing = subprocess.run(["git", "-C", str(git_dir), "ls-tree", "-r", "-z", commit],
                             capture_output=True, check=True).stdout.split(b"\0")
    blobs = []
    for row in filter(None, listing):
        meta, path = row.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":  # links are not followed by the scan either
            blobs.append((sha, path.decode("utf-8", "surrogateescape")))
    batch = subprocess.run(["git", "-C", str(git_dir), "cat-file", "--batch"],
                           input=b"".join(sha + b"\n" for sha, _ in blobs), capture_output=True, check=True).stdout
    missing, offset = 0, 0
    for _, path in blobs:
        end = batch.index(b"\n", offset)
        header = batch[offset:end].split()
        offset = end + 1
        if header[-1] == b"missing":
            missing += 1
            continue
        size = int(header[2])
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(batch[offset:offset + size])
        offset += size + 1
    return missing


def python_files(tree: Path) -> list[Path]:
    return [p for p in tree.rglob("*.py") if p.is_file()]


def scan_project(tool: Tool, run: ProjectRun, tree: Path) -> None:
    files = python_files(tree)
    run.py_files = len(files)
    run.py_lines = sum(p.read_bytes().count(b"\n") for p in files)
    start = time.perf_counter()
    done = tool.run(tree, "--format", "json")
    run.seconds = time.perf_counter() - start
    run.exit_code = done.returncode
    if done.returncode not in (0, 1):
        run.problem = f"exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        return
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        run.problem = f"no JSON report: {done.stdout[:200]!r}"
        return
    run.findings = len(report["findings"])
    run.verdict = report["verdict"]
    run.failed_files = [f"{row.get('path')}: {row.get('error')}" for row in report.get("files", [])
                        if row.get("error")]


def fix_project(tool: Tool, run: ProjectRun, tree: Path, scratch: Path) -> None:
    copy = scratch / tree.name
    shutil.copytree(tree, copy, symlinks=True)
    done = tool.run(copy, "--fix")
    if done.returncode not in (0, 1):
        run.problem = run.problem or f"--fix exit {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
    for orig in copy.rglob("*.py.orig"):
        fixed = orig.with_suffix("")
        run.fixed_files += 1
        try:
            ast.parse(fixed.read_text(encoding="utf-8"), filename=str(fixed), feature_version=(3, 10))
        except SyntaxError as error:
            run.unparsable.append(f"{fixed.relative_to(copy)}:{error.lineno}: {error.msg}")


def print_runs(runs: list[ProjectRun]) -> None:
    header = (f"{'repository':34} {'exit':>4} {'files':>6} {'lines':>8} {'seconds':>7} {'lines/s':>8} "
              f"{'findings':>8} {'failed':>6} {'fixed':>5} {'bad fix':>7}  verdict")
    print(header)
    print("-" * len(header))
    for r in runs:
        rate = f"{r.py_lines / r.seconds:8.0f}" if r.seconds else "       -"
        print(f"{r.repo:34} {r.exit_code if r.exit_code is not None else '-':>4} {r.py_files:6} {r.py_lines:8} "
              f"{r.seconds:7.2f} {rate} {r.findings:8} {len(r.failed_files):6} {r.fixed_files:5} "
              f"{len(r.unparsable):7}  {r.verdict}")
    for r in runs:
        for line in ([r.problem] if r.problem else []) + r.failed_files + r.unparsable:
            print(f"  {r.repo}: {line}")
    good = sum(r.ok for r in runs)
    print(f"\n{good}/{len(runs)} repositories ended with a report and a --fix that parses (3.10); "
          f"{sum(r.py_lines for r in runs)} lines in {sum(r.seconds for r in runs):.1f} s of scanning")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, required=True, help="git mirrors: MIRROR/<owner>+<name>/repo")
    parser.add_argument("--root", type=Path, default=Path(tempfile.gettempdir()) / "neuron-check-projects",
                        help="where the trees are exported (outside any worktree)")
    add_tool_options(parser)
    parser.add_argument("--only", action="append", default=None, help="one repository (repeatable)")
    parser.add_argument("--no-fix", action="store_true", help="skip the --fix check")
    parser.add_argument("--json", type=Path, default=None, help="write the runs here")
    args = parser.parse_args(argv)
    tool = Tool.from_args(args.tool, args.checkout)
    print(f"tool: {tool.describe()}")
    runs = []
    for repo, commit in PROJECTS:
        if args.only and repo not in args.only:
            continue
        run = ProjectRun(repo)
        tree = args.root / repo.replace("/", "+")
        try:
            run.missing_blobs = export_tree(args.mirror, repo, commit, tree)
        except (FileNotFoundError, subprocess.CalledProcessError) as error:
            run.problem = f"not exported: {error}"
            runs.append(run)
            continue
        scan_project(tool, run, tree)
        if not args.no_fix:
            with tempfile.TemporaryDirectory() as scratch:
                fix_project(tool, run, tree, Path(scratch))
        runs.append(run)
        print(f"{repo}: exit {run.exit_code}, {run.py_lines} lines in {run.seconds:.2f} s", file=sys.stderr)
    print_runs(runs)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(r) for r in runs], indent=1))
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
