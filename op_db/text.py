"""Short text for people: counted nouns and cuts at word boundaries.

Every message, table cell and page that counts things or shortens untrusted text goes through
these two, so "1 items" and a figure cut mid-number ("oracle 0.)") cannot come back one
call site at a time. In op_db because every package may import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ELLIPSIS = "..."
_SPACE = re.compile(r"\s")


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """'1 item', '2 items', '0 items'; `plural_form` for nouns that do not take an s ('series')."""
    return f"{count} {noun if count == 1 else (plural_form or noun + 's')}"


def cut(text: str | None, limit: int) -> str:
    """`text` at most `limit` characters long, cut after the last whole word that fits (never inside
    a number or a name), with '...' where something was cut. One word longer than the limit is
    the only thing cut inside, as there is no boundary to cut at."""
    text = str(text or "")
    if len(text) <= limit:
        return text
    room = max(limit - len(ELLIPSIS), 1)
    boundaries = [match.start() for match in _SPACE.finditer(text, 0, room + 1)]
    kept = text[:boundaries[-1]] if boundaries and boundaries[-1] > 0 else text[:room]
    return kept.rstrip(" ,;:(") + ELLIPSIS


def closest(word: str, names: Iterable[str], count: int = 3, *, dotted_tail: bool = False) -> list[str]:
    """The known names closest to a misspelt `word`, best first (none when nothing is close).
    `dotted_tail`: a name also matches by its last dotted part ('lienar' finds 'nn.functional.linear')."""
    import difflib

    matcher = difflib.SequenceMatcher()
    matcher.set_seq2(word)
    best: dict[str, float] = {}
    for name in names:
        for form in (name, name.rpartition(".")[2]) if dotted_tail and "." in name else (name,):
            matcher.set_seq1(form)
            if matcher.real_quick_ratio() >= 0.6 and matcher.quick_ratio() >= 0.6:
                best[name] = max(best.get(name, 0.0), matcher.ratio())
    return sorted((n for n, r in best.items() if r >= 0.6), key=lambda n: (-best[n], n))[:count]


def did_you_mean(word: str, names: Iterable[str], count: int = 3, *, dotted_tail: bool = False) -> str:
    """' (did you mean 'a' or 'b'?)' naming the closest known names (`closest`), or ''."""
    return suggestion(closest(word, names, count, dotted_tail=dotted_tail))


def suggestion(names: list[str]) -> str:
    if not names:
        return ""
    quoted = [repr(name) for name in names]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f" (did you mean {listed}?)"
