"""Per-class input rules for video transformers and world models (see `rules_transformers.py`): the
structures only their pipelines make (per-frame prompt states, packed video and audio streams,
rotary positions, frame indices), at the shapes the pipeline hands the model.
"""

from __future__ import annotations

from typing import Any, Callable

from conformance.models.diffusers.rules import SKIPPED
from conformance.models.diffusers.pipeline_inputs import Context, text_states


def _temporal_per_frame(c: Context) -> dict[str, Any]:
    """TransformerTemporalModel (UNet3DConditionModel's `transformer_in`): frames folded into the
    batch, (batch x frames, C, H, W), with `num_frames`; the UNet passes no text states."""
    g = c.g
    return {"hidden_states": c.randn("hidden_states", g.batch * g.frames, g.channels, g.side, g.side),
            "num_frames": g.frames, "encoder_hidden_states": SKIPPED}


def _animatediff_unet(c: Context) -> dict[str, Any]:
    """UNetMotionModel in AnimateDiffPipeline: the prompt states are repeated per frame
    (`prompt_embeds.repeat_interleave(num_frames)`), since the spatial blocks fold frames into the batch."""
    return {"encoder_hidden_states": text_states(c, "encoder_hidden_states", c.g.batch * c.g.frames)}


def _sparse_controlnet(c: Context) -> dict[str, Any]:
    """SparseControlNetModel in AnimateDiffSparseControlNetPipeline: conditioning frames (B, C, F, H, W)
    zero except at the conditioned frames, a mask (B, 1, F, H, W) marking them, prompt states per frame.
    The simplified condition embedding takes latents (latent side); the full one takes images."""
    import torch

    g, config = c.g, c.config
    factor = 1 if config.get("use_simplified_condition_embedding") else \
        2 ** (len(config.get("conditioning_embedding_out_channels") or [0]) - 1)
    side = g.side * factor
    mask = torch.zeros(g.batch, 1, g.frames, side, side)
    mask[:, :, 0] = 1  # the first frame is conditioned
    frames = c.randn("controlnet_cond", g.batch, config["conditioning_channels"], g.frames, side, side) * mask
    return {"controlnet_cond": frames, "conditioning_mask": mask,
            "encoder_hidden_states": text_states(c, "encoder_hidden_states", g.batch * g.frames)}


def _hunyuan_video15(c: Context) -> dict[str, Any]:
    """HunyuanVideo15Pipeline: the MLLM states and mask, the ByT5 glyph states (`text_embed_2_dim`) and
    mask, and the SigLIP image states (`image_embed_dim`; zeros for text-to-video)."""
    import torch

    g, config = c.g, c.config
    ones = torch.ones(g.batch, g.text_length, dtype=torch.long)
    return {"encoder_hidden_states": text_states(c, "encoder_hidden_states", width=config["text_embed_dim"]),
            "encoder_attention_mask": ones,
            "encoder_hidden_states_2": text_states(c, "encoder_hidden_states_2", width=config["text_embed_2_dim"]),
            "encoder_attention_mask_2": ones,
            "image_embeds": text_states(c, "image_embeds", width=config["image_embed_dim"])}


def _latent_video(c: Context, name: str, channels: int, frames: int | None = None):
    g = c.g
    return c.randn(name, g.batch, channels, frames or g.frames, g.side, g.side)


def _wan_vace(c: Context) -> dict[str, Any]:
    """WanVACEPipeline: the VACE context (masked video latents and mask, `vace_in_channels`) on the
    latent grid of the noisy video."""
    return {"control_hidden_states": _latent_video(c, "control_hidden_states", c.config["vace_in_channels"])}


def _wan_animate(c: Context) -> dict[str, Any]:
    """WanAnimatePipeline: noisy latents (B, 2C + 4, T + 1, H, W) (reference frame first), pose latents
    (B, C, T, H, W), and the face video in pixels (B, 3, S, size, size), `motion_encoder_size` square."""
    g, config = c.g, c.config
    frames = g.frames + 1
    size = config["motion_encoder_size"]
    return {"hidden_states": _latent_video(c, "hidden_states", config["in_channels"], frames),
            "pose_hidden_states": _latent_video(c, "pose_hidden_states", config["latent_channels"]),
            "face_pixel_values": c.randn("face_pixel_values", g.batch, 3, g.frames, size, size)}


def _ltx_video(c: Context) -> dict[str, Any]:
    """LTXPipeline: latents packed into tokens (B, F x H x W, C) (patch 1), with the latent grid passed
    as `num_frames`, `height`, `width`."""
    g = c.g
    return {"hidden_states": c.randn("hidden_states", g.batch, g.frames * g.side * g.side, g.channels),
            "num_frames": g.frames, "height": g.side, "width": g.side}


