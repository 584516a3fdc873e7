"""Rule 6 of the numerics rule for the models suite (DESIGN.md): a correct backend that runs a
decomposition where the CPU has a fused kernel is not a MISMATCH.

A backend without a fused `silu_backward` runs PyTorch's composite formula (sigmoid, mul,
add); the CPU's kernel computes in float32 inside. Through a gradient that is a small
difference of large terms (DeepSeek-V4's hyper-connection scales) the composite's bfloat16
error can be ten times the CPU's, though every op the device ran is right. As in the OpInfo
suite (conformance/opinfo/composite.py), the device's own recorded op sequence, replayed on
the CPU in the item's dtype (conformance/reference/replay.py), is a second reference, and it counts
only if every primitive of the sequence, rerun on the device with its inputs and outputs
kept, passes on its own (conformance/reference/primitives.py): a fault in any of them still fails.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from conformance.numerics import Comparison


def against_composite(device_run: Any, ref_out: Any, hi_out: Any, failed: Comparison,
                      judge: Callable[..., Comparison]) -> Comparison:
    """`failed` judged once more with the replayed sequence as the second reference; `failed`
    itself where there is no replay, the replay does not pass either, or a primitive fails."""
    from conformance.reference.primitives import judge_primitives
    from conformance.reference.replay import replay

    device_type = device_run.ctx.device_type
    if not device_run.calls:  # none kept (too large to keep): no replay, since nothing was replayed
        return failed
    # The runner draws every random op on the CPU (randomness.RandomOnCpu): the device's draws
    # are the CPU's numbers, so the replay takes them (VibeVoice's diffusion head draws noise).
    second = replay(device_run.calls, device_run.device_output, device_type, draws_from_cpu=True)
    if second is None:
        return failed
    judged = judge(device_run.output, ref_out, hi_out, composite=second)
    if not judged.ok:
        return failed
    calls = device_run.snapshot_calls()
    if not calls:
        return failed
    primitives = judge_primitives(calls, device_type)
    if primitives.ok:
        return judged
    return dataclasses.replace(failed, rule=primitives.rule, reason=f"{failed.reason}; {primitives.reason}")
