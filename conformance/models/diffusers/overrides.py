"""Per-class fixes for the Diffusers tiny-config builder, as data.

The rules of `shrink.py` build most classes from their default config. Where they cannot, an
entry here names the class and the constructor arguments to apply after shrinking, or a `SKIP`
reason. Every entry says why it exists, so it can be dropped when Diffusers changes.
"""

from __future__ import annotations

from typing import Any

OVERRIDES: dict[str, dict[str, Any]] = {
    # Projections between text encoders whose widths come only with a checkpoint (no defaults).
    "AudioLDM2ProjectionModel": {"text_encoder_dim": 32, "text_encoder_1_dim": 32, "langauge_model_dim": 32},
    "StableAudioProjectionModel": {"text_encoder_dim": 32, "conditioning_dim": 32, "min_value": 0, "max_value": 32},
    # The prefix a CLIP embedding makes for GPT-2 has no default length or width.
    "UniDiffuserTextDecoder": {"prefix_length": 4, "prefix_inner_dim": 32, "n_embd": 32, "n_head": 2},
    # The control-type embedding's time width has no default (None) though the model multiplies it.
    "ControlNetUnionModel": {"addition_time_embed_dim": 8},
    # Caption widths of its two text encoders (T5, Llama) are left to the checkpoint (None); so are the Llama
    # layers read, one per block (2 double + 2 single when tiny).
    # Its patch size is left to the checkpoint too (None), which the patch embedding multiplies by; the
    # released checkpoints patch Flux-VAE latents (16 channels) 2x2, and split the head over three rotary
    # axes (the ids it makes have three), where the default names two.
    "HiDreamImageTransformer2DModel": {"caption_channels": [32, 32], "llama_layers": [0, 1, 2, 3], "patch_size": 2,
                                       "axes_dims_rope": (8, 4, 4),
                                       "in_channels": 16},
    # OmniGen's Phi-3 rotary scaling has no default (None) though the constructor reads its factors, one per
    # pair of head dims (8 when tiny); factors of 1 are plain rotary.
    "OmniGenTransformer2DModel": {"rope_scaling": {"short_factor": [1.0] * 8, "long_factor": [1.0] * 8}},
    # PRX's rotary axes default (None) becomes [32, 32] inside the constructor, which must sum to the head
    # width (16 when tiny).
    "PRXTransformer2DModel": {"axes_dim": [8, 8]},
    # The default Transformer2DModel (no input width, no patch size) is the continuous-input transformer a
    # UNet's attention block builds; a patch size would need ada norm, which its default layer norm is not.
    "Transformer2DModel": {"patch_size": None},
    # HunyuanDiT's default hidden_size (1152) disagrees with its default heads x head dim (16 x 88 = 1408);
    # released checkpoints have hidden_size = heads x head dim, which the blocks' norms assume.
    "HunyuanDiT2DModel": {"hidden_size": 32},
    # Wan Animate's face motion encoder: 512-pixel face crops through a conv stack whose widths come from a
    # table keyed by resolution (a dict no width rule reaches); a 16-pixel crop with 32-wide stages keeps
    # every stage (conv in, two res blocks, the 4x4 conv out) at a tiny cost.
    "WanAnimateTransformer3DModel": {"motion_encoder_size": 16,
                                     "motion_encoder_channel_sizes": {"4": 32, "8": 32, "16": 32}},
    # FramePack's forward always calls its image projection and clean-latent embedder, which the default config
    # leaves out (False); the released checkpoint has both.
    "HunyuanVideoFramepackTransformer3DModel": {"has_image_proj": True, "has_clean_x_embedder": True},
    # Z-Image's ControlNet leaves where its control layers sit and its control input width to the checkpoint
    # (None); the Union checkpoint puts them at every few layers from 0 over 16-channel latents.
    "ZImageControlNetModel": {"control_layers_places": [0, 1], "control_in_dim": 16},
    # MiniMax-H3's default heads x head dim (56 x 128) disagrees with its hidden_size (5376 = 42 x 128); the
    # widths that follow hidden_size take the tiny attention width, and its 3-axis rotary, which turns
    # 2 x 3 x rope_freq_dim channels of each head, must fit the tiny head (16).
    "MiniMaxH3Transformer3DModel": {"hidden_size": 32, "time_embed_hidden_dim": 32, "time_embed_dim": 16,
                                    "rope_freq_dim": 2},
    # Kandinsky 3's up blocks pair their in and out resnets from two layers per block; with one, the block's
    # self-attention norm gets the other width. The released model has three.
    "Kandinsky3UNet": {"layers_per_block": 2},
    # Latte's caption projection width is left to the checkpoint (None).
    "LatteTransformer3DModel": {"caption_channels": 32},
}

# Wrappers that hold other than zoo.WRAPPED_COUNT models: class -> how many.
WRAPPED_MODELS: dict[str, int] = {
    # Qwen-Image's multi-ControlNet runs one ControlNet-Union over several conditions; two nets are refused.
    "QwenImageMultiControlNetModel": 1,
}

# Models built around another model's modules, as their pipeline builds them: class -> (the tiny model
# whose modules it shares, the classmethod that attaches them).
COMPANIONS: dict[str, tuple[str, str]] = {
    # Z-Image's ControlNet borrows the transformer's embedders and refiners (ZImageControlNetPipeline
    # calls ZImageControlNetModel.from_transformer); alone its forward refuses to run.
    "ZImageControlNetModel": ("ZImageTransformer2DModel", "from_transformer"),
}

SKIP: dict[str, str] = {
}
