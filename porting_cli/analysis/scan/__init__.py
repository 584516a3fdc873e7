"""Static scan of a PyTorch script for CUDA-specific code.

Imports nothing heavy (no torch) and needs nothing outside the standard library: the rule
families run on the ``ast`` tree and are imported only when a file is actually analysed, so a
result read from the cache (porting_cli.analysis.scan.cache) never loads them.

    >>> from porting_cli.analysis.scan import scan_source
    >>> [f.rule_id for f in scan_source("x = x.cuda()\\n").findings]
    ['NC101']
"""

from __future__ import annotations

from pathlib import Path

from .findings import EffortSummary, Finding, ScanError, ScanResult
from .rules import RULES, RULES_BY_ID, Rule, rules_markdown

__all__ = ["EffortSummary", "Finding", "RULES", "RULES_BY_ID", "Rule", "ScanError", "ScanResult",
           "rules_markdown", "scan_file", "scan_source"]


def scan_source(text: str, path: str = "<string>") -> ScanResult:
    """Scan Python source text; raises ScanError on a syntax error."""
    from .checked import analyze_checked

    analysis = analyze_checked(text, path)
    return ScanResult(path=path, findings=analysis.findings, lines=analysis.lines)


def scan_file(path: str | Path) -> ScanResult:
    """Scan one Python file; raises ScanError (an InputError) if it can't be read or parsed."""
    from .source import read_source

    return scan_source(read_source(path), str(path))
