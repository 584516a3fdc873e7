"""How much of a module `--verify` runs: its import, never its training job.

A fix is proven at import: the prelude (`DEVICE = torch.accelerator...`), the imports it adds and
the module-level statements it edits must run. What the script does afterwards (the main guard, a
training loop at module level, a call of the file's own `main()`) is its job and is not run: the
module's top-level statements run in order up to the first that starts that work, which is:

- the main guard, `if __name__ == "__main__":`;
- a statement holding a `for` or `while` loop (outside a function or class body);
- a statement calling a function or class the file defines (`main()`, `model = build_model()`,
  `asyncio.run(main())`), or handing one to a launcher (`mp.spawn(worker, ...)`, `fire.Fire(main)`).

The rule is the same for the original and the fixed text, and the fixes add none of these, so
both runs stop before the same statement. This module imports nothing heavy: the child process
(porting_cli/runtime/verify_child.py) and the parent's report both use it.
"""

from __future__ import annotations

import ast
import dataclasses

#: call names that run the function they are given (a function of the file as an argument)
LAUNCHERS = frozenset({"spawn", "start_processes", "Fire", "run", "launch", "elastic_launch", "call"})
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


@dataclasses.dataclass(frozen=True)
class ImportPart:
    """The statements run, and the one they stop before (None: the whole module runs)."""

    body: list[ast.stmt]
    stop_line: int | None = None
    stop_reason: str | None = None


def import_part(tree: ast.Module) -> ImportPart:
    """The leading top-level statements of `tree` that do not start the script's work."""
    own = {node.name for node in tree.body if isinstance(node, _NESTED[:3])}
    for index, statement in enumerate(tree.body):
        reason = _starts_work(statement, own)
        if reason is not None:
            return ImportPart(tree.body[:index], statement.lineno, reason)
    return ImportPart(list(tree.body))


def _starts_work(statement: ast.stmt, own: set[str]) -> str | None:
    if isinstance(statement, (*_NESTED[:3], ast.Import, ast.ImportFrom)):
        return None
    if isinstance(statement, ast.If) and _is_main_guard(statement.test):
        return "the main guard"
    for node in _walk_outside_bodies(statement):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return "a loop"
        if isinstance(node, ast.Call):
            callee = node.func.id if isinstance(node.func, ast.Name) else None
            if callee in own:
                return f"a call of `{callee}`"
            name = callee or (node.func.attr if isinstance(node.func, ast.Attribute) else None)
            handed = [arg.id for arg in node.args if isinstance(arg, ast.Name) and arg.id in own]
            if name in LAUNCHERS and handed:
                return f"`{name}` of `{handed[0]}`"
    return None


def _is_main_guard(test: ast.expr) -> bool:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and mains)


def _walk_outside_bodies(statement: ast.stmt):
    """Every node of `statement` except those inside a nested function, class or lambda."""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, _NESTED))
