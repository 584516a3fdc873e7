"""JUnit XML from Results: one testcase per work item, for CI systems.

MISMATCH, UNSUPPORTED, ERROR, CRASH and TIMEOUT (and FALLBACK when asked) are
failures; SKIP and REF_ERROR (the CPU reference failed: nothing is known about
the backend) are skipped.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from op_db.errors import InputError
from op_db.records import FAILING, Result, Status
from op_db.text import cut
from reports.sanitize import for_xml

SKIPPED = frozenset({Status.SKIP, Status.REF_ERROR})


def junit_tree(results: Iterable[Result], suite_name: str = "neuron-check", *,
               failing: frozenset[Status] = FAILING) -> ET.ElementTree:
    results = list(results)
    suite = ET.Element("testsuite", name=for_xml(suite_name))
    failures = skipped = 0
    total_time = 0.0
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=for_xml(f"{r.suite}.{r.subject}"),
                             name=for_xml(r.item.test_id), time=f"{r.duration_s:.3f}")
        total_time += r.duration_s
        detail = "\n".join(x for x in (r.first_failure, r.message, f"failing op: {r.failing_op}" if r.failing_op else None) if x)
        if r.status in failing:
            failures += 1
            node = ET.SubElement(case, "failure", type=r.status.value,
                                 message=for_xml(cut(f"{r.status.value}: {_first_line(r.message)}", 500)))
            node.text = for_xml(detail)
        elif r.status in SKIPPED:
            skipped += 1
            ET.SubElement(case, "skipped", message=for_xml(cut(f"{r.status.value}: {r.message or ''}", 500)))
        if r.fallback_ops:
            ET.SubElement(case, "system-out").text = for_xml("CPU fallback: " + ", ".join(r.fallback_ops))
    suite.set("tests", str(len(results)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{total_time:.3f}")
    return ET.ElementTree(suite)


def write_junit(results: Iterable[Result], path_or_file: str | os.PathLike | IO[bytes], suite_name: str = "neuron-check",
                *, failing: frozenset[Status] = FAILING) -> None:
    """Write the JUnit XML of `results` to a path or a binary file object; InputError naming a
    path that cannot be written."""
    tree = junit_tree(results, suite_name, failing=failing)
    ET.indent(tree)
    try:
        tree.write(path_or_file, encoding="utf-8", xml_declaration=True)
    except OSError as exc:
        raise InputError(f"cannot write the JUnit file {path_or_file}: {exc.strerror or exc}.") from None


def check_target(path: str | os.PathLike) -> None:
    """InputError, naming the path, when a JUnit file cannot be written there (asked before a run)."""
    target = Path(path)
    folder = target.parent
    if not folder.is_dir():
        raise InputError(f"cannot write the JUnit file {target}: folder {folder} does not exist.")
    # Ask the file system itself (os.access says yes to root everywhere, /proc included);
    # a file made only to ask is removed again.
    existed = target.exists()
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write the JUnit file {target}: {exc.strerror or exc}.") from None
    if not existed:
        target.unlink(missing_ok=True)


def _first_line(message: str | None) -> str:
    lines = (message or "").splitlines()
    return lines[0] if lines else ""
