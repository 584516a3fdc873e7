"""A fix is never invalid: each fixed statement must parse under the oldest Python we support.

The rule families' edits are text splices; a splice can be wrong for its place (code with
double quotes inside a double-quoted f-string is valid only on Python 3.12 and later). Before a
file's fixes are offered, every top-level statement that an edit changed is parsed with
``ast.parse(..., feature_version=(3, 10))`` (which rejects the newer grammar: ``except*``,
``type`` statements, generic parameters) plus a token check for the f-string nesting of PEP 701
(the running parser accepts it from 3.12 on, ``feature_version`` does not reject it). An edit
whose statement does not parse is dropped, and its finding stays, marked not fixable with the
reason. ``analyze_checked`` is the analysis every caller that offers fixes uses.
"""

from __future__ import annotations

import ast
import bisect
import io
import sys
import tokenize

from .apply import _Rewriter, _top_level_spans
from .bound import drop_unbound_fixes, mark_unfixable
from .engine import Analysis, analyze_cached

OLDEST_PYTHON = (3, 10)


def syntax_problem(code: str) -> str | None:
    """Why ``code`` (whole statements) is not valid Python 3.10, or None."""
    try:
        ast.parse(code, feature_version=OLDEST_PYTHON)
    except SyntaxError as exc:
        return f"{exc.msg} (line {exc.lineno})" if exc.lineno else exc.msg
    except (ValueError, RecursionError) as exc:  # a null byte, a deeply nested expression
        return str(exc)
    if sys.version_info >= (3, 12):
        return _nested_quote_problem(code)
    return None


def _nested_quote_problem(code: str) -> str | None:
    """A string inside an f-string's replacement field that reuses the f-string's quotes
    (PEP 701, Python 3.12+ only). Python 3.11 and older reject it when parsing."""
    fstring_start = getattr(tokenize, "FSTRING_START", None)
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    open_quotes: list[str] = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type in (tokenize.STRING, fstring_start):
                quote = token.string.lstrip("rRbBuUfFtT")[:3]
                quote = quote if quote in ('"""', "'''") else quote[:1]
                for outer in open_quotes:
                    if quote == outer or (len(outer) == 1 and quote[0] == outer):
                        return (f"a string quoted with {outer} inside an f-string quoted with {outer} "
                                "(valid only on Python 3.12 and later)")
                if token.type == fstring_start:
                    open_quotes.append(quote)
            elif token.type == fstring_end and open_quotes:
                open_quotes.pop()
    except (tokenize.TokenError, SyntaxError):  # pragma: no cover - ast parsed it
        return None
    return None


def drop_invalid_fixes(analysis: Analysis) -> None:
    """Drop the edits whose top-level statement does not parse, and mark their findings."""
    ctx = analysis.ctx
    if ctx is None or not ctx.edits:
        return
    spans = _top_level_spans(ctx)
    starts = [start for start, _ in spans]
    why_dropped: dict[int, str] = {}
    for _ in range(len(ctx.edits)):
        rewriter = _Rewriter(ctx)
        by_statement: dict[int, list[int]] = {}
        for key, (node, _edit) in ctx.edits.items():
            offset = rewriter.key(node)[0]
            by_statement.setdefault(bisect.bisect_right(starts, offset) - 1, []).append(key)
        bad = None
        for index, keys in sorted(by_statement.items()):
            start, end = spans[index]
            problem = syntax_problem(rewriter.render(start, end))
            if problem is not None:
                bad = (start, end, keys, problem)
                break
        if bad is None:
            break
        start, end, keys, problem = bad
        culprits = [key for key in keys
                    if syntax_problem(_Rewriter(ctx, frozenset({key})).render(start, end)) is None]
        for key in culprits[:1] or keys:  # the one edit that breaks it, else all in the statement
            why_dropped[key] = problem
            del ctx.edits[key]
    mark_unfixable(analysis, {key: f"the fix would not parse on Python {OLDEST_PYTHON[0]}.{OLDEST_PYTHON[1]}: "
                                   f"{problem}" for key, problem in why_dropped.items()})


def analyze_checked(text: str, path: str = "<string>") -> Analysis:
    """The file's analysis (remembered, porting_cli.analysis.scan.engine.analyze_cached) with every fix it
    offers checked to parse and to use no name before it is bound (porting_cli.analysis.scan.bound)."""
    analysis = analyze_cached(text, path)
    if not analysis.checked:
        drop_invalid_fixes(analysis)
        drop_unbound_fixes(analysis)
        analysis.checked = True
    return analysis
