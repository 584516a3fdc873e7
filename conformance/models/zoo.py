"""The model zoo: every Transformers model type in every task table that lists it, tiny.

The (model type, task) pairs come from the task tables of `tasks.py`, derived
from the auto mappings at run time. A pair's subject (the WorkItem subject) is
the bare model type for the type's primary task (the first table, in
precedence order, that lists it) and "model_type:task" for every other task.

A tiny model is built from the type's own default config: the config is
rebuilt through its constructor with shrunk sizes (`shrink.py`), with fixes
from `overrides.py`, and random weights drawn under a fixed seed in float32.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from typing import Any

from conformance.models.shrink import _merge, shrink
from conformance.models.tasks import GENERATIVE as GENERATIVE_TASKS  # noqa: F401 - read as zoo.GENERATIVE_TASKS by plan and runner
from conformance.models.tasks import mapping_of, tasks as derived_tasks

SUBJECT_SEPARATOR = ":"


class BuildError(Exception):
    """A model type that could not be built tiny; the message says why."""


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    model_type: str
    task: str
    class_name: str  # the task head class, e.g. "LlamaForCausalLM"
    config_class: str  # e.g. "LlamaConfig"
    primary: bool = True  # the type's first task in precedence order

    @property
    def subject(self) -> str:
        return self.model_type if self.primary else f"{self.model_type}{SUBJECT_SEPARATOR}{self.task}"

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "subject": self.subject}


@functools.lru_cache(maxsize=1)
def pairs() -> dict[str, ZooEntry]:
    """Every (model type, task) pair, keyed by subject, sorted by model type then precedence."""
    from transformers.models.auto import configuration_auto

    config_names = configuration_auto.CONFIG_MAPPING_NAMES
    found: dict[tuple[str, int], ZooEntry] = {}
    seen: set[str] = set()
    for rank, task in enumerate(derived_tasks()):
        for model_type, class_name in mapping_of(task).items():
            if model_type not in config_names:
                continue
            if isinstance(class_name, (tuple, list)):  # e.g. deit: (plain head, head with teacher)
                class_name = class_name[0]
            found[(model_type, rank)] = ZooEntry(model_type, task, class_name, config_names[model_type],
                                                 primary=model_type not in seen)
            seen.add(model_type)
    return {entry.subject: entry for _, entry in sorted(found.items())}


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, ZooEntry]:
    """Every model type's primary entry, keyed by model_type, sorted."""
    return {e.model_type: e for e in pairs().values() if e.primary}


def select(archs: list[str] | None = None, tasks: list[str] | None = None) -> list[ZooEntry]:
    """Pairs of any of `archs` (names or globs) in any of `tasks` (default: every task);
    raises InputError naming the known tasks for an unknown one."""
    from op_db.errors import InputError

    known = derived_tasks()
    for task in tasks or []:
        if task not in known:
            raise InputError(f"unknown task {task!r}; known tasks: {', '.join(known)}.")
    chosen = [e for e in pairs().values() if not tasks or e.task in tasks]
    if archs:
        types = catalogue()
        for pattern in archs:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in types):
                raise InputError(f"no model type matches {pattern!r}; see `neuron-check models --list`.")
        chosen = [e for e in chosen if any(fnmatch.fnmatchcase(e.model_type, p) for p in archs)]
    return chosen


# -- building ---------------------------------------------------------------------------------


def _config_class(entry: ZooEntry):
    import transformers

    return getattr(transformers, entry.config_class)


def build_config(entry: ZooEntry) -> Any:
    """The tiny config of `entry` (raises BuildError)."""
    from conformance.models.overrides import CONFIG_OVERRIDES, SKIP

    if entry.model_type in SKIP:
        raise BuildError(SKIP[entry.model_type])
    try:
        cls = _config_class(entry)
        overrides = CONFIG_OVERRIDES.get(entry.model_type, {})
        kwargs = _merge(shrink(_default_config(cls, overrides)), overrides)
        config = cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 - any failure is this type's build status
        raise BuildError(f"config: {type(exc).__name__}: {_first_line(exc)}") from exc
    if entry.task == "causal-lm" and hasattr(config, "is_decoder"):
        config.is_decoder = True  # encoder types with a causal-LM head (bert) want it
    if entry.task == "sequence-classification":
        for part in (config, getattr(config, "text_config", None)):  # a composite's head reads its text part's
            if part is not None and getattr(part, "pad_token_id", None) is None:
                part.pad_token_id = 0  # a batch of two needs a pad id to find the last token
    return config


