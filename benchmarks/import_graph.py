"""The project's import graph, read from the source (AST), as plain text.

    python benchmarks/import_graph.py              packages and the arrows between them
    python benchmarks/import_graph.py --modules    every module-level arrow inside conformance/

Every `import` and `from ... import` counts, at module level or inside functions (a lazy
import is still a dependency). Nodes are the top-level packages (conformance, op_db,
reports, porting_cli) and, one level down, their subpackages. tests/test_import_graph.py
asserts no cycles and the one-way rule of DESIGN.md:
porting_cli -> reports -> op_db <- conformance; conformance never imports reports or porting_cli.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("conformance", "op_db", "reports", "porting_cli")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, root: Path = ROOT) -> set[tuple[str, tuple[str, ...]]]:
    """(module, names) for each import in `path` (relative imports resolved): `import a.b` is
    ('a.b', ()), `from a import b, c` is ('a', ('b', 'c')). Project modules only."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    found: set[tuple[str, tuple[str, ...]]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add((base, tuple(alias.name for alias in node.names)))
    return {(name, names) for name, names in found if name.split(".")[0] in PACKAGES}


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the project modules it imports (only names that are modules of the tree)."""
    files = [p for package in PACKAGES if (root / package).is_dir() for p in (root / package).rglob("*.py")]
    modules = {module_name(p, root): p for p in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported, names in imports_of(path, root):
            # `from pkg import submodule` depends on the submodule, `from mod import func` on mod.
            submodules = [f"{imported}.{n}" for n in names if f"{imported}.{n}" in modules]
            if not submodules or len(submodules) < len(names):
                while imported and imported not in modules:
                    imported = imported.rpartition(".")[0]
                submodules.append(imported)
            targets.update(m for m in submodules if m and m != name)
        graph[name] = targets
    return graph


def node_of(module: str, depth: int) -> str:
    """'conformance.opinfo.steps' -> 'conformance.opinfo' at depth 2; top-level modules of a
    package stay themselves ('conformance.numerics')."""
    return ".".join(module.split(".")[:depth])


def collapse(graph: dict[str, set[str]], depth: int) -> dict[str, set[str]]:
    """The graph between nodes `depth` names deep (1: packages; 2: subpackages/modules)."""
    collapsed: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.items():
        a = node_of(source, depth)
        collapsed[a]
        for target in targets:
            b = node_of(target, depth)
            if a != b:
                collapsed[a].add(b)
    return dict(collapsed)


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a list of nodes (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def render(graph: dict[str, set[str]]) -> str:
    return "\n".join(f"{source} -> {', '.join(sorted(targets)) or '(nothing)'}" for source, targets in sorted(graph.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modules", action="store_true", help="module-level arrows inside conformance/")
    args = parser.parse_args()
    graph = module_graph()
    print("packages:")
    print(render(collapse(graph, 1)))
    print("\nsubpackages and top-level modules:")
    print(render({k: v for k, v in collapse(graph, 2).items() if "." in k}))
    if args.modules:
        print("\nmodules of conformance:")
        print(render({k: {t for t in v if t.startswith("conformance")} for k, v in graph.items()
                      if k.startswith("conformance")}))
    for depth, what in ((0, "modules"), (2, "subpackages")):
        cycle = find_cycle(graph if depth == 0 else collapse(graph, depth))
        print(f"\ncycles between {what}: " + (" -> ".join(cycle) if cycle else "none"))


if __name__ == "__main__":
    sys.exit(main())
