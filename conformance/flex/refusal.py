"""A backend that refuses flex attention, told apart from one that fails at it.

PyTorch's own device check (`_validate_device` in torch/nn/attention/flex_attention.py) and
its per-feature refusals raise with these words; wherever flex attention is run (the flex
suite, a model built with attn_implementation="flex_attention") that is UNSUPPORTED with
PyTorch's reason and the device type, never ERROR.
"""

from __future__ import annotations

from conformance.outcome import Missing, describe_exception

FORWARD_OP = "higher_order.flex_attention"
_REFUSALS = ("FlexAttention is only supported on", "FlexAttention does not support")


def refusal(exc: BaseException, device_type: str) -> Missing | None:
    """UNSUPPORTED with PyTorch's words where `exc` is its refusal of flex attention, else None."""
    text = describe_exception(exc)
    if any(words in text for words in _REFUSALS):
        return Missing(f"{text} (device type {device_type})")
    return None
