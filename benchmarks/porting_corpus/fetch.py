"""Bring the corpus scripts into the git-ignored folder `.scripts/` beside this file.

The scripts are third-party code: they are read and measured on, never committed. Each one is
pinned in labels.json by (repository, path, commit) and lands as `.scripts/<id>.py`.

Sources, tried in this order for each script:
  --mirror ROOT   git directories laid out as ROOT/<owner>+<name>/repo (bare) or
                  ROOT/<owner>/<name> (a clone); the file is read at the pinned commit
  --from-dir DIR  plain copies laid out as DIR/<owner>/<name>/<path>
  --github        https://raw.githubusercontent.com/<owner>/<name>/<commit>/<path>

    python benchmarks/porting_corpus/fetch.py --mirror /work/.mirror
    python benchmarks/porting_corpus/fetch.py --github --half dev
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import urllib.request
from pathlib import Path

from corpus import SCRIPTS_DIR, load_corpus


def _git_dirs(root: Path, repo: str) -> list[Path]:
    owner, name = repo.split("/")
    return [root / f"{owner}+{name}" / "repo", root / owner / name]


def from_mirror(root: Path, entry: dict) -> bytes | None:
    for git_dir in _git_dirs(root, entry["repo"]):
        if not git_dir.exists():
            continue
        done = subprocess.run(["git", "-C", str(git_dir), "show", f"{entry['commit']}:{entry['path']}"],
                              capture_output=True)
        if done.returncode == 0:
            return done.stdout
    return None


def from_dir(root: Path, entry: dict) -> bytes | None:
    candidate = root / entry["repo"] / entry["path"]
    return candidate.read_bytes() if candidate.is_file() else None


def from_github(entry: dict) -> bytes | None:
    url = f"https://raw.githubusercontent.com/{entry['repo']}/{entry['commit']}/{entry['path']}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 (fixed https host)
            return response.read()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, help="folder of git mirrors (see module docstring)")
    parser.add_argument("--from-dir", type=Path, help="folder of plain copies: DIR/owner/name/path")
    parser.add_argument("--github", action="store_true", help="download from raw.githubusercontent.com")
    parser.add_argument("--half", choices=("dev", "held", "fresh", "all"), default="all")
    args = parser.parse_args(argv)
    if not (args.mirror or args.from_dir or args.github):
        parser.error("give at least one source: --mirror, --from-dir or --github")
    SCRIPTS_DIR.mkdir(exist_ok=True)
    missing = []
    for entry in load_corpus():
        if args.half != "all" and entry["half"] != args.half:
            continue
        text = ((args.mirror and from_mirror(args.mirror, entry))
                or (args.from_dir and from_dir(args.from_dir, entry))
                or (args.github and from_github(entry)) or None)
        if text is None:
            missing.append(f"{entry['repo']}/{entry['path']}@{entry['commit'][:12]}")
            continue
        (SCRIPTS_DIR / f"{entry['id']}.py").write_bytes(text)
    print(f"fetched {len(load_corpus()) - len(missing)} scripts into {SCRIPTS_DIR}" if args.half == "all"
          else f"fetched into {SCRIPTS_DIR}; missing {len(missing)}")
    for name in missing:
        print(f"  not found: {name}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
