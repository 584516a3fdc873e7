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

# model_type -> keyword arguments applied on top of the shrunk config.
CONFIG_OVERRIDES: dict[str, dict[str, Any]] = {
    # Block-sparse attention needs seq_len > (5 + 2 * num_random_blocks) * block_size;
    # tiny blocks keep the sparse path (and its random block choice) in play.
    "big_bird": {"block_size": 1, "num_random_blocks": 1},
    "bigbird_pegasus": {"block_size": 1, "num_random_blocks": 1},
    # Reformer's chunked/LSH attention needs the sequence length to be a multiple of the chunk.
    "reformer": {"axial_pos_shape": [4, 8], "axial_pos_embds_dim": [16, 16],
                 "local_attn_chunk_length": 4, "lsh_attn_chunk_length": 4, "num_buckets": 2},
}

# model_type -> reason the type is left out of the zoo (reported as its build status).
SKIP: dict[str, str] = {}
