"""One sanitiser per output kind, so untrusted text is inert wherever a person or a CI system reads it.

Exception messages, op names, paths and script lines come from the backend, the user's script
and the database; they may hold terminal escapes (OSC 8 hyperlinks, `ESC[2J`), NUL, lone
surrogates or markup. They are stored raw and made inert here, at output time:

* `for_terminal`: control characters (C0 but newline and tab, DEL, C1), bidi overrides and line
  separators are shown escaped (`\\x1b`, `\\u202e`); lone surrogates become U+FFFD (the replacement character).
* `for_markdown`: terminal-safe, then HTML and Markdown punctuation escaped, `|` kept inside its
  table cell, newlines as `<br>`; `markdown_fence` wraps code (a patch) in a fence nothing inside
  can close.
* `for_xml`: terminal-safe, which also removes every character XML 1.0 forbids (ElementTree does
  the markup escaping).
* `for_html`: the jinja2 `finalize` hook; terminal-safe strings, autoescape does the markup.
* `for_json`: data stays data (JSON escapes every control character); only lone surrogates,
  which no UTF-8 file can hold and strict parsers reject, become U+FFFD. `dumps_json` writes it
  with `<`, `>` and `&` as \\u escapes too, so the text holds no markup yet parses to the same data.

All but `for_markdown` are idempotent, so a second pass (a whole page after its cells) changes nothing;
`for_markdown` escapes, so it is applied once, to each piece of untrusted text.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, TextIO


# Characters a terminal acts on, that XML 1.0 forbids, or that reorder what a reader sees:
# C0 controls, DEL, C1 controls (0x9b is a one-byte CSI), line/paragraph separators, bidi
# embeddings, overrides and isolates ("Trojan Source"), and the non-characters U+FFFE/U+FFFF.
_LINE_CONTROLS = r"\t\n"
_UNSAFE = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufffe\uffff"
_UNSAFE_ONE_LINE = re.compile(f"[{_UNSAFE}]")
_UNSAFE_KEEP_LINES = re.compile(f"(?![{_LINE_CONTROLS}])[{_UNSAFE}]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_WHITESPACE_RUN = re.compile(r"[ \t\r\n\x0b\x0c\x85\u2028\u2029]+")
# Markdown punctuation, escaped in one pass (the backslashes it adds are not escaped again).
_MARKDOWN_PUNCTUATION = re.compile(r"([\\`*\[\]~|])")
_BACKTICK_RUN = re.compile(r"`+")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _without_surrogates(text: str) -> str:
    """Lone surrogates (no UTF-8 file or terminal can hold them) as U+FFFD; a pair as its character."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def for_terminal(value: Any, *, one_line: bool = False) -> str:
    """Text that prints as itself: nothing in it moves the cursor, recolours, links or clears.

    `one_line` folds every run of whitespace (newlines included) into one space, for table cells.
    """
    text = _without_surrogates("" if value is None else str(value))
    if one_line:
        text = _WHITESPACE_RUN.sub(" ", text).strip()
        return _UNSAFE_ONE_LINE.sub(_escaped, text)
    return _UNSAFE_KEEP_LINES.sub(_escaped, text.replace("\r\n", "\n"))


def for_markdown(value: Any) -> str:
    """Inline Markdown (a table cell, a list item): renders as the literal text, never as markup."""
    text = for_terminal(value).replace("\t", " ")
    text = _MARKDOWN_PUNCTUATION.sub(r"\\\1", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return "<br>".join(line.strip() for line in text.split("\n"))


def markdown_fence(value: Any, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    text = for_terminal(value)
    longest = max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{language}\n{body}{fence}"


def for_xml(value: Any) -> str:
    """Character data or an attribute value legal in XML 1.0 (ElementTree escapes the markup)."""
    return for_terminal(value)


def for_html(value: Any) -> Any:
    """jinja2's `finalize`: every `{{ }}` string is made terminal-safe before autoescape runs.

    Markup (e.g. the output of `|tojson`) is already safe and passes untouched."""
    if isinstance(value, str) and not hasattr(value, "__html__"):
        return for_terminal(value)
    return value


def for_json(value: Any) -> Any:
    """A copy of a JSON-ready structure with lone surrogates replaced in every string (keys too)."""
    if isinstance(value, str):
        return _without_surrogates(value)
    if isinstance(value, dict):
        return {for_json(k) if isinstance(k, str) else k: for_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [for_json(v) for v in value]
    return value


def dumps_json(value: Any, **options: Any) -> str:
    """json.dumps of `for_json(value)` (ASCII, every control character escaped) with no raw markup:
    `<`, `>`, `&` only ever occur inside JSON strings, where their \\u escapes mean the same."""
    text = json.dumps(for_json(value), ensure_ascii=True, **options)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def tolerant_streams(*streams: TextIO) -> None:
    """Let stdout/stderr print any text even where their encoding cannot (PYTHONIOENCODING=ascii):
    what the encoding lacks is written as a backslash escape instead of raising."""
    for stream in streams or (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="backslashreplace")
            except (ValueError, OSError):  # a closed or detached stream: nothing to print to anyway
                pass


def echo(message: Any = "", *, err: bool = False, nl: bool = True) -> None:
    """click.echo of terminal-safe text: the one way commands print."""
    import click

    click.echo(for_terminal(message), err=err, nl=nl)
