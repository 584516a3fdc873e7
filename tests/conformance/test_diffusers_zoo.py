"""The Diffusers zoo on the sim device: tiny classes built by rule pass fault-free and faults are
caught and localised (a conv fault in a UNet, an attention fault in a DiT)."""

from __future__ import annotations

import pytest

from op_db.errors import InputError
from op_db.records import Status, WorkItem

pytest.importorskip("diffusers")

CONV_FAULT = {"name": "conv-scale", "faults": [{"op": "aten.convolution.default", "kind": "scale", "value": 1.05}]}


def run(models_ctx, class_name, variant="forward", dtype="float32"):
    from conformance.models import runner

    return runner.run_item(WorkItem("model", f"diffusers:{class_name}", variant, dtype, "eager"), models_ctx)


def attention_op(result) -> str:
    """The overload a DiT's attention takes on this device, as its fault-free run recorded it:
    the fused kernel where the device has one, else the softmax of the math path."""
    fused = [op for op in result.aten_ops if "scaled_dot_product" in op]
    return fused[0] if fused else "aten._safe_softmax.default"


def test_unet_conv_fault_is_a_mismatch_at_a_conv_module(models_ctx, use_profile):
    healthy = run(models_ctx, "UNet2DModel")
    assert healthy.status is Status.PASS, healthy.message
    assert healthy.extra["family"] == "image" and "aten.convolution.default" in healthy.aten_ops
    use_profile(CONV_FAULT)
    faulty = run(models_ctx, "UNet2DModel")
    assert faulty.status is Status.MISMATCH
    assert faulty.extra["divergence"]["class_name"] == "Conv2d", faulty.divergence


def test_dit_attention_fault_is_a_mismatch_at_an_attention_module(models_ctx, use_profile):
    healthy = run(models_ctx, "FluxTransformer2DModel")
    assert healthy.status is Status.PASS, healthy.message
    op = attention_op(healthy)
    assert op in healthy.aten_ops
    use_profile({"name": "attention-scale", "faults": [{"op": op, "kind": "scale", "value": 1.5}]})
    faulty = run(models_ctx, "FluxTransformer2DModel")
    assert faulty.status is Status.MISMATCH
    assert "Attention" in faulty.extra["divergence"]["class_name"], faulty.divergence


def test_autoencoder_checks_encode_and_decode_in_bf16(models_ctx, use_profile):
    result = run(models_ctx, "AutoencoderKL", dtype="bfloat16")
    assert result.status is Status.PASS, result.message
    assert result.extra["family"] == "autoencoder"
    assert result.samples == 1 and "aten.convolution.default" in result.aten_ops


def test_backward_compares_gradients_and_catches_a_conv_fault(models_ctx, use_profile):
    assert run(models_ctx, "UNet2DModel", variant="backward").status is Status.PASS
    use_profile(CONV_FAULT)
    faulty = run(models_ctx, "UNet2DModel", variant="backward")
    assert faulty.status is Status.MISMATCH and faulty.first_failure.startswith("grad ")


def test_pipeline_step_compares_the_next_latents(models_ctx, use_profile):
    result = run(models_ctx, "FluxTransformer2DModel", variant="step")
    assert result.status is Status.PASS, result.message
    assert result.extra["scheduler"] == "FlowMatchEulerDiscreteScheduler"
    assert run(models_ctx, "AutoencoderKL", variant="step").status is Status.SKIP


def test_plan_selects_by_glob_and_family_and_rejects_transformers_options():
    from conformance.models.plan import ModelOptions, plan

    items = plan(ModelOptions(library="diffusers", archs=("Flux*",), dtypes=("fp32",), step=True))
    subjects = {i.subject for i in items}
    assert "diffusers:FluxTransformer2DModel" in subjects and "diffusers:FluxControlNetModel" in subjects
    assert {i.variant for i in items if i.subject == "diffusers:FluxTransformer2DModel"} == {"forward", "step"}
    autoencoders = plan(ModelOptions(library="diffusers", families=("autoencoder",), dtypes=("fp32",)))
    assert autoencoders and all(i.subject.startswith("diffusers:") for i in autoencoders)
    assert "diffusers:AutoencoderKL" in {i.subject for i in autoencoders}
    with pytest.raises(InputError, match="unknown family"):
        plan(ModelOptions(library="diffusers", families=("sound",)))
    with pytest.raises(InputError, match="--task does not apply"):
        ModelOptions(library="diffusers", tasks=("causal-lm",))
    with pytest.raises(InputError, match="no Diffusers model class matches"):
        plan(ModelOptions(library="diffusers", archs=("NoSuch*",)))


