"""`torch.cuda.*` runtime APIs and their `torch.accelerator` equivalents.

`torch.accelerator` calls raise where no accelerator exists, so the fixes guard
them: a call that is a statement of its own becomes
``if torch.accelerator.is_available(): torch.accelerator.synchronize()``, one
inside an expression becomes ``(... if torch.accelerator.is_available() else 0)``.
"""

from __future__ import annotations

import ast

from .base import ReferenceFamily, guarded
from .calls import arguments_text, rebuilt_call
from .dataflow import INDEX
from .nodes import int_value, is_name, positional
from .settings_flow import SettingsFlow

UNGUARDED = None

#: torch.cuda name -> (rule, replacement, value where no accelerator exists)
API: dict[str, tuple[str, str, str | None]] = {
    "is_available": ("NC201", "torch.accelerator.is_available", UNGUARDED),
    "device_count": ("NC202", "torch.accelerator.device_count", UNGUARDED),
    "current_device": ("NC203", "torch.accelerator.current_device_index", "0"),
    "set_device": ("NC204", "torch.accelerator.set_device_index", "None"),
    "synchronize": ("NC205", "torch.accelerator.synchronize", "None"),
    "empty_cache": ("NC206", "torch.accelerator.empty_cache", "None"),
    "memory_allocated": ("NC207", "torch.accelerator.memory_allocated", "0"),
    "max_memory_allocated": ("NC207", "torch.accelerator.max_memory_allocated", "0"),
    "memory_reserved": ("NC207", "torch.accelerator.memory_reserved", "0"),
    "max_memory_reserved": ("NC207", "torch.accelerator.max_memory_reserved", "0"),
    "memory_stats": ("NC207", "torch.accelerator.memory_stats", "{}"),
    "reset_peak_memory_stats": ("NC207", "torch.accelerator.reset_peak_memory_stats", "None"),
    "reset_accumulated_memory_stats": ("NC207", "torch.accelerator.reset_accumulated_memory_stats",
                                       "None"),
    "mem_get_info": ("NC207", "torch.accelerator.get_memory_info", "(0, 0)"),
    # the accelerator's own generator, as on CUDA (torch.manual_seed would reseed the CPU too)
    "manual_seed": ("NC208", "torch.get_device_module({device}).manual_seed", "None"),
    "manual_seed_all": ("NC208", "torch.get_device_module({device}).manual_seed_all", "None"),
    "seed": ("NC208", "torch.get_device_module({device}).seed", "None"),
    "seed_all": ("NC208", "", None),  # device modules need not have seed_all (MPS has none)
    "get_device_name": ("NC209", "", None),
    "get_device_properties": ("NC209", "", None),
    "get_device_capability": ("NC209", "", None),
    "device": ("NC210", "", None),
    "is_bf16_supported": ("NC212", "", None),
}
#: references reported whole, by rule (the prefix of the qualified name)
OTHER_API = (("torch.cuda.nvtx", "NC211"), ("torch.version.cuda", "NC213"),
             ("torch.profiler.ProfilerActivity.CUDA", "NC216"),
             ("torch.autograd.ProfilerActivity.CUDA", "NC216"))
#: argparse's methods: a `pin_memory=` given to them is a setting on the namespace, not pinned
#: memory; where the setting reaches a loader (`DataLoader(pin_memory=args.pin_memory)`), that
#: loader's keyword is the finding
SETTINGS_METHODS = frozenset({"set_defaults", "add_argument"})
SELF_EVIDENT = frozenset({"is_available", "device_count"})
MEMORY_PREFIXES = ("memory_", "max_memory_", "reset_max_memory_", "caching_allocator_", "memory.")


