"""How a model item's device result is judged against the CPU's: logits and gradients by the
numerics rule (every gradient by name, the worst reported), generated tokens exactly."""

from __future__ import annotations

from collections.abc import Callable

from conformance.models.passes import SURROGATE_NOTE
from conformance.numerics import Comparison, compare


def judge_logits(dev, ref, hi, composite=None) -> Comparison:
    c = compare(dev, ref, hi, composite=composite)
    if not c.ok:
        c.reason, c.where = f"logits: {c.reason}", "logits"
    return c


def judge_grads(dev, ref, hi, composite=None) -> Comparison:
    """Every gradient by name; the worst (first failing, else the highest error ratio) is reported."""
    missing = sorted(set(ref["grads"]) ^ set(dev["grads"]))
    if missing:
        reason = f"gradients present on one side only: {', '.join(missing[:5])}"
        if not set(missing) & set(ref["grads"]):
            reason += (" (on the device only: parameters the CPU's model shares, tied weights, came apart on the device; "
                       "Module.to() keeps them tied only if the backend answers aten::_has_compatible_shallow_copy_type "
                       "true for a CPU and a device tensor)")
        return Comparison(False, "structure", reason, where=missing[0], samples=len(ref["grads"]), passed=0)
    passed, worst_name, worst = 0, None, None
    for name, ref_grad in ref["grads"].items():
        c = compare(dev["grads"][name], ref_grad, hi["grads"].get(name) if hi else None,
                    composite=composite["grads"].get(name) if composite else None)
        passed += int(c.ok)
        if worst is None or (worst.ok and not c.ok) or (worst.ok == c.ok and (c.err_ratio or 0) > (worst.err_ratio or 0)):
            worst_name, worst = name, c
    total = len(ref["grads"])
    if worst is None:
        return Comparison(False, "structure", "the loss produced no parameter gradients on CPU", samples=0, passed=0)
    worst.samples, worst.passed = total, passed
    if ref.get("surrogate"):
        worst.note = "; ".join(n for n in (SURROGATE_NOTE, worst.note) if n)
    if not worst.ok:
        worst.reason = f"{total - passed}/{total} gradients differ; worst {worst_name}: {worst.reason}"
        worst.where = f"grad {worst_name}"
    return worst


def judge_tokens(dev, ref, hi=None) -> Comparison:
    import torch

    if dev.shape != ref.shape:
        return Comparison(False, "structure", f"generated shape {tuple(dev.shape)} differs from CPU's {tuple(ref.shape)}",
                          where="shape")
    if torch.equal(dev, ref):
        return Comparison(True, "exact")
    row, col = (int(i) for i in (dev != ref).nonzero()[0])
    return Comparison(False, "exact", f"generated tokens differ first at position {col} of sequence {row}: "
                      f"device {int(dev[row, col])}, CPU {int(ref[row, col])}", where=f"position {col}")


_JUDGES: dict[str, Callable] = {"forward": judge_logits, "backward": judge_grads, "generate": judge_tokens,
                                 "step": judge_logits}
