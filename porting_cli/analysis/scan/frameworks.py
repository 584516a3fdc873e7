"""The framework layer: trainers that take their device as configuration.

Lightning's `Trainer` and `Fabric` (imported from `lightning`, `lightning.pytorch`,
`pytorch_lightning`, `lightning.fabric` or `lightning_fabric`, under any alias) choose the device
from their arguments, so a script ported call by call still stops there:

* `accelerator="gpu"` / `"cuda"` (NC921): Lightning's GPU accelerators are CUDA and MPS; on any
  other backend the Trainer raises before training. `accelerator="auto"` picks what is there.
* `gpus=` (NC922): removed in Lightning 2.0 (the Trainer rejects it); `devices=` replaces it.
* `devices=[0, 1]` (NC923): indices of the chosen accelerator's devices, CUDA ones where
  `accelerator="gpu"`; check that the backend has them (`devices="auto"` or a count).
* a strategy object built with `process_group_backend="nccl"`: the distributed family's NC501
  reports and fixes the "nccl" string wherever it is given (one finding per token). A strategy
  named by string (`strategy="ddp"`, `"fsdp"`, `"deepspeed"`) lets Lightning choose the
  process-group backend for the device (NCCL on CUDA only), so it is no finding.
* `precision="16-mixed"` / `"bf16-mixed"` / `16` (NC925, information): mixed precision on the
  accelerator, which the backend's autocast must support.

DeepSpeed configuration a script writes as a dict (NC926, information): `"fp16": {"enabled": True}`
(a loss scaler for half precision), `"communication_data_type"` (the collectives' dtype), read in a
dict that is a DeepSpeed config: one given as `config=` / `config_params=` to
`deepspeed.initialize`, or one with DeepSpeed's own top-level keys; a name given as the config is
followed to the dict literals assigned to it in the file (`ds_config = {...}`). (The
`"pin_memory": True` of a ZeRO offload is NC214's, as every pinned-memory request is.)
"""

from __future__ import annotations

import ast
import re

from .base import ReferenceFamily
from .nodes import int_value, is_name, module_statements

#: Trainer / Fabric of every package Lightning has shipped under
LIGHTNING_ENTRY = re.compile(r"^(?:lightning|pytorch_lightning|lightning_fabric)(?:\.\w+)*\.(?:Trainer|Fabric)$")
CUDA_ACCELERATORS = frozenset({"gpu", "cuda"})
MIXED = frozenset({"16-mixed", "bf16-mixed", "16", "bf16", "16-true", "bf16-true"})
#: top-level keys only a DeepSpeed config has
DEEPSPEED_KEYS = frozenset({"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
                            "gradient_accumulation_steps", "zero_allow_untested_optimizer"})
DEEPSPEED_INITIALIZE = re.compile(r"^deepspeed\.initialize$")


class FrameworksVisitor(ReferenceFamily):
    family = "frameworks"
    triggers = (r"accelerator\s*=", r"gpus\s*=", r"devices\s*=", r"precision\s*=",
                r"[\"']fp16[\"']", r"communication_data_type", r"zero_optimization", r"initialize\(")

    def visit_Call(self, node: ast.Call) -> None:
        callee = self.ctx.qualname(node.func) or ""
        if LIGHTNING_ENTRY.match(callee):
            for arg in node.keywords:
                self._lightning_option(arg, callee.rpartition(".")[2])
        elif DEEPSPEED_INITIALIZE.match(callee):
            for arg in node.keywords:
                if arg.arg in ("config", "config_params"):
                    for config in self._dicts_of(arg.value):
                        self._deepspeed_config(config)

    def _dicts_of(self, value: ast.AST):
        """The dict literals ``value`` is: itself, or those assigned to the name it is."""
        if isinstance(value, ast.Dict):
            yield value
        elif isinstance(value, ast.Name):
            for stmt in module_statements(self.ctx.tree):
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Dict) and any(
                        isinstance(t, ast.Name) and t.id == value.id for t in stmt.targets):
                    yield stmt.value

    def visit_Dict(self, node: ast.Dict) -> None:
        keys = {self.ctx.string_value(k) for k in node.keys if k is not None}
        if keys & DEEPSPEED_KEYS:
            self._deepspeed_config(node)

    # -- Lightning ---------------------------------------------------------------------
    def _lightning_option(self, arg: ast.keyword, entry: str) -> None:
        value = arg.value
        if arg.arg == "accelerator":
            text = self.ctx.string_value(value)
            if text is not None and text.lower() in CUDA_ACCELERATORS and id(value) not in self.ctx.handled:
                quote = self.ctx.source.text[self.ctx.source.span(value)[0]]
                self.report(value, "NC921", detail=f"`{entry}(accelerator={text!r})`",
                            edit=lambda _, q=quote: f"{q}auto{q}" if q in "'\"" else '"auto"')
        elif arg.arg == "gpus" and not (is_name(value, "None") or int_value(value) == 0):
            self.report(arg, "NC922", detail=f"`{entry}(gpus=...)`")
        elif arg.arg == "devices" and isinstance(value, (ast.List, ast.Tuple)) and value.elts \
                and all(int_value(e) is not None for e in value.elts):
            self.report(value, "NC923", detail=f"`{entry}(devices={[int_value(e) for e in value.elts]})`")
        elif arg.arg == "precision":
            text = self.ctx.string_value(value)
            number = int_value(value)
            if (text if text is not None else str(number)) in MIXED:
                shown = repr(text) if text is not None else str(number)
                self.report(value, "NC925", detail=f"`{entry}(precision={shown})`")

    # -- DeepSpeed ---------------------------------------------------------------------
    def _deepspeed_config(self, config: ast.Dict) -> None:
        if id(config) in self.ctx.handled:
            return
        self.ctx.handled.add(id(config))
        for key, value in zip(config.keys, config.values):
            name = self.ctx.string_value(key) if key is not None else None
            if name == "fp16" and isinstance(value, ast.Dict) and _enabled(self, value):
                self.report(key, "NC926", detail='`"fp16": {"enabled": True}` (a loss-scaled half-precision run)')
            elif name == "communication_data_type":
                self.report(key, "NC926", detail='`"communication_data_type"` (the collectives\' dtype)')


def _enabled(family: FrameworksVisitor, section: ast.Dict) -> bool:
    for k, v in zip(section.keys, section.values):
        if k is not None and family.ctx.string_value(k) == "enabled":
            return is_name(v, "True") or family.ctx.string_value(v) == "auto"
    return False
