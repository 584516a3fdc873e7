"""The input rules, as data: a forward parameter's name -> the values it may take, in order.

Each rule gets the model, its config, its `Geometry`, its modality, a seed, the candidate text
widths and the whole signature (a parameter's shape may depend on which others are there:
packed patch tokens come with rotary ids). A rule returns a list of options (tried in order by
`inputs.choose`) or None when it has no say.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from conformance.models.diffusers.geometry import POOLED_WIDTH_KEYS, SAMPLE_CHANNEL_KEYS, Geometry, first_int

# Optional parameters worth filling: without them a model skips its conditioning path.
OPTIONAL_WANTED = frozenset({
    "encoder_hidden_states", "pooled_projections", "timestep", "timesteps", "img_ids", "txt_ids", "guidance",
    "added_cond_kwargs", "encoder_hidden_states_t5", "text_embedding_mask", "text_embedding_mask_t5",
    "image_meta_size", "style", "img_shapes", "encoder_hidden_states_mask", "global_hidden_states",
    "class_labels", "pooled_embeds", "encoder_hidden_states_llama3", "img_sizes", "controlnet_mode",
    "conditioning_scale", "fps", "controlnet_cond", "hidden_states_1", "mask", "text_hidden_states", "start_seconds", "end_seconds",
})
MAIN_SAMPLE = ("sample", "hidden_states", "x", "latents", "z", "h", "mel", "audio", "audio_data", "waveform",
               "inputs_embeds", "z_latent", "input",
               "latent_image_embeds", "controls_latents")
LIKE_SAMPLE = re.compile(r"^(\w+_)?latents?(_\w+)?$|^latent_cond$")
TIMESTEP = re.compile(r"^(timesteps?|t|timestep_r|r_timestep|timestep_ratio|sigma|decoder_noise_time|"
                      r"\w+_time|timestep_img|timestep_text|clean_timestep|target_timestep|vision_timesteps)$")
# a text mask, also one per text encoder (`text_embedding_mask_t5`, `encoder_attention_mask_2`)
MASK = re.compile(r"(^|_)(mask|masks)(_t5|_\d)?$|^encoder_mask$")
TEXT_STATES = re.compile(r"^(encoder_hidden_states(_(?!\w*mask)\w+)?|text_hidden_states|cap_feats|text_bth|prompt_embeds|"
                         r"context|clip_text|hidden_states_1|source_hidden_states|lyric_hidden_states)$")
POOLED = re.compile(r"^(pooled_projections|pooled_embeds|pooled_text_emb|clip_text_pooled|global_hidden_states|"
                    r"image_embeds|image_embeddings|proj_embedding|clip_img)$")


class _Skipped:
    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = _Skipped()  # an optional input left to its default


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


def _randn(shape: tuple[int, ...], seed: int):
    import torch

    return torch.randn(shape, generator=_generator(seed))


def _name_seed(seed: int, name: str) -> int:
    return seed * 1000 + sum(map(ord, name)) % 997


def sample_layouts(name: str, config: dict[str, Any], g: Geometry, modality: str, seed: int,
                   params: dict[str, Any]) -> list[Any]:
    """The main sample in the modality's rank, then as packed patch tokens (Flux-style DiTs)."""
    s = _name_seed(seed, name)
    c, side = g.channels, g.side
    grid = {"image": (g.batch, c, side, side), "video": (g.batch, c, g.frames, side, side),
            "audio": (g.batch, c, side * side)}
    frames = max(1, g.frames // g.temporal_patch) if modality == "video" else 1
    tokens = (g.batch, frames * g.tokens, c)
    order = [grid[modality], tokens] if "img_ids" not in params else [tokens, grid[modality]]
    if modality == "video":
        order.insert(1, (g.batch, g.frames, c, side, side))  # frames before channels (CogVideoX)
    else:
        order.append(grid["video"])
    if modality == "image":  # an image codec built on a causal video one takes a single frame (Qwen-Image)
        order.append((g.batch, c, 1, side, side))
    if modality != "image":
        order.append(grid["image"])
    if not any(key in config for key in SAMPLE_CHANNEL_KEYS):  # features, not latents: (B, W), (B, T, W)
        width = g.text_width or first_int(config, ("hidden_size", "dim", "embed_dim"), 32)
        order = [(g.batch, width), (g.batch, g.text_length, width)] + order
    return [_randn(shape, s) for shape in order]


def _timesteps(g: Geometry, modality: str):
    """One timestep per sample (fractions, then integer steps), a scalar; a video model may take
    one per frame, (B, F) or (B, 1, F) (AnyFlow, SANA-WM)."""
    import torch

    options = [torch.tensor([0.25, 0.75])[: g.batch], torch.tensor([250, 750])[: g.batch], torch.tensor(0.5)]
    if modality == "video":
        per_frame = torch.linspace(0.2, 0.8, g.batch * g.frames).reshape(g.batch, g.frames)
        options += [per_frame, per_frame.unsqueeze(1)]
    return options


def _ids(n: int, axes: int, grid: int | None = None):
    """Rotary position ids: (n, axes), one row per token; image ids count rows and columns."""
    import torch

    ids = torch.zeros(n, axes)
    if grid:
        rows = torch.arange(n) // grid
        cols = torch.arange(n) % grid
        ids[:, -2], ids[:, -1] = rows.float(), cols.float()
    return ids


def _rope_axes(config: dict[str, Any]) -> int:
    for key in ("axes_dims_rope", "axes_dim", "axes_dims", "rope_axes_dim"):
        value = config.get(key)
        if isinstance(value, (list, tuple)) and value:
            return len(value)
    return 3


def build_choices(name: str, model: Any, config: dict[str, Any], g: Geometry, modality: str, seed: int,
                  widths: list[int], params: dict[str, Any]) -> list[Any] | None:
    import torch

    s = _name_seed(seed, name)
    if name in MAIN_SAMPLE:
        return sample_layouts(name, config, g, modality, seed, params)
    if name == "controlnet_cond" or name == "control_context" or name == "controls_latents":
        factor = 2 ** (len(config["conditioning_embedding_out_channels"]) - 1) \
            if config.get("conditioning_embedding_out_channels") else 1
        ch = first_int(config, ("conditioning_channels",), g.channels)
        image = _randn((g.batch, ch, g.side * factor, g.side * factor), s)
        latent = sample_layouts(name, config, g, modality, seed, params)
        options = [image] + latent if factor > 1 else latent + [image]
        return [[o, o] for o in options] if _is_multi(model) else options
    if LIKE_SAMPLE.match(name):  # image / context / control latents beside the noisy ones
        return sample_layouts(name, config, g, modality, seed, params)
    if name == "xs" and hasattr(model, "adapters"):  # every adapter's image, stacked on channels
        parts = [a.config.get("in_channels", 3) for a in model.adapters]
        factor = model.adapters[0].config.get("downscale_factor", 8)
        return [_randn((g.batch, sum(parts), g.side * factor, g.side * factor), s)]
    if name == "condition_mask":
        return [torch.ones(g.batch, 1, g.frames, g.side, g.side), torch.ones(g.batch, 1, g.side, g.side)]
    if name == "controlnet_mode":  # a pipeline passes -1 per sample for each non-union ControlNet of several
        return [[torch.full((g.batch,), -1, dtype=torch.long)] * 2 if _is_multi(model) else None]
    if name in ("text_lens", "text_lengths"):
        return [torch.full((g.batch,), g.text_length, dtype=torch.long)]
    if name == "scale":
        return [2, 2.0]
    if name == "conditioning_scale":
        return [[1.0, 1.0] if _is_multi(model) else 1.0]
    if TIMESTEP.match(name):
        return _timesteps(g, modality)
    if name == "guidance":
        return [torch.full((g.batch,), 3.5)] if config.get("guidance_embeds", True) else [SKIPPED]
    if TEXT_STATES.match(name):
        width_key = name.removeprefix("encoder_hidden_states_")
        own_keys = (f"cross_attention_dim_{width_key}", f"text_embed_dim_{width_key}", f"text_embed_{width_key}_dim",
                    f"{width_key}_dim")
        own = first_int(config, own_keys)
        if own is None and params[name].default is not inspect.Parameter.empty \
                and any(key in config and config[key] is None for key in own_keys):
            return [SKIPPED]  # a second text encoder the config leaves out: the model has no projection for it
        return [_randn((g.batch, g.text_length, w), s) for w in ([own] if own else widths)]
    if POOLED.match(name):
        width = first_int(config, POOLED_WIDTH_KEYS) or widths[0]
        return [_randn((g.batch, width), s), _randn((g.batch, 1, width), s)]
    if name == "img_ids":
        return [_ids(g.tokens, _rope_axes(config), g.side // g.patch)]
    if name == "txt_ids":
        return [_ids(g.text_length, _rope_axes(config))]
    if MASK.search(name):
        return [torch.ones(g.batch, g.text_length, dtype=torch.long), torch.ones(g.batch, g.text_length, dtype=torch.bool)]
    if name == "added_cond_kwargs":
        return [_added_cond(config, g, s)]
    if name == "added_time_ids":
        n = 3
        return [torch.tensor([[6.0, 127.0, 0.02]] * g.batch)[:, :n]]
    if name == "class_labels":
        return [torch.tensor([1, 2])[: g.batch]] if config.get("num_class_embeds") or \
            config.get("num_embeds_ada_norm") or "DiT" in type(model).__name__ else [SKIPPED]
    if name in ("fps",):
        return [torch.tensor([8.0] * g.batch), 8]
    if name in ("num_frames", "video_length"):
        return [g.frames]
    if name in ("height", "width"):
        return [g.side]
    if name in ("img_shapes",):
        return [[[(1, g.side // 2, g.side // 2)]] * g.batch, [(1, g.side // 2, g.side // 2)] * g.batch]
    if name in ("original_size", "target_size", "crop_coords"):
        return [torch.tensor([[g.side * 8.0, g.side * 8.0]] * g.batch)]
    if name in ("input_ids", "decoder_input_tokens", "target_input_ids"):
        vocab = first_int(config, ("vocab_size", "codebook_size", "target_vocab_size"), 16)
        return [torch.randint(0, vocab, (g.batch, g.text_length), generator=_generator(s))]
    if name in ("image_meta_size",):
        return [torch.tensor([[g.side * 8.0] * 6] * g.batch)]
    if name == "style":
        return [torch.zeros(g.batch, dtype=torch.long)]
    return None


def _is_multi(model: Any) -> bool:
    return "Multi" in type(model).__name__


def _added_cond(config: dict[str, Any], g: Geometry, seed: int) -> dict[str, Any]:
    """SDXL's text embeds and six time ids, their widths adding up to the projection's input width;
    PixArt's resolution and aspect ratio."""
    import torch

    if config.get("addition_embed_type") == "text_time":
        time_width = config["addition_time_embed_dim"]
        total = config["projection_class_embeddings_input_dim"]
        ids = 6
        return {"text_embeds": _randn((g.batch, total - ids * time_width), seed),
                "time_ids": torch.tensor([[g.side * 8.0, g.side * 8.0, 0.0, 0.0, g.side * 8.0, g.side * 8.0]]
                                         * g.batch)}
    if config.get("addition_embed_type") == "text":
        return {}
    return {"resolution": torch.tensor([[g.side * 8.0, g.side * 8.0]] * g.batch),
            "aspect_ratio": torch.tensor([[1.0]] * g.batch)}
