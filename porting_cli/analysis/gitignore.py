"""The common part of `.gitignore` semantics, for the project walker (porting_cli/analysis/project.py).

Supported, as git documents them: blank lines and `#` comments; `\\#` and `\\!` escapes;
trailing spaces trimmed; `!pattern` re-includes; `dir/` matches directories only; a pattern
with a slash at its start or in its middle is anchored to the folder of its `.gitignore`,
any other matches a name at any depth; `*`, `?`, `[...]` do not cross `/`; `**/x`, `x/**` and
`a/**/b` span folders. The last matching pattern wins. As in git, a file below an ignored
folder cannot be re-included (the walker never enters that folder).
"""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class IgnoreRule:
    regex: re.Pattern[str]
    negated: bool
    dir_only: bool


def _glob_to_regex(glob: str) -> str:
    out, i = [], 0
    while i < len(glob):
        char = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("/**", i) and i + 3 == len(glob):
            out.append("/.*")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif char == "*":
            out.append("[^/]*")
            i += 1
        elif char == "?":
            out.append("[^/]")
            i += 1
        elif char == "[":
            end = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "]") else i + 1)
            if end == -1:
                out.append(re.escape(char))
                i += 1
            else:
                body = glob[i + 1:end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end + 1
        elif char == "\\" and i + 1 < len(glob):
            out.append(re.escape(glob[i + 1]))
            i += 2
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)


def parse_rule(line: str) -> IgnoreRule | None:
    """One `.gitignore` line as a rule; None for blanks and comments."""
    line = line.rstrip("\n").rstrip("\r")
    while line.endswith(" ") and not line.endswith("\\ "):
        line = line[:-1]
    if not line or line.startswith("#"):
        return None
    negated = line.startswith("!")
    if negated:
        line = line[1:]
    elif line.startswith(("\\!", "\\#")):
        line = line[1:]
    dir_only = line.endswith("/")
    line = line.rstrip("/")
    if not line:
        return None
    anchored = "/" in line
    line = line.lstrip("/")
    prefix = "" if anchored or line.startswith("**/") else "(?:.*/)?"
    return IgnoreRule(re.compile(prefix + _glob_to_regex(line) + r"\Z"), negated, dir_only)


@dataclasses.dataclass(frozen=True)
class IgnoreFile:
    """The rules of one `.gitignore`; `base` is its folder relative to the project root ('' at the top)."""

    base: str
    rules: tuple[IgnoreRule, ...]

    @classmethod
    def parse(cls, text: str, base: str = "") -> "IgnoreFile":
        return cls(base, tuple(r for r in map(parse_rule, text.splitlines()) if r is not None))

    def verdict(self, rel_path: str, is_dir: bool) -> bool | None:
        """True: ignored, False: re-included, None: no rule of this file matches."""
        if self.base:
            if not rel_path.startswith(self.base + "/"):
                return None
            rel_path = rel_path[len(self.base) + 1:]
        result = None
        for rule in self.rules:
            if rule.dir_only and not is_dir:
                continue
            if rule.regex.match(rel_path):
                result = not rule.negated
        return result


def is_ignored(files: list[IgnoreFile], rel_path: str, is_dir: bool) -> bool:
    """Whether `rel_path` (posix, relative to the root) is ignored; deeper files decide last."""
    ignored = False
    for ignore_file in files:  # ordered from the root down, so the deepest decides
        verdict = ignore_file.verdict(rel_path, is_dir)
        if verdict is not None:
            ignored = verdict
    return ignored
