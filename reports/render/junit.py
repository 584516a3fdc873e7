"""JUnit XML from Results: one testcase per work item, for CI systems.

MISMATCH, UNSUPPORTED, ERROR, CRASH and TIMEOUT (and FALLBACK when asked) are
failures; SKIP and REF_ERROR (the CPU reference failed: nothing is known about
the backend) are skipped.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from typing import IO

from op_db.records import FAILING, Result, Status

SKIPPED = frozenset({Status.SKIP, Status.REF_ERROR})


def junit_tree(results: Iterable[Result], suite_name: str = "neuron-check", *,
               failing: frozenset[Status] = FAILING) -> ET.ElementTree:
    results = list(results)
    suite = ET.Element("testsuite", name=suite_name)
    failures = skipped = 0
    total_time = 0.0
    for r in results:
        case = ET.SubElement(suite, "testcase", classname=f"{r.suite}.{r.subject}", name=r.item.test_id,
                             time=f"{r.duration_s:.3f}")
        total_time += r.duration_s
        detail = "\n".join(x for x in (r.first_failure, r.message, f"failing op: {r.failing_op}" if r.failing_op else None) if x)
        if r.status in failing:
            failures += 1
            node = ET.SubElement(case, "failure", type=r.status.value,
                                 message=f"{r.status.value}: {(r.message or '').splitlines()[0] if r.message else ''}"[:500])
            node.text = detail
        elif r.status in SKIPPED:
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{r.status.value}: {r.message or ''}"[:500])
        if r.fallback_ops:
            ET.SubElement(case, "system-out").text = "CPU fallback: " + ", ".join(r.fallback_ops)
    suite.set("tests", str(len(results)))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", str(skipped))
    suite.set("time", f"{total_time:.3f}")
    return ET.ElementTree(suite)


def write_junit(results: Iterable[Result], path_or_file: str | os.PathLike | IO[bytes], suite_name: str = "neuron-check",
                *, failing: frozenset[Status] = FAILING) -> None:
    """Write the JUnit XML of `results` to a path or a binary file object."""
    tree = junit_tree(results, suite_name, failing=failing)
    ET.indent(tree)
    tree.write(path_or_file, encoding="utf-8", xml_declaration=True)
