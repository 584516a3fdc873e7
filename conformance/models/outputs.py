"""What a model's forward is judged on, shared by the Transformers and the Diffusers zoo."""

from __future__ import annotations


def forward_outputs(output):
    """What a forward is judged on: the logits where the head has them, else every tensor the
    output carries (hidden states, boxes, depth, feature maps, waveforms), caches left out."""
    import torch

    logits = getattr(output, "logits", None)
    if isinstance(logits, torch.Tensor):
        return logits
    if isinstance(output, torch.Tensor):
        return output
    items = output.items() if hasattr(output, "items") else enumerate(output)
    return {str(key): value for key, value in items if isinstance(value, torch.Tensor)
            or (isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value))}
