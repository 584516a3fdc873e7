"""Plan the model suite: `ModelOptions` -> WorkItems ("model", model_type, variant, dtype, mode)."""

from __future__ import annotations

import dataclasses

from conformance.suite import cli_option
from op_db.errors import InputError
from op_db.records import WorkItem

SUITE = "model"
MODEL_DTYPES = ("float32", "bfloat16", "float16")  # what --dtype may name for models
DEFAULT_DTYPES = ("float32", "bfloat16")
TASK_HELP = ("Comma list of tasks, derived from Transformers' auto mappings (causal-lm, token-classification, "
             "ctc, object-detection, base, ...; an unknown one lists them all). Default: every task.")


@dataclasses.dataclass(frozen=True)
class ModelOptions:
    """What `neuron-check models` selects and how its items run; stored with the run so
    `--resume` rebuilds the plan. Each field's CLI option is declared with it."""

    archs: tuple[str, ...] = cli_option((), "--arch", "Comma list of model types or globs (llama, 'qwen*'). "
                                        "Default: all.", kind="list")
    tasks: tuple[str, ...] = cli_option((), "--task", TASK_HELP, kind="list")
    dtypes: tuple[str, ...] = cli_option(DEFAULT_DTYPES, "--dtype", "Comma list: fp32, bf16, fp16.", kind="list",
                                         show_default=True)
    modes: tuple[str, ...] = cli_option(("eager",), "--mode", "Comma list: eager, compile (forward and backward "
                                        "through torch.compile).", kind="list", show_default=True)
    grad: bool = cli_option(False, "--grad", "Also run loss.backward() and compare every parameter gradient.", kind="flag")
    generate: bool = cli_option(False, "--generate", "Also greedy-decode 8 tokens and require the CPU's exact tokens.",
                                kind="flag")
    attn: str = cli_option("eager", "--attn", "Attention implementation the models are built with (Transformers' "
                           "attn_implementation). With flex_attention the CPU reference and the oracle attend "
                           "eagerly, and a type without flex support is SKIP.", kind="choice",
                           choices=("eager", "sdpa", "flex_attention"), show_default=True)
    library: str = cli_option("transformers", "--library", "Which library's model zoo: Transformers (tasks) or "
                              "Diffusers (model classes: UNets, DiTs, video transformers, autoencoders, ControlNets, "
                              "adapters; subjects diffusers:<ClassName>).", kind="choice",
                              choices=("transformers", "diffusers"), show_default=True)
    families: tuple[str, ...] = cli_option((), "--family", "With --library diffusers: comma list of families (image, "
                                           "video, audio, world-model, autoencoder, controlnet, adapter, other). "
                                           "Default: all.", kind="list")
    step: bool = cli_option(False, "--step", "With --library diffusers: also run one denoising step (scheduler step "
                            "plus model) for the classes with a representative pipeline (SD UNet, Flux, Wan, Cosmos).",
                            kind="flag")
    divergence: bool = cli_option(True, "--no-divergence", "Do not rerun a MISMATCH under hooks to find its first "
                                  "divergent module.", kind="flag", negate=True)

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtypes", tuple(model_dtypes(list(self.dtypes))))
        from conformance.planning import parse_modes

        object.__setattr__(self, "modes", parse_modes(self.modes))
        diffusers = self.library == "diffusers"
        for flag, given, allowed in (("--task", self.tasks, not diffusers), ("--generate", self.generate, not diffusers),
                                     ("--family", self.families, diffusers), ("--step", self.step, diffusers)):
            if given and not allowed:
                raise InputError(f"{flag} does not apply to --library {self.library}.")


def model_dtypes(names: list[str] | None) -> list[str]:
    """['fp32', 'bf16'] -> ['float32', 'bfloat16']; only the dtypes a model runs in."""
    from conformance.planning import parse_dtypes

    if not names:
        return list(DEFAULT_DTYPES)
    found = parse_dtypes(names)
    for name in found:
        if name not in MODEL_DTYPES:
            raise InputError(f"models run in fp32, bf16 or fp16, not {name}.")
    return found


def plan(options: ModelOptions) -> list[WorkItem]:
    """Forward items for every selected (model type, task) pair, plus backward (--grad) and generate
    (--generate, generative tasks only), in model-type order."""
    from conformance.models import zoo

    modes = options.modes or ("eager",)
    if options.library == "diffusers":
        return _diffusers_plan(options, modes)
    entries = zoo.select(list(options.archs), list(options.tasks))
    items = []
    for entry in entries:
        variants = ["forward"] + (["backward"] if options.grad else [])
        if options.generate and entry.task in zoo.GENERATIVE_TASKS:
            variants.append("generate")
        for variant in variants:
            for dtype in options.dtypes:
                for mode in modes:
                    items.append(WorkItem(SUITE, entry.subject, variant, dtype, mode))
    return items


def _diffusers_plan(options: ModelOptions, modes: tuple[str, ...]) -> list[WorkItem]:
    """Forward items for every selected Diffusers class, plus backward (--grad) and one denoising
    step (--step, the classes with a representative pipeline)."""
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.pipeline_step import PIPELINES

    items = []
    for entry in zoo.select(list(options.archs), list(options.families)):
        variants = ["forward"] + (["backward"] if options.grad else [])
        if options.step and entry.class_name in PIPELINES:
            variants.append("step")
        items += [WorkItem(SUITE, entry.subject, variant, dtype, mode)
                  for variant in variants for dtype in options.dtypes for mode in modes]
    return items
