"""Reading, parsing and running the rule families over one file.

Everything runs on the standard library's ``ast`` tree: one parse (also the source of syntax
errors), the data flow (porting_cli/analysis/scan/dataflow.py), then one traversal that runs every
family's handlers (porting_cli/analysis/scan/traverse.py). Most lines of a training script have
nothing to do with CUDA, so the scanner first finds the lines that match a trigger of some
rule family (or use a name imported from a CUDA-related module) and the traversal skips every
statement that touches none of them. ``reduce=False`` turns this off.
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import functools
import re

from .amp import AmpImportVisitor, AmpVisitor
from .backend_flags import BackendFlagsVisitor
from .base import Context, FamilyVisitor, prelude_names
from .cuda_api import CudaApiVisitor
from .dataflow import INDEX, STRING, device_flow
from .device import DevicePlacementVisitor
from .legacy_types import LegacyTensorTypesVisitor
from .distributed import DistributedVisitor
from .dtypes import Float64Visitor
from .env import EnvironmentVisitor
from .hf import HuggingFaceVisitor
from .kernels import KernelsVisitor
from .findings import Finding
from .frameworks import FrameworksVisitor
from .net import NET_WORDS, Spot, net_tokens
from .aliases import value_aliases
from .nodes import SourceText, module_statements
from .source import folded, parse_python, read_source, split_lines  # noqa: F401 (re-exported)
from .streams import StreamsVisitor
from .torch_semantics import TorchSemantics
from .traverse import Traversal
from .triggers import compact_triggers, foldable, lowered, trigger_pattern

FAMILIES = (DevicePlacementVisitor, LegacyTensorTypesVisitor, CudaApiVisitor, AmpVisitor, AmpImportVisitor, BackendFlagsVisitor,
            DistributedVisitor, StreamsVisitor, KernelsVisitor, Float64Visitor, HuggingFaceVisitor,
            EnvironmentVisitor, FrameworksVisitor)
CudaApiVisitor.claimed = tuple(c for family in FAMILIES for c in family.claims)

#: every family's triggers, lower case, for lower-cased text (porting_cli.analysis.scan.triggers)
TRIGGER_ALTERNATIVES = tuple(lowered(t) for family in FAMILIES for t in family.triggers)
LOWER_TRIGGERS = compact_triggers(TRIGGER_ALTERNATIVES)
LOWER_TRIGGER_RE = trigger_pattern(TRIGGER_ALTERNATIVES)


@functools.cache
def _any_case_triggers() -> re.Pattern:
    """The triggers without case, for text that lowering would change otherwise (triggers.foldable)."""
    return re.compile(LOWER_TRIGGERS, re.IGNORECASE)


def has_trigger(text: str) -> bool:
    low = foldable(text)
    if low is not None:
        return LOWER_TRIGGER_RE.search(low) is not None
    return _any_case_triggers().search(text) is not None


DEFAULT_DEVICE_NAME = "DEVICE"
PRELUDE_MARK = "# neuron-check:"
FIRST_CHOICE_WORDS = trigger_pattern((), tuple(prelude_names(DEFAULT_DEVICE_NAME).values()))


def collect_imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name it was imported as (scopes are ignored)."""
    aliases: dict[str, str] = {}
    for stmt in module_statements(tree):
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
    """1-based numbers of the lines that could hold a finding: where a trigger matches, or a
    name whose import is a trigger's (``from torch import cuda as gpu``). The two are searched
    apart, so the triggers' pattern is compiled once for all files and each file compiles
    only the small pattern of its names (one pattern of both cost a compile per file)."""
    extra = [name for name, qn in aliases.items() if has_trigger(qn) and not has_trigger(name)]
    text = "".join(lines)
    low = foldable(text)
    if low is not None and all(name.isascii() for name in extra):  # the same matches, in lower case
        text, triggers, flags = low, LOWER_TRIGGER_RE, 0
        extra = [name.lower() for name in extra]
    else:
        triggers, flags = _any_case_triggers(), re.IGNORECASE
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line)
    found = _matching_lines(triggers, text, starts)
    if extra:
        names = trigger_pattern((), tuple(extra), flags)
        found = sorted(set(found).union(_matching_lines(names, text, starts)))
    return found


def _matching_lines(pattern: re.Pattern, text: str, starts: list[int]) -> list[int]:
    """The lines (1-based; ``starts``: their offsets in ``text``) where a match of ``pattern``
    starts: one regex pass over the text, skipping to the next line after each hit."""
    found: list[int] = []
    pos = 0
    while True:
        m = pattern.search(text, pos)
        if m is None:
            return found
        n = bisect.bisect_right(starts, m.start())
        found.append(n)
        if n >= len(starts):
            return found
        pos = starts[n]


def _start(stmt: ast.stmt) -> tuple[int, int]:
    decorators = getattr(stmt, "decorator_list", None)
    if decorators:
        first = min(decorators, key=lambda d: d.lineno)
        return first.lineno, first.col_offset - 1  # the "@"
    return stmt.lineno, stmt.col_offset


