"""The compact trigger pattern on lower-cased text finds exactly the lines that the families'
triggers find without case (porting_cli/analysis/scan/triggers.py)."""

from __future__ import annotations

import bisect
import re
import string

import pytest

from porting_cli.analysis.scan import engine, triggers
from porting_cli.analysis.scan.source import split_lines

ALL_TRIGGERS = [t for family in engine.FAMILIES for t in family.triggers]


def reference_lines(text: str, extra_names=()) -> list[int]:
    """The lines of ``text`` where some trigger (or a whole extra name) matches without case:
    the plain alternation the compact pattern stands for."""
    alternatives = [f"(?:{t})" for t in ALL_TRIGGERS] + [rf"\b{re.escape(n)}\b" for n in extra_names]
    pattern = re.compile("|".join(alternatives), re.IGNORECASE)
    lines = split_lines(text)
    starts = [sum(map(len, lines[:i])) for i in range(len(lines))]
    return sorted({bisect.bisect_right(starts, m.start()) for m in pattern.finditer(text)})


TEXTS = {
    "ascii": "import torch\nx = 1\nm.to(device = 0)\ny = ['fp16']\nz = a](b)\nreimport = 2\n",
    "import as a word only": "reimported = 1\nx_import = 2\nfrom a import b\n",
    "long s": "x = 1\ny = 'tranſformers'\n",
    "dotless i": "x = 1\nfrom a ımport b\n",
    "dotted capital I": "x = 'İ'\nm = torch.nn.Linear(2, 2).CUDA()\n",
    "kelvin sign": "x = 'nccl'\ny = '\u212a'\n",
    "upper case and accents": "café = 1\nTORCH.cuda.is_available()\nDevice = 3\n",
    "across a line break": "f(device=\n 0)\n",
}


@pytest.mark.parametrize("name", TEXTS)
def test_the_compact_pattern_finds_the_lines_the_triggers_find(name):
    text = TEXTS[name]
    assert engine.candidate_lines(split_lines(text), {}) == reference_lines(text)


@pytest.mark.parametrize("name", ["ascii", "long s", "upper case and accents"])
def test_imported_names_are_found_as_whole_words(name):
    text = TEXTS[name] + "amp_scope()\nmy_amp_scope()\n"
    aliases = {"amp_scope": "torch.cuda.amp.autocast"}
    assert engine.candidate_lines(split_lines(text), aliases) == reference_lines(text, ["amp_scope"])


@pytest.mark.parametrize("name", ["ascii", "dotted capital I"])
def test_several_imported_names_and_their_lines_that_hold_triggers_too(name):
    # the names are searched apart from the triggers: a line found by both is one line, and a
    # dotted binding (`self.scaler = torch.cuda.amp.GradScaler`) is a whole name too
    text = TEXTS[name] + "gpu.synchronize(); torch.zeros(1)\nself.scaler.step()\nnvtx_range()\nselfxscaler = 1\n"
    aliases = {"gpu": "torch.cuda", "self.scaler": "torch.cuda.amp.GradScaler", "nvtx_range": "torch.cuda.nvtx.range"}
    assert engine.candidate_lines(split_lines(text), aliases) == reference_lines(text, list(aliases))


def test_a_fold_exception_sends_the_text_to_the_case_insensitive_search():
    assert triggers.foldable("tranſformers") is None
    assert triggers.foldable("İ") is None  # lower() makes it two characters
    assert triggers.foldable("Café") == "café"
    # the line holds a trigger only for a case-insensitive search, which the fallback keeps
    assert engine.candidate_lines(["x = 'tranſformers'\n"], {}) == [1]


def test_lowering_keeps_matches_except_for_the_fold_exceptions():
    """The claim triggers.foldable rests on, over every character whose lower case is one
    character: an ASCII character or class matches it without case exactly when it matches
    its lower case with case."""
    chars = "".join(chr(i) for i in range(0x110000) if not 0xD800 <= i < 0xE000 and len(chr(i).lower()) == 1)
    low = chars.lower()
    differ: set[str] = set()
    probes = [re.escape(c) for c in string.printable if c == c.lower()] + [r"\w", r"\d", r"\s"]
    for probe in probes:
        without_case = {m.start() for m in re.finditer(probe, chars, re.IGNORECASE)}
        with_case = {m.start() for m in re.finditer(probe, low)}
        differ.update(chars[i] for i in without_case ^ with_case)
    assert differ == set(triggers.FOLD_EXCEPTIONS)


@pytest.mark.parametrize("pattern, text, matches", [
    (r"\bimport\b", "x import y", True),
    (r"\bimport\b", "reimport y", False),
    (r"\bimport\b", "import", True),
    (r"[\"']fp16[\"']", "x = 'fp16\"", True),
    (r"\.to\(\s*\d", "m.to( 3)", True),
    (r"ab|cd", "xcd", True),
    (r"a?b", "b", True),
])
def test_a_split_pattern_matches_where_the_original_does(pattern, text, matches):
    compact = re.compile(triggers.compact_triggers([pattern]))
    assert (compact.search(text) is not None) is matches
    assert (re.search(pattern, text) is not None) is matches
