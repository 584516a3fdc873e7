"""Call sites that ran on the target only because the trace remapped them, as report findings.

Every user line the runtime remapped (porting_cli/runtime/remap.py logs them) becomes one finding of
the runtime rule NCRT1, "works by remap; fix: ...", so it counts in the verdict like a static
finding. Where the static scan already reports the same line, the remap finding says so and
is informational (severity `info`, effort `none`): the change is the static finding's, counted
once. A line only the runtime saw (say a device taken from a config value) is a `warning` of
`low` effort that needs a change. Remaps made inside library code have no user line and
stay in the report's `remapped` list only.
"""

from __future__ import annotations

import os
from typing import Any

REMAP_RULE = {
    "id": "NCRT1", "family": "runtime-remap", "name": "works-by-remap", "severity": "warning",
    "effort": "low", "fixable": False,
    "message": "This call ran on the target only because neuron-check remapped its CUDA device "
               "or backend; make it device-agnostic.",
}

# (what the remap log says contains, the fix): first match wins.
ADVICE: tuple[tuple[str, str], ...] = (
    ("Tensor.cuda()", "use .to(device) with one device chosen at start-up"),
    ("Module.cuda()", "use .to(device) with one device chosen at start-up"),
    ("torch.cuda.amp.autocast", "use torch.autocast(device.type, ...)"),
    ("autocast(", "pass device_type=device.type to torch.autocast"),
    ("GradScaler", "use torch.amp.GradScaler(device.type)"),
    ("pin_memory", "pin memory only where the device supports it (e.g. pin_memory=device.type == 'cuda')"),
    ("init_process_group", "choose the backend from the device: "
                           "torch.distributed.get_default_backend_for_device(device)"),
    ("DistributedDataParallel", "pass device_ids=[rank] only when device.type == 'cuda'"),
    ("torch.load(map_location", "use map_location=device"),
    ("set_default_device", "use torch.set_default_device(device)"),
    ("torch.cuda.", "use the torch.accelerator API (or the device module of device.type)"),
    ("device=", "pass the chosen device instead of a 'cuda' device"),
    ("torch.device(", "build the device from the chosen device type (torch.device(device.type, index))"),
)


def advice_for(what: str) -> str:
    return next((fix for needle, fix in ADVICE if needle in what), "make the call device-agnostic")


def remap_findings(remapped: list[dict[str, Any]], static: list[dict[str, Any]],
                   base_dir: str | None = None) -> list[dict[str, Any]]:
    """One NCRT1 finding per remapped user line. `static`: the scan's findings (dicts), to mark
    lines it already covers; `base_dir`: the folder the sites' paths are relative to."""
    by_line: dict[tuple[str, int], dict[str, Any]] = {}
    for f in static:
        if f["severity"] != "info":
            by_line.setdefault((os.path.normpath(f["path"]), f["line"]), f)
    grouped: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in remapped:
        where = _split(r["site"])
        if where is not None:
            grouped.setdefault(where, []).append(r)
    findings = []
    for (path, line), remaps in sorted(grouped.items()):
        covered = by_line.get((os.path.normpath(path), line))
        whats = sorted({r["what"] for r in remaps})
        fixes = "; ".join(sorted({advice_for(w) for w in whats}))
        message = f"works by remap ({', '.join(whats)}); fix: {fixes}"
        if covered is not None:
            message += f" (the scan reports this line as {covered['rule']})"
        source = _source_line(path, line, base_dir)
        findings.append({
            "rule": REMAP_RULE["id"], "path": path, "line": line, "col": 1, "end_line": line,
            # A line the scan reports is that finding's change: this one only confirms it.
            "end_col": len(source) + 1, "severity": "info" if covered is not None else REMAP_RULE["severity"],
            "effort": "none" if covered is not None else REMAP_RULE["effort"],
            "message": message, "fixable": bool(covered and covered["fixable"]),
            "family": REMAP_RULE["family"], "source_line": source,
            "count": sum(r["count"] for r in remaps), "covered_by": covered["rule"] if covered else None,
        })
    return findings


def _split(site: str | None) -> tuple[str, int] | None:
    if not site:
        return None
    path, _, line = site.rpartition(":")
    return (path, int(line)) if line.isdigit() and path else None


def _source_line(path: str, line: int, base_dir: str | None) -> str:
    full = path if os.path.isabs(path) else os.path.join(base_dir or os.getcwd(), path)
    try:
        with open(full, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                if number == line:
                    return text.rstrip("\r\n")
    except OSError:
        pass
    return ""
