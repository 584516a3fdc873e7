"""Plan the quant suite: `QuantOptions` -> WorkItems ("quant", recipe, target, dtype, mode).

Subjects are torchao recipes, variants are targets (conformance/quant/targets.py): linear stacks
with edge shapes and tiny Transformers models. Inference recipes run on every target; training
recipes (QAT fake quantization, float8 training, the low-bit optimizers) on the linear targets.
`dtype` is the activation dtype (the high-precision dtype the weights start in).
"""

from __future__ import annotations

import dataclasses
import fnmatch

from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

SUITE = "quant"
# Inference recipes: torchao `quantize_` configs (conformance/quant/recipes.py builds them).
INFERENCE = (
    "int8_weight_only", "int8_dynamic_int8_weight",
    "int4_weight_only.plain", "int4_weight_only.preshuffled", "int4_weight_only.plain_int32",
    "int4_weight_only.tile_packed_to_4d",
    "intx_weight_only", "int8_dynamic_intx_weight",
    "float8_weight_only", "float8_dynamic.per_tensor", "float8_dynamic.per_row",
)
# Training recipes: forward, backward (and a step where there is an optimizer).
TRAINING = ("qat_fake_quant", "float8_training", "adamw_8bit", "adamw_4bit", "adamw_fp8")
RECIPES = INFERENCE + TRAINING
LINEAR_TARGETS = ("linear.g32", "linear.g64", "linear.g128", "linear.ragged", "linear.decode", "linear.3d",
                  "linear.no_bias")
MODEL_TARGETS = ("llama", "qwen2", "mistral", "gpt2", "mixtral", "qwen3_moe", "vit")
TARGETS = LINEAR_TARGETS + MODEL_TARGETS
# Training recipes need no group-size sweep: three shapes cover 2-D, 3-D and no bias.
TRAINING_TARGETS = ("linear.g64", "linear.3d", "linear.no_bias")
DEFAULT_DTYPES = ("bfloat16", "float32")


@dataclasses.dataclass(frozen=True)
class QuantOptions:
    """What `neuron-check quant` selects; stored with the run so `--resume` rebuilds the plan."""

    recipes: tuple[str, ...] = cli_option((), "--recipe", "Comma list of recipes or globs ('int8_*'). "
                                          "Default: every recipe.", kind="list")
    targets: tuple[str, ...] = cli_option((), "--target", "Comma list of targets or globs ('linear.*', 'llama'). "
                                          "Default: every target.", kind="list")
    dtypes: tuple[str, ...] = cli_option(DEFAULT_DTYPES, "--dtype", "Comma list of activation dtypes: fp32, bf16, "
                                         "fp16.", kind="list", show_default=True)
    grad: bool = cli_option(False, "--grad", "Add the training recipes (QAT fake quantization, float8 training, "
                            "the low-bit optimizers).", kind="flag")
    modes: tuple[str, ...] = cli_option(("eager",), "--mode", "Comma list: eager, compile (the quantized forward "
                                        "through torch.compile).", kind="list", show_default=True)

    def __post_init__(self) -> None:
        from conformance.planning import parse_dtypes, parse_modes

        dtypes = tuple(parse_dtypes(list(self.dtypes)))
        bad = [d for d in dtypes if d not in ("float32", "bfloat16", "float16")]
        if bad:
            raise InputError(f"the quant suite takes float32, bfloat16 or float16 activations, not {bad[0]}.")
        object.__setattr__(self, "dtypes", dtypes)
        object.__setattr__(self, "modes", parse_modes(self.modes))


def _chosen(patterns: tuple[str, ...], known: tuple[str, ...], what: str) -> list[str]:
    if not patterns:
        return list(known)
    found: list[str] = []
    for pattern in patterns:
        matches = fnmatch.filter(known, pattern)
        if not matches:
            raise InputError(f"unknown {what} {pattern!r}; use one of {', '.join(known)}.")
        found.extend(m for m in matches if m not in found)
    return [k for k in known if k in found]


def targets_of(recipe: str) -> tuple[str, ...]:
    return TRAINING_TARGETS if recipe in TRAINING else TARGETS


def plan(options: QuantOptions) -> list[WorkItem]:
    recipes = _chosen(options.recipes, RECIPES if options.grad else INFERENCE, "recipe")
    targets = _chosen(options.targets, TARGETS, "target")
    items = []
    for recipe in recipes:
        for target in (t for t in targets_of(recipe) if t in targets):
            for dtype in options.dtypes:
                items.extend(WorkItem(SUITE, recipe, target, dtype, mode) for mode in options.modes)
    return items
