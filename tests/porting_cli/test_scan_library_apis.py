"""APIs of other packages that need a CUDA-only library (porting_cli/analysis/scan/cuda_library_apis.json).

The script never imports the library itself: Lightning's precision plugin, Accelerate's bnb
quantization, Diffusers' xformers switch pull it in. The data says which; a mere check that the
library is there (`is_bitsandbytes_available()`, `RequirementCache("bitsandbytes")`) never blocks.
"""

from __future__ import annotations

import json

import pytest

from porting_cli.analysis.scan import RULES_BY_ID, scan_source
from porting_cli.analysis.scan.libraries import library_for
from porting_cli.analysis.scan.library_apis import DATA, api_for, method_api


def found(source: str) -> list[tuple[str, int]]:
    return [(f.rule_id, f.line) for f in scan_source(source).findings if f.family == "kernels"]


def blocks(source: str) -> bool:
    return any(RULES_BY_ID[f.rule_id].blocks for f in scan_source(source).findings)


# the same API under each path a package exports it from, and through a module alias
CALLS = [
    "from lightning.fabric.plugins import BitsandbytesPrecision\nBitsandbytesPrecision('nf4')\n",
    "from lightning.pytorch.plugins.precision import BitsandbytesPrecision as BNB\nBNB(mode='int8')\n",
    "from pytorch_lightning.plugins import BitsandbytesPrecision\nBitsandbytesPrecision('nf4-dq')\n",
    "from lightning_fabric.plugins.precision.bitsandbytes import BitsandbytesPrecision\nBitsandbytesPrecision('fp4')\n",
    "from accelerate.utils import load_and_quantize_model\nload_and_quantize_model(m, cfg)\n",
    "from transformers.integrations import replace_with_bnb_linear\nreplace_with_bnb_linear(m)\n",
]


@pytest.mark.parametrize("source", CALLS)
def test_calling_an_api_that_needs_bitsandbytes_blocks_at_the_call(source):
    assert found(source) == [("NC707", 1), ("NC704", 2)]
    assert blocks(source)


def test_a_call_through_a_module_alias_is_reported_at_the_api_name():
    source = "import lightning as L\nif args.quantize:\n    p = L.fabric.plugins.BitsandbytesPrecision('nf4')\n"
    (finding,) = scan_source(source).findings
    assert (finding.rule_id, finding.line, finding.col) == ("NC704", 3, 26)
    assert "`bitsandbytes` through `BitsandbytesPrecision`" in finding.message


def test_naming_the_api_without_calling_it_does_not_block():
    source = ("from lightning.fabric.plugins import BitsandbytesPrecision\n"
              "def quantized(fabric):\n    return isinstance(fabric.precision, BitsandbytesPrecision)\n")
    assert found(source) == [("NC707", 1), ("NC707", 3)]
    assert not blocks(source) and not RULES_BY_ID["NC707"].blocks


AVAILABILITY_CHECKS = [
    "from transformers.utils import is_bitsandbytes_available\nif is_bitsandbytes_available():\n    print('ok')\n",
    "from lightning_utilities.core.imports import RequirementCache\n"
    "_BNB = RequirementCache('bitsandbytes>=0.41.0')\nif not _BNB:\n    print('no bnb')\n",
    "from accelerate.utils import is_bnb_available\nok = is_bnb_available()\n",
]


@pytest.mark.parametrize("source", AVAILABILITY_CHECKS)
def test_a_mere_availability_check_is_no_finding(source):
    assert found(source) == [] and not blocks(source)


def test_a_call_inside_an_availability_guard_is_optional():
    source = ("from lightning.fabric.plugins import BitsandbytesPrecision\n"
              "from lightning_utilities.core.imports import RequirementCache\n"
              "if RequirementCache('bitsandbytes'):\n    plugin = BitsandbytesPrecision('nf4')\n")
    assert found(source) == [("NC707", 1), ("NC705", 4)] and not blocks(source)


def test_a_file_that_checks_the_library_elsewhere_still_blocks_an_unguarded_call():
    source = ("from lightning.fabric.plugins import BitsandbytesPrecision\n"
              "from lightning_utilities.core.imports import RequirementCache\n"
              "def main(quantize):\n    if RequirementCache('bitsandbytes != 0.42.0'):\n        warn()\n"
              "    if quantize.startswith('bnb.'):\n        return BitsandbytesPrecision(quantize[4:])\n")
    assert ("NC704", 7) in found(source) and blocks(source)


def test_a_method_that_needs_a_library_with_a_replacement_is_reported_without_blocking():
    source = "pipe = load()\npipe.unet.enable_xformers_memory_efficient_attention()\n"
    (finding,) = scan_source(source).findings
    assert (finding.rule_id, finding.line, finding.col) == ("NC703", 2, 11) and not blocks(source)


def test_an_attention_processor_that_runs_xformers_is_reported_and_the_sdpa_one_is_not():
    source = ("from diffusers.models.attention_processor import AttnProcessor2_0, XFormersAttnProcessor\n"
              "unet.set_attn_processor(XFormersAttnProcessor())\nunet.set_attn_processor(AttnProcessor2_0())\n")
    assert found(source) == [("NC707", 1), ("NC703", 2)] and not blocks(source)


def test_a_local_function_of_the_same_name_is_not_the_package_api():
    source = "def load_and_quantize_model(m):\n    return m\nload_and_quantize_model(model)\n"
    assert found(source) == []


def test_every_entry_names_a_known_library_and_where_it_was_read():
    entries = json.loads(DATA.read_text(encoding="utf-8"))["apis"]
    assert entries
    for entry in entries:
        library = library_for(entry["requires"])
        assert library is not None and library.kind != "fallback", entry
        assert len(entry["found"]) > 40, entry
        name = entry.get("name") or entry["method"]
        if "method" in entry:
            assert method_api(name) is not None
        for package in entry.get("packages", ()):
            assert api_for(f"{package}.sub.{name}").requires == entry["requires"]


def test_a_triton_only_part_of_a_library_with_a_cpu_path_is_reported_and_the_rest_is_not():
    sparse = "from deepspeed.ops.sparse_attention import SparseSelfAttention\nattn = SparseSelfAttention(cfg)\n"
    assert found(sparse) == [("NC702", 1), ("NC702", 2)] and blocks(sparse)
    assert found("import deepspeed\nfrom deepspeed.ops.adam import FusedAdam, DeepSpeedCPUAdam\n") == []
