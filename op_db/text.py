"""Short text for people: counted nouns and cuts at word boundaries.

Every message, table cell and page that counts things or shortens untrusted text goes through
these two, so "1 items" and a figure cut mid-number ("oracle 0.)") cannot come back one
call site at a time. In op_db because every package may import it.
"""

from __future__ import annotations

import re

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
