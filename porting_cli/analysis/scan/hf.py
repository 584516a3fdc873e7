"""Hugging Face options that carry CUDA assumptions.

Options are read wherever they are given: as keyword arguments, as the entries of a dict
literal (`from_pretrained(**{"load_in_8bit": True})`, `kwargs = dict(...)`), or assigned into a
dict (`kwargs["load_in_4bit"] = True`), since scripts build their keyword arguments as data.

* `device_map` pinned to a CUDA device: `"cuda"`, `"cuda:1"`, an integer ordinal, or
  `{"": int(os.environ.get("LOCAL_RANK") or 0)}` (an index the data flow traced) (NC901);
* bitsandbytes quantization: `load_in_8bit` / `load_in_4bit`, `BitsAndBytesConfig` (NC902,
  blocks: its kernels are CUDA-only and have no PyTorch fallback);
* `attn_implementation="flash_attention_2"` (NC903; `"sdpa"` on the backend);
* CUDA-only `TrainingArguments` options: `fp16`, `tf32`, a bitsandbytes / apex / fused `optim`,
  `half_precision_backend` (NC904).
"""

from __future__ import annotations

import ast
import re

from .base import ReferenceFamily
from .dataflow import INDEX, is_env_lookup
from .guards import Guards
from .device import CUDA_DEVICE
from .nodes import int_value, is_name

QUANTIZE = frozenset({"load_in_8bit", "load_in_4bit"})
BNB_CONFIG = re.compile(r"(?:^|\.)BitsAndBytesConfig$")
FLASH_ATTENTION = re.compile(r"flash_attention_[23]\Z")
#: callables whose options are those of transformers' TrainingArguments (and TRL's configs)
TRAINING_ARGS = re.compile(r"(?:TrainingArguments|SFTConfig|DPOConfig|ORPOConfig|KTOConfig|GRPOConfig|"
                           r"RewardConfig|PPOConfig|CPOConfig)$")
CUDA_OPTIM = re.compile(r"bnb|8bit|paged_|apex|_fused|adafactor_bnb|lomo", re.IGNORECASE)
SWITCHES = frozenset({"fp16", "tf32", "fp16_full_eval"})


def _off(node: ast.AST) -> bool:
    """A value that turns an option off: False, None, 0."""
    return is_name(node, "False") or is_name(node, "None") or int_value(node) == 0


