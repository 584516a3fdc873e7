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
    # With Fourier time features and no time MLP, the first NoSkip block concatenates the
    # 2 x block_out_channels[0] features to the sample; the default leaves them out of its width.
    "UNet1DModel": {"extra_in_channels": 64},
    # The FSQ quantizer's width is the pooled hidden width it quantizes (both 2048 by default);
    # `fsq_dim` is kept by the shrink rules because other codecs' FSQ widths are code widths.
    "AceStepAudioTokenizer": {"fsq_dim": 32},
    # Each decoder stage's upsampler divides its channels by the upsample factor (2) into the next
    # stage's width: the widths must keep their 1:2:4 ratio, which rounding to 32 loses.
    "AutoencoderKLLTX2Video": {"decoder_block_out_channels": (32, 64, 128)},
    # Its clips are `clip_length` frames whose latents lose `token_drop` (3) trailing frames, and the
    # decoder's chunking assumes (clip_length - 1) / temporal ratio > token_drop: the default 17.
    "AutoencoderKLMiniMaxH3": {"clip_length": 17},
    # The decoder's input is the posterior's mean, half the encoder's `encoder_hidden_size` output
    # (64 of 128 by default); the shrink rounds the decoder's width up to a norm-friendly 32.
    "AutoencoderOobleck": {"decoder_input_channels": 4},
    # Its BigVGAN decoder halves `decoder_dim` at each of its 7 upsampling stages, so the width must
    # stay at least 2^7 (a divided 64 reaches 0); the latent width is kept at the checkpoint's 2048
    # by the rules (a data width), 64 here keeps it a multiple of `latent_channels` at a tiny cost.
    "AutoencoderKLMiniMaxH3Audio": {"decoder_dim": 256, "latent_dim": 64},
    # Its vision encoder's heads are `encoder_hidden_size // 64` (head width fixed at 64).
    "AutoencoderRAE": {"encoder_hidden_size": 128},
    # The decoder takes the posterior's mean: `latent_dim` (64, a data width the rules keep) is half
    # of the encoder's `encoder_latent_dim` output (128), which the rules would divide.
    "LongCatAudioDiTVae": {"encoder_latent_dim": 128},
    # Every size is left to the checkpoint (no defaults): the HunyuanImage 2.1 VAE's layout, tiny
    # (RGB in and out, channel list doubling to the latent, one resnet per stage, 8x down).
    "AutoencoderKLHunyuanImage": {"in_channels": 3, "out_channels": 3, "latent_channels": 16,
                                  "block_out_channels": (32, 32, 64, 64), "layers_per_block": 1,
                                  "spatial_compression_ratio": 8, "sample_size": 32},
    # Each stage's width is the previous one divided by its upsample's channel reduction (2, 2, 1,
    # 2), which dividing by 16 and rounding to 32 breaks; every width a multiple of the head width.
    # Its neighbourhood attention needs every grid side at least its kernel (7 by default): kernels
    # of 3 let a latent of a few pixels run.
    "LTX2VideoDiffusionDecoderModel": {"decoder_stage_channels": (128, 64, 32, 32, 16),
                                       "decoder_stage_depths": (1, 1, 1, 1, 1),
                                       "decoder_stage_kernels": ((3, 3, 3),) * 4, "decoder_stage5_kernel": (3, 3, 3)},
    # The residue vocabulary's tables come only with a checkpoint: which atom37 slots each of the
    # 147 residue types uses, and which residue types each of the 7 token types allows. Every slot
    # and every type allowed is the tiny model's table (its weights are random anyway).
    "RFD4ProteinaAutoencoder": {"atom37_mask": [[True] * 37] * 147, "allowed_residue_types": [[True] * 147] * 7},
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
