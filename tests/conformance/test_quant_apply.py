"""The quant suite applies a recipe to a zoo model as Transformers' TorchAoConfig does: the same
modules quantized, to the same codes, as a real from_pretrained of the saved model."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao")

import torch  # noqa: E402

from conformance.quant import apply, recipes, targets  # noqa: E402


# The rule is Transformers', not quantize_'s default (every nn.Linear): a causal LM keeps its head
# (the output embeddings); ViT's last parameter is the classifier's bias, so its weight is quantized.
@pytest.mark.parametrize("name,head,head_quantized", [("llama", "lm_head.weight", False),
                                                      ("vit", "classifier.weight", True)])
def test_filter_matches_from_pretrained_with_torchao_config(name, head, head_quantized, tmp_path, monkeypatch):
    from transformers import AutoConfig, TorchAoConfig

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    target = targets.build(name, torch.float32, seed=0)
    config = recipes.config("int8_weight_only", target.group_size)
    target.module.save_pretrained(tmp_path)
    loaded = type(target.module).from_pretrained(tmp_path, quantization_config=TorchAoConfig(quant_type=config),
                                                 config=AutoConfig.from_pretrained(tmp_path))
    expected = recipes.quantized_weights(loaded)

    ours = target.module
    apply.quantize(ours, config, apply.module_filter(ours, config))
    found = recipes.quantized_weights(ours)

    assert sorted(found) == sorted(expected) and found
    assert (head in found) is head_quantized
    for weight in found:
        assert torch.equal(found[weight].qdata, expected[weight].qdata), weight


def test_a_plain_module_gets_every_linear():
    target = targets.build("linear.g64", torch.float32, seed=0)
    config = recipes.config("int8_weight_only", target.group_size)
    assert apply.module_filter(target.module, config) is None
    apply.quantize(target.module, config, None)
    assert sorted(recipes.quantized_weights(target.module)) == ["0.weight", "1.weight"]


def test_modules_to_not_convert_replaces_the_default_skips():
    # Transformers' own rule: a given list replaces the defaults (so lm_head is quantized), and an
    # entry matches a parameter's name from its start, as a regex, or as its suffix
    target = targets.build("llama", torch.float32, seed=0)
    config = recipes.config("int8_weight_only", target.group_size)
    default = apply.transformers_choice(target.module, config)
    given = apply.transformers_choice(target.module, config, modules_to_not_convert=["model.layers.0.self_attn.q_proj"])
    assert "lm_head" not in default
    assert given == (default | {"lm_head"}) - {"model.layers.0.self_attn.q_proj"}