def bound_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
    return names


def choose_device_name(tree: ast.Module, skip_lines: frozenset[int] = frozenset(), text: str | None = None) -> str:
    """A module-level name for the device that the file does not use (nor its derived names);
    names bound by neuron-check's own prelude (a file fixed before) are free to reuse. With
    ``text``, a first name whose derived names are not even words of it (of its names as the
    parser folds them) is taken without walking the tree."""
    if text is not None and not FIRST_CHOICE_WORDS.search(folded(text)):
        # names are NFKC-folded by the parser: the folded text holds every name the tree binds
        return DEFAULT_DEVICE_NAME
    names = bound_names(ast.Module(body=[s for s in tree.body if s.lineno not in skip_lines],
                                   type_ignores=[]))
    candidates = [DEFAULT_DEVICE_NAME, "ACCEL_DEVICE", "NEURON_CHECK_DEVICE", *(f"ACCEL_DEVICE_{n}" for n in range(2, 100))]
    for candidate in candidates:
        if not names & set(prelude_names(candidate).values()):
            return candidate
    return "NEURON_CHECK_ACCEL_DEVICE"


def prelude_lines(tree: ast.Module, lines: list[str]) -> frozenset[int]:
    """Lines of top-level statements that neuron-check's fix added (each follows a comment
    line starting with PRELUDE_MARK); a second scan of a fixed file leaves them alone."""
    found: set[int] = set()
    for stmt in tree.body:
        first = _start(stmt)[0]
        above = first - 2
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0 and lines[above].lstrip().startswith(PRELUDE_MARK):
            found.update(range(first, (stmt.end_lineno or first) + 1))
    return frozenset(found)


@dataclasses.dataclass
class Analysis:
    """A parsed file and what the rule families found in it."""

    text: str
    ctx: Context | None
    findings: list[Finding]
    lines: int
    tree: ast.Module
    #: the fixes were checked to parse (porting_cli.analysis.scan.checked)
    checked: bool = False
    #: the fixed file's prelude imports torch (porting_cli.analysis.scan.bound)
    force_torch: bool = False


def analyze(text: str, path: str = "<string>", *, reduce: bool = True,
            device_name: str | None = None, torch: TorchSemantics | None = None) -> Analysis:
    """Parse ``text`` and run every rule family; ``device_name`` (default: a free name) is
    what the fixes call the device; ``torch`` (default: the installed one) is the PyTorch whose
    semantics the rules state."""
    tree = parse_python(text, path)
    body = text.removeprefix("\ufeff")
    lines = split_lines(body)
    aliases = collect_imports(tree)
    by_value = value_aliases(tree, aliases)  # precision_scope = autocast if ... else nullcontext
    aliases.update(by_value)
    skip = prelude_lines(tree, lines)
    flow = device_flow(tree, aliases, lines, body)
    found = set(candidate_lines(lines, aliases))
    found.update(line for (line, _), kinds in flow.sites.items() if kinds & {INDEX, STRING})
    found.update(flow.fused_lines | flow.amp_wrapper_calls)
    candidates = sorted(found - skip)
    if not candidates:
        return Analysis(text, None, [], len(lines), tree)
    ctx = Context(path, SourceText(body, lines), tree, aliases, device_name or choose_device_name(tree, skip, body),
                  flow, skip, torch)
    ctx.value_aliases = frozenset(by_value)
    families = [family(ctx) for family in FAMILIES]
    Traversal(ctx, families, candidates if reduce else None).run(tree)
    _safety_net(ctx, candidates if reduce else list(range(1, len(lines) + 1)))
    if ctx.edits:
        for key, companion in ctx.companions.items():
            ctx.edits.setdefault(key, companion)
    findings = sorted(ctx.findings, key=Finding.sort_key)
    return Analysis(text, ctx, findings, len(lines), tree)


def _safety_net(ctx: Context, candidates: list[int]) -> None:
    """NC999 at the first CUDA token of each line that holds one and has no finding yet."""
    lines = ctx.lines
    net_lines = [n for n in candidates if n <= len(lines) and NET_WORDS.search(lines[n - 1])]
    if not net_lines:
        return
    reported = {f.line for f in ctx.findings} | set(ctx.skip_lines)
    net = FamilyVisitor(ctx)
    for start, end, token in net_tokens(ctx.source, ctx.tree, net_lines, reported):
        net.report(Spot(start, end), "NC999", detail=f"`{token}`")


_memo: dict[tuple, Analysis] = {}


def analyze_cached(text: str, path: str = "<string>") -> Analysis:
    """`analyze` with the fast path, remembering the last file: the report scans a file and then
    asks for its patch, and both come from one analysis."""
    key = (path, len(text), hash(text))
    found = _memo.get(key)
    if found is None or found.text != text:
        _memo.clear()
        found = _memo[key] = analyze(text, path)
    return found
