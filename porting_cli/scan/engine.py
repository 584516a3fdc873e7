"""Reading, parsing and running the rule families over one file.

Speed: libcst is thorough but slow (a few thousand lines per second), and most
lines of a training script have nothing to do with CUDA. So the scanner first
parses the file with the standard library's ``ast`` (fast, and the source of
syntax errors), finds the lines that match a trigger of some rule family (or
use a name imported from a CUDA-related module), and replaces every statement
that contains no such line by ``pass`` plus blank lines. Line and column
numbers stay the same, and libcst then only builds the statements that matter.
``reduce=False`` turns this off (the fixer uses the full tree).
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper

from .amp import AmpImportVisitor, AmpVisitor
from .backend_flags import BackendFlagsVisitor
from .base import Context, ContextVisitor
from .cuda_api import CudaApiVisitor
from .device import DevicePlacementVisitor
from .distributed import DistributedVisitor
from .dtypes import Float64Visitor
from .env import EnvironmentVisitor
from .hf import HuggingFaceVisitor
from .kernels import KernelsVisitor
from .model import Finding, ScanError
from .streams import StreamsVisitor

FAMILIES = (DevicePlacementVisitor, CudaApiVisitor, AmpVisitor, AmpImportVisitor, BackendFlagsVisitor,
            DistributedVisitor, StreamsVisitor, KernelsVisitor, Float64Visitor, HuggingFaceVisitor,
            EnvironmentVisitor)
CudaApiVisitor.claimed = tuple(c for family in FAMILIES for c in family.claims)

TRIGGERS = "|".join(f"(?:{t})" for family in FAMILIES for t in family.triggers)
TRIGGER_RE = re.compile(TRIGGERS, re.IGNORECASE)
LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
DEFAULT_DEVICE_NAME = "DEVICE"


def split_lines(text: str) -> list[str]:
    """Lines as Python numbers them (only \\n, \\r\\n and \\r end a line)."""
    return LINE_RE.findall(text)


def read_source(path: str | Path) -> str:
    """The text of a Python file, or ScanError with one sentence saying why not."""
    p = Path(path)
    if not p.exists():
        raise ScanError(f"{path}: no such file.")
    if p.is_dir():
        raise ScanError(f"{path} is a directory, not a Python file.")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ScanError(f"{path} cannot be read: {e.strerror or e}.") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScanError(f"{path} is not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); "
                        "save it as UTF-8 and try again.") from None
    return text


def parse_python(text: str, path: str) -> ast.Module:
    try:
        return ast.parse(text.removeprefix("\ufeff"), filename=path)
    except SyntaxError as e:
        raise ScanError(f"{path}:{e.lineno or 1}: syntax error: {e.msg}.") from None
    except ValueError as e:  # e.g. null bytes
        raise ScanError(f"{path}:1: syntax error: {e}.") from None


def iter_blocks(stmt: ast.stmt):
    """The statement lists nested directly in a compound statement."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield block
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def iter_statements(body: list[ast.stmt]):
    for stmt in body:
        yield stmt
        for block in iter_blocks(stmt):
            yield from iter_statements(block)


def collect_imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name it was imported as (scopes are ignored)."""
    aliases: dict[str, str] = {}
    for stmt in iter_statements(tree.body):
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module:
            for a in stmt.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return aliases


def candidate_lines(lines: list[str], aliases: dict[str, str]) -> list[int]:
    """1-based numbers of the lines that could hold a finding."""
    extra = [name for name, qn in aliases.items() if TRIGGER_RE.search(qn) and not TRIGGER_RE.search(name)]
    pattern = TRIGGER_RE
    if extra:
        names = "|".join(re.escape(n) for n in extra)
        pattern = re.compile(f"{TRIGGERS}|\\b(?:{names})\\b", re.IGNORECASE)
    search = pattern.search
    return [i for i, line in enumerate(lines, 1) if search(line)]


def _start(stmt: ast.stmt) -> tuple[int, int]:
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        first = min(decorators, key=lambda d: d.lineno)
        return first.lineno, first.col_offset - 1  # the "@"
    return stmt.lineno, stmt.col_offset


def reduce_source(lines: list[str], tree: ast.Module, candidates: list[int]) -> str:
    """The source with every statement that has no candidate line made ``pass``."""
    out = list(lines)

    def touches(first: int, last: int) -> bool:
        i = bisect.bisect_left(candidates, first)
        return i < len(candidates) and candidates[i] <= last

    def newline(line: str) -> str:
        return line[len(line.rstrip("\r\n")):]

    def walk(body: list[ast.stmt]) -> None:
        prev_end = 0
        for i, stmt in enumerate(body):
            first, col = _start(stmt)
            last = stmt.end_lineno or first
            if touches(first, last):
                for block in iter_blocks(stmt):
                    walk(block)
            else:
                next_first = _start(body[i + 1])[0] if i + 1 < len(body) else None
                line = lines[first - 1]
                alone = (line[:col].strip() == "" and prev_end < first
                         and (next_first is None or next_first > last))
                if alone:
                    indent = line[:len(line) - len(line.lstrip())]
                    out[first - 1] = indent + "pass" + newline(line)
                    for n in range(first, last):
                        out[n] = newline(lines[n])
            prev_end = last

    walk(tree.body)
    return "".join(out)


@dataclasses.dataclass
class Analysis:
    """A parsed file and what the rule families found in it."""

    text: str
    module: cst.Module | None
    ctx: Context | None
    findings: list[Finding]
    lines: int
    tree: ast.Module


def analyze(text: str, path: str = "<string>", *, reduce: bool = True,
            device_name: str = DEFAULT_DEVICE_NAME) -> Analysis:
    bom = text.startswith("\ufeff")
    tree = parse_python(text, path)
    lines = split_lines(text.removeprefix("\ufeff"))
    aliases = collect_imports(tree)
    candidates = candidate_lines(lines, aliases)
    if not candidates:
        return Analysis(text, None, None, [], len(lines), tree)
    source = text
    if reduce:
        source = ("\ufeff" if bom else "") + reduce_source(lines, tree, candidates)
    try:
        module = cst.parse_module(source)
    except cst.ParserSyntaxError as e:
        if source is text:
            raise ScanError(f"{path}:{e.raw_line}: syntax error: {e.message}.") from None
        module = cst.parse_module(text)  # pragma: no cover - the reduction never breaks syntax
    ctx = Context(path, lines, aliases, device_name)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    wrapper.visit_batched([ContextVisitor(ctx), *(family(ctx) for family in FAMILIES)])
    findings = sorted(ctx.findings, key=Finding.sort_key)
    return Analysis(text, module, ctx, findings, len(lines), tree)
