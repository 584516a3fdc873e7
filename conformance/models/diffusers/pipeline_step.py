"""One denoising step of a pipeline: the scheduler's step around the model, as the pipeline runs it.

For one representative class per family (an SD-style UNet, a Flux-style DiT, a Wan-style video
transformer, a Cosmos world model) the step is: a fresh scheduler of the pipeline's kind set to
STEPS steps, the latents scaled for the first timestep, the tiny model's prediction at that
timestep (in the pipeline's timestep units), and the scheduler's step to the next latents, which
are compared with the CPU's. Text encoders are left out: the pipeline takes prompt embeddings,
and random ones at the model's width stand in for them. Nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
from typing import Any

STEPS = 4
SAMPLE_KEYS = ("sample", "hidden_states", "x", "latents")
TIMESTEP_KEYS = ("timestep", "timesteps", "t")


@dataclasses.dataclass(frozen=True)
class Pipeline:
    name: str  # the Diffusers pipeline whose step this is
    scheduler: str  # its scheduler class
    timestep_scale: float = 1.0  # Flux's pipeline passes t / 1000


PIPELINES: dict[str, Pipeline] = {
    "UNet2DConditionModel": Pipeline("StableDiffusionPipeline", "DDIMScheduler"),
    "FluxTransformer2DModel": Pipeline("FluxPipeline", "FlowMatchEulerDiscreteScheduler", 1 / 1000),
    "WanTransformer3DModel": Pipeline("WanPipeline", "FlowMatchEulerDiscreteScheduler"),
    "CosmosTransformer3DModel": Pipeline("CosmosTextToWorldPipeline", "EDMEulerScheduler"),
}


def step(model: Any, inputs: dict[str, Any]) -> Any:
    """The latents after one scheduler step (`inputs`: the model's inputs, and which of them are
    the latents and the timestep)."""
    import diffusers
    import torch

    pipeline = PIPELINES[type(model).__name__]
    scheduler = getattr(diffusers, pipeline.scheduler)()
    latents = inputs["model"][inputs["sample_key"]]
    scheduler.set_timesteps(STEPS, device=latents.device)
    t = scheduler.timesteps[0]
    scaled = scheduler.scale_model_input(latents, t) if hasattr(scheduler, "scale_model_input") else latents
    timestep = (t * pipeline.timestep_scale).expand(latents.shape[0]).to(latents.dtype)
    kwargs = {**inputs["model"], inputs["sample_key"]: scaled, inputs["timestep_key"]: timestep}
    with torch.no_grad():
        prediction = model(**kwargs)
        prediction = prediction[0] if isinstance(prediction, (tuple, list)) else prediction.sample
        return scheduler.step(prediction, t, latents, return_dict=False)[0]


def prepare(item: Any, entry: Any, seed: int, extra: dict[str, Any]):
    """(tiny model, step inputs, step, extra) of a "step" item, or its Result."""
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.item import make_inputs
    from conformance.outcome import NotApplicable, ReferenceFailed, result_for

    pipeline = PIPELINES.get(entry.class_name)
    if pipeline is None:
        return result_for(item, NotApplicable(f"no representative pipeline runs {entry.class_name}"))
    extra = {**extra, "pipeline": pipeline.name, "scheduler": pipeline.scheduler, "steps": STEPS}
    try:
        model = zoo.build_model(entry, seed=seed)
        inputs = make_inputs(model, entry, seed)
    except Exception as exc:  # noqa: BLE001 - no model or inputs, no CPU reference
        return result_for(item, ReferenceFailed(f"build failed: {type(exc).__name__}: {exc}"),
                          extra={**extra, "stage": "build"})
    sample_key = next(k for k in SAMPLE_KEYS if k in inputs)
    timestep_key = next(k for k in TIMESTEP_KEYS if k in inputs)
    return model, {"model": inputs, "sample_key": sample_key, "timestep_key": timestep_key}, step, extra
