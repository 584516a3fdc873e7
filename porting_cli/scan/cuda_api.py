"""`torch.cuda.*` runtime APIs and their `torch.accelerator` equivalents.

`torch.accelerator` calls raise where no accelerator exists, so the fixes guard
them: a call that is a statement of its own becomes
``if torch.accelerator.is_available(): torch.accelerator.synchronize()``, one
inside an expression becomes ``(... if torch.accelerator.is_available() else 0)``.
"""

from __future__ import annotations

import libcst as cst

from .base import ReferenceFamily, expr, guarded, guarded_statement

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
    "manual_seed": ("NC208", "torch.manual_seed", UNGUARDED),
    "manual_seed_all": ("NC208", "torch.manual_seed", UNGUARDED),
    "get_device_name": ("NC209", "", None),
    "get_device_properties": ("NC209", "", None),
    "get_device_capability": ("NC209", "", None),
    "device": ("NC210", "", None),
}


class CudaApiVisitor(ReferenceFamily):
    family = "cuda-api"
    triggers = (r"cuda",)

    #: torch.cuda names other families report (filled by the engine from their claims)
    claimed: tuple[str, ...] = ()

    def on_reference(self, node, qn: str) -> None:
        if qn != "torch.cuda" and not qn.startswith("torch.cuda."):
            return
        name = qn[len("torch.cuda."):]
        if name.startswith("memory."):  # torch.cuda.memory.memory_allocated and friends
            name = name[len("memory."):]
        entry = API.get(name)
        if entry is None:
            if not qn.startswith(self.claimed):
                self.report(node, "NC299", detail=f"`{qn}`")
            return
        rule, replacement, default = entry
        if not replacement:
            self.report(node, rule)
            return
        call = self.call_of(node)
        if call is None:  # a reference that is not called: only plain renames are safe
            if default is UNGUARDED:
                self.report(node, rule, edit=lambda _: expr(replacement))
            else:
                self.report(node, rule)
            return
        new_func = lambda: expr(replacement)  # noqa: E731
        if default is UNGUARDED:
            self.report(node, rule, edit=lambda c: c.with_changes(func=new_func()), edit_node=call)
            return
        line = self.ctx.sole_call_stmt.get(id(call))
        if line is not None:
            def edit(updated: cst.SimpleStatementLine) -> cst.If:
                stmt = updated.body[0]
                new_call = stmt.value.with_changes(func=new_func())
                return guarded_statement(updated.with_changes(body=[stmt.with_changes(value=new_call)]))
            self.report(node, rule, edit=edit, edit_node=line)
        else:
            self.report(node, rule, edit=lambda c: guarded(c.with_changes(func=new_func()), default),
                        edit_node=call)
