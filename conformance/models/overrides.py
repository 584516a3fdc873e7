"""Per-architecture fixes for the tiny-config builder, as data.

The generic shrinking rules in `zoo.py` build most model types from their own
default config. Where they fail, an entry here names the model type and the
constructor keyword arguments to apply after shrinking (nested dicts reach
sub-configs such as "text_config"), or a `skip` reason when the type cannot be
built tiny at all. Every entry says why it exists, so it can be dropped when
Transformers changes.
"""

from __future__ import annotations

from typing import Any

def _chameleon_vocabulary(codes: int, first_id: int, image_id: int) -> dict[str, int]:
    """A Chameleon vocabulary map: "<image>" and one "IMGIMG<code in letters>Z" token per VQ code
    (digits spelled A..J, as the released vocabularies name them), at consecutive ids."""
    names = {"IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z": first_id + code
             for code in range(codes)}
    return {"<image>": image_id, **names}


# VibeVoice's codecs with 4 filters and one block per stage (see "vibevoice_acoustic_tokenizer").
_TINY_VIBEVOICE_CODEC = {"num_filters": 4, "depths": [1] * 7}
# The server detectors' neck: its intra-class blocks, per-level upsampling and head kernels come
# with the checkpoint (None); the released values, (kernel, stride, padding) of same-size 1-D and
# square convs; a narrow neck (256 wide by default).
_PP_OCR_SERVER_NECK = {
    "intraclass_block_config": {"reduce_channel": [1, 1, 0], "return_channel": [1, 1, 0], **{
        f"{name}_{ratio}ratio": [[k * h + 1 - h, k * w + 1 - w], 1, [k // 2 * h, k // 2 * w]]
        for name, h, w in (("vertical_long_to_small_conv", 1, 0), ("horizontal_small_to_long_conv", 0, 1),
                           ("symmetric_conv_long", 1, 1))
        for ratio, k in (("long", 7), ("mid", 5), ("short", 3))}},
    "scale_factor_list": [1, 2, 4, 8], "kernel_list": [3, 2, 2], "neck_out_channels": 32}

# The PP-OCRv6 detectors' default backbone (PP-LCNetV4, built in place of the hgnet_v2 /
# pp_lcnet_v3 their specs name) is the recognisers': it puts out only its last stage and halves
# only the height, yet the neck fuses one map per stage, each half the size of the one before (the
# full-size default fails alike). A tiny one-block-per-stage backbone with every stage out.
_PP_LCNET_V4_DET = {"stem_channels": [3, 8, 16], "out_features": ["stage1", "stage2", "stage3", "stage4"],
                    "out_indices": [1, 2, 3, 4],
                    "block_configs": [[[3, 16, 16, 1, False]], [[3, 16, 16, 2, False]], [[3, 16, 32, 2, True]],
                                      [[3, 32, 64, 2, False]]],
                    "stage_out_channels": [16, 16, 32, 64]}  # derived, but to_dict() wrote the default's

# model_type -> keyword arguments applied on top of the shrunk config.
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {
    # Block-sparse attention needs seq_len > (5 + 2 * num_random_blocks) * block_size;
    # tiny blocks keep the sparse path (and its random block choice) in play.
    "big_bird": {"block_size": 1, "num_random_blocks": 1},
    "bigbird_pegasus": {"block_size": 1, "num_random_blocks": 1},
    # Reformer's chunked/LSH attention needs the sequence length to be a multiple of the chunk.
    "reformer": {"axial_pos_shape": [4, 8], "axial_pos_embds_dim": [16, 16],
                 "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4, "num_buckets": 2},
    # Tiny lfm2_moe needs its layer kinds spelled out: the default (None) fails in the modeling code.
    "lfm2_moe": {"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    # The checkpoints' attention config carries rope_theta, which the attention layers read
    # and the config class does not define (the full-size default fails alike).
    # clip_qkv defaults to None, which the attention clamps with unguarded; the checkpoints use 8.
    "dbrx": {"attn_config": {"rope_theta": 500000.0, "clip_qkv": 8.0}},
    # Default rope_parameters is empty, but the rotary embedding looks it up by layer type.
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "cohere_compass": {"text_config": {"rope_parameters": {"full_attention": {"rope_type": "default",
                                                                              "rope_theta": 10000.0}}}},
    # Recurrent Gemma repeats block_types over the layers; two layers must include attention.
    "recurrent_gemma": {"block_types": ["recurrent", "attention"]},
    # Zamba ties one shared transformer across its hybrid layers: it needs at least two of them.
    "zamba": {"layers_block_type": ["linear_attention", "hybrid", "hybrid"], "num_hidden_layers": 3},
    # The sparse-attention indexer has no defaults (None); give it tiny ones.
    "qwen4_exp": {"text_config": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8,
                                  "indexer_budget": 4, "indexer_compress_ratio": 2}},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8,
                       "indexer_budget": 4, "indexer_compress_ratio": 2},
    # The default layer kinds are all Mamba; a tiny hybrid needs an attention layer.
    "granitemoehybrid": {"layer_types": ["mamba", "attention"]},
    # The audio placeholder id has no default (None); the released checkpoints use 24.
    "voxtral": {"audio_token_id": 24},
    # Special-token ids have no defaults (None; the checkpoints give them); the padding mask needs one.
    "esm": {"pad_token_id": 1, "mask_token_id": 32},
    # to_dict() writes the released layout (an mlp block after each attention block, counts
    # doubled), which the generic layer cut cannot halve back; four layers re-derive the default
    # kinds (every fourth full attention) with one input, two recurrent and one output layer.
    "dory": {"layer_types": None, "num_hidden_layers": 4, "n_input_layers": 1, "n_output_layers": 1,
             "n_recurrent_layers": None},
    # The decoder layers read num_key_value_heads, which the config class does not define (the
    # full-size default fails alike); plain multi-head attention as the checkpoints use.
    "moonshine_streaming": {"num_key_value_heads": 4},
    # The default text config is a full Gemma 4 one, which the assistant's validator rejects (full
    # size too); the checkpoints' text config turns off per-layer inputs, MoE and wide MLPs.
    "gemma4_assistant": {"text_config": {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
                                         "enable_moe_block": False, "use_double_wide_mlp": False}},
    # Its keys and values are rounded to NVFP4 in blocks of 16, which the validator requires of
    # head_dim (the generic shrink makes it 8); its indexer heads share key head 0, so there are
    # no more of them than the tiny model's query heads per key head.
    "kolibri1_1": {"head_dim": 16, "index_num_heads": 1},
    # The talker's MoE blocks build a shared expert of shared_expert_intermediate_size, and the
    # talker reads spatial_merge_size, fields its config classes do not define (the full-size
    # default fails alike); the checkpoints give them (the merge as the vision tower's, 2).
    "qwen3_omni_moe": {"talker_config": {"spatial_merge_size": 2,
                                         "text_config": {"shared_expert_intermediate_size": 32}}},
    # The projector stacks downsample_factor encoder frames (4): the zoo's half second of audio
    # makes 25, so 5 keep the stacking in play with none left over.
    "voxtral_realtime": {"downsample_factor": 5},
    # The delay pattern has one entry per codebook channel, which the shrink cut to three.
    "dia": {"delay_pattern": [0, 1, 2]},
    # The visual and audio code ranges follow each other inside the text vocabulary: tiny
    # codebooks whose ranges end below the tiny vocabulary's special tokens at its top.
    "apertus1p5": {"vision_config": {"codebook_size": 16}, "audio_config": {"codebook_size": 16},
                   "image_token_offset": 64, "audio_token_offset": 80},
    # The thinker's multimodal RoPE reads vision_start_token_id, which only the talker's config
    # class defines (the full-size default fails alike); an id inside the tiny vocabulary.
    "qwen2_5_omni_thinker": {"vision_start_token_id": 100},
    "qwen3_omni_moe_thinker": {"vision_start_token_id": 100},
    # The layout embedding concatenates six box embeddings of width hidden_size // 6 back to
    # hidden_size: a width divisible by 6 (and by the heads and the layout channel shrink).
    "lilt": {"hidden_size": 48},
    # The 1-D box sinusoids are hidden_size // 4 // dim_bbox wide, halved: zero below width 64.
    "bros": {"hidden_size": 64},
    # The rotary part of each query head must be as wide as the RoPE the head_dim and the
    # rotary fraction (1/2) make: split the tiny head of 8 evenly.
    "mistral4": {"qk_rope_head_dim": 4, "qk_nope_head_dim": 4},
    # The vocabulary map comes with the checkpoint (None by default, which the model cannot
    # build from, full size too): a tiny VQ codebook whose codes map into the tiny vocabulary.
    "chameleon": {"vq_config": {"num_embeddings": 16, "resolution": 64, "base_channels": 32, "embed_dim": 32,
                                "latent_channels": 32}, "vocabulary_map": _chameleon_vocabulary(16, 100, 99)},
    # The Q-Former alone cross-attends to image features of encoder_hidden_size (the vision
    # tower's width, 1408, absent here): as wide as the tiny hidden states it is given.
    "blip_2_qformer": {"encoder_hidden_size": 32},
    # The config rounds the query/key and value widths up to multiples of 64, the modeling code
    # does not: they agree only for a width whose half is a multiple of 64.
    "xlstm": {"hidden_size": 128, "embedding_dim": 128},
    # The sequence classifier shifts labels into decoder inputs from decoder_start_token_id, which
    # the default config leaves unset (the checkpoints start decoding at the pad id, 0).
    "t5": {"decoder_start_token_id": 0},
    # The adaptor's validator ties its width to a quarter of the text model's.
    "fun_asr_nano": {"adaptor_config": {"intermediate_size": 8}},
    # Per-label thresholds and reading-order priorities come with the checkpoint (None by default);
    # the detection head indexes them by label, so the tiny model's two labels get one each.
    "pp_doclayout_v2": {"class_thresholds": [0.5, 0.5], "class_order": [0, 1]},
    # SAM 2's prompt encoder names the Hiera backbone's overall stride (16) its patch size: the dense
    # prompt grid must match the image embeddings, so it keeps it (the generic rule halves patches).
    **dict.fromkeys(("sam2", "sam2_video", "edgetam_video"), {"prompt_encoder_config": {"patch_size": 16}}),
    # BLT builds its KV cache from the top-level config, which has no layer count of its own (the
    # layers live in encoder/global/decoder sub-configs): the cache fails at any size in 5.24, so
    # the tiny forward runs without one.
    "blt": {"use_cache": False},
    # EoMT feeds its queries to the last `num_blocks` layers: no more than the tiny model's two.
    **dict.fromkeys(("eomt", "eomt_dinov3"), {"num_blocks": 1}),
    # Every width is the base width x width_coefficient, and hidden_dim must name the top conv's
    # (1280 x width_coefficient): a quarter-width, single-depth net keeps them consistent.
    "efficientnet": {"width_coefficient": 0.25, "depth_coefficient": 1.0, "hidden_dim": 320},
    # LeViT's stem is four stride-2 convs (16 x 16 patches whatever patch_size says); its attention
    # biases are sized from image_size // patch_size, so both keep a 16-pixel patch, 4 x 4 grid.
    "levit": {"patch_size": 16, "image_size": 64},
    # MobileViTv2 downsamples 32x; its unfolded 2x2 patches need at least a 2x2 last feature map.
    "mobilevitv2": {"image_size": 64},
    # Text, 2-D position and shape embeddings are concatenated to the hidden size:
    # 4 * coordinate_size + 2 * shape_size == hidden_size (32); input_size is the image side.
    "layoutlmv3": {"coordinate_size": 4, "shape_size": 8, "input_size": 32},
    # ViTMatte fuses the ViT's features, upsampled, with a conv stream downsampled 2 x 2 x 2: the
    # ViT's 16-pixel patches keep the two at the same size.
    "vitmatte": {"backbone_config": {"patch_size": 16}},
    # UVDoc's head concatenates one feature map per bridge stage (six), but the default backbone
    # outputs only the last: it fails at full size too; the checkpoints output every stage.
    # Its config names no image size; its reflect-padded 5x5 convs need 4 x 4 maps after 16x
    # downsampling, so the input builder is told 64 (the config keeps unknown keys as attributes).
    "uvdoc": {"backbone_config": {"out_indices": [1, 2, 3, 4, 5, 6],
                                  "out_features": [f"stage{i}" for i in range(1, 7)]},
              "image_size": 64},
    # PP-OCR text recognizers read a text line; their configs name no image size, and after the
    # backbone's 16x height reduction a (3, 2) pool needs 48-pixel-high lines (the processor's).
    **dict.fromkeys(("pp_ocrv5_server_rec", "pp_ocrv6_small_rec", "pp_ocrv6_tiny_rec"), {"image_size": [48, 64]}),
    "pp_ocrv5_mobile_rec": {"image_size": [96, 64]},  # its default backbone halves the height once more
    # LW-DETR's ViT attends in num_windows windows (a square number) tiling the patch grid: the
    # tiny 4 x 4 grid holds 2 x 2 of them.
    # Its default projects no feature level at all (projector_scale_factors empty: it fails at full
    # size too); the checkpoints give one scale per level, here one at the backbone's stride.
    "lw_detr": {"backbone_config": {"num_windows": 4, "num_windows_side": 2}, "projector_scale_factors": [1.0]},
    "lw_detr_vit": {"num_windows": 4, "num_windows_side": 2},
    # DETR's segmentation mask head group-normalises d_model + encoder heads channels in groups of
    # 8: the tiny 32 + 4 = 36 does not divide, 32 + 8 does.
    "detr": {"encoder_attention_heads": 8},
    # ALIGN compares its EfficientNet's pooled last-stage width (320 x width_coefficient) with the
    # text projection (projection_dim, 32): a tenth-width, single-depth tower makes them equal.
    "align": {"vision_config": {"width_coefficient": 0.1, "depth_coefficient": 1.0}},
    # BridgeTower's vision tower gives its attention pooler hidden_size // 64 heads: 64 wide at least.
    "bridgetower": {"vision_config": {"hidden_size": 64}},
    # The encoder alone lacks the dropout rate its parent config (t5gemma2) copies into it.
    "t5gemma2_encoder": {"text_config": {"dropout_rate": 0.0}},
    # Expert counts and sizes come with the checkpoint (None); its MoE block needs them.
    "diffusion_gemma": {"text_config": {"num_experts": 4, "top_k_experts": 2, "moe_intermediate_size": 32}},
    # Its text model always builds a sliding-window mask, but the window comes with the checkpoint
    # (None by default: it fails at full size too).
    "step3p7": {"text_config": {"sliding_window": 4}},
    # Its timm Swin backbone (an optional dependency) gives channels-last maps that a LayerNorm
    # then makes channels-first; the tiny ResNet put in its place (shrink.py) is channels-first.
    # Its decoder defines task_project only when the class embedding is wider than the decoder (as
    # at full size, 512 vs 256) yet always calls it: the tiny text side (class embedding) stays wider.
    "omdet-turbo": {"apply_layernorm_after_vision_backbone": False, "text_config": {"hidden_size": 64},
                    "class_embed_dim": 64, "text_projection_in_dim": 64, "text_projection_out_dim": 64},
    # VibeVoice's acoustic codec doubles num_filters at each of its seven stages (2048 wide at the
    # end, 340M parameters): a 4-filter, one-block-per-stage codec is tiny.
    **dict.fromkeys(("vibevoice_acoustic_tokenizer", "vibevoice_acoustic_tokenizer_encoder",
                     "vibevoice_acoustic_tokenizer_decoder"), _TINY_VIBEVOICE_CODEC),
    # ...and VibeVoice itself holds two such codecs (acoustic and semantic): the same tiny ones.
    "vibevoice": {"audio_config": _TINY_VIBEVOICE_CODEC, "semantic_model_config": _TINY_VIBEVOICE_CODEC},
    # ERNIE-VL orders its M-RoPE sections (height, width, time) and stacks height with width, so
    # they must be equal; its modeling default, [22, 22, 20], scaled to the tiny head's 4 pairs.
    "ernie4_5_vl_moe": {"text_config": {"rope_parameters": {"mrope_section": [1, 1, 2]}}},
    # Their SAM encoder's neck ends at the width of the CLIP/Qwen2 encoder it feeds (1024; 896 in
    # the checkpoint, which DeepSeek-OCR 2's default encoder, 4096 wide, does not match even at full
    # size): the neck ends at the tiny encoder's width.
    "unlimited_ocr": {"vision_config": {"sam_config": {"downsample_channels": [16, 32]}}},
    # ...and its per-layer dense/sparse MLP kinds come with the checkpoint (None): one of each.
    "deepseek_ocr2": {"vision_config": {"sam_config": {"downsample_channels": [16, 32]}},
                      "text_config": {"mlp_layer_types": ["dense", "sparse"]}},
    # The classifier reads the logits of its "Yes"/"No" tokens, ids the modeling code defaults to
    # (10784, 3771) when the config names none: two ids of the tiny vocabulary.
    "shieldgemma2": {"yes_token_index": 100, "no_token_index": 101},
    # The encoders' rotary embedding is at least 32 dims wide whatever the config says (modeling
    # code), so each head must be too: one head of the tiny width 32 (12 heads of 64 at full size).
    "clvp": {"text_config": {"num_attention_heads": 1}, "speech_config": {"num_attention_heads": 1}},
    # CLAP's feature extractor defaults to fused mels (four stacked views, truncation "fusion"),
    # which only the fused audio tower reads (laion/clap-htsat-fused): the tiny model is that one.
    "clap": {"audio_config": {"enable_fusion": True}},
    # The dense heads' layer widths come with each task's checkpoint (None): one upsampling and one
    # conv layer, and for the pointmap scale head one strided conv and its two hidden layers.
    "sapiens2": {"head_config": {"upsample_out_channels": [16], "conv_out_channels": [16], "use_pixel_shuffle": False,
                                 "scale_conv_out_channels": [16], "scale_final_hidden_sizes": [16, 16]}},
    # The pretraining head computes its losses by default (return_loss), and the masked-image loss
    # needs the processor's codebook pixels; the tiny forward is judged on its logits.
    "flava": {"return_loss": False},
    # The Window Q-Former projector's rate and its vision -> text layer maps come with the checkpoint
    # (None: it fails at full size too): a 1/2 rate, one deepstack pair and the four spatial groups
    # inside the tiny text model; the Q-Former has vision width // 64 heads, so 64 wide at least.
    "granite4_vision": {"downsample_rate": "1/2", "deepstack_layer_map": [[-1, 0]],
                        "spatial_target_layers": [0, 1, 0, 1], "vision_config": {"hidden_size": 64},
                        # the default pinpoints are in 336-pixel tiles, its default tower's are 224
                        # (they disagree at full size): pinpoints in whole tiny tiles
                        "image_grid_pinpoints": [[32, 64], [64, 32]]},
    # The position table is locked to the checkpoint's 27 x 27 patch grid (the tower adds it
    # unresized): one entry per patch of the tiny 4 x 4 grid.
    # Its image placeholder is named image_patch_id, which the token-id shrink does not know: an id
    # below the tiny vocabulary beside the shrunk image start/end ids.
    "molmo2": {"vision_config": {"num_position_embeddings": 16}, "image_patch_id": 122},
    # Fine matching splits each fine feature (out_features[1] wide: 64 at full size, 8 tiny) into a
    # matched part and a slice_dim-wide rest; the default slice (8) would leave nothing to match.
    "efficientloftr": {"fine_matching_slice_dim": 4},
    "pp_ocrv5_server_det": _PP_OCR_SERVER_NECK,
    "pp_ocrv6_medium_det": {**_PP_OCR_SERVER_NECK, "backbone_config": _PP_LCNET_V4_DET},
    "pp_ocrv6_small_det": {"backbone_config": _PP_LCNET_V4_DET, "layer_list_out_channels": [16, 16, 32, 64]},
}

# model_type -> reason the type is left out of the zoo (reported as its build status).
SKIP: dict[str, str] = {}
