"""Known third-party import noise, kept off the user's terminal.

Importing the libraries the suites use logs warnings that say nothing about the backend
under test and are printed again by every worker: torchao's CUDA kernels failing to load
on a CPU build, torch's deprecation of torchao's `register_constant` calls, Diffusers'
failed import of torchao classes it needs only to load torchao checkpoints, Transformers'
fallback to the PIL image processors when torchvision is absent. Each message is matched
exactly (logger and text) so that any other warning from the same library still shows.
`neuron-check --debug` (or NEURON_CHECK_DEBUG=1, which it sets for its workers) shows them all.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class KnownNoise:
    logger: str  # the logger that emits it (filters on a logger see only its own records)
    pattern: str  # regular expression, searched in the formatted message
    why: str  # why it is harmless here


KNOWN_NOISE: tuple[KnownNoise, ...] = (
    KnownNoise(
        "torchao",
        r"^Failed to load .*torchao/_C\w*.*\.so",
        "torchao's prebuilt CUDA kernels (cutlass, mxfp8) cannot load on a CPU build of torch; "
        "its CPU kernels load and the quant suite reports what runs",
    ),
    KnownNoise(
        "torch.utils._pytree",
        r"is an Enum subclass and is now natively supported by torch\.compile",
        "torchao registers enums with pytree, which torch now deprecates; nothing changes",
    ),
    KnownNoise(
        "diffusers.quantizers.torchao.torchao_quantizer",
        r"^Unable to import `torchao` Tensor objects",
        "needed only to load checkpoints serialized with torchao; models here are built from configs",
    ),
    KnownNoise(
        "transformers.utils.import_utils",
        r"requires torchvision \(not installed\); falling back to `\w+Pil`",
        "the PIL image processor is a full replacement; the zoo builds its inputs itself",
    ),
)


class _DropKnown(logging.Filter):
    def __init__(self, patterns: list[re.Pattern[str]]) -> None:
        super().__init__()
        self.patterns = patterns

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(pattern.search(message) for pattern in self.patterns)


def silence_known_noise(table: tuple[KnownNoise, ...] = KNOWN_NOISE) -> None:
    """Drop the table's messages from their loggers, in this process (idempotent).

    A logger exists as soon as it is named, so this may run before the library is imported."""
    if os.environ.get("NEURON_CHECK_DEBUG"):
        return
    by_logger: dict[str, list[re.Pattern[str]]] = {}
    for noise in table:
        by_logger.setdefault(noise.logger, []).append(re.compile(noise.pattern))
    for name, patterns in by_logger.items():
        logger = logging.getLogger(name)
        for existing in list(logger.filters):
            if isinstance(existing, _DropKnown):
                logger.removeFilter(existing)
        logger.addFilter(_DropKnown(patterns))