class HuggingFaceVisitor(ReferenceFamily):
    family = "huggingface"
    _guards: Guards | None = None
    triggers = (r"device_map", r"load_in_[48]bit", r"BitsAndBytes", r"flash_attention_[23]", r"optim",
                r"TrainingArguments", r"Config\(", r"half_precision_backend", r"tf32")

    # -- where options are given ---------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        callee = self.ctx.qualname(node.func) or ""
        training = TRAINING_ARGS.search(callee) is not None
        for arg in node.keywords:
            if arg.arg is not None:
                self.option(arg.arg, arg.value, arg, training)
            elif training and isinstance(arg.value, ast.Dict):  # TrainingArguments(**{...})
                for key, value in zip(arg.value.keys, arg.value.values):
                    name = self.ctx.string_value(key) if key is not None else None
                    if name is not None:
                        self._training(name, value, key)

    def visit_Dict(self, node: ast.Dict) -> None:
        for key, value in zip(node.keys, node.values):
            name = self.ctx.string_value(key) if key is not None else None
            if name is not None:
                self.option(name, value, key, False)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """`optim: str = field(default="paged_adamw_32bit")` in a TrainingArguments subclass."""
        if isinstance(node.target, ast.Name) and node.target.id == "optim" and node.value is not None:
            value = node.value
            if isinstance(value, ast.Call):
                value = next((kw.value for kw in value.keywords if kw.arg == "default"), value)
            self._training("optim", value, value)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if isinstance(target, ast.Subscript):  # kwargs["load_in_8bit"] = True
                name = self.ctx.string_value(target.slice)
                if name is not None:
                    self.option(name, node.value, target, False)
            elif isinstance(target, ast.Name) and "device_map" in target.id:
                self._device_map(node.value, node.value)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if (node.module or "").split(".")[0] == "transformers":
            for alias in node.names:
                if alias.name == "BitsAndBytesConfig":  # an import quantizes nothing by itself
                    self.report(alias, "NC905")

    def on_reference(self, node, qn: str) -> None:
        if BNB_CONFIG.search(qn) and (qn.startswith("transformers") or "." not in qn):
            if self.call_of(node) is None:
                self.report(node, "NC905")
            else:
                self._bnb(node, detail=f"`{qn.rpartition('.')[2]}`")

    def _bnb(self, node: ast.AST, detail: str) -> None:
        """NC902, or NC705 where the code runs only when bitsandbytes is available."""
        if self._guards is None:
            self._guards = Guards(self.ctx.tree, self.ctx.aliases)
        line = getattr(node, "lineno", 1)
        if self._guards.covers(line, "bitsandbytes", nested=True):
            self.report(node, "NC705", detail=f"`bitsandbytes` through {detail}")
        else:
            self.report(node, "NC902", detail=detail)

    # -- what each option means ----------------------------------------------------------
    def option(self, name: str, value: ast.AST, at: ast.AST, training: bool) -> None:
        if name == "device_map":
            self._device_map(value, at)
        elif name in QUANTIZE and not _off(value):
            self._bnb(at, detail=f"`{name}`")
        elif name == "attn_implementation":
            for text_node in _branches(value):
                text = self.ctx.string_value(text_node)
                if text is not None and FLASH_ATTENTION.match(text) and id(text_node) not in self.ctx.handled:
                    self.report(text_node, "NC903")
        elif training:
            self._training(name, value, at)
        elif name == "optim":  # a TrainingArguments subclass's field, an options dict
            self._training(name, value, at)

    def _training(self, name: str, value: ast.AST, at: ast.AST) -> None:
        if name in SWITCHES and not _off(value):
            self.report(at, "NC904", detail=f"`{name}`")
        elif name == "half_precision_backend" and not _off(value):
            self.report(at, "NC904", detail="`half_precision_backend`")
        elif name == "optim":
            text = self.ctx.string_value(value)
            if text is not None and CUDA_OPTIM.search(text):
                self.report(at, "NC904", detail=f"`optim=\"{text}\"`")

    def _device_map(self, value: ast.AST, at: ast.AST) -> None:
        for branch in _branches(value):
            if isinstance(branch, ast.Dict):
                entries = [(k, v) for k, v in zip(branch.keys, branch.values) if k is not None]
                pinned = [v for _, v in entries if self._cuda_device(v)]
                if not entries or len(pinned) < len(entries):
                    continue
                if len(entries) == 1 and self.ctx.string_value(entries[0][0]) == "":
                    self._pinned(entries[0][1], branch)  # {"": 0} -> the device itself
                elif id(branch) not in self.ctx.handled:
                    self.report(branch, "NC901")
            elif self._cuda_device(branch):
                self._pinned(branch)

    def _cuda_device(self, node: ast.AST) -> bool:
        """A device_map value that means a CUDA device: "cuda[:N]", an integer, a traced index."""
        text = self.ctx.string_value(node)
        if text is not None:
            return CUDA_DEVICE.match(text) is not None
        return self._index(node)

    def _index(self, node: ast.AST) -> bool:
        if int_value(node) is not None or is_env_lookup(node, self.ctx.aliases):
            return True
        if isinstance(node, ast.Call) and self.ctx.qualname(node.func) == "int" and node.args:
            return self._index(node.args[0])
        if isinstance(node, ast.BoolOp):  # os.environ.get("LOCAL_RANK") or 0
            return any(self._index(v) for v in node.values)
        if isinstance(node, (ast.Name, ast.Attribute)):
            return INDEX in self.ctx.kinds_of(node) or self.ctx.flow.any_has(node, INDEX)
        return False

    def _pinned(self, value: ast.AST, replaced: ast.AST | None = None) -> None:
        """NC901 at ``value``; the fix puts the accelerator's device in place of ``replaced``
        (default: the value)."""
        if id(value) in self.ctx.handled:
            return
        ctx = self.ctx
        text = ctx.string_value(value)
        if text is not None:
            m = CUDA_DEVICE.match(text)
            index = m.group(1) if m else None
            edit = lambda _: ctx.device() if index is None else ctx.indexed_device(index)  # noqa: E731
        else:
            edit = lambda view: ctx.indexed_device(view.text(value))  # noqa: E731
        self.report(value, "NC901", edit=edit, edit_node=replaced)


def _branches(node: ast.AST):
    """The values a conditional expression may take."""
    if isinstance(node, ast.IfExp):
        yield from _branches(node.body)
        yield from _branches(node.orelse)
    else:
        yield node

