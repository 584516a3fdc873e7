"""Inputs of video trackers whose forward propagates objects through an inference session (SAM 2 /
SAM 3 video, EdgeTAM video): a session of the model's own session class holding a tiny random clip
and one object prompted by one point on its first frame.

A session is stateful (the forward caches features and stores each frame's outputs in it), so every
run gets a fresh one: `cast_inputs` remakes it from its frames and prompts on the run's device
and dtype (`remade`), never handing on what an earlier run stored.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from conformance.models.tokens import _generator

FRAMES = 2
SESSION = "inference_session"


def session_class(model: Any) -> type | None:
    """The class the forward's `inference_session` is annotated with, from the model's module."""
    param = inspect.signature(model.forward).parameters.get(SESSION)
    if param is None:
        return None
    annotation = param.annotation
    if isinstance(annotation, str):
        annotation = getattr(sys.modules[type(model).__module__], annotation.split("|")[0].strip(), None)
    return annotation if isinstance(annotation, type) else None


def session_inputs(model: Any, seed: int) -> dict[str, Any] | None:
    """{inference_session, frame_idx} for a tracker's forward, or None for another forward."""
    import torch

    from conformance.models.vision_features import image_size

    cls = session_class(model)
    if cls is None or not hasattr(cls, "add_point_inputs"):
        return None  # a session prompted otherwise (SAM 3 video's text prompts)
    channels, height, width = image_size(model.config)
    video = torch.randn((FRAMES, channels, height, width), generator=_generator(seed + 1))
    session = cls(video=video, video_height=height, video_width=width, dtype=torch.float32)
    # one object, one positive click at the frame's centre, in the model's input pixel coordinates
    session.add_point_inputs(session.obj_id_to_idx(1), 0, {"point_coords": torch.tensor([[[[width / 2, height / 2]]]]),
                                                           "point_labels": torch.ones((1, 1, 1), dtype=torch.int32)})
    session.obj_with_new_inputs = [1]
    return {SESSION: session, "frame_idx": 0}


def remade(session: Any, device: Any, dtype: Any) -> Any:
    """A fresh session like `session` (same frames and prompts) on `device` in `dtype`."""
    import torch

    frames = torch.stack([session.processed_frames[i] for i in sorted(session.processed_frames)])
    device = device or "cpu"
    fresh = type(session)(video=frames, video_height=session.video_height, video_width=session.video_width,
                          inference_device=device, inference_state_device=device, video_storage_device=device,
                          dtype=dtype or frames.dtype)
    for obj_idx, per_frame in session.point_inputs_per_obj.items():
        for frame_idx, points in per_frame.items():
            fresh.add_point_inputs(fresh.obj_id_to_idx(session.obj_idx_to_id(obj_idx)), frame_idx, points)
    fresh.obj_with_new_inputs = list(fresh.obj_ids)
    return fresh
