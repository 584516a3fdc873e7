"""The task tables of the zoo, derived from Transformers' auto mappings at run time.

Every `MODEL_*_MAPPING_NAMES` table of `transformers.models.auto.modeling_auto`
(plain ordered dicts of model type -> class name; reading them imports no
modeling code) is one task. A new Transformers release that adds a table or a
type adds it here with no code change.

Names: `MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES` -> "token-classification",
`MODEL_MAPPING_NAMES` -> "base". The six tasks the zoo started with keep
their names and lead the precedence order (which gives each type one
primary task, the one a bare model type names); the rest follow in table
order, and "base" comes last.
"""

from __future__ import annotations

import dataclasses
import functools
import re

PREFIX, SUFFIX = "MODEL_FOR_", "_MAPPING_NAMES"
BASE_TABLE = "MODEL_MAPPING_NAMES"
BASE_TASK = "base"
# Table names whose derived task name would differ from the name the zoo already used.
RENAMED: dict[str, str] = {"seq-to-seq-causal-lm": "seq2seq-lm", "speech-seq-2-seq": "speech-seq2seq"}
# The original tasks, first in precedence (a type's primary task is the first that lists it).
LEADING = ("causal-lm", "seq2seq-lm", "masked-lm", "sequence-classification", "image-classification",
           "image-text-to-text")
GENERATIVE = frozenset({"causal-lm", "seq2seq-lm", "image-text-to-text", "multimodal-lm", "speech-seq2seq"})


@dataclasses.dataclass(frozen=True)
class TaskTable:
    task: str  # e.g. "token-classification"
    mapping: str  # e.g. "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"


def task_name(mapping: str) -> str:
    """'MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES' -> 'audio-xvector'; the base table -> 'base'."""
    if mapping == BASE_TABLE:
        return BASE_TASK
    if not (mapping.startswith(PREFIX) and mapping.endswith(SUFFIX)):
        raise ValueError(f"{mapping} is not a task mapping")
    name = mapping[len(PREFIX):-len(SUFFIX)].lower().replace("_", "-")
    return RENAMED.get(name, name)


def is_task_mapping(name: str) -> bool:
    return name == BASE_TABLE or bool(re.fullmatch(r"MODEL_FOR_[A-Z0-9_]+_MAPPING_NAMES", name))


@functools.lru_cache(maxsize=1)
def task_tables() -> tuple[TaskTable, ...]:
    """Every task table of the installed Transformers, in precedence order."""
    from transformers.models.auto import modeling_auto

    found = [TaskTable(task_name(name), name) for name in vars(modeling_auto)
             if is_task_mapping(name) and isinstance(getattr(modeling_auto, name), dict)]
    rank = {task: i for i, task in enumerate(LEADING)}
    return tuple(sorted(found, key=lambda t: (t.task == BASE_TASK, rank.get(t.task, len(rank)))))


def tasks() -> tuple[str, ...]:
    return tuple(t.task for t in task_tables())


def mapping_of(task: str):
    """The ordered model type -> class name(s) table of `task`."""
    from transformers.models.auto import modeling_auto

    table = next(t for t in task_tables() if t.task == task)
    return getattr(modeling_auto, table.mapping)
