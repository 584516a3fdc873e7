"""The import graph has no cycles and follows DESIGN.md's one-way rule:
porting_cli -> reports -> op_db <- conformance; conformance never imports reports or porting_cli."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def graph_tools():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_graph"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph(graph_tools):
    return graph_tools.module_graph(ROOT)


# What each top-level package may import (besides itself).
ALLOWED = {
    "op_db": set(),
    "conformance": {"op_db"},
    "reports": {"op_db"},
    "porting_cli": {"conformance", "op_db", "reports"},
}


def test_packages_import_one_way(graph, graph_tools):
    packages = graph_tools.collapse(graph, 1)
    for package, targets in packages.items():
        assert targets <= ALLOWED[package], f"{package} imports {sorted(targets - ALLOWED[package])}"


# The two halves of the porting check (DESIGN.md): the static half never loads the runtime
# (a scan must not need torch), and the runtime knows nothing of the rules. port_report and
# the commands join them.
STATIC_HALF = ("porting_cli.analysis.scan", "porting_cli.analysis.fix", "porting_cli.analysis.batch_scan", "porting_cli.analysis.project",
               "porting_cli.analysis.gitignore", "porting_cli.analysis.effort")


def test_the_static_half_never_imports_the_runtime(graph):
    for module, targets in graph.items():
        if module.startswith(STATIC_HALF):
            assert not {t for t in targets if t.startswith("porting_cli.runtime")}, module
        if module.startswith("porting_cli.runtime"):
            assert not {t for t in targets if t.startswith(("porting_cli.analysis.scan", "porting_cli.analysis.fix"))}, module


def test_the_runtime_half_has_its_own_package(graph):
    runtime = {m for m in graph if m.startswith("porting_cli.runtime.")}
    assert {"porting_cli.runtime.trace", "porting_cli.runtime.remap", "porting_cli.runtime.frames"} <= runtime
    assert not {m for m in graph if m.count(".") == 1 and m.split(".")[1].startswith(("trace", "remap"))}


# Cycles known and owned elsewhere, each to be broken by its owner; an entry that no longer
# holds fails the test too, so the list only shrinks.
KNOWN_CYCLES: list[set[str]] = []


def _cut(graph: dict[str, set[str]], cycle: set[str]) -> dict[str, set[str]]:
    return {node: {t for t in targets if not (node in cycle and t in cycle)} for node, targets in graph.items()}


@pytest.mark.parametrize("depth", [0, 2])
def test_no_import_cycles(graph, graph_tools, depth):
    nodes = graph if depth == 0 else graph_tools.collapse(graph, depth)
    for known in KNOWN_CYCLES:
        found = graph_tools.find_cycle({n: t & known for n, t in nodes.items() if n in known})
        assert found is not None, f"the known cycle {sorted(known)} is gone: remove it from KNOWN_CYCLES"
        nodes = _cut(nodes, known)
    assert graph_tools.find_cycle(nodes) is None


def test_the_cycle_finder_finds_a_cycle(graph_tools, tmp_path):
    package = tmp_path / "conformance"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from conformance import b\n")
    (package / "b.py").write_text("from conformance.a import f\n")
    cycle = graph_tools.find_cycle(graph_tools.module_graph(tmp_path))
    assert cycle is not None and set(cycle) == {"conformance.a", "conformance.b"}


def test_the_one_way_check_sees_a_lazy_upward_import(graph_tools, tmp_path):
    for name in ("conformance", "reports"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    (tmp_path / "reports" / "render.py").write_text("")
    (tmp_path / "conformance" / "x.py").write_text("def f():\n    import reports.render\n")
    packages = graph_tools.collapse(graph_tools.module_graph(tmp_path), 1)
    assert packages["conformance"] == {"reports"}
