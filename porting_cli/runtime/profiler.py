"""`neuron-check trace`: where a script spends its time on the device, line by line.

Runs the script in a child process (porting_cli/runtime/profiler_child.py) the way the porting
trace does, under torch.profiler for a bounded window, and folds the attributed op events
(porting_cli/runtime/profiler_events.py) into one row per user line and a top-N bottleneck list,
each with one sentence of advice grounded in what was measured. Output formats and the
Parquet schema: porting_cli/runtime/profiler_export.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from typing import Any

from op_db.errors import InputError

SCHEMA = 1
GRACE_S = 10.0
SETUP_LIMIT_S = 300.0
TOP_N = 5


def run_profile(script: str, args: list[str], *, device: str | None, warmup: int, steps: int,
                max_steps: int, max_seconds: float | None, chrome_trace: str | None = None,
                root: str | None = None, display_base: str | None = None) -> dict[str, Any]:
    """Profile `script` in a child process; the child's findings (events, ranges, notes, end)."""
    with tempfile.TemporaryDirectory(prefix="neuron-check-profile-") as tmp:
        config, out = os.path.join(tmp, "config.json"), os.path.join(tmp, "out.json")
        with open(config, "w", encoding="utf-8") as handle:
            json.dump({"script": os.path.abspath(script), "args": args, "device": device, "out": out,
                       "warmup": warmup, "steps": steps, "max_steps": max_steps, "max_seconds": max_seconds,
                       "chrome_trace": os.path.abspath(chrome_trace) if chrome_trace else None,
                       "root": root, "display_base": display_base}, handle)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        if device and not device.startswith("sim"):
            env.pop("NEURON_CHECK_SIM_PROFILE", None)
        limit = SETUP_LIMIT_S + (max_seconds + GRACE_S if max_seconds else 24 * 3600)
        with open(os.path.join(tmp, "output.log"), "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "porting_cli.runtime.profiler_child", config],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            with open(out, encoding="utf-8") as handle:
                found = json.load(handle)
        except (OSError, json.JSONDecodeError):
            with open(os.path.join(tmp, "output.log"), "rb") as handle:
                tail = handle.read().decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
            raise InputError(f"the profiled script's process ended without a result (exit {proc.returncode}): "
                             f"{tail[0]}") from None
    if "setup_error" in found:
        raise InputError(found["setup_error"])
    found["script"] = script
    return found


def per_line(found: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per user line, most device time first."""
    rows: dict[tuple[str, int], dict[str, Any]] = defaultdict(lambda: None)  # type: ignore[arg-type]

    def row(file: str, line: int) -> dict[str, Any]:
        if rows[(file, line)] is None:
            rows[(file, line)] = {"file": file, "line": line, "device_time_s": 0.0, "cpu_time_s": 0.0,
                                  "cpu_total_s": 0.0, "backward_device_time_s": 0.0, "backward_total_s": 0.0,
                                  "ops": 0, "op_names": {}, "fallback_ops": {}, "fallback_time_s": 0.0,
                                  "copies": 0, "copy_bytes": 0, "copy_time_s": 0.0, "syncs": 0,
                                  "sync_kinds": {}, "graph_breaks": 0, "recompiles": 0, "compile_reasons": [],
                                  "chain": []}
        return rows[(file, line)]

    for e in found["events"]:
        r = row(e["file"], e["line"])
        r["device_time_s"] += e["device_time_s"]
        r["cpu_time_s"] += e["cpu_time_s"]
        if e["phase"] == "backward":
            r["backward_device_time_s"] += e["device_time_s"]
        if e["top_level"] and e["op"].startswith("aten::"):
            r["ops"] += 1
            r["op_names"][e["op"]] = r["op_names"].get(e["op"], 0) + 1
        if e["fallback"]:
            r["fallback_ops"][e["op"]] = r["fallback_ops"].get(e["op"], 0) + 1
            r["fallback_time_s"] += e["device_time_s"]
    for g in found["ranges"]:
        r = row(g["file"], g["line"])
        r["cpu_total_s"] += g["total_s"]
        r["chain"] = r["chain"] or g["chain"]
        if g["call"] == "backward":
            r["backward_total_s"] += g["total_s"]
        if g["kind"] == "copy" or g["kind"] == "sync:cpu":
            r["copies"] += 1
            r["copy_bytes"] += g["bytes"]
            r["copy_time_s"] += g["total_s"]
        if g["kind"].startswith("sync:"):
            r["syncs"] += 1
            kind = g["kind"][5:]
            r["sync_kinds"][kind] = r["sync_kinds"].get(kind, 0) + 1
    for c in found.get("compile_events", []):  # the whole run's: compiling happens mostly in warm-up
        r = row(c["file"], c["line"])
        r["graph_breaks" if c["kind"] == "graph_break" else "recompiles"] += 1
        r["compile_reasons"].append(f"{c['kind'].replace('_', ' ')}: {c['reason']}")
    out = [r for r in rows.values() if r is not None]
    for r in out:
        for key in ("device_time_s", "cpu_time_s", "cpu_total_s", "backward_device_time_s", "backward_total_s",
                    "fallback_time_s", "copy_time_s"):
            r[key] = round(r[key], 9)
    return sorted(out, key=lambda r: (-r["device_time_s"], r["file"], r["line"]))


def bottlenecks(lines: list[dict[str, Any]], total_s: float, steps: int, top: int = TOP_N) -> list[dict[str, Any]]:
    """The top lines by device time, each with one sentence of advice from what was measured."""
    found = []
    chosen = [r for r in lines if r["line"]][:top]
    chosen += [r for r in lines if r["line"] and r not in chosen and (r["syncs"] or r["copies"]) >= steps][:3]
    chosen += [r for r in lines if r["line"] and r not in chosen and (r["graph_breaks"] or r["recompiles"])][:3]
    for r in chosen:
        share = r["device_time_s"] / total_s if total_s else 0.0
        where = f"{r['file']}:{r['line']}"
        if r["fallback_ops"]:
            ops = ", ".join(sorted(r["fallback_ops"]))
            advice = (f"{ops} ran through the backend's CPU fallback here ({r['fallback_time_s'] * 1e3:.2f} ms): "
                      "implementing it on the device, or replacing it, removes that time.")
        elif r["graph_breaks"] or r["recompiles"]:
            advice = (f"torch.compile {_compile_counts(r)} here ({r['compile_reasons'][0]}): each break splits "
                      "the compiled graph and each recompile pays the compile again; remove the cause or mark "
                      "the changing size dynamic.")
        elif r["syncs"] and (steps <= 1 or r["syncs"] >= steps):
            kinds = ", ".join(sorted(r["sync_kinds"]))
            advice = (f"the host waits for the device here {r['syncs']} time(s) ({kinds}), once per step or more: "
                      "keep the value on the device and read it every N steps.")
        elif r["copies"]:
            advice = (f"{r['copies']} host<->device copy(ies) of {r['copy_bytes']} bytes here: move the data "
                      "to the device once, outside the loop, or use pinned memory with non_blocking=True.")
        else:
            top_op = max(r["op_names"], key=r["op_names"].get) if r["op_names"] else "its ops"
            advice = (f"{share:.0%} of the device time, most often {top_op}: the line's own compute; "
                      "a smaller shape, a fused op or a lower precision is where to look.")
        found.append({"file": r["file"], "line": r["line"], "site": where, "device_time_s": r["device_time_s"],
                      "share": round(share, 4), "advice": advice})
    return found


def _compile_counts(r: dict[str, Any]) -> str:
    parts = [f"{r['graph_breaks']} graph break(s)" if r["graph_breaks"] else "",
             f"{r['recompiles']} recompile(s)" if r["recompiles"] else ""]
    return " and ".join(p for p in parts if p)


def report(found: dict[str, Any], top: int = TOP_N) -> dict[str, Any]:
    """The JSON report: {"schema": 1, "lines": [...], "bottlenecks": [...], ...}."""
    lines = per_line(found)
    total = sum(e["device_time_s"] for e in found["events"])
    steps = len({e["step"] for e in found["events"] if e["step"] is not None}) or 1
    found.setdefault("profiler_total_s", total)
    return {"schema": SCHEMA, "script": found["script"], "device": found.get("device"),
            "backend": found.get("backend"), "device_timed": found.get("device_timed"),
            "profiler_total_s": round(found["profiler_total_s"], 9),
            "attributed_s": round(total, 9), "steps_profiled": steps,
            "end": found.get("end"), "notes": found.get("notes", []), "fallbacks": found.get("fallbacks", []),
            "lines": lines, "bottlenecks": bottlenecks(lines, total, steps, top)}
