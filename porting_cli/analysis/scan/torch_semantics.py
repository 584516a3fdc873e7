"""What the installed PyTorch makes of the code the rules read.

Some rules depend on PyTorch's semantics, and those changed between releases. A bare integer
device (`torch.device(0)`, `x.to(local_rank)`, `device=0`) meant CUDA device N up to torch 2.4;
from torch 2.5 it means device N of the *current accelerator* (pytorch/pytorch#129119, "Refine the
logic of device construction when only device index is given"; safetensors#509 adapted to the same
change), so on a backend such as TorchNeuron, or `sim` in this project's tests, `torch.device(0)`
is `neuron:0` / `sim:0` (measured on torch 2.13 with sim registered). On such a torch an integer
device is no change to make.

The version is read from the installed distribution's metadata, never by importing torch: the
static scan stays fast and torch-free. No torch installed: the old (CUDA) meaning, which is what
the script means on the torch its authors ran.

Other facts the rules state: what a `torch.cuda` call does where there is no CUDA (WITHOUT_CUDA:
lazy, a no-op, a default value, or an exception; measured on torch 2.13's CPU build, and measured
again on the installed torch by tests/porting_cli/test_scan_torch_semantics.py), and which
`torch.accelerator` functions the installed torch has (read from its `__all__`, so a fix never
writes one the installed torch lacks: the memory functions came in 2.8/2.9, the module in 2.6,
pytorch/pytorch#132204).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import importlib.metadata
import re

#: the first release where a bare integer device is the current accelerator's device N
INTEGER_DEVICE_IS_ACCELERATOR = (2, 5)


#: the torch whose CPU build WITHOUT_CUDA was measured on
MEASURED_ON = (2, 13)

LAZY = "lazy"        # queued until CUDA initialises (torch.cuda._lazy_call): without CUDA it never runs
NO_OP = "no-op"      # returns at once, doing nothing
RAISES = "raises"    # AssertionError "Torch not compiled with CUDA enabled", or an AttributeError of torch._C

#: torch.cuda name -> what it does without CUDA: LAZY, NO_OP, RAISES, or "returns <value>"
WITHOUT_CUDA: dict[str, str] = {
    "manual_seed": LAZY, "manual_seed_all": LAZY, "seed": LAZY, "seed_all": LAZY,
    "set_rng_state": LAZY, "set_rng_state_all": LAZY,
    "empty_cache": NO_OP,  # it empties the cache only once CUDA is initialised
    "is_available": "returns False", "device_count": "returns 0", "is_bf16_supported": "returns False",
    "memory_allocated": "returns 0", "max_memory_allocated": "returns 0", "memory_reserved": "returns 0",
    "max_memory_reserved": "returns 0", "memory_stats": "returns {}",
    "get_rng_state_all": "returns []",
    "synchronize": RAISES, "current_device": RAISES, "set_device": RAISES,
    "reset_peak_memory_stats": RAISES, "reset_accumulated_memory_stats": RAISES, "mem_get_info": RAISES,
    "get_rng_state": RAISES, "initial_seed": RAISES, "get_device_name": RAISES,
    "get_device_properties": RAISES, "get_device_capability": RAISES,
}

#: how each kind of behaviour reads in a finding
_SAYS = {LAZY: "is lazy: without CUDA the call is queued until CUDA initialises, which never happens, so it "
               "silently does nothing and never reaches the accelerator",
         NO_OP: "is a no-op without CUDA: the accelerator's cache is left as it is",
         RAISES: "raises without CUDA"}


@dataclasses.dataclass(frozen=True)
class TorchSemantics:
    """The PyTorch whose meaning the rules state: its version, None when unknown, and the names of
    its `torch.accelerator` module (None when unknown: every name is taken to exist)."""

    version: tuple[int, int] | None = None
    accelerator_names: frozenset[str] | None = None

    def has_accelerator_api(self, name: str) -> bool:
        """`torch.accelerator.<name>` exists in this torch (as far as is known)."""
        return self.accelerator_names is None or name in self.accelerator_names

    def without_cuda(self, name: str) -> str | None:
        """What `torch.cuda.<name>` does without CUDA, as a finding says it; None when not known."""
        fact = WITHOUT_CUDA.get(name)
        if fact is None:
            return None
        said = _SAYS.get(fact) or f"{fact} without CUDA"
        return f"on {self.measured()}, `torch.cuda.{name}` {said}"

    def measured(self) -> str:
        """The torch the stated facts were measured on, as a finding names it."""
        where = f"torch {MEASURED_ON[0]}.{MEASURED_ON[1]}"
        return f"the installed {where}" if self.version == MEASURED_ON else f"{where} (measured there)"

    @property
    def integer_device_is_accelerator(self) -> bool:
        return self.version is not None and self.version >= INTEGER_DEVICE_IS_ACCELERATOR

    def describe(self) -> str:
        return "an unknown torch" if self.version is None else f"torch {self.version[0]}.{self.version[1]}"


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of a version string such as ``2.13.0+cpu`` or ``2.5.0a0``."""
    m = re.match(r"\s*(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


@functools.cache
def installed() -> TorchSemantics:
    """The semantics of the torch installed next to neuron-check (the scan cache's key includes
    the installed distributions, so a result is never reused under another torch)."""
    try:
        distribution = importlib.metadata.distribution("torch")
    except importlib.metadata.PackageNotFoundError:
        return TorchSemantics(None)
    init = distribution.locate_file("torch/accelerator/__init__.py")
    return TorchSemantics(parse_version(distribution.version), _exported_names(str(init)))


def _exported_names(path: str) -> frozenset[str] | None:
    """The names a module's literal `__all__` lists, read without importing it (None: no such
    file or no literal `__all__`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            try:
                return frozenset(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None
