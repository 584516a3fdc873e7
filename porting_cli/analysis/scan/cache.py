"""A cache of scan results keyed by file content, so an unchanged file is never parsed twice.

One JSON file per scanned text under ``$XDG_CACHE_HOME/neuron-check/scan/`` (``~/.cache``
when unset) holds what ``porting_cli.analysis.batch_scan`` needs to answer without the rule families: the
findings, the line count and the fixed text. The key is the SHA-256 of the file's text
and of the scanner's own identity: the sources of ``porting_cli/analysis/scan/*.py`` (the rule
table included) and ``porting_cli/analysis/fix.py`` and the Python version, so a new version of
the tool, a changed rule or another interpreter never reads an old entry. Findings are
stored without their path and get the path they are asked for on the way out.

``NEURON_CHECK_NO_CACHE=1`` turns the cache off. A cache that cannot be read or written
is a miss, never an error: the scan is then just slower.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from .findings import Finding

CACHE_FORMAT = 1
NO_CACHE_ENV = "NEURON_CHECK_NO_CACHE"


@functools.lru_cache(maxsize=1)
def scanner_identity() -> str:
    """Hash of everything that decides a file's findings and patch, besides the file."""
    digest = hashlib.sha256(f"format {CACHE_FORMAT}; python {sys.version_info[:2]}".encode())
    package = Path(__file__).resolve().parent
    for source in (*sorted(package.glob("*.py")), *sorted(package.glob("*.json")), package.parent / "fix.py"):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    # the evidence of installed packages decides findings on imports the data does not know
    from .libraries import environment_identity

    digest.update(environment_identity().encode())
    return digest.hexdigest()


def default_directory() -> Path | None:
    """Where the cache lives, or None when NEURON_CHECK_NO_CACHE turns it off."""
    if os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "neuron-check" / "scan"


@dataclasses.dataclass(frozen=True)
class CachedScan:
    """What one file's scan produced, independent of the path it was found at."""

    lines: int
    findings: tuple[Finding, ...]
    fixed_text: str | None  # None: nothing to fix automatically
    companion_lines: tuple[int, ...] = ()  # lines the fix changes with no finding of their own

    def to_json(self) -> dict[str, Any]:
        findings = [{k: v for k, v in f.to_dict().items() if k != "path"} for f in self.findings]
        return {"format": CACHE_FORMAT, "lines": self.lines, "findings": findings, "fixed_text": self.fixed_text,
                "companion_lines": list(self.companion_lines)}

    @classmethod
    def from_json(cls, data: dict[str, Any], path: str) -> CachedScan:
        if data.get("format") != CACHE_FORMAT:
            raise ValueError("another cache format")
        findings = tuple(Finding(path=path, **f) for f in data["findings"])
        return cls(int(data["lines"]), findings, data["fixed_text"], tuple(data.get("companion_lines", ())))


@dataclasses.dataclass(frozen=True)
class ScanCache:
    """The on-disk store; ``directory=None`` is a cache that never hits and never writes."""

    directory: Path | None

    @classmethod
    def default(cls) -> ScanCache:
        return cls(default_directory())

    def key(self, text: str) -> str:
        digest = hashlib.sha256(scanner_identity().encode())
        digest.update(text.encode("utf-8", errors="surrogatepass"))
        return digest.hexdigest()

    def _file(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key}.json"

    def load(self, text: str, path: str) -> CachedScan | None:
        if self.directory is None:
            return None
        try:
            with open(self._file(self.key(text)), encoding="utf-8") as handle:
                return CachedScan.from_json(json.load(handle), path)
        except (OSError, ValueError, KeyError, TypeError):  # absent, partly written, or stale
            return None

    def store(self, text: str, scan: CachedScan) -> None:
        if self.directory is None:
            return
        target = self._file(self.key(text))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            # a name no other process uses (tempfile would cost more to import than the scan saves)
            tmp = target.parent / f".tmp-{os.getpid()}-{id(scan):x}-{target.name}"
            try:
                with open(tmp, "x", encoding="utf-8") as handle:
                    json.dump(scan.to_json(), handle)
                os.replace(tmp, target)  # readers see the old entry or the whole new one
            except BaseException:
                os.unlink(tmp)
                raise
        except (OSError, ValueError):  # a read-only or full disk: no cache, same answer
            return
