"""The framework layer (issue 45): Lightning's Trainer / Fabric options, DeepSpeed config dicts."""

from __future__ import annotations

import pytest

from porting_cli.analysis.fix import fix_source
from porting_cli.analysis.scan import scan_source

IMPORTS = {
    "lightning": ("import lightning as L\n", "L.Trainer"),
    "lightning.pytorch": ("from lightning.pytorch import Trainer\n", "Trainer"),
    "pytorch_lightning": ("import pytorch_lightning as pl\n", "pl.Trainer"),
    "fabric": ("from lightning.fabric import Fabric as F\n", "F"),
    "lightning_fabric": ("import lightning_fabric\n", "lightning_fabric.Fabric"),
}


def rules(source: str) -> list[str]:
    return sorted(f.rule_id for f in scan_source(source).findings)


@pytest.mark.parametrize("kind", sorted(IMPORTS))
@pytest.mark.parametrize("option, rule", [('accelerator="gpu"', "NC921"), ("accelerator='cuda'", "NC921"),
                                          ("gpus=2", "NC922"), ("devices=[0, 1]", "NC923"),
                                          ('precision="16-mixed"', "NC925"), ('precision="bf16-mixed"', "NC925"),
                                          ("precision=16", "NC925")])
def test_a_cuda_option_of_trainer_or_fabric_is_reported(kind, option, rule):
    imports, entry = IMPORTS[kind]
    assert rules(f"{imports}t = {entry}({option})\n") == [rule]


@pytest.mark.parametrize("option", ['accelerator="auto"', 'accelerator="cpu"', "devices=2", 'devices="auto"',
                                    "gpus=None", "gpus=0", 'precision="32-true"', "precision=32",
                                    'strategy="ddp"', 'strategy="fsdp"', 'strategy="deepspeed_stage_2"'])
def test_a_device_agnostic_option_is_no_finding(option):
    assert rules(f"import lightning as L\nt = L.Trainer({option})\n") == []


@pytest.mark.parametrize("source", [
    'class Trainer:\n    pass\nt = Trainer(accelerator="gpu", gpus=2, precision=16)\n',  # not Lightning's
    'from transformers import Trainer\nt = Trainer(model=m, devices=[0, 1])\n',
    'opts = {"accelerator": "gpu"}\n',
])
def test_a_trainer_that_is_not_lightnings_is_no_finding(source):
    assert rules(source) == []


def test_accelerator_gpu_is_fixed_to_auto_keeping_its_quotes():
    source = "import lightning as L\nt = L.Trainer(accelerator='gpu', devices=1)\n"
    result = fix_source(source)
    assert result.new_text == "import lightning as L\nt = L.Trainer(accelerator='auto', devices=1)\n"
    assert rules(result.new_text) == []


def test_the_other_lightning_findings_are_not_fixed_automatically():
    found = scan_source("import lightning as L\nt = L.Trainer(gpus=2, devices=[0], precision='16-mixed')\n")
    assert {f.rule_id: f.fixable for f in found.findings} == {"NC922": False, "NC923": False, "NC925": False}


def test_a_strategy_with_the_nccl_backend_is_reported_once_and_fixed():
    source = ("from lightning.pytorch.strategies import DDPStrategy\n"
              "s = DDPStrategy(process_group_backend=\"nccl\")\n")
    assert rules(source) == ["NC501"]
    assert "get_default_backend_for_device" in fix_source(source).new_text


# -- DeepSpeed configs --------------------------------------------------------------------
DS_CONFIG = ('config = {"train_batch_size": 8, "fp16": {"enabled": True},\n'
             '          "communication_data_type": "fp16"}\n')


def test_deepspeed_config_keys_that_assume_cuda_are_information():
    found = scan_source(DS_CONFIG).findings
    assert [(f.line, f.rule_id, f.severity, f.fixable) for f in found] == [
        (1, "NC926", "info", False), (2, "NC926", "info", False)]


def test_a_config_given_to_deepspeed_initialize_is_read_without_deepspeed_keys():
    source = 'import deepspeed\ne, *_ = deepspeed.initialize(model=m, config={"fp16": {"enabled": True}})\n'
    assert rules(source) == ["NC926"]


def test_a_config_passed_by_name_is_followed_to_its_dict():
    source = ('import deepspeed\nsettings = {"fp16": {"enabled": True}}\n'
              'e, *_ = deepspeed.initialize(model=m, config=settings)\n')
    assert [(f.line, f.rule_id) for f in scan_source(source).findings] == [(2, "NC926")]


@pytest.mark.parametrize("source", [
    'config = {"train_batch_size": 8, "fp16": {"enabled": False}, "bf16": {"enabled": True}}\n',
    'settings = {"fp16": {"enabled": True}}\n',  # not a DeepSpeed config: no DeepSpeed key, not given to it
    'import deepspeed\ne, *_ = deepspeed.initialize(model=m, config={"train_batch_size": 8})\n',
])
def test_a_deepspeed_config_without_cuda_assumptions_is_no_finding(source):
    assert rules(source) == []
