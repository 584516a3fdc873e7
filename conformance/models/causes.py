"""Why a (model type, task) pair does not build tiny and run: one cause from a closed set.

The rules, in order, as data:

* an ImportError naming a module or "requires the X library" -> needs an optional dependency (named);
* a download attempt (offline hub errors, missing local files) -> needs real weights or a processor download;
* no rule builds the forward's main input, or the forward rejects the inputs' names -> input builder missing;
* any other failure while the tiny config or the model is made -> config cannot be shrunk;
* any other failure in the forward -> model bug on CPU (the exception);
* the worker ran past its time limit -> timeout.
"""

from __future__ import annotations

import dataclasses
import re

OPTIONAL_DEPENDENCY = "needs optional dependency"
DOWNLOAD = "needs real weights or a processor download"
UNSHRINKABLE = "config cannot be shrunk"
NO_INPUT_BUILDER = "input builder missing"
MODEL_BUG = "model bug on CPU"
TIMEOUT = "timeout"
CAUSES = (OPTIONAL_DEPENDENCY, DOWNLOAD, UNSHRINKABLE, NO_INPUT_BUILDER, MODEL_BUG, TIMEOUT)
STAGES = ("config", "model", "inputs", "forward")

_LIBRARY = re.compile(r"requires the (\S+?) library|No module named '([\w.]+)'|pip install ([\w.\-\[\]]+)")
_DOWNLOAD_NAMES = ("LocalEntryNotFoundError", "OfflineModeIsEnabled", "EntryNotFoundError",
                   "RepositoryNotFoundError", "HFValidationError")
_DOWNLOAD_TEXT = ("offline", "huggingface.co", "from_pretrained", "does not appear to have a file",
                  "Can't load", "couldn't connect")
_INPUT_TEXT = ("got an unexpected keyword argument", "missing 1 required positional argument",
               "missing required")


@dataclasses.dataclass(frozen=True)
class Failure:
    cause: str  # one of CAUSES
    detail: str  # the package for a dependency, else the exception on one line

    def describe(self) -> str:
        return f"{self.cause} {self.detail}" if self.cause == OPTIONAL_DEPENDENCY else f"{self.cause}: {self.detail}"


def _chain(exc: BaseException) -> list[BaseException]:
    found = []
    while exc is not None and exc not in found:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]


def _guarded_import(exc: NameError) -> str | None:
    """The package whose guarded import would have bound the undefined name (Diffusers imports
    torchvision's `transforms` only when torchvision is installed), read off the module source
    of the frame that raised; None when no import there binds it."""
    import linecache

    name = getattr(exc, "name", None)
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if not name or tb is None:
        return None
    source = "".join(linecache.getlines(tb.tb_frame.f_code.co_filename))
    found = re.search(rf"^\s*from\s+(\w+)[\w.]*\s+import\s+[^\n]*\b{re.escape(name)}\b|"
                      rf"^\s*import\s+(\w+)[\w.]*\s+as\s+{re.escape(name)}\b", source, re.MULTILINE)
    return next((g for g in found.groups() if g), None) if found else None


def classify(exc: BaseException, stage: str) -> Failure:
    """The cause of `exc`, raised while making the pair's `stage` (one of STAGES)."""
    from conformance.models.documented import MissingInputBuilder

    chain = _chain(exc)
    for link in chain:
        package = _guarded_import(link) if isinstance(link, NameError) else None
        if package:
            return Failure(OPTIONAL_DEPENDENCY, package)
        if isinstance(link, ImportError):
            name = getattr(link, "name", None)
            match = _LIBRARY.search(str(link))
            package = name or (next(g for g in match.groups() if g) if match else None)
            if package:
                return Failure(OPTIONAL_DEPENDENCY, package.split(".")[0])
    for link in chain:
        if type(link).__name__ in _DOWNLOAD_NAMES or any(t.lower() in str(link).lower() for t in _DOWNLOAD_TEXT):
            return Failure(DOWNLOAD, _one_line(link))
    root = chain[-1]
    if any(isinstance(link, MissingInputBuilder) for link in chain) or (
            isinstance(root, TypeError) and any(t in str(root) for t in _INPUT_TEXT)):
        return Failure(NO_INPUT_BUILDER, _one_line(root))
    if stage in ("config", "model"):
        return Failure(UNSHRINKABLE, _one_line(root))
    return Failure(MODEL_BUG, _one_line(root))