def _kandinsky_video(c: Context) -> dict[str, Any]:
    """Kandinsky 5 / 6 / 6-SR pipelines: channels-last video latents (B, F, H, W, C), where a model with
    visual conditioning takes the noisy latent, the conditioning latent and a mask stacked on channels
    (2 x `in_visual_dim` + 1; always so for the super-resolution model). Kandinsky 5 also takes the rotary
    positions its pipeline computes: an arange per patched axis, and one over the text tokens."""
    import torch

    g, config = c.g, c.config
    cond = config.get("visual_cond", True)  # the SR model's constructor has no switch: always conditioned
    channels = 2 * config["in_visual_dim"] + 1 if cond else config["in_visual_dim"]
    inputs: dict[str, Any] = {"hidden_states": c.randn("hidden_states", g.batch, g.frames, g.side, g.side, channels)}
    if "visual_rope_pos" in c.params:
        patch = config["patch_size"]
        inputs["visual_rope_pos"] = [torch.arange(g.frames // patch[0]), torch.arange(g.side // patch[1]),
                                     torch.arange(g.side // patch[2])]
        inputs["text_rope_pos"] = torch.arange(g.text_length)
    return inputs


def _anyflow(c: Context) -> dict[str, Any]:
    """AnyFlow pipelines: latents frames-first (B, F, C, H, W), with the current and the target timestep
    per frame (B, F) (`t` and `r` of the mean-velocity step). The frame-autoregressive (FAR) model takes
    the frame count of each chunk; this is its first chunk, all frames, with no KV cache yet."""
    import torch

    g = c.g
    timestep = torch.full((g.batch, g.frames), 750.0)
    inputs = {"hidden_states": c.randn("hidden_states", g.batch, g.frames, g.channels, g.side, g.side),
              "timestep": timestep, "r_timestep": timestep * 2 / 3}
    if "chunk_partition" in c.params:
        inputs["chunk_partition"] = [g.frames]
    return inputs


def _joyimage_edit(c: Context) -> dict[str, Any]:
    """JoyImageEditPlusPipeline with the target image alone: latents already cut into patches
    (B, N, C, pt, ph, pw), N = t x h x w patches, and `shape_list` giving each sample's components as
    (t, h, w) in patches (target first, then any reference images)."""
    g, config = c.g, c.config
    pt, ph, pw = config["patch_size"]
    h, w = g.side // ph, g.side // pw
    return {"hidden_states": c.randn("hidden_states", g.batch, h * w, g.channels, pt, ph, pw),
            "shape_list": [[(1, h, w)] for _ in range(g.batch)]}


def _framepack(c: Context) -> dict[str, Any]:
    """HunyuanVideoFramepackPipeline (vanilla sampling): the frame indices of the window being denoised,
    the SigLIP image states (B, N, `image_proj_dim`), and the clean context it packs in front: the
    image latent plus the 1x history (2 frames), the 2x history (2 frames) and the 4x history (4 frames),
    each with its frame indices (the pipeline's history sizes, scaled down), when the model has the
    clean-latent embedder (`has_clean_x_embedder`) that takes them."""
    import torch

    g, config = c.g, c.config
    history = {"latents_clean": 2, "latents_history_2x": 2, "latents_history_4x": 4}
    inputs: dict[str, Any] = {"indices_latents": torch.arange(g.frames),
                              "image_embeds": text_states(c, "image_embeds", width=config["image_proj_dim"])}
    start = g.frames
    for name, frames in history.items() if config.get("has_clean_x_embedder") else ():
        inputs[name] = _latent_video(c, name, g.channels, frames)
        inputs["indices_" + name] = torch.arange(start, start + frames)
        start += frames
    return inputs


def _ltx2_audio_video(c: Context) -> dict[str, Any]:
    """LTX2Pipeline: video latents packed into tokens (B, F x H x W, C) (patch 1) beside packed audio
    latents (B, A, `audio_in_channels`), each with its own connector text states (`caption_channels`,
    one mask for both), and the latent grid and audio length the model builds its coordinates from."""
    import torch

    g, config = c.g, c.config
    audio_frames = 2 * g.frames
    mask = torch.ones(g.batch, g.text_length, dtype=torch.long)
    return {"hidden_states": c.randn("hidden_states", g.batch, g.frames * g.side * g.side, config["in_channels"]),
            "audio_hidden_states": c.randn("audio_hidden_states", g.batch, audio_frames, config["audio_in_channels"]),
            "encoder_hidden_states": text_states(c, "encoder_hidden_states", width=config["caption_channels"]),
            "audio_encoder_hidden_states": text_states(c, "audio_encoder_hidden_states", width=config["caption_channels"]),
            "encoder_attention_mask": mask, "audio_encoder_attention_mask": mask,
            "num_frames": g.frames, "height": g.side, "width": g.side, "audio_num_frames": audio_frames,
            "fps": 24.0}


def _sana_wm_refiner(c: Context) -> dict[str, Any]:
    """SANA-WM's LTX-2 refiner pipeline, one block without the KV cache: packed video tokens, a timestep
    per token, and the video RoPE the pipeline gets from the model's own
    `build_rotary_emb_for_absolute_positions` for the block's frame positions."""
    import torch

    g, config = c.g, c.config
    frames, side = g.frames // config["patch_size_t"], g.side // config["patch_size"]
    tokens = frames * side * side
    rope = c.model.build_rotary_emb_for_absolute_positions(batch_size=g.batch, frame_positions=list(range(frames)),
                                                           height=g.side, width=g.side, device=torch.device("cpu"),
                                                           fps=24.0)
    return {"hidden_states": c.randn("hidden_states", g.batch, tokens, config["in_channels"]),
            "encoder_hidden_states": text_states(c, "encoder_hidden_states", width=config["caption_channels"]),
            "timestep": torch.full((g.batch, tokens), 500.0), "video_rotary_emb": rope}


def _minimax_h3(c: Context) -> dict[str, Any]:
    """MiniMax-H3 (its forward's docstring): one packed sequence of text rows, then patchified video rows
    (F x h x w, `in_channels` x prod(patch_size) wide), then audio rows; the distinct timesteps in
    [0, 1] and each row's index into them (video and text at the first, audio at the second), each row's
    modality tag (0 video, 1 text, 2 audio), its (t, h, w) rotary coordinates, and where each modality's
    rows sit."""
    import math

    import torch

    g, config = c.g, c.config
    pt, ph, pw = config["patch_size"]
    frames, h, w = g.frames // pt, g.side // ph, g.side // pw
    text, video, audio = g.text_length, frames * h * w, 2 * g.frames
    length = text + video + audio
    tags = torch.cat([torch.ones(text), torch.zeros(video), torch.full((audio,), 2.0)]).long()
    grid = torch.stack(torch.meshgrid(torch.arange(frames), torch.arange(h), torch.arange(w), indexing="ij"), -1)
    position_ids = torch.cat([torch.arange(text)[:, None].expand(text, 3), grid.reshape(-1, 3),
                              torch.arange(audio)[:, None].expand(audio, 3)])
    return {"hidden_states": c.randn("hidden_states", g.batch, video, config["in_channels"] * math.prod(config["patch_size"])),
            "audio_hidden_states": c.randn("audio_hidden_states", g.batch, audio, config["audio_in_channels"]),
            "encoder_hidden_states": text_states(c, "encoder_hidden_states", width=config["text_dim"]),
            "timestep": torch.tensor([0.5, 0.25]), "timestep_indices": (tags == 2).long(), "token_tags": tags,
            "position_ids": position_ids, "text_indices": torch.arange(text),
            "video_indices": torch.arange(text, text + video), "audio_indices": torch.arange(text + video, length)}


VIDEO_INPUTS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "TransformerTemporalModel": _temporal_per_frame,
    "UNetMotionModel": _animatediff_unet,
    "SparseControlNetModel": _sparse_controlnet,
    "HunyuanVideo15Transformer3DModel": _hunyuan_video15,
    "WanVACETransformer3DModel": _wan_vace,
    "WanAnimateTransformer3DModel": _wan_animate,
    "LTXVideoTransformer3DModel": _ltx_video,
    "LTX2VideoTransformer3DModel": _ltx2_audio_video,
    "MiniMaxH3Transformer3DModel": _minimax_h3,
    "SanaWMLTX2RefinerTransformer3DModel": _sana_wm_refiner,
    "Kandinsky5Transformer3DModel": _kandinsky_video,
    "AnyFlowTransformer3DModel": _anyflow,
    "JoyImageEditPlusTransformer3DModel": _joyimage_edit,
    "HunyuanVideoFramepackTransformer3DModel": _framepack,
    "AnyFlowFARTransformer3DModel": _anyflow,
    "Kandinsky6Transformer3DModel": _kandinsky_video,
    "Kandinsky6SRTransformer3DModel": _kandinsky_video,
}
