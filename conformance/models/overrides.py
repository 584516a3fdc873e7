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
}

# model_type -> reason the type is left out of the zoo (reported as its build status).
SKIP: dict[str, str] = {}
