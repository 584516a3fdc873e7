"""Reading a vendor's compatibility table (CSV or Markdown) into typed claim rows.

Vendors publish tables such as TorchNeuron's PyTorch API compatibility table:
one row per API (`torch.add`, `torch.nn.functional.layer_norm`, `Tensor.add_`)
or aten overload (`aten::add.Tensor`), a status (`Y`, `CPU_FALLBACK`, `N`),
and often dtype and limitation columns. Headers and status words vary from
vendor to vendor, so both are recognised through the synonym tables below
(data, not code). Anything this module cannot read is an InputError that
names the file and the line.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from pathlib import Path

from op_db.errors import InputError

# The three claims a table can make.
NATIVE, FALLBACK, UNSUPPORTED = "Y", "CPU_FALLBACK", "N"
CLAIMS = (NATIVE, FALLBACK, UNSUPPORTED)

# Normalised status word -> claim. Words are lower-cased with `_`/`-` as spaces.
STATUS_WORDS: dict[str, str] = {
    **dict.fromkeys(("y", "yes", "supported", "native", "true", "ok", "full", "fully supported",
                     "\u2713", "\u2714", "\u2705", "\u2611"), NATIVE),
    **dict.fromkeys(("cpu fallback", "fallback", "falls back", "cpu", "fallback to cpu",
                     "supported via cpu fallback", "\u26a0", "\u26a0\ufe0f"), FALLBACK),
    **dict.fromkeys(("n", "no", "unsupported", "not supported", "false", "none", "missing",
                     "\u2717", "\u2718", "\u274c", "\u2716"), UNSUPPORTED),
}

# Column role -> header words that name it (normalised: lower case, punctuation as spaces).
# A header matches a role when it equals one of the words or ends with one ("PyTorch API").
HEADER_WORDS: dict[str, tuple[str, ...]] = {
    "api": ("api", "pytorch api", "torch api", "op", "ops", "operator", "operation", "function", "name",
            "aten op", "aten overload", "aten", "overload", "pytorch op", "torch function"),
    "status": ("status", "supported", "support", "claim", "state", "support status", "neuron support",
               "compatibility", "supported?"),
    "dtypes": ("dtype", "dtypes", "data type", "data types", "types"),
    "limitations": ("limitation", "limitations", "notes", "note", "comment", "comments", "remarks", "details"),
}

DTYPE_ALIASES = {
    "fp32": "float32", "float": "float32", "f32": "float32", "fp16": "float16", "half": "float16",
    "f16": "float16", "bf16": "bfloat16", "fp64": "float64", "double": "float64", "f64": "float64",
    "int": "int32", "long": "int64",
}
_DTYPE_NAME = re.compile(r"^(u?int(8|16|32|64)|float(16|32|64)|bfloat16|complex(32|64|128)|bool|float8_\w+)$")
_ALL_DTYPES = {"", "all", "any", "*"}
_MD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MD_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")  # a backslash escape, as `claims export` writes them


@dataclasses.dataclass(frozen=True)
class ClaimRow:
    """One claimed row of a table: where it came from and what it says."""

    source: str
    line: int
    apis: tuple[str, ...]  # as written, e.g. ("torch.add", "Tensor.add")
    claim: str  # Y, CPU_FALLBACK or N
    dtypes: tuple[str, ...] | None  # None: every dtype
    limitations: str | None

    @property
    def label(self) -> str:
        return ", ".join(self.apis)


def read_claims(path: str | Path) -> list[ClaimRow]:
    """The claimed rows of a CSV (or TSV) file or of the first claims table in a Markdown file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"claims table {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read claims table {path}: {getattr(exc, 'strerror', None) or exc}.") from None
    tables = _markdown_tables(text) if _is_markdown(path, text) else [_delimited_table(text, path)]
    if not tables or not tables[0]:
        raise InputError(f"{path}:1: no table found (expected CSV or a Markdown table with a header row).")
    for table in tables:
        header_line, header = table[0]
        roles = _column_roles(header)
        if "api" in roles and "status" in roles:
            return [row for line, cells in table[1:] if (row := _claim_row(path, line, cells, roles))]
    header_line, header = tables[0][0]
    missing = " and ".join(label for role, label in (("api", "API"), ("status", "status"))
                           if role not in _column_roles(header))
    raise InputError(f"{path}:{header_line}: the table has no recognisable {missing} column "
                     f"(headers: {', '.join(h or '(blank)' for h in header)}; an API column is named e.g. "
                     f"'PyTorch API' or 'op', a status column 'Status' or 'Supported').")


