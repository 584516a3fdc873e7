"""The text of a call, taken apart and put together again for the fixes.

An edit that changes a call's arguments keeps what it does not change as it was written
(the callee, the space after ``(``, each kept argument with the space that follows it),
separates the arguments with ``", "`` and drops a trailing comma: the layout a printed tree
gives, so a rewritten call reads like hand-written code.
"""

from __future__ import annotations

import ast
from typing import NamedTuple

from .nodes import SourceText, call_arguments, skip_space


class CallText(NamedTuple):
    """Offsets of the parts of one call in the text."""

    func_end: int
    open: int                               # offset of "("
    close: int                              # offset of the final ")"
    args: tuple[tuple[ast.AST, int, int], ...]  # (argument, start, end), parentheses included
    after: tuple[int, ...]                  # offset of the comma after each argument (close: none)


def call_text(source: SourceText, call: ast.Call) -> CallText:
    text = source.text
    _, func_end = source.outer_span(call.func)
    _, end = source.span(call)
    opening = text.find("(", func_end)
    close = end - 1
    args = [(arg, *source.outer_span(arg)) for arg in call_arguments(call)]
    after = []
    for _, _, stop in args:
        i = skip_space(text, stop, 1)
        while i < close and text[i] == "#":  # a comment before the comma
            i = skip_space(text, text.find("\n", i), 1)
        after.append(i if i < close and text[i] == "," else close)
    return CallText(func_end, opening, close, tuple(args), tuple(after))


def rebuilt_call(view, call: ast.Call, func: str | None, new: list[str], kept: list[ast.AST]) -> str:
    """``func(new..., kept...)``: ``func`` replaces the callee (None keeps it, a name starting
    with "." renames the method), ``new`` are code, ``kept`` arguments of ``call``."""
    source = view.source_text
    parts = call_text(source, call)
    text = source.text
    if func is None:
        callee = view.text(call.func)
    elif func.startswith("."):  # the method renamed, the rest of the callee as written
        inner = view.between(*view.span(call.func))
        callee = view.keep_parens(call.func, inner[:len(inner) - len(call.func.attr)] + func[1:])
    else:
        callee = func
    first = parts.args[0][1] if parts.args else parts.close
    pieces: list[str] = list(new)
    spaces: list[str] = [""] * len(new)
    for (arg, start, stop), comma in zip(parts.args, parts.after):
        if any(arg is k for k in kept):
            pieces.append(view.between(start, stop))
            spaces.append(text[stop:parts.close] if comma == parts.close else "")  # no trailing comma
    body = "".join(piece + (", " if i < len(pieces) - 1 else "") + space
                   for i, (piece, space) in enumerate(zip(pieces, spaces)))
    return view.keep_parens(call, callee + text[parts.func_end:parts.open + 1] + text[parts.open + 1:first]
                            + body + ")")


def arguments_text(view, call: ast.Call) -> str:
    """The arguments of ``call`` as written (trailing comma included), edits made."""
    parts = call_text(view.source_text, call)
    if not parts.args:
        return ""
    return view.between(parts.args[0][1], parts.close)