def _default_config(cls: Any, overrides: dict[str, Any]) -> Any:
    """The config class's default, or, for a class whose own default fails its validators (a
    Gemma 4 assistant around a full Gemma 4 text config), the default with the type's overrides."""
    try:
        return cls()
    except Exception:
        if not overrides:
            raise
        return cls(**overrides)


def build_model(entry: ZooEntry, attn: str = "eager", seed: int = 0, config: Any = None) -> Any:
    """The tiny model of `entry` (of `config`, default its tiny config): float32, random weights
    under `seed`, eval mode, on CPU."""
    import torch
    import transformers

    config = config if config is not None else build_config(entry)
    try:
        cls = getattr(transformers, entry.class_name)
        # a head or tower whose own config class is one part of the composite config (Musicgen's
        # causal LM, llama4 -> Llama4VisionModel) is built from that part
        config = _sub_config_of(cls, config) or config
        torch.manual_seed(seed)
        try:
            model = cls._from_config(config, attn_implementation=attn, dtype=torch.float32)
        except AttributeError:
            # a head whose own config wraps a text model (JevForDecision for qwen2) gets that
            # config around the type's; a text-only head listed for a multimodal type
            # (qwen3_5 -> Qwen3_5ForCausalLM) wants the text part of the composite config
            wrapped = _head_config(cls, config)
            if wrapped is None and getattr(config, "text_config", None) is None:
                raise
            torch.manual_seed(seed)
            model = cls._from_config(wrapped or config.text_config, attn_implementation=attn, dtype=torch.float32)
    except Exception as exc:  # noqa: BLE001
        raise BuildError(f"model: {type(exc).__name__}: {_first_line(exc)}") from exc
    return model.eval()


def _sub_config_of(cls: Any, config: Any) -> Any | None:
    """The part of composite `config` that is of `cls`'s own config class, or None."""
    own = getattr(cls, "config_class", None)
    if own is None or isinstance(config, own):
        return None
    parts = (getattr(config, key, None) for key in getattr(config, "sub_configs", None) or {})
    return next((part for part in parts if isinstance(part, own)), None)


def _head_config(cls: Any, config: Any) -> Any | None:
    """The config class of `cls` built around the type's tiny (text) config, when that class wraps
    a text model and `config` is not one of it; else None."""
    own = getattr(cls, "config_class", None)
    if own is None or isinstance(config, own) or "text_config" not in (getattr(own, "sub_configs", None) or {}):
        return None
    text = getattr(config, "text_config", None) or config
    kwargs: dict[str, Any] = {"text_config": text.to_dict()}
    if "hidden_size" in own().to_dict() and getattr(text, "hidden_size", None):
        kwargs["hidden_size"] = text.hidden_size  # the head reads the text model's width
    return own(**kwargs)


def class_exists(entry: ZooEntry) -> bool:
    """Whether Transformers defines the class its own auto mapping names for `entry`."""
    import transformers

    try:
        getattr(transformers, entry.class_name)
    except (AttributeError, ImportError) as exc:  # ImportError: defined, but needs a missing library
        return isinstance(exc, ImportError)
    return True


def missing_class_reason(entry: ZooEntry) -> str:
    return (f"Transformers' auto mapping names {entry.class_name} for {entry.model_type} ({entry.task}), but this "
            f"Transformers defines no such class: there is no model to check (AutoModel fails the same way)")


# attn_implementation -> the class attribute by which Transformers says a model supports it
_ATTN_SUPPORT = {"sdpa": "_supports_sdpa", "flex_attention": "_supports_flex_attn"}


def attn_refusal(entry: ZooEntry, attn: str) -> str | None:
    """Why Transformers would refuse to build `entry` with `attn`, or None where it supports it.
    Asked before building, so an unsupported type is a SKIP rather than a failed build."""
    import transformers

    flag = _ATTN_SUPPORT.get(attn)
    if flag is None or attn == "sdpa":  # Transformers falls back to eager where sdpa is missing
        return None
    if not getattr(getattr(transformers, entry.class_name), flag, False):
        return f"{entry.class_name} does not support attn_implementation={attn!r} (Transformers' {flag} is False)"
    return None


def _first_line(exc: BaseException) -> str:
    """The exception text on one line, shortened (validation errors put the cause on line two)."""
    text = " ".join(str(exc).split())
    return text[:300]