def parse_claim(word: str, where: str) -> str:
    """A status word -> Y, CPU_FALLBACK or N; InputError naming `where` (file:line) otherwise."""
    key = " ".join(word.strip().lower().replace("_", " ").replace("-", " ").split())
    claim = STATUS_WORDS.get(key)
    if claim is None:
        raise InputError(f"{where}: unknown status {word.strip()!r}; use Y, CPU_FALLBACK or N "
                         f"(or yes/no/fallback/supported/unsupported).")
    return claim


def parse_dtype_list(text: str, where: str) -> tuple[str, ...] | None:
    """'fp32, bf16' -> ('float32', 'bfloat16'); blank or 'all' -> None (every dtype)."""
    words = [w for w in re.split(r"[,;/\s]+", text.strip().lower()) if w]
    if not words or (len(words) == 1 and words[0] in _ALL_DTYPES):
        return None
    found = []
    for word in words:
        name = DTYPE_ALIASES.get(word.removeprefix("torch."), word.removeprefix("torch."))
        if not _DTYPE_NAME.match(name):
            raise InputError(f"{where}: unknown dtype {word!r} in the dtype column; use fp32, bf16, fp16 "
                             f"or torch dtype names.")
        if name not in found:
            found.append(name)
    return tuple(found)


# -- table shapes ---------------------------------------------------------------


def _is_markdown(path: Path, text: str) -> bool:
    if path.suffix.lower() in (".md", ".markdown"):
        return True
    if path.suffix.lower() in (".csv", ".tsv"):
        return False
    return any(line.lstrip().startswith("|") for line in text.splitlines())


def _delimited_table(text: str, path: Path) -> list[tuple[int, list[str]]]:
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    reader = csv.reader(text.splitlines(), delimiter=delimiter)
    rows = []
    for cells in reader:
        if any(c.strip() for c in cells):
            rows.append((reader.line_num, [_clean(c) for c in cells]))
    return rows


def _markdown_tables(text: str) -> list[list[tuple[int, list[str]]]]:
    """Every pipe table: its header row and body rows (separator rows dropped), with line numbers."""
    tables: list[list[tuple[int, list[str]]]] = []
    current: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped.startswith("|"):
            if current:
                tables.append(current)
                current = []
            continue
        cells = _split_pipes(stripped)
        if all(re.fullmatch(r":?-{3,}:?", c.strip()) for c in cells if c.strip()) and any(cells):
            continue  # the |---|:---:| separator
        current.append((number, [_clean(_MD_ESCAPE.sub(r"\1", c)) for c in cells]))
    if current:
        tables.append(current)
    return tables


def _split_pipes(line: str) -> list[str]:
    """'| a | b \\| c |' -> ['a', 'b | c']: escaped pipes stay in their cell."""
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [cell.replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", body)]


def _clean(cell: str) -> str:
    """Markdown decoration off: links to their text, no backticks or emphasis, one line."""
    cell = _MD_LINK.sub(r"\1", cell)
    cell = cell.replace("`", "").replace("**", "").replace("<br>", " ").replace("<br/>", " ")
    return " ".join(cell.split())


def _column_roles(header: list[str]) -> dict[str, int]:
    """Role -> column index, for the first column whose header names each role."""
    roles: dict[str, int] = {}
    for index, raw in enumerate(header):
        name = " ".join(re.sub(r"[^a-z0-9?]+", " ", raw.lower()).split())
        for role, words in HEADER_WORDS.items():
            if role in roles:
                continue
            if name in words or any(name.endswith(" " + w) for w in words):
                roles[role] = index
                break
    return roles


def _claim_row(path: Path, line: int, cells: list[str], roles: dict[str, int]) -> ClaimRow | None:
    def cell(role: str) -> str:
        index = roles.get(role)
        return cells[index].strip() if index is not None and index < len(cells) else ""

    where = f"{path}:{line}"
    api_text, status = cell("api"), cell("status")
    if not api_text and not status:
        return None  # a blank or section row
    if not api_text:
        raise InputError(f"{where}: the row has a status but no API.")
    apis = tuple(a.strip() for a in re.split(r",|\s+/\s+|\s+or\s+", api_text) if a.strip())
    return ClaimRow(
        source=str(path), line=line, apis=apis, claim=parse_claim(status, where),
        dtypes=parse_dtype_list(cell("dtypes"), where) if "dtypes" in roles else None,
        limitations=cell("limitations") or None,
    )