def test_class_names_select_the_catalogues_entries_without_building_it():
    """`--arch` with class names only (and a worker's one item) looks its classes up alone: the
    same entries, in the catalogue's order, as the whole catalogue gives; an unknown name is refused."""
    from conformance.models.diffusers import zoo

    names = ["diffusers:UNet2DModel", "AutoencoderTiny", "UNet2DModel", "MultiControlNetModel"]
    zoo.catalogue.cache_clear()
    chosen = zoo.select(names)
    assert zoo.catalogue.cache_info().currsize == 0, "the whole catalogue was built for class names"
    whole = zoo.catalogue()
    assert chosen == [e for e in whole.values() if e.class_name in {n.removeprefix("diffusers:") for n in names}]
    assert [zoo.entry_of(s) for s in ("diffusers:FluxTransformer2DModel", "diffusers:AutoencoderKLWan")] == [
        whole["diffusers:FluxTransformer2DModel"], whole["diffusers:AutoencoderKLWan"]]
    assert zoo.entry_of("diffusers:NoSuchModel") is None and zoo.entry_of("diffusers:DDPMScheduler") is None
    with pytest.raises(InputError, match="no Diffusers model class matches 'NoSuchModel'"):
        zoo.select(["UNet2DModel", "NoSuchModel"])


@pytest.mark.parametrize("class_name, family", [
    ("UNet2DConditionModel", "image"), ("WanTransformer3DModel", "video"), ("CosmosTransformer3DModel", "world-model"),
    ("AutoencoderKLWan", "autoencoder"), ("FluxControlNetModel", "controlnet"), ("T2IAdapter", "adapter"),
    ("StableAudioDiTModel", "audio"), ("PriorTransformer", "other")])
def test_families_are_derived_from_class_and_config(class_name, family):
    from conformance.models.diffusers import zoo

    assert zoo.catalogue()[f"diffusers:{class_name}"].family == family


def test_shrink_keeps_the_joins_between_widths():
    from conformance.models.diffusers.shrink import default_config, shrink
    from conformance.models.diffusers.zoo import model_classes

    sdxl = {**default_config(model_classes()["UNet2DConditionModel"]),
            "addition_embed_type": "text_time", "addition_time_embed_dim": 256,
            "projection_class_embeddings_input_dim": 2816, "cross_attention_dim": 2048}
    tiny = {**sdxl, **shrink(sdxl)}
    # the projection's input is the text width (1280) plus six time ids, both scaled alike
    assert tiny["projection_class_embeddings_input_dim"] == 1280 // 16 + 6 * tiny["addition_time_embed_dim"]
    assert all(c % tiny["norm_num_groups"] == 0 for c in tiny["block_out_channels"])
    assert len(tiny["block_out_channels"]) == len(tiny["down_block_types"])
    flux = default_config(model_classes()["FluxTransformer2DModel"])
    small = {**flux, **shrink(flux)}
    assert sum(small["axes_dims_rope"]) == small["attention_head_dim"] <= 16
    assert all(a % 2 == 0 for a in small["axes_dims_rope"])
    assert small["num_layers"] <= 2 and small["num_single_layers"] <= 2


def test_census_check_records_ops_and_a_cause():
    from conformance.models.causes import CAUSES
    from conformance.models.diffusers import zoo
    from conformance.models.diffusers.census import check_class

    status = check_class(zoo.catalogue()["diffusers:AutoencoderTiny"])
    assert status.ok and "aten.convolution.default" in status.ops and status.task == "autoencoder"
    broken = check_class(zoo.catalogue()["diffusers:ControlNetXSAdapter"])  # runs only inside its UNet
    assert not broken.ok and broken.cause in CAUSES


def test_report_family_table_counts_classes_and_blocking_ops():
    from op_db.records import Result
    from reports.model import families

    def result(subject, status, op=None):
        return Result(suite="model", subject=subject, variant="forward", dtype="float32", mode="eager", status=status,
                      failing_op=op, extra={"family": "image"})

    rows = families([result("diffusers:A", Status.PASS), result("diffusers:B", Status.UNSUPPORTED, "aten.conv.x"),
                     result("diffusers:C", Status.ERROR, "aten.conv.x"), result("diffusers:D", Status.MISMATCH, "aten.y")])
    assert rows == [{"family": "image", "classes": 4, "passed": 1, "blocked": 3,
                     "top_blocking_ops": [{"op": "aten.conv.x", "classes": 2}, {"op": "aten.y", "classes": 1}]}]


def test_listing_refuses_the_other_librarys_options():
    from porting_cli.cli.commands.models import _list

    with pytest.raises(InputError, match="--family does not apply"):
        _list([], [], False, "table", 1, library="transformers", families=["video"])
    with pytest.raises(InputError, match="--task does not apply"):
        _list([], ["causal-lm"], False, "table", 1, library="diffusers")


def test_compile_mode_compiles_an_autoencoders_encode_and_decode(sim_device):
    from conformance.compiling.settings import CompileSettings
    from conformance.engine.config import RunConfig
    from conformance.engine.worker import init_worker, run_one
    from conformance.models.plan import ModelOptions

    ctx = init_worker(RunConfig(backend="sim", device="sim", suite_options=ModelOptions(library="diffusers"),
                                compile=CompileSettings()))
    result = run_one(WorkItem("model", "diffusers:AutoencoderTiny", "forward", "float32", "compile"), ctx)
    assert result.status is Status.PASS, result.message
    assert result.compile["graph_breaks"] == 0 and "aten.convolution.default" in result.compile["graph_ops"]
