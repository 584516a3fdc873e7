"""Run a device's recorded op sequence again on the CPU, in the same dtypes.

A backend without a fused kernel for an op runs its decomposition (PyTorch's
CompositeImplicitAutograd formula: `mish_backward` as `sigmoid`, `softplus`, `tanh`, `mul`),
and a Python op may choose another algorithm by device type (`linear_cross_entropy`
accumulates in the input dtype off CUDA and on the CPU). The recorder
(conformance/reference/oprecord.py, `keep_calls=True`) saw exactly the aten calls that reached the
device; replaying them here, one by one with the CPU's kernels, gives what a correct
backend running that same sequence computes: the second reference of the numerics rule
(DESIGN.md, rule 6). Faults of the backend under test do not travel: every primitive
runs on the CPU.

Tensors are followed by identity (`tensor_key`): a device tensor an earlier call made is
replaced by that call's CPU result; one no recorded call made (an input moved to the
device beforehand, a module's weight) is copied to the CPU as it is, provided no call
has written it since it was first read. Anything that cannot be followed (a random op whose
numbers did not come from the CPU, a tensor written in place after it was read, a call the CPU
refuses) makes the replay unavailable rather than wrong: `replay` returns None. Ops only
accelerators have kernels for (the fused RNN cells, integer histc, half-precision antialiased
resizing) run on the CPU by the stand-ins of conformance/reference/accelerator_kernels.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree as pytree

from conformance.reference.accelerator_kernels import run_on_cpu
from conformance.reference.oprecord import RecordedCall, tensor_key

# Ops whose results depend on a random stream the CPU does not share with the device.
_RANDOM_TAGS = ("nondeterministic_seeded",)


class ReplayUnavailable(Exception):
    """The recorded sequence cannot be replayed faithfully on the CPU."""


def replay(calls: list[RecordedCall], outputs: Any, device_type: str,
           to_cpu: Callable[[torch.Tensor], torch.Tensor] | None = None, draws_from_cpu: bool = False) -> Any | None:
    """`outputs` (a tree of the run's device tensors) as the CPU computes them by replaying
    `calls` in order; None when the replay is unavailable (see the module docstring).
    `draws_from_cpu`: the run drew its random numbers from the CPU's generator and moved them
    over (the models suite's RandomOnCpu), so a random call's device result holds the CPU's own
    numbers and the replay takes them as they are instead of giving up."""
    try:
        return _Replay(device_type, to_cpu or _copy_to_cpu, draws_from_cpu).run(calls, outputs)
    except Exception:  # a replay is a second opinion: when it cannot be had, the rule goes without
        return None


def _copy_to_cpu(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to("cpu")


class _Replay:
    def __init__(self, device_type: str, to_cpu: Callable[[torch.Tensor], torch.Tensor], draws_from_cpu: bool = False):
        self.device_type = device_type
        self.to_cpu = to_cpu
        self.draws_from_cpu = draws_from_cpu
        self.made: dict[int, Any] = {}  # tensor_key of a recorded output -> its CPU counterpart
        self.first_read: dict[int, int] = {}  # tensor_key of an outside tensor -> its version when first read

    def run(self, calls: list[RecordedCall], outputs: Any) -> Any:
        with torch.no_grad():
            for call in calls:
                self._call(call)
            return pytree.tree_map(self._resolve_output, outputs)

    def _call(self, call: RecordedCall) -> None:
        if any(tag.name in _RANDOM_TAGS for tag in getattr(call.func, "tags", ())):
            self._drawn(call)
            return
        for key, version in call.versions.items():
            if key not in self.made:
                self.first_read.setdefault(key, version)
        args, kwargs = pytree.tree_map(self._argument, (call.args, call.kwargs))
        try:
            out = run_on_cpu(call.func, args, kwargs)
        except Exception:
            # An exact (integer or bool) result the CPU has no kernel for and no stand-in covers:
            # the device's own values carry no rounding to weigh. A floating one cannot be stood
            # in for: no replay.
            if any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex())
                   for t in pytree.tree_leaves(call.out)):
                raise
            out = pytree.tree_map(lambda t: self.to_cpu(t) if isinstance(t, torch.Tensor) else t, call.out)
        recorded = pytree.tree_leaves(call.out)
        replayed = pytree.tree_leaves(out)
        if len(recorded) != len(replayed):
            raise ReplayUnavailable(f"{call.func} returned another structure on the CPU")
        for before, after in zip(recorded, replayed):
            if isinstance(before, torch.Tensor):
                self.made[tensor_key(before)] = after

    def _drawn(self, call: RecordedCall) -> None:
        """A random call: the numbers it drew, as the recorder copied them when the call returned,
        where those are the CPU's own (`draws_from_cpu`); else no replay."""
        if not self.draws_from_cpu or call.drawn is None:
            raise ReplayUnavailable(f"{call.func} draws random numbers")
        for made, drawn in zip(pytree.tree_leaves(call.out), pytree.tree_leaves(call.drawn)):
            if isinstance(made, torch.Tensor):
                self.made[tensor_key(made)] = drawn.to("cpu")

    def _argument(self, value: Any) -> Any:
        if isinstance(value, torch.device) and value.type == self.device_type:
            return torch.device("cpu")
        if not isinstance(value, torch.Tensor):
            return value
        key = tensor_key(value)
        if key in self.made:
            return self.made[key]
        if value.device.type != self.device_type:
            return value.detach()  # a CPU tensor of the run itself: the same values
        return self._outside(value)

    def _outside(self, value: torch.Tensor) -> torch.Tensor:
        """A device tensor no recorded call made: its value now, if nothing wrote it since."""
        key = tensor_key(value)
        if value._version != self.first_read.get(key, value._version):
            raise ReplayUnavailable("an input was written in place after it was read")
        copy = self.to_cpu(value)
        self.made[key] = copy
        return copy

    def _resolve_output(self, value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        key = tensor_key(value)
        if key in self.made:
            return self.made[key]
        if value.device.type == self.device_type:
            return self._outside(value)
        return value
