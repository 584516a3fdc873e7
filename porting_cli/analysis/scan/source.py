"""Reading and parsing a Python file with the standard library only.

The cached path (porting_cli.analysis.scan.cache) reads files through here without importing the
rule families, so a scan whose result is cached starts fast.
"""

from __future__ import annotations

import ast
import functools
import re
import unicodedata
from pathlib import Path

from .findings import ScanError

LINE_RE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """Lines as Python numbers them (only \\n, \\r\\n and \\r end a line)."""
    return LINE_RE.findall(text)


def folded(text: str) -> str:
    """``text`` with its names as the parser reads them: Python folds every identifier to NFKC
    (a name spelled in full-width letters is the ASCII one)."""
    if text.isascii():
        return text
    return _folded_unicode(text)


@functools.lru_cache(maxsize=2)
def _folded_unicode(text: str) -> str:
    """The pre-filters ask one file's folded text many times (the data flow's alone some twenty
    words): even the test that it is folded already reads the whole text, so it is done once."""
    return text if unicodedata.is_normalized("NFKC", text) else unicodedata.normalize("NFKC", text)


def mentions(text: str, word: str) -> bool:
    """``word`` is in ``text`` as written or as the parser reads its names (folded), so a
    pre-filter that asks whether a name can occur in a file looks at both spellings."""
    if word in text:
        return True
    return not text.isascii() and word in folded(text)


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
