"""Per-class input rules for image DiTs and ControlNets, as data (`rules_video.py` holds the video
transformers' and world models', `rules_codecs.py` the codecs'; `inputs.py` looks them up).

Some forwards take a structure only their pipeline knows how to make: index tensors, rotary
positions computed outside the model, an audio stream beside the video, the shapes of packed
images. For those classes an entry here builds the inputs the pipeline would hand the model,
from the tiny model's config and `Geometry`, at the shapes the class documents. Each entry names
the pipeline (or the Diffusers test) whose shapes it follows. Inputs an entry does not name are
made by the general rules of `rules.py`; an entry's value `SKIPPED` leaves an optional input to
its default (the pipeline does not pass it).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from conformance.models.diffusers.pipeline_inputs import Context, text_states
from conformance.models.diffusers.rules import SKIPPED


def _qwen_image21(c: Context) -> dict[str, Any]:
    """QwenImage21Pipeline (text to image): packed latent tokens (B, h x w, C) of one target image,
    `img_shapes` [[(1, h, w)]] per sample, and the VLM sequence mask `img_mask` (text slots, then one
    image slot per 2x2 latent tokens, True); the text states cover the text slots."""
    import torch

    g = c.g
    h = w = max(2, g.side // 2)  # even: each image slot is a 2x2 group of tokens
    slots = h * w // 4
    img_mask = torch.zeros(g.batch, g.text_length + slots, dtype=torch.bool)
    img_mask[:, g.text_length:] = True
    return {"hidden_states": c.randn("hidden_states", g.batch, h * w, g.channels),
            "img_shapes": [[(1, h, w)]] * g.batch, "img_mask": img_mask,
            "encoder_hidden_states_mask": torch.ones(g.batch, g.text_length, dtype=torch.bool)}


def _control_image(c: Context, name: str, channels: int, stages: Any):
    """An image-space conditioning at the size the ControlNet's conditioning embedding brings down to
    the latent side (one halving per stage after the first)."""
    factor = 2 ** (len(stages) - 1) if stages else 1
    return c.randn(name, c.g.batch, channels, c.g.side * factor, c.g.side * factor)


def _controlnet_xs(c: Context) -> dict[str, Any]:
    """StableDiffusionControlNetXSPipeline: the UNet's 4-channel latents (the class hard-codes them; its
    config names no input width) and the control image, `ctrl_conditioning_channels` wide."""
    g, config = c.g, c.config
    return {"sample": c.randn("sample", g.batch, 4, g.side, g.side),
            "controlnet_cond": _control_image(c, "controlnet_cond", config["ctrl_conditioning_channels"],
                                              config["ctrl_conditioning_embedding_out_channels"])}


def _controlnet_union(c: Context) -> dict[str, Any]:
    """StableDiffusionXLControlNetUnionPipeline with one control: a list of control images, the control
    types used as a 0/1 row per sample (`num_control_type` wide), their indices and one scale each."""
    import torch

    g, config = c.g, c.config
    control_type = torch.zeros(g.batch, config["num_control_type"])
    control_type[:, 0] = 1
    image = _control_image(c, "controlnet_cond", config["conditioning_channels"],
                           config["conditioning_embedding_out_channels"])
    return {"controlnet_cond": [image], "control_type": control_type, "control_type_idx": [0],
            "conditioning_scale": [1.0]}


def _hidream(c: Context) -> dict[str, Any]:
    """HiDreamImagePipeline (square images): latents (B, C, H, W), no image ids or sizes (the model makes
    them), the pooled CLIP states (`text_emb_dim`), the Llama-3.1 states of every layer stacked (layers, B, T, W) of which `llama_layers` are read."""
    g, config = c.g, c.config
    layers = max(config["llama_layers"]) + 1
    return {"hidden_states": c.randn("hidden_states", g.batch, g.channels, g.side, g.side),
            "img_ids": SKIPPED, "img_sizes": SKIPPED,
            "encoder_hidden_states_llama3": c.randn("llama3", layers, g.batch, g.text_length,
                                                    config["caption_channels"][0]),
            "encoder_hidden_states_t5": text_states(c, "t5", width=config["caption_channels"][-1]),
            "pooled_embeds": c.randn("pooled_embeds", g.batch, config["text_emb_dim"])}  # CLIP-L and G pooled


def _omnigen(c: Context) -> dict[str, Any]:
    """OmniGenPipeline with one input image per sample: prompt token ids whose placeholder span the image's
    patch tokens replace (`input_image_sizes`: sample -> [[start, end]]), the input-image latents, then a
    (B, L, L) attention mask and position ids over the joint sequence (condition, time token, output)."""
    import torch

    g, config = c.g, c.config
    tokens = (g.side // config["patch_size"]) ** 2
    start = 2
    length = start + tokens + 2
    joint = length + 1 + tokens
    return {"hidden_states": c.randn("hidden_states", g.batch, g.channels, g.side, g.side),
            "input_ids": c.randint("input_ids", config["vocab_size"] - 1, g.batch, length),
            "input_img_latents": [c.randn(f"image{i}", 1, g.channels, g.side, g.side) for i in range(g.batch)],
            "input_image_sizes": {i: [[start, start + tokens]] for i in range(g.batch)},
            "attention_mask": torch.ones(g.batch, joint, joint),
            "position_ids": torch.arange(joint).expand(g.batch, joint)}


def _bria_fibo(c: Context) -> dict[str, Any]:
    """BriaFiboPipeline: the text encoder's hidden states of one layer per transformer block (double and
    single), each (B, T, `text_encoder_dim`), which the blocks take in turn."""
    config = c.config
    blocks = config["num_layers"] + config["num_single_layers"]
    return {"text_encoder_layers": [text_states(c, f"text_encoder_layer{i}", width=config["text_encoder_dim"])
                                    for i in range(blocks)]}


def _bria_fibo2(c: Context) -> dict[str, Any]:
    """BriaFibo2Pipeline: text features as bundles (B, 1 + len(injection_layer_ids), T, `cap_feat_dim`), the
    Perceiver's bundle first, then one per injection block (the forward's docstring)."""
    g, config = c.g, c.config
    bundles = 1 + len(config["injection_layer_ids"])
    return {"encoder_hidden_states": c.randn("encoder_hidden_states", g.batch, bundles, g.text_length,
                                             config["cap_feat_dim"])}


def _lumina_next(c: Context) -> dict[str, Any]:
    """LuminaPipeline: the 2-D rotary table the pipeline computes with Diffusers'
    `get_2d_rotary_pos_embed_lumina` at the model's head width (the pipeline sizes it 384 x 384; the model
    reads the corner its token grid covers, so one latent side each way is enough), a text mask, and the
    attention kwargs the pipeline always passes (a dict; `{}` without proportional attention)."""
    import torch
    from diffusers.models.embeddings import get_2d_rotary_pos_embed_lumina

    g = c.g
    return {"image_rotary_emb": get_2d_rotary_pos_embed_lumina(c.model.head_dim, g.side, g.side),
            "encoder_mask": torch.ones(g.batch, g.text_length, dtype=torch.long), "cross_attention_kwargs": {}}


def _grid_ids(h: int, w: int):
    """(h x w, 3) rotary coordinates (0, row, column) of a latent token grid."""
    import torch

    rows = torch.arange(h).repeat_interleave(w)
    cols = torch.arange(w).repeat(h)
    return torch.stack([torch.zeros_like(rows), rows, cols], dim=1)


def _ideogram4(c: Context) -> dict[str, Any]:
    """Ideogram4Pipeline: one packed sequence per sample, text tokens then image tokens (length L), with
    the image tokens (B, L, in_channels) and the text features (B, L, `llm_features_dim`) each masked
    by a per-token role (`indicator`: 3 text, 2 image), one segment id for the sample, and 3-axis
    positions: (i, i, i) for text token i, (0, row, column) offset by 65536 for image tokens."""
    import torch

    g, config = c.g, c.config
    h = w = g.side // 2
    text, image = g.text_length, h * w
    length = text + image
    position_ids = torch.zeros(length, 3, dtype=torch.long)
    position_ids[:text] = torch.arange(text)[:, None]
    position_ids[text:] = _grid_ids(h, w) + 65536  # the pipeline keeps image positions clear of text ones
    indicator = torch.full((length,), 2, dtype=torch.long)
    indicator[:text] = 3
    return {"hidden_states": c.randn("hidden_states", g.batch, length, config["in_channels"]),
            "encoder_hidden_states": text_states(c, "encoder_hidden_states", width=config["llm_features_dim"],
                                           length=length),
            "position_ids": position_ids.expand(g.batch, length, 3), "indicator": indicator.expand(g.batch, length),
            "segment_ids": torch.ones(g.batch, length, dtype=torch.long)}


def _krea2(c: Context) -> dict[str, Any]:
    """Krea2Pipeline: packed image tokens (B, h x w, in_channels), text states tapped from several encoder
    layers (B, T, `num_text_layers`, `text_hidden_dim`), and the rotary coordinates of the joint sequence
    (T + h x w, 3): text rows zero, image rows (0, row, column)."""
    import torch

    g, config = c.g, c.config
    h = w = g.side // 2
    return {"hidden_states": c.randn("hidden_states", g.batch, h * w, config["in_channels"]),
            "encoder_hidden_states": c.randn("encoder_hidden_states", g.batch, g.text_length,
                                             config["num_text_layers"], config["text_hidden_dim"]),
            "position_ids": torch.cat([torch.zeros(g.text_length, 3), _grid_ids(h, w).float()])}


def _glm_image(c: Context) -> dict[str, Any]:
    """GlmImagePipeline: the autoregressive model's prior tokens, one VQ code per latent patch
    (B, h x w) below `prior_vq_quantizer_codebook_size`, and which of them to drop (none, conditional
    branch)."""
    import torch

    g, config = c.g, c.config
    patches = (g.side // config["patch_size"]) ** 2
    ids = c.randint("prior_token_id", config["prior_vq_quantizer_codebook_size"], g.batch, patches)
    return {"prior_token_id": ids, "prior_token_drop": torch.zeros_like(ids, dtype=torch.bool)}


def _uvit2d(c: Context) -> dict[str, Any]:
    """AmusedPipeline: the masked VQ image tokens (B, H, W) below `codebook_size` (the mask token is the
    last code), the pooled CLIP text state (`cond_embed_dim`), and the five micro-conditions (original
    width and height, crop top and left, aesthetic score), which the model embeds one by one."""
    import torch

    g, config = c.g, c.config
    micro = torch.tensor([[g.side * 8.0, g.side * 8.0, 0.0, 0.0, 6.0]] * g.batch)
    codes = min(config["codebook_size"], config["vocab_size"])  # the token table is capped when tiny
    return {"input_ids": c.randint("input_ids", codes, g.batch, g.side, g.side),
            "pooled_text_emb": c.randn("pooled_text_emb", g.batch, config["cond_embed_dim"]),
            "micro_conds": micro}


def _unidiffuser(c: Context) -> dict[str, Any]:
    """UniDiffuserPipeline (joint mode): VAE latents, the CLIP image embedding as one token
    (B, 1, `clip_img_dim`), the text prompt states at their learned length (B, `num_text_tokens`,
    `text_dim`), one timestep per modality; the pipeline passes no cross-attention states."""
    g, config = c.g, c.config
    return {"image_embeds": c.randn("image_embeds", g.batch, 1, config["clip_img_dim"]),
            "prompt_embeds": text_states(c, "prompt_embeds", width=config["text_dim"], length=config["num_text_tokens"]),
            "encoder_hidden_states": SKIPPED}


def _z_image_controlnet(c: Context) -> dict[str, Any]:
    """ZImageControlNetPipeline: per-sample lists, as the Z-Image transformer takes them: latents
    (C, 1, H, W), caption features (T, width of the shared caption embedder) and the control latents
    (`control_in_dim`, 1, H, W)."""
    import torch

    g, config = c.g, c.config
    caption_width = next(m for m in c.model.cap_embedder.modules() if isinstance(m, torch.nn.Linear)).in_features
    channels = c.model.all_x_embedder[next(iter(c.model.all_x_embedder))].in_features // (
        config["all_patch_size"][0] ** 2 * config["all_f_patch_size"][0])
    return {"x": [c.randn(f"x{i}", channels, 1, g.side, g.side) for i in range(g.batch)],
            "cap_feats": [c.randn(f"cap{i}", g.text_length, caption_width) for i in range(g.batch)],
            "control_context": [c.randn(f"control{i}", config["control_in_dim"], 1, g.side, g.side)
                                for i in range(g.batch)]}


CLASS_INPUTS: dict[str, Callable[[Context], dict[str, Any]]] = {
    "QwenImage21Transformer2DModel": _qwen_image21,
    "UNetControlNetXSModel": _controlnet_xs,
    "ControlNetUnionModel": _controlnet_union,
    "HiDreamImageTransformer2DModel": _hidream,
    "OmniGenTransformer2DModel": _omnigen,
    "BriaFiboTransformer2DModel": _bria_fibo,
    "BriaFibo2Transformer2DModel": _bria_fibo2,
    "LuminaNextDiT2DModel": _lumina_next,
    "Ideogram4Transformer2DModel": _ideogram4,
    "Krea2Transformer2DModel": _krea2,
    "GlmImageTransformer2DModel": _glm_image,
    "UVit2DModel": _uvit2d,
    "UniDiffuserModel": _unidiffuser,
    "ZImageControlNetModel": _z_image_controlnet,
}