class CudaApiVisitor(ReferenceFamily):
    family = "cuda-api"
    triggers = (r"cuda", r"pin_memory")

    #: torch.cuda names other families report (filled by the engine from their claims)
    claimed: tuple[str, ...] = ()

    _settings: SettingsFlow | None = None

    @property
    def settings(self) -> SettingsFlow:
        """Which dicts of settings reach a loader (read once per file, when a dict asks)."""
        if self._settings is None:
            self._settings = SettingsFlow(self.ctx.tree, self.ctx.qualname, self.ctx.string_value)
        return self._settings

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "pin_memory" and not node.args and not node.keywords:
            self.report(node, "NC214", start=self.attr_start(func))
        if isinstance(func, ast.Attribute) and func.attr in SETTINGS_METHODS:
            return
        pinned = [arg for arg in node.keywords if arg.arg == "pin_memory" and not is_name(arg.value, "False")]
        if not pinned:
            return
        # settings a dict holds (`dict(pin_memory=True)`, `kw.update(pin_memory=True)`) pin only where they reach a loader
        if self.ctx.qualname(func) == "dict" and not self.settings.reaches(node):
            return
        if isinstance(func, ast.Attribute) and func.attr == "update" and not self.settings.name_reaches(func.value):
            return
        for arg in pinned:
            self.report(arg, "NC214")

    def visit_Dict(self, node: ast.Dict) -> None:  # DataLoader(**{"pin_memory": True})
        for key, value in zip(node.keys, node.values):
            if key is not None and self.ctx.string_value(key) == "pin_memory" and not is_name(value, "False") \
                    and self.settings.reaches(node):
                self.report(key, "NC214")

    def visit_Assign(self, node: ast.Assign) -> None:  # loader_kwargs["pin_memory"] = True
        for target in node.targets:
            if isinstance(target, ast.Subscript) and self.ctx.string_value(target.slice) == "pin_memory" \
                    and not is_name(node.value, "False") and self.settings.name_reaches(target.value):
                self.report(target, "NC214")

    def on_reference(self, node, qn: str) -> None:
        for prefix, rule in OTHER_API:
            if qn == prefix or qn.startswith(prefix + "."):
                self.report(node, rule, detail=f"`{qn}`")
                return
        if qn != "torch.cuda" and not qn.startswith("torch.cuda."):
            return
        name = qn[len("torch.cuda."):]
        if name.startswith("memory."):  # torch.cuda.memory.memory_allocated and friends
            name = name[len("memory."):]
        entry = API.get(name)
        ctx = self.ctx
        # what the installed torch does with it off CUDA (the availability queries say it themselves)
        without_cuda = None if name in SELF_EVIDENT else ctx.torch.without_cuda(name)
        if entry is None:
            if qn.startswith(self.claimed):
                return
            said = f"`{qn}`" + (f"; {without_cuda}" if without_cuda else "")
            if name.startswith(MEMORY_PREFIXES) or qn.startswith("torch.cuda.memory."):
                self.report(node, "NC215", detail=said)
            else:
                self.report(node, "NC299", detail=said)
            return
        rule, replacement, default = entry
        detail = without_cuda
        if replacement.startswith("torch.accelerator.") and \
                not ctx.torch.has_accelerator_api(replacement.rpartition(".")[2]):
            # a fix must not call what the installed torch lacks
            detail = (f"{without_cuda}; " if without_cuda else "") + \
                f"not fixed automatically: the installed {ctx.torch.describe()} has no `{replacement}`"
            replacement = ""
        if rule == "NC212":
            call = self.call_of(node)
            if call is None:
                self.report(node, rule, detail)
            else:
                self.report(node, rule, detail, edit_node=call,
                            edit=lambda view: f"{ctx.helper_name('bf16')}({arguments_text(view, call)})")
            return
        if not replacement:
            self.report(node, rule, detail)
            return
        call = self.call_of(node)
        if rule == "NC207" and call is not None:  # backends without a device allocator raise there
            def memory_edit(view, name=replacement.rpartition(".")[2], default=default) -> str:
                head = ctx.helper("memory", f'"{name}"', default)  # device_memory("name", default)
                args = arguments_text(view, call)
                return f"{head[:-1]}, {args})" if args else head
            self.report(node, rule, detail, edit_node=call, edit=memory_edit)
            return
        if call is None:  # a reference that is not called: only plain renames are safe
            if default is UNGUARDED:
                self.report(node, rule, detail, edit=lambda _: replacement)
            else:
                self.report(node, rule, detail)
            return

        def new_func(view) -> str:
            code = replacement.format(device=ctx.device()) if "{device}" in replacement else replacement
            return view_with_func(view, call, code)
        if default is UNGUARDED:
            self.report(node, rule, detail, edit=new_func, edit_node=call)
            return
        if rule == "NC204":  # set_device("cuda:1") / set_device(torch.device(...)): an index for any backend
            new_func = self._set_device(call, new_func, replacement)
        line = ctx.sole_call_stmt.get(id(call))
        if line is not None:
            self.report(node, rule, detail, edit_node=line,
                        edit=lambda view: ctx.guarded_statement(line, new_func(view)))
        else:
            self.report(node, rule, detail, edit=lambda view: guarded(new_func(view), default), edit_node=call)

    def _set_device(self, call: ast.Call, rename, replacement: str):
        """The rewrite of `torch.cuda.set_device(x)`: an index stays, "cuda:N" becomes N, anything
        else (a torch.device, a string of unknown value) goes through the prelude's `device_for`."""
        args = positional(call)
        if len(args) != 1:
            return rename
        value = args[0]
        literal = self.ctx.string_value(value)
        if int_value(value) is not None or INDEX in self.ctx.kinds_of(value):
            return rename
        if literal is not None and literal.startswith("cuda:") and literal[5:].isdigit():
            index = literal[5:]
            return lambda view: rebuilt_call(view, call, replacement, [index], [])
        return lambda view: rebuilt_call(view, call, replacement,
                                         [self.ctx.helper("device_for", view.text(value))], [])


def view_with_func(view, call: ast.Call, func: str) -> str:
    """``call`` with its callee replaced by ``func`` and the rest as written."""
    _, end = view.span(call)
    _, func_end = view.outer(call.func)
    return view.keep_parens(call, func + view.between(func_end, end))
