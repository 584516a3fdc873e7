"""The model zoo: every Transformers model type, its primary task, and a tiny build.

Model types come from the auto mappings' `*_MAPPING_NAMES` tables (plain
dicts of names, so listing the zoo imports no modeling code). Each type gets
one primary task, the first of `TASKS` whose mapping names it.

A tiny model is built from the type's own default config: the config is
rebuilt through its constructor with shrunk sizes (configs are strict
dataclasses, so derived fields such as head_dim are recomputed and
validated), with fixes from `overrides.py`, and random weights drawn under a
fixed seed in float32.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from typing import Any

# Task name -> auto-mapping table, in precedence order.
TASK_MAPPINGS: dict[str, str] = {
    "causal-lm": "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "seq2seq-lm": "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "masked-lm": "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "sequence-classification": "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "image-classification": "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "image-text-to-text": "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
}
TASKS = tuple(TASK_MAPPINGS)
GENERATIVE_TASKS = frozenset({"causal-lm", "seq2seq-lm", "image-text-to-text"})

# Tiny sizes. A rule only ever shrinks a default (min), so small defaults stay.
VOCAB = 128
SIZE_RULES: dict[str, int] = {
    **dict.fromkeys(("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "embedding_size",
                     "word_embed_proj_dim", "projection_dim"), 32),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "encoder_attention_heads",
                     "decoder_attention_heads", "num_decoder_attention_heads"), 4),
    **dict.fromkeys(("intermediate_size", "ffn_dim", "n_inner", "d_ff", "encoder_ffn_dim", "decoder_ffn_dim",
                     "hidden_dim", "ffn_hidden_size", "mlp_dim", "intermediate_dim"), 64),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), 32),
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "encoder_layers",
                     "decoder_layers", "num_decoder_layers", "num_encoder_layers"), 2),
    **dict.fromkeys(("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts"), 4),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "num_selected_experts"), 2),
    "num_key_value_heads": 2,
    "vocab_size": VOCAB,
    "max_position_embeddings": 512,
    "kv_lora_rank": 16,
    "q_lora_rank": 16,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "rotary_dim": 4,
    "image_size": 32,
    "patch_size": 8,
    "num_channels": 3,
}
# Per-layer lists whose length must follow the number of layers.
LAYER_LIST_KEYS = ("layer_types",)


class BuildError(Exception):
    """A model type that could not be built tiny; the message says why."""


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    model_type: str
    task: str
    class_name: str  # the task head class, e.g. "LlamaForCausalLM"
    config_class: str  # e.g. "LlamaConfig"

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, ZooEntry]:
    """Every model type with a task in TASKS, keyed by model_type, sorted."""
    from transformers.models.auto import configuration_auto, modeling_auto

    config_names = configuration_auto.CONFIG_MAPPING_NAMES
    found: dict[str, ZooEntry] = {}
    for task, table in TASK_MAPPINGS.items():
        for model_type, class_name in getattr(modeling_auto, table).items():
            if model_type in found or model_type not in config_names:
                continue
            if isinstance(class_name, (tuple, list)):  # e.g. deit: (plain head, head with teacher)
                class_name = class_name[0]
            found[model_type] = ZooEntry(model_type, task, class_name, config_names[model_type])
    return dict(sorted(found.items()))


def select(archs: list[str] | None = None, tasks: list[str] | None = None) -> list[ZooEntry]:
    """Entries matching any of `archs` (names or globs) and any of `tasks`; raises InputError."""
    from op_db.errors import InputError

    entries = catalogue()
    for task in tasks or []:
        if task not in TASK_MAPPINGS:
            raise InputError(f"unknown task {task!r}; known tasks: {', '.join(TASKS)}.")
    chosen = [e for e in entries.values() if not tasks or e.task in tasks]
    if archs:
        for pattern in archs:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in entries):
                raise InputError(f"no model type matches {pattern!r}; see `neuron-check models --list`.")
        chosen = [e for e in chosen if any(fnmatch.fnmatchcase(e.model_type, p) for p in archs)]
    return chosen


# -- building ---------------------------------------------------------------------------------


def _config_class(entry: ZooEntry):
    import transformers

    return getattr(transformers, entry.config_class)


def _is_config(value: Any) -> bool:
    from transformers import PreTrainedConfig

    return isinstance(value, PreTrainedConfig)


def _layer_list(values: list[Any]) -> list[Any]:
    """One layer of each distinct kind, in order, at least two: hybrids keep an attention layer."""
    kinds = list(dict.fromkeys(values))
    while len(kinds) < 2:
        kinds.append(kinds[-1])
    return kinds


class _TokenIds:
    """Maps special-token ids beyond the tiny vocabulary to distinct ids at its top."""

    def __init__(self) -> None:
        self.mapping: dict[int, int] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, bool) or not isinstance(value, int) or value < VOCAB:
            return value
        if value not in self.mapping:
            self.mapping[value] = VOCAB - 1 - len(self.mapping)
        return self.mapping[value]


def _is_token_key(key: str) -> bool:
    return key.endswith(("_token_id", "_token_index", "_token_ids")) or key in ("image_token_index",)


def shrink(config: Any, token_ids: _TokenIds | None = None) -> dict[str, Any]:
    """Constructor kwargs that rebuild `config` tiny: only the keys that change, recursively."""
    token_ids = token_ids or _TokenIds()
    values = config.to_dict()
    out: dict[str, Any] = {}
    for key, limit in SIZE_RULES.items():
        value = values.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > limit:
            out[key] = limit
    heads = out.get("num_attention_heads", values.get("num_attention_heads"))
    hidden = out.get("hidden_size", values.get("hidden_size"))
    if isinstance(values.get("head_dim"), int) and isinstance(heads, int) and isinstance(hidden, int):
        out["head_dim"] = max(hidden // heads, 4)
    kv_heads = values.get("num_key_value_heads")
    if isinstance(kv_heads, int) and isinstance(heads, int):
        # plain multi-head attention (and MLA, which requires it) keeps kv heads == heads
        out["num_key_value_heads"] = heads if kv_heads == values.get("num_attention_heads") else min(kv_heads, 2, heads)
    for key in LAYER_LIST_KEYS:
        if isinstance(values.get(key), list) and values[key]:
            out[key] = _layer_list(values[key])
            for layers_key in ("num_hidden_layers", "num_layers", "n_layer"):
                if layers_key in values:
                    out[layers_key] = len(out[key])
    for key, value in values.items():
        if _is_token_key(key) and value is not None:
            mapped = token_ids(value)
            if mapped != value:
                out[key] = mapped
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if _is_config(sub):
            out[key] = {**sub.to_dict(), **shrink(sub, token_ids)}
    return out


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def build_config(entry: ZooEntry) -> Any:
    """The tiny config of `entry` (raises BuildError)."""
    from conformance.models.overrides import CONFIG_OVERRIDES, SKIP

    if entry.model_type in SKIP:
        raise BuildError(SKIP[entry.model_type])
    try:
        cls = _config_class(entry)
        kwargs = _merge(shrink(cls()), CONFIG_OVERRIDES.get(entry.model_type, {}))
        config = cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure is this type's build status
        raise BuildError(f"config: {type(exc).__name__}: {_first_line(exc)}") from exc
    if entry.task == "causal-lm" and hasattr(config, "is_decoder"):
        config.is_decoder = True  # encoder types with a causal-LM head (bert) want it
    if entry.task == "sequence-classification" and getattr(config, "pad_token_id", None) is None:
        config.pad_token_id = 0  # a batch of two needs a pad id to find the last token
    return config


def build_model(entry: ZooEntry, attn: str = "eager", seed: int = 0) -> Any:
    """The tiny model of `entry`: float32, random weights under `seed`, eval mode, on CPU."""
    import torch
    import transformers

    config = build_config(entry)
    try:
        cls = getattr(transformers, entry.class_name)
        torch.manual_seed(seed)
        try:
            model = cls._from_config(config, attn_implementation=attn, dtype=torch.float32)
        except AttributeError:
            # a text-only head listed for a multimodal type (qwen3_5 -> Qwen3_5ForCausalLM)
            # wants the text part of the composite config
            if getattr(config, "text_config", None) is None:
                raise
            torch.manual_seed(seed)
            model = cls._from_config(config.text_config, attn_implementation=attn, dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001
        raise BuildError(f"model: {type(exc).__name__}: {_first_line(exc)}") from exc
    return model.eval()


def _first_line(exc: BaseException) -> str:
    """The exception text on one line, shortened (validation errors put the cause on line two)."""
    text = " ".join(str(exc).split())
    return text[:300]
