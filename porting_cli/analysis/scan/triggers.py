"""The rule families' trigger words as one fast regular expression, and the text it searches.

Only which lines hold a match matters (porting_cli.analysis.scan.engine.candidate_lines), so the
alternatives can be rewritten as long as the set of positions where some alternative matches
stays the same. Python's regex engine searches a pattern fast when every alternative starts with
a literal character: it then skips the positions whose character starts none of them, and tries
one branch per character, not every alternative. ``compact_triggers`` brings every alternative
to that form it can.

The triggers are matched without case. A case-insensitive pattern is several times slower
than a lower-case one on lower-cased text, and the two find the same positions when lowering
keeps every offset (no character becomes two, like "İ") and the text holds neither "ı" nor
"ſ": the only characters that a case-insensitive ASCII letter matches but whose lower case is
not that letter (the dotless i and the long s match "i" and "s"). tests/porting_cli/
test_scan_triggers.py checks that claim over every Unicode character.
"""

from __future__ import annotations

import functools
import re

#: characters a case-insensitive ASCII pattern matches although their lower case differs
FOLD_EXCEPTIONS = ("\u0131", "\u017f")
_QUANTIFIERS = frozenset("*+?{")


def lowered(pattern: str) -> str:
    """``pattern`` with its literal letters in lower case (escapes such as ``\\s`` stay)."""
    return re.sub(r"\\.|[A-Z]", lambda m: m.group(0) if m.group(0)[0] == "\\" else m.group(0).lower(), pattern)


def literal(pattern: str) -> str | None:
    """The text ``pattern`` matches when it is a plain literal, else None."""
    text = re.sub(r"\\(.)", r"\1", pattern)
    return text if re.escape(text) == pattern else None


def _first_class(pattern: str) -> tuple[list[str], str] | None:
    """(the characters, the rest) when ``pattern`` starts with a class of plain characters
    such as ``["']`` that no quantifier follows, else None."""
    end = pattern.find("]")
    if not pattern.startswith("[") or end < 2 or pattern[1] == "^":
        return None
    chars, i = [], 1
    while i < end:
        if pattern[i] == "\\" and not pattern[i + 1].isalnum():
            chars.append(pattern[i + 1])
            i += 2
        elif pattern[i] not in "\\-[":
            chars.append(pattern[i])
            i += 1
        else:  # a range, an escape class: not a plain set
            return None
    rest = pattern[end + 1:]
    return (chars, rest) if not rest[:1] or rest[0] not in _QUANTIFIERS else None


def split_first(pattern: str) -> list[tuple[str, str]] | None:
    """``pattern`` as (first character, pattern of what follows it) pairs, one per character
    it can start with; None when its start is not that simple. A pattern with a ``|`` is left
    alone (the split would bind the alternation wrongly)."""
    text = literal(pattern)
    if text:
        return [(text[0], re.escape(text[1:]))]
    if "|" in pattern:
        return None
    if pattern.startswith("\\b") and pattern[2:3].isalnum() and pattern[3:4] not in _QUANTIFIERS:
        # \b before a word character: the character before it is none; said after that character
        first = pattern[2]
        return [(first, f"(?<!\\w{first}){pattern[3:]}")]
    if pattern[:1].isalnum() and pattern[1:2] not in _QUANTIFIERS:
        return [(pattern[0], pattern[1:])]
    if pattern[:1] == "\\" and pattern[1:2] and not pattern[1].isalnum() and pattern[2:3] not in _QUANTIFIERS:
        return [(pattern[1], pattern[2:])]
    start = _first_class(pattern)
    if start is not None:
        return [(char, start[1]) for char in start[0]]
    return None


def compact_triggers(alternatives) -> str:
    """One pattern that matches at the same positions as ``alternatives``, many times faster:
    a literal that contains another literal alternative adds no line and is dropped (with the
    duplicates); the rest are grouped under their first character (split_first)."""
    alternatives = list(dict.fromkeys(alternatives))
    literals = {a: literal(a) for a in alternatives}
    kept = [a for a in alternatives if not (literals[a] and any(
        b != a and literals[b] and literals[b] in literals[a] for b in alternatives))]
    groups: dict[str, list[str]] = {}
    others = []
    for a in kept:
        pairs = split_first(a)
        if pairs is None:
            others.append(f"(?:{a})")
        for first, rest in pairs or ():
            groups.setdefault(first, []).append(rest)
    return "|".join([f"{re.escape(first)}(?:{'|'.join(rest)})" for first, rest in groups.items()] + others)


def foldable(text: str) -> str | None:
    """``text`` in lower case when a lower-case pattern finds in it the positions the pattern
    finds without case in ``text`` (see the module's docstring), else None."""
    low = text.lower()
    if text.isascii():
        return low
    if len(low) != len(text) or any(c in text for c in FOLD_EXCEPTIONS):
        return None
    return low


@functools.lru_cache(maxsize=256)
def trigger_pattern(alternatives: tuple[str, ...], words: tuple[str, ...] = (), flags: int = 0) -> re.Pattern:
    """``alternatives`` and the whole ``words`` (identifiers) as one compact pattern."""
    return re.compile(compact_triggers([*alternatives, *(rf"\b{re.escape(w)}\b" for w in words)]), flags)
